//! A results directory as a comparison reads it: `run.json` and, when the
//! run wrote them, `request_series.csv` (each request type's measured
//! seconds, the samples the significance test needs) and
//! `server_series.csv` (each tier's intervals, for its CPU per request).

use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::profile::ServerSecond;
use crate::record::{unmeasurable, RunRecord};
use crate::results::{read_results_file_if_there, read_run, ResultsError};

/// One row of `request_series.csv`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct RequestSecond {
    pub t_s: f64,
    pub level: u32,
    /// A request name, or `*` for all of the level's requests.
    pub request: String,
    pub requests: u64,
    pub errors: u64,
    pub throughput_rps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

/// A results directory, read.
pub struct Results {
    pub dir: PathBuf,
    pub record: RunRecord,
    /// Empty for results written before `request_series.csv` existed: their
    /// changes are judged by the limits alone, untested.
    pub seconds: Vec<RequestSecond>,
    /// Empty for results without `servers:` (or written before the file).
    pub server_seconds: Vec<ServerSecond>,
}

impl RequestSecond {
    /// Why this row cannot be a measured second, if it cannot: a figure
    /// that is not finite (NaN, inf) or negative, more errors than
    /// requests.
    fn implausible(&self) -> Option<String> {
        let figures = [
            ("t_s", self.t_s),
            ("throughput_rps", self.throughput_rps),
            ("mean_ms", self.mean_ms),
            ("p50_ms", self.p50_ms),
            ("p90_ms", self.p90_ms),
            ("p95_ms", self.p95_ms),
            ("p99_ms", self.p99_ms),
        ];
        unmeasurable(figures, self.errors, self.requests)
    }
}

/// A row of a per-second file, checked for what a measurement can be.
trait Row: serde::de::DeserializeOwned {
    fn implausible(&self) -> Option<String>;
}

impl Row for RequestSecond {
    fn implausible(&self) -> Option<String> {
        RequestSecond::implausible(self)
    }
}

impl Row for ServerSecond {
    fn implausible(&self) -> Option<String> {
        let figures = [
            ("window_s", self.window_s),
            ("requests", self.requests),
            ("cpu_ms_per_request", self.cpu_ms_per_request),
            ("cpu_util_cores", self.cpu_util_cores),
        ];
        unmeasurable(figures, 0, 0)
    }
}

/// The rows of a per-second CSV file. A last line cut short (the process
/// was killed mid-write) is left out; any other bad row is an error, and
/// so is a row no measurement gives.
fn parse_seconds<T: Row>(text: &str) -> Result<Vec<T>, String> {
    let mut rows = Vec::new();
    let records: Vec<_> = ::csv::Reader::from_reader(text.as_bytes())
        .into_deserialize::<T>()
        .collect();
    let last = records.len().saturating_sub(1);
    for (i, record) in records.into_iter().enumerate() {
        match record {
            Ok(row) => match row.implausible() {
                // Row 1 is the header.
                Some(why) => return Err(format!("row {}: {why}", i + 2)),
                None => rows.push(row),
            },
            Err(_) if i == last && !text.ends_with('\n') => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(rows)
}

impl Results {
    pub fn read(dir: &Path) -> Result<Results, ResultsError> {
        let record = read_run(dir)?;
        Ok(Results {
            dir: dir.to_path_buf(),
            record,
            seconds: read_series(&dir.join("request_series.csv"))?,
            server_seconds: read_series(&dir.join("server_series.csv"))?,
        })
    }

    /// The intervals of one tier in one level.
    pub(crate) fn server_seconds_of<'a>(
        &'a self,
        level: u32,
        tier: &'a str,
    ) -> impl Iterator<Item = &'a ServerSecond> + 'a {
        self.server_seconds
            .iter()
            .filter(move |s| s.level == level && s.tier == tier)
    }

    /// The measured seconds of one request (or `*`) in one level.
    pub(crate) fn seconds_of<'a>(
        &'a self,
        level: u32,
        request: &'a str,
    ) -> impl Iterator<Item = &'a RequestSecond> + 'a {
        self.seconds
            .iter()
            .filter(move |s| s.level == level && s.request == request)
    }
}

/// A per-second file's rows; none when the run did not write it.
fn read_series<T: Row>(path: &Path) -> Result<Vec<T>, ResultsError> {
    match read_results_file_if_there(path)? {
        None => Ok(Vec::new()),
        Some(text) => parse_seconds(&text).map_err(|e| ResultsError {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
            reading: true,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_line_cut_short_is_left_out_and_other_bad_rows_are_errors() {
        let header = "t_s,level,request,requests,errors,throughput_rps,mean_ms,p50_ms,p90_ms,p95_ms,p99_ms\n";
        let row = "1.0,1,a,5,0,5.0,1.0,1.0,1.0,1.0,1.0\n";
        let cut = format!("{header}{row}2.0,1,a,5,0");
        assert_eq!(parse_seconds::<RequestSecond>(&cut).unwrap().len(), 1);
        let bad = format!("{header}1.0,1,a,x,0,5.0,1.0,1.0,1.0,1.0,1.0\n{row}");
        assert!(parse_seconds::<RequestSecond>(&bad).is_err());
        // Figures no measurement gives: named with their row.
        for (figures, key) in [
            ("1.0,1,a,5,0,5.0,1.0,1.0,1.0,1.0,-4.0", "p99_ms is -4"),
            (
                "1.0,1,a,5,0,NaN,1.0,1.0,1.0,1.0,1.0",
                "throughput_rps is NaN",
            ),
            ("1.0,1,a,5,0,5.0,inf,1.0,1.0,1.0,1.0", "mean_ms is inf"),
            ("1.0,1,a,5,0,5.0,1e308,1.0,1.0,1.0,1.0", "mean_ms is 1000"),
            (
                "1.0,1,a,5,9,5.0,1.0,1.0,1.0,1.0,1.0",
                "errors is 9, more than its 5",
            ),
        ] {
            let text = format!("{header}{row}{figures}\n");
            let e = parse_seconds::<RequestSecond>(&text).unwrap_err();
            assert!(e.starts_with(&format!("row 3: {key}")), "{e}");
        }
    }
}
