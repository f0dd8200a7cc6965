//! `report.html`: one self-contained page rendered from the run record and
//! the time series — inline CSS and inline SVG, no scripts, nothing fetched
//! — so it opens anywhere, offline. The output depends only on its inputs
//! (no clock, fixed number formats), so it can be compared to a golden file.
//!
//! Layout: summary and verdict, warnings, thresholds; for runs over several
//! loads the curves against users (with the queueing model's, when
//! `prediction.json` is there); the open search's rates and verdicts; the
//! profile's demand table; the model's
//! section; one section
//! per level (its time series and per-request table); the scenario text.
//!
//! - `figure`: one chart under its caption, with its legend.
//! - `charts`: the curves against users and each level's time series.
//! - `tables`: the levels, each level's requests and tiers, the demands.
//! - `rates`: the open search's verdicts and rate curves.
//! - `prediction`: the queueing model's section (`prediction.json`).

mod charts;
mod classes;
mod figure;
mod prediction;
mod rates;
mod tables;

pub(crate) use charts::SeriesRow;
pub(crate) use figure::{figure, Key};
pub(crate) use tables::{head as table_head, row as table_row};

use std::fmt::Write;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::Prediction;
use crate::record::{Analysis, LagReading, LevelRecord, Mode, RunRecord};
use crate::report::svg::{esc, fnum};

pub(crate) const STYLE: &str = include_str!("style.css");

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file could not be read or the report not written.
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `run.json` is not a run record autoperf can have written.
    #[error(transparent)]
    Record(#[from] crate::results::ResultsError),
    /// `prediction.json` is not a prediction (remove it, or run `autoperf
    /// predict` again).
    #[error("{path} is not a prediction ({source}): run `autoperf predict` on the directory again, or remove the file")]
    Prediction {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// `timeseries.csv` has a malformed row.
    #[error("{path}: {source}")]
    Series {
        path: PathBuf,
        #[source]
        source: ::csv::Error,
    },
    /// `lag_series.csv` has a malformed row.
    #[error("{path}, line {line}: expected `window_s,level,group,lag_records`")]
    LagSeries { path: PathBuf, line: usize },
}

/// Reads `timeseries.csv`; a missing file is an empty series (a run
/// stopped before its first second still gets a report).
pub(crate) fn read_series(path: &Path) -> Result<Vec<SeriesRow>, ReportError> {
    let Some(text) = crate::results::read_results_file_if_there(path)? else {
        return Ok(Vec::new());
    };
    ::csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect::<Result<_, _>>()
        .map_err(|source| ReportError::Series {
            path: path.into(),
            source,
        })
}

/// Reads `lag_series.csv` (`window_s,level,group,lag_records`); a
/// missing file is no readings (no lag was watched). A group's name may
/// hold commas: it is what lies between the second comma and the last.
pub(crate) fn read_lag_series(path: &Path) -> Result<Vec<LagReading>, ReportError> {
    let Some(text) = crate::results::read_results_file_if_there(path)? else {
        return Ok(Vec::new());
    };
    let malformed = |line: usize| ReportError::LagSeries {
        path: path.into(),
        line,
    };
    let mut readings = Vec::new();
    for (i, row) in text.lines().enumerate().skip(1) {
        if row.trim().is_empty() {
            continue;
        }
        let parsed = (|| {
            let (window_s, rest) = row.split_once(',')?;
            let (level, rest) = rest.split_once(',')?;
            let (group, lag) = rest.rsplit_once(',')?;
            Some(LagReading {
                window_s: window_s.parse().ok()?,
                level: level.parse().ok()?,
                group: group.to_string(),
                lag_records: lag.trim().parse().ok()?,
            })
        })();
        readings.push(parsed.ok_or_else(|| malformed(i + 1))?);
    }
    Ok(readings)
}

/// Reads `run.json`, `timeseries.csv` and `lag_series.csv` from `dir` and
/// writes `dir/report.html`, returning its path.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let record = crate::results::read_run(dir)?;
    let series = read_series(&dir.join("timeseries.csv"))?;
    let lag = read_lag_series(&dir.join("lag_series.csv"))?;
    let prediction = read_prediction(dir)?;
    let out = dir.join("report.html");
    let html = render(&record, &series, &lag, prediction.as_ref());
    fs::write(&out, html).map_err(|source| ReportError::Io {
        path: out.clone(),
        source,
    })?;
    Ok(out)
}

/// Reads `prediction.json` when the directory has one.
fn read_prediction(dir: &Path) -> Result<Option<Prediction>, ReportError> {
    let path = dir.join("prediction.json");
    let Some(text) = crate::results::read_results_file_if_there(&path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| ReportError::Prediction { path, source })
}

/// The whole page: the record, its time series and consumer-lag readings;
/// `prediction`: the queueing model of these results.
pub(crate) fn render(
    record: &RunRecord,
    series: &[SeriesRow],
    lag: &[LagReading],
    prediction: Option<&Prediction>,
) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let title = format!(
        "autoperf {} · {}",
        record.mode.as_str(),
        record.scenario.name
    );
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    let _ = write!(
        h,
        "<header>\n<h1>{}</h1>\n<p class=\"sub\">{} of <code>{}</code> against <code>{}</code></p>\n</header>\n",
        esc(&record.scenario.name),
        esc(mode_title(record.mode)),
        esc(&record.scenario.file),
        esc(&record.scenario.target)
    );
    untrustworthy(&mut h, record);
    summary(&mut h, record);
    warnings(&mut h, record);
    thresholds(&mut h, &record.analysis);
    if let Some(a) = &record.analysis.rates {
        rates::section(&mut h, record, a);
    }
    let over_loads = distinct_users(&record.levels) > 1;
    if over_loads {
        h.push_str("<h2>Against load</h2>\n");
        charts::capacity(&mut h, record, prediction);
        tables::levels(&mut h, &record.levels);
    }
    if let Some(p) = prediction {
        prediction::section(&mut h, p, over_loads);
    }
    classes::curves(&mut h, &record.levels, prediction);
    if let Some(profile) = &record.analysis.profile {
        h.push_str("<h2>Resource demands per request</h2>\n");
        tables::demands(&mut h, &profile.demands);
        classes::demands(&mut h, &profile.class_demands);
    }
    h.push_str("<h2>Levels</h2>\n");
    if record.levels.is_empty() {
        h.push_str("<p class=\"note\">No level finished.</p>\n");
    }
    for level in &record.levels {
        let rows: Vec<&SeriesRow> = series.iter().filter(|r| r.level == level.level).collect();
        let lag: Vec<&LagReading> = lag.iter().filter(|r| r.level == level.level).collect();
        let _ = write!(
            h,
            "<section class=\"level\" id=\"level-{}\">\n<h3>{}</h3>\n",
            level.level,
            esc(&level_title(level))
        );
        charts::level(&mut h, level, &rows, &lag);
        tables::per_request(&mut h, level);
        tables::per_class(&mut h, level);
        tables::servers(&mut h, level);
        h.push_str("</section>\n");
    }
    let _ = write!(
        h,
        "<h2>Scenario</h2>\n<pre>{}</pre>\n<footer>Rendered by {} {} from <code>run.json</code> and <code>timeseries.csv</code> (record version {}).</footer>\n</body>\n</html>\n",
        esc(&record.scenario.text),
        esc(&record.tool.name),
        esc(&record.tool.version),
        record.record_version
    );
    h
}

fn mode_title(mode: Mode) -> &'static str {
    match mode {
        Mode::Capacity => "Capacity analysis",
        Mode::Profile => "Resource profile",
        Mode::Demo => "Demo capacity analysis",
        Mode::Run => "Load run",
    }
}

pub(crate) fn level_title(l: &LevelRecord) -> String {
    let load = match (l.users, l.rate_rps) {
        (Some(u), _) => users(u),
        (None, Some(r)) => format!("{} req/s offered", fnum(r, 1)),
        (None, None) => "no load".into(),
    };
    let mut t = format!(
        "Level {} · {load} · {} req/s · p99 {} ms",
        l.level,
        fnum(l.throughput_rps, 1),
        fnum(l.response_time_ms.p99, 2)
    );
    if !l.workers.is_empty() {
        let n = l.workers.len();
        t.push_str(&format!(" · {n} worker{}", if n == 1 { "" } else { "s" }));
    }
    if l.client_bottleneck {
        t.push_str(" · client bottleneck");
    }
    if l.incomplete.is_some() {
        t.push_str(" · INCOMPLETE");
    } else if l.invalid.is_some() {
        t.push_str(" · NOT TRUSTWORTHY");
    }
    t
}

fn users(n: u32) -> String {
    format!("{n} user{}", if n == 1 { "" } else { "s" })
}

fn distinct_users(levels: &[LevelRecord]) -> usize {
    let mut u: Vec<u32> = levels.iter().filter_map(|l| l.users).collect();
    u.sort_unstable();
    u.dedup();
    u.len()
}

fn card(h: &mut String, class: &str, label: &str, value_html: &str) {
    let _ = writeln!(
        h,
        "<div class=\"card {class}\"><dt>{}</dt><dd>{value_html}</dd></div>",
        esc(label)
    );
}

fn summary(h: &mut String, r: &RunRecord) {
    h.push_str("<dl class=\"cards\">\n");
    card(h, "", "Mode", &esc(mode_title(r.mode)));
    let when = match &r.finished_at {
        Some(end) => format!(
            "{}<br><small>to {}{}</small>",
            esc(&r.started_at),
            esc(end),
            elapsed(&r.started_at, end)
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        ),
        None => format!("{}<br><small>not finished</small>", esc(&r.started_at)),
    };
    card(h, "", "When", &when);
    card(
        h,
        "",
        "Where",
        &format!(
            "{}<br><small>{} cores, {}</small>",
            esc(&r.host.hostname),
            r.host.cores,
            esc(&r.host.os)
        ),
    );
    card(
        h,
        "",
        "Tool",
        &format!("{} {}", esc(&r.tool.name), esc(&r.tool.version)),
    );
    card(
        h,
        "verdict",
        "Stop reason",
        &esc(r.analysis.stop_reason.as_str()),
    );
    if let Some(a) = &r.analysis.capacity {
        let users =
            |n: Option<f64>| n.map_or("—".to_string(), |v| format!("{} users", fnum(v, 0)));
        card(
            h,
            "verdict",
            "Saturation point",
            &esc(&users(a.saturation_users.map(f64::from))),
        );
        card(h, "verdict", "N* (model estimate)", &esc(&users(a.n_star)));
        let bottleneck = match (&a.hidden_bottleneck, &a.bottleneck) {
            (Some(hid), _) => format!(
                "not a CPU <small>(a lock, a pool, a limit the agents do not see: {} ms a request, ≤ {} req/s; busiest CPU {} at {}%)</small>",
                fnum(hid.demand_ms, 2),
                fnum(hid.max_throughput_rps, 1),
                esc(&hid.busiest_cpu.tier),
                fnum(hid.busiest_cpu.utilisation * 100.0, 0)
            ),
            (None, Some(b)) => format!("{} <small>({})</small>", esc(&b.tier), esc(&b.process)),
            (None, None) => "—".into(),
        };
        card(h, "verdict", "Bottleneck", &bottleneck);
        let at = a.max_throughput_users.map_or(String::new(), |u| {
            format!(" at {} users", fnum(u.into(), 0))
        });
        card(
            h,
            "verdict",
            "Max throughput",
            &format!("{} req/s<small>{at}</small>", fnum(a.max_throughput_rps, 1)),
        );
        if let Some(n) = a.n_min {
            card(h, "", "N_min", &format!("{} users", fnum(n.into(), 0)));
        }
    } else if let Some(a) = &r.analysis.rates {
        rates::cards(h, a);
    } else {
        let requests: u64 = r.levels.iter().map(|l| l.requests).sum();
        let errors: u64 = r.levels.iter().map(|l| l.errors).sum();
        let rate = if requests > 0 {
            errors as f64 / requests as f64 * 100.0
        } else {
            0.0
        };
        card(
            h,
            "verdict",
            "Requests",
            &format!(
                "{requests} <small>{errors} errors ({}%)</small>",
                fnum(rate, 2)
            ),
        );
        if let [l] = r.levels.as_slice() {
            let rt = &l.response_time_ms;
            card(
                h,
                "verdict",
                "Throughput",
                &format!("{} req/s", fnum(l.throughput_rps, 1)),
            );
            card(
                h,
                "verdict",
                "Response time",
                &format!(
                    "p50 {} · p99 {} ms<br><small>mean {} · p90 {} · max {} ms</small>",
                    fnum(rt.p50, 2),
                    fnum(rt.p99, 2),
                    fnum(rt.mean, 2),
                    fnum(rt.p90, 2),
                    fnum(rt.max, 2)
                ),
            );
        }
    }
    h.push_str("</dl>\n");
}

/// "1m 30s" between two RFC 3339 timestamps.
fn elapsed(start: &str, end: &str) -> Option<String> {
    let a = humantime::parse_rfc3339(start).ok()?;
    let b = humantime::parse_rfc3339(end).ok()?;
    let s = b.duration_since(a).ok()?.as_secs();
    Some(if s >= 60 {
        format!("{}m {}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    })
}

/// First on the page: the levels that measured errors, not the system.
fn untrustworthy(h: &mut String, r: &RunRecord) {
    let invalid: Vec<&LevelRecord> = r.levels.iter().filter(|l| l.invalid.is_some()).collect();
    if invalid.is_empty() {
        return;
    }
    let stop = match r.analysis.stop_reason {
        crate::record::StopReason::TargetDown => {
            " The analysis stopped there: the target went down."
        }
        crate::record::StopReason::InvalidLevel => " The analysis stopped there.",
        _ => "",
    };
    let _ = writeln!(
        h,
        "<div class=\"warnings untrusted\"><strong>Not trustworthy: {} of {} levels measured errors, or lost part of their load, not the system working; they are no point of any curve.{stop}</strong><ul>",
        invalid.len(),
        r.levels.len()
    );
    for l in invalid {
        let _ = writeln!(
            h,
            "<li>Level {}: {}</li>",
            l.level,
            esc(l.invalid.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</ul></div>\n");
}

fn warnings(h: &mut String, r: &RunRecord) {
    let mut items: Vec<String> = r.warnings.iter().map(|w| esc(w)).collect();
    for l in &r.superseded {
        let why = match &l.incomplete {
            Some(lost) => format!(
                "<strong>Level {} ran again after a worker was lost</strong>: {}",
                l.level,
                esc(lost)
            ),
            None => format!(
                "<strong>Level {} ran again on more workers</strong>: on {} worker{} the load generator was the bottleneck ({} req/s, p99 {} ms)",
                l.level,
                l.workers.len(),
                if l.workers.len() == 1 { "" } else { "s" },
                fnum(l.throughput_rps, 1),
                fnum(l.response_time_ms.p99, 2)
            ),
        };
        items.push(format!(
            "{why}; its measurements are kept in run.json's <code>superseded</code>, not drawn."
        ));
    }
    for l in r.levels.iter().filter(|l| l.client_bottleneck) {
        if let (Some(rate), Some(late)) = (l.rate_rps, &l.client.arrival_lateness_ms) {
            items.push(format!(
                "<strong>Client bottleneck at level {} ({} arrivals/s offered)</strong>: arrivals started late (p99 {} ms) or not at all ({} unstarted) — the load generator, or sessions held up by a slow server, limited this level.",
                l.level,
                fnum(rate, 1),
                fnum(late.p99, 1),
                l.arrivals.as_ref().map_or(0, |a| a.unstarted)
            ));
            continue;
        }
        items.push(format!(
            "<strong>Client bottleneck at level {} ({})</strong>: users thought {} s on average against {} s configured — the load generator, not the server, limited this level; its figures understate what the server can do.",
            l.level,
            esc(&l.users.map_or("rate".to_string(), users)),
            fnum(l.think_time_s.achieved, 3),
            fnum(l.think_time_s.configured, 3)
        ));
    }
    if items.is_empty() {
        return;
    }
    h.push_str("<ul class=\"warnings\">\n");
    for i in items {
        let _ = writeln!(h, "<li>{i}</li>");
    }
    h.push_str("</ul>\n");
}

/// Threshold results, when the run stored them in `analysis.thresholds`.
fn thresholds(h: &mut String, analysis: &Analysis) {
    let Some(list) = &analysis.thresholds else {
        return;
    };
    h.push_str("<h2>Thresholds</h2>\n<div class=\"table-wrap\"><table>\n<tr><th>Threshold</th><th>Result</th><th>Measured</th><th>Note</th></tr>\n");
    for t in list {
        let actual = t.actual.map_or("—".into(), |v| t.unit.format(v));
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td class=\"l\"><span class=\"badge {}\">{}</span></td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&t.source),
            if t.passed { "ok" } else { "bad" },
            if t.passed { "pass" } else { "fail" },
            esc(&actual),
            esc(t.note.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</table></div>\n");
}

#[cfg(test)]
mod tests;
