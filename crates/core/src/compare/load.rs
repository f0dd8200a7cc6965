//! A results directory as a comparison reads it: `run.json` and, when the
//! run wrote it, `request_series.csv` (each request type's measured
//! seconds, the samples the significance test needs).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::record::RunRecord;
use crate::results::{read_run, ResultsError};

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
}

impl Results {
    pub fn read(dir: &Path) -> Result<Results, ResultsError> {
        let record = read_run(dir)?;
        let path = dir.join("request_series.csv");
        let bad = |source: io::Error| ResultsError {
            path: path.clone(),
            source,
            reading: true,
        };
        let seconds = match fs::File::open(&path) {
            Ok(file) => ::csv::Reader::from_reader(file)
                .deserialize()
                .collect::<Result<Vec<RequestSecond>, _>>()
                .map_err(|e| bad(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(bad(e)),
        };
        Ok(Results {
            dir: dir.to_path_buf(),
            record,
            seconds,
        })
    }

    /// The measured seconds of one request (or `*`) in one level.
    pub fn seconds_of<'a>(
        &'a self,
        level: u32,
        request: &'a str,
    ) -> impl Iterator<Item = &'a RequestSecond> + 'a {
        self.seconds
            .iter()
            .filter(move |s| s.level == level && s.request == request)
    }
}
