//! The results directory, written as the run goes: every finished level is
//! appended to `levels.jsonl` and synced at once, every second lands in
//! `timeseries.csv` (and each request type's measured seconds in
//! `request_series.csv`, what `autoperf compare` tests changes on), and
//! `run.json` is replaced atomically — so a crash or a Ctrl-C loses at most
//! the level in progress.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::measure::{LevelInfo, Tick, TickSink};
use crate::record::{LagReading, LevelRecord, RunRecord};

pub struct ResultsDir {
    path: PathBuf,
    /// `t_s` in the time series counts from here.
    opened: Instant,
    levels: File,
    series: BufWriter<File>,
    requests: BufWriter<File>,
    /// `server_series.csv`, opened with the first row (runs without
    /// `servers:` have none).
    servers: Option<BufWriter<File>>,
    /// `lag_series.csv`, opened with the first row (runs without lag
    /// thresholds have none).
    lag: Option<BufWriter<File>>,
    /// Request names in `RequestId` order, for `request_series.csv`.
    request_names: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {} {path}: {source}", if *.reading { "read results from" } else { "write results to" })]
pub struct ResultsError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
    /// Reading an existing directory, not writing one.
    pub reading: bool,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> ResultsError + '_ {
    move |source| ResultsError {
        path: path.to_path_buf(),
        source,
        reading: false,
    }
}

fn reading(path: &Path) -> impl FnOnce(io::Error) -> ResultsError + '_ {
    move |source| ResultsError {
        path: path.to_path_buf(),
        source,
        reading: true,
    }
}

/// The free space a results directory's filesystem must have before load
/// starts: the time series and the levels grow during the run and the
/// report is written at its end (a few MiB for hours of load), and a disk
/// that fills then would lose what was measured.
pub(crate) const MIN_FREE_BYTES: u64 = 16 << 20;

/// Refuses a results directory whose filesystem is read-only, nearly full or
/// out of inodes. The nearest existing ancestor of `path` tells which
/// filesystem it will be on; when even that cannot be asked, the writes
/// themselves will report.
pub(crate) fn check_room(path: &Path) -> Result<(), ResultsError> {
    use std::os::unix::ffi::OsStrExt;
    let mut probe = path;
    while !probe.exists() {
        match probe.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => probe = parent,
            _ => {
                probe = Path::new(".");
                break;
            }
        }
    }
    let Ok(c_path) = std::ffi::CString::new(probe.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: statvfs writes only into `stat`, from a NUL-terminated path.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Ok(());
    }
    let refuse = |kind: io::ErrorKind, why: String| Err(at(path)(io::Error::new(kind, why)));
    if stat.f_flag & libc::ST_RDONLY != 0 {
        return refuse(
            io::ErrorKind::ReadOnlyFilesystem,
            format!(
                "{} is on a read-only filesystem; choose a writable directory with --out",
                probe.display()
            ),
        );
    }
    let free = stat.f_bavail as u64 * stat.f_frsize as u64;
    if free < MIN_FREE_BYTES {
        return refuse(
            io::ErrorKind::StorageFull,
            format!(
                "its filesystem has {} KiB free and a run needs at least {} MiB for its results; free some space or choose another directory with --out",
                free >> 10,
                MIN_FREE_BYTES >> 20
            ),
        );
    }
    if stat.f_files > 0 && stat.f_favail < 16 {
        return refuse(
            io::ErrorKind::StorageFull,
            format!("its filesystem has no inodes left ({} free); free some or choose another directory with --out", stat.f_favail),
        );
    }
    Ok(())
}

pub(crate) const SERIES_HEADER: &str =
    "t_s,level,requests,errors,throughput_rps,p50_ms,p99_ms,active_users\n";

/// `request_series.csv`: one row per request type and measured second (the
/// warm-up is left out), a second without one of them too (its rate is 0
/// then), and one for all of them together, named `*` (no request name can
/// be: names are letters, digits, `_` and `-`).
pub(crate) const REQUEST_SERIES_HEADER: &str =
    "t_s,level,request,requests,errors,throughput_rps,mean_ms,p50_ms,p90_ms,p95_ms,p99_ms\n";

/// `server_series.csv`: one row per tier and interval between its agent's
/// readings (about a second) of a level's measured window: the samples
/// `compare` tests a change in CPU per request with.
pub(crate) const SERVER_SERIES_HEADER: &str =
    "window_s,level,tier,requests,cpu_ms_per_request,cpu_util_cores,memory_bytes\n";

/// `lag_series.csv`: each reading of a lag threshold's consumer group in a
/// level's measured window (seconds into it), in records.
pub(crate) const LAG_SERIES_HEADER: &str = "window_s,level,group,lag_records\n";

/// A CSV file opened to append to, its header written if it is new.
fn appending(path: &Path, header: &str) -> Result<BufWriter<File>, ResultsError> {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(at(path))?;
    if file.metadata().map_err(at(path))?.len() == 0 {
        file.write_all(header.as_bytes()).map_err(at(path))?;
    }
    Ok(BufWriter::new(file))
}

/// The request name that stands for all of a level's requests together in
/// `request_series.csv`.
pub(crate) const ALL_REQUESTS: &str = "*";

impl ResultsDir {
    /// The default location: `autoperf-results/<scenario>-<UTC timestamp>`.
    pub fn default_path(scenario: &str) -> PathBuf {
        let stamp: String = crate::record::now_rfc3339()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        // At most 100 characters of the name: a directory name is limited
        // (255 bytes on most file systems) and the stamp follows it.
        let safe: String = scenario
            .chars()
            .take(100)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        PathBuf::from("autoperf-results").join(format!("{safe}-{stamp}"))
    }

    /// Creates the directory (and parents) and fresh result files in it,
    /// after making sure its filesystem can take a run's results: a full or
    /// read-only one is refused before any load, and nothing is left
    /// behind when creating fails.
    pub(crate) fn create(
        path: &Path,
        request_names: Vec<String>,
    ) -> Result<ResultsDir, ResultsError> {
        check_room(path)?;
        let existed = path.exists();
        let created = Self::create_files(path, request_names);
        if created.is_err() && !existed {
            let _ = fs::remove_dir_all(path);
        }
        created
    }

    fn create_files(path: &Path, request_names: Vec<String>) -> Result<ResultsDir, ResultsError> {
        fs::create_dir_all(path).map_err(at(path))?;
        let levels_path = path.join("levels.jsonl");
        let levels = File::create(&levels_path).map_err(at(&levels_path))?;
        let new_csv = |name: &str, header: &str| -> Result<BufWriter<File>, ResultsError> {
            let path = path.join(name);
            let mut file = BufWriter::new(File::create(&path).map_err(at(&path))?);
            file.write_all(header.as_bytes())
                .and_then(|_| file.flush())
                .map_err(at(&path))?;
            Ok(file)
        };
        Ok(ResultsDir {
            path: path.to_path_buf(),
            opened: Instant::now(),
            levels,
            series: new_csv("timeseries.csv", SERIES_HEADER)?,
            requests: new_csv("request_series.csv", REQUEST_SERIES_HEADER)?,
            servers: None,
            lag: None,
            request_names,
        })
    }

    /// Opens an existing results directory to append to it (resuming):
    /// the per-second rows of levels not in `kept` (one interrupted, to be
    /// run again under its number) are dropped first.
    pub(crate) fn reopen(
        path: &Path,
        request_names: Vec<String>,
        kept: &[u32],
    ) -> Result<ResultsDir, ResultsError> {
        check_room(path)?;
        for name in [
            "timeseries.csv",
            "request_series.csv",
            "server_series.csv",
            "lag_series.csv",
        ] {
            keep_levels(&path.join(name), kept)?;
        }
        let levels_path = path.join("levels.jsonl");
        let levels = OpenOptions::new()
            .append(true)
            .open(&levels_path)
            .map_err(at(&levels_path))?;
        // Results written before a file existed get it, header first.
        let append_csv = |name: &str, header: &str| appending(&path.join(name), header);
        Ok(ResultsDir {
            path: path.to_path_buf(),
            opened: Instant::now(),
            levels,
            series: append_csv("timeseries.csv", SERIES_HEADER)?,
            requests: append_csv("request_series.csv", REQUEST_SERIES_HEADER)?,
            servers: None,
            lag: None,
            request_names,
        })
    }

    /// Appends one finished level and makes it durable before returning.
    pub(crate) fn append_level(&mut self, level: &LevelRecord) -> Result<(), ResultsError> {
        let path = self.path.join("levels.jsonl");
        let mut line = serde_json::to_vec(level).map_err(|e| at(&path)(e.into()))?;
        line.push(b'\n');
        self.levels.write_all(&line).map_err(at(&path))?;
        self.levels.sync_data().map_err(at(&path))
    }

    /// Appends a level's server intervals to `server_series.csv` (created,
    /// header first, with the first rows; appended to when resuming).
    pub(crate) fn append_server_seconds(
        &mut self,
        rows: &[crate::profile::ServerSecond],
    ) -> Result<(), ResultsError> {
        if rows.is_empty() {
            return Ok(());
        }
        let path = self.path.join("server_series.csv");
        let file = match &mut self.servers {
            Some(file) => file,
            None => self.servers.insert(appending(&path, SERVER_SERIES_HEADER)?),
        };
        for r in rows {
            writeln!(
                file,
                "{},{},{},{},{},{},{}",
                r.window_s,
                r.level,
                r.tier,
                r.requests,
                r.cpu_ms_per_request,
                r.cpu_util_cores,
                r.memory_bytes
            )
            .map_err(at(&path))?;
        }
        file.flush().map_err(at(&path))
    }

    /// Appends a level's consumer-lag readings to `lag_series.csv`.
    pub(crate) fn append_lag_readings(&mut self, rows: &[LagReading]) -> Result<(), ResultsError> {
        if rows.is_empty() {
            return Ok(());
        }
        let path = self.path.join("lag_series.csv");
        let file = match &mut self.lag {
            Some(file) => file,
            None => self.lag.insert(appending(&path, LAG_SERIES_HEADER)?),
        };
        for r in rows {
            writeln!(
                file,
                "{},{},{},{}",
                r.window_s, r.level, r.group, r.lag_records
            )
            .map_err(at(&path))?;
        }
        file.flush().map_err(at(&path))
    }

    /// Replaces `run.json` atomically (write aside, then rename).
    pub(crate) fn write_run(&self, run: &RunRecord) -> Result<(), ResultsError> {
        write_run_file(&self.path, run)
    }

    fn write_tick(&mut self, level: &LevelInfo, tick: &Tick) -> io::Result<()> {
        let total = tick.stats.total();
        let secs = tick.length.as_secs_f64().max(1e-9);
        writeln!(
            self.series,
            "{:.3},{},{},{},{:.3},{:.3},{:.3},{}",
            self.opened.elapsed().as_secs_f64(),
            level.index,
            total.requests,
            total.errors.total(),
            total.requests as f64 / secs,
            total.quantile_ms(0.5),
            total.quantile_ms(0.99),
            tick.active_users
        )?;
        self.series.flush()?;
        if !tick.warmup {
            self.write_request_rows(level, tick, &total)?;
        }
        Ok(())
    }

    /// `total`: the tick's requests merged, as the time series row used them.
    fn write_request_rows(
        &mut self,
        level: &LevelInfo,
        tick: &Tick,
        total: &crate::measure::RequestStats,
    ) -> io::Result<()> {
        let t_s = self.opened.elapsed().as_secs_f64();
        let secs = tick.length.as_secs_f64().max(1e-9);
        let named = tick
            .stats
            .per_request
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((self.request_names.get(i)?.as_str(), s)));
        for (name, s) in named.chain(std::iter::once((ALL_REQUESTS, total))) {
            writeln!(
                self.requests,
                "{t_s:.3},{},{name},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}",
                level.index,
                s.requests,
                s.errors.total(),
                s.requests as f64 / secs,
                s.mean_ms(),
                s.quantile_ms(0.5),
                s.quantile_ms(0.9),
                s.quantile_ms(0.95),
                s.quantile_ms(0.99),
            )?;
        }
        self.requests.flush()
    }
}

/// Rewrites a per-second CSV file (level in its second column) without the
/// rows of levels not in `kept`; a missing file is left missing.
fn keep_levels(path: &Path, kept: &[u32]) -> Result<(), ResultsError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(reading(path)(e)),
    };
    let keep = |line: &str| {
        line.split(',')
            .nth(1)
            .and_then(|l| l.parse::<u32>().ok())
            .is_some_and(|l| kept.contains(&l))
    };
    let mut lines = text.lines();
    let mut out: Vec<&str> = lines.next().into_iter().collect();
    let before = text.lines().count();
    out.extend(lines.filter(|l| keep(l)));
    if out.len() == before {
        return Ok(());
    }
    let tmp = path.with_extension("csv.tmp");
    let mut body = out.join("\n");
    body.push('\n');
    fs::write(&tmp, body)
        .and_then(|_| fs::rename(&tmp, path))
        .map_err(at(path))
}

/// Replaces `dir/run.json` atomically (write aside, then rename), so a
/// reader never sees half a file.
pub fn write_run_file(dir: &Path, run: &RunRecord) -> Result<(), ResultsError> {
    let path = dir.join("run.json");
    let tmp = dir.join(".run.json.tmp");
    let text = serde_json::to_vec_pretty(run).map_err(|e| at(&path)(e.into()))?;
    let mut f = File::create(&tmp).map_err(at(&tmp))?;
    f.write_all(&text)
        .and_then(|_| f.write_all(b"\n"))
        .and_then(|_| f.sync_data())
        .map_err(at(&tmp))?;
    fs::rename(&tmp, &path).map_err(at(&path))
}

/// The largest results file read back: far past any run's (a run.json of
/// thousands of levels is a few MiB), short of a reader's memory.
pub(crate) const MAX_RESULTS_FILE: u64 = 256 << 20;

/// Reads a results file, refusing what no run wrote: not a regular file
/// (a link to /dev/zero was read until memory ran out), or larger than
/// `MAX_RESULTS_FILE`.
pub(crate) fn read_results_file(path: &Path) -> Result<String, ResultsError> {
    let invalid = |what: String| ResultsError {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, what),
        reading: true,
    };
    let meta = fs::metadata(path).map_err(reading(path))?;
    if !meta.is_file() {
        return Err(invalid("not a regular file".into()));
    }
    if meta.len() > MAX_RESULTS_FILE {
        return Err(invalid(format!(
            "{} MiB, more than the {} MiB any run writes",
            meta.len() >> 20,
            MAX_RESULTS_FILE >> 20
        )));
    }
    let mut text = String::new();
    File::open(path)
        .and_then(|f| f.take(MAX_RESULTS_FILE + 1).read_to_string(&mut text))
        .map_err(reading(path))?;
    if text.len() as u64 > MAX_RESULTS_FILE {
        return Err(invalid(
            "grew past the size any run writes while read".into(),
        ));
    }
    Ok(text)
}

/// `read_results_file`, or `None` when nothing is at `path` (a file a run
/// may not have written); a dangling link is read, and says what is wrong.
pub(crate) fn read_results_file_if_there(path: &Path) -> Result<Option<String>, ResultsError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        _ => read_results_file(path).map(Some),
    }
}

/// Reads `dir/run.json`, refusing a record autoperf cannot have written
/// (see `RunRecord::implausible`).
pub fn read_run(dir: &Path) -> Result<RunRecord, ResultsError> {
    let path = dir.join("run.json");
    let text = read_results_file(&path)?;
    let invalid = |what: String| ResultsError {
        path: path.clone(),
        source: io::Error::new(io::ErrorKind::InvalidData, what),
        reading: true,
    };
    let record: RunRecord = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    match record.implausible() {
        Some(why) => Err(invalid(why)),
        None => Ok(record),
    }
}

/// Reads every level of an existing `levels.jsonl` (for resuming and
/// re-rendering reports).
pub fn read_levels(dir: &Path) -> Result<Vec<LevelRecord>, ResultsError> {
    let path = dir.join("levels.jsonl");
    let text = read_results_file(&path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let invalid = |what: String| ResultsError {
                path: path.clone(),
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("line {}: {what}", i + 1),
                ),
                reading: true,
            };
            let level: LevelRecord = serde_json::from_str(l).map_err(|e| invalid(e.to_string()))?;
            match level.implausible() {
                Some(why) => Err(invalid(why)),
                None => Ok(level),
            }
        })
        .collect()
}

impl TickSink for ResultsDir {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        // The series is a by-product: a full disk must not stop the load.
        let _ = self.write_tick(level, tick);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_missing_directory_says_read() {
        let e = read_run(Path::new("/nonexistent/autoperf")).unwrap_err();
        assert!(e.to_string().starts_with("cannot read results from"), "{e}");
    }

    #[test]
    fn a_long_or_odd_scenario_name_still_makes_a_directory_name() {
        let path = ResultsDir::default_path(&"é/x".repeat(200));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.len() < 130, "{name}");
        assert!(name.starts_with("__x__x"), "{name}");
        assert!(!name.contains('/'));
    }
}
