//! A results directory read back, whatever its files hold, as `autoperf
//! report`, `compare` (and `--baseline`) and `capacity --resume` read it:
//! `read_levels`, the HTML report (`write_report`: run.json, timeseries.csv,
//! prediction.json) and levels.csv, `compare::Results::read` (run.json,
//! request_series.csv and server_series.csv) compared both ways with a real run and rendered as
//! text and HTML. Never a panic; and a record that was read, written
//! again, reads back the same (`capacity --resume` rewrites the run.json
//! it read).
//!
//! Input: the files' contents in the order of `FILES`, split at 0xFF bytes
//! (no UTF-8 text holds one); a file without a part is absent.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use autoperf_core::compare::{self, Limits, Results};
use autoperf_core::record::RunRecord;
use autoperf_core::report::{csv::levels_csv, html::write_report};
use autoperf_core::results::{read_levels, read_run};
use libfuzzer_sys::fuzz_target;

const FILES: [&str; 6] = [
    "run.json",
    "levels.jsonl",
    "request_series.csv",
    "timeseries.csv",
    "prediction.json",
    "server_series.csv",
];

/// A fresh directory `name` under this process's scratch directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir()
        .join(format!("autoperf-fuzz-run-record-{}", std::process::id()))
        .join(name);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A real run's results: the other side of every comparison.
fn baseline() -> &'static Results {
    static BASE: OnceLock<Results> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = scratch("baseline");
        std::fs::write(
            dir.join("run.json"),
            include_str!("../../crates/core/src/report/html/testdata/run/run.json"),
        )
        .unwrap();
        Results::read(&dir).expect("the test data's run reads back")
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch("results");
    let mut parts = data.split(|&b| b == 0xFF);
    for name in FILES {
        let path = dir.join(name);
        match parts.next() {
            Some(part) => std::fs::write(&path, part).expect("a results file written"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    if let Ok(levels) = read_levels(&dir) {
        let _ = levels_csv(&levels);
    }
    if write_report(&dir).is_ok() {
        let record = read_run(&dir).expect("run.json read once reads again");
        let _ = levels_csv(&record.levels);
        // As `write_run_file` writes it (in memory: it syncs to disk).
        let text = serde_json::to_string_pretty(&record).expect("a record serializes");
        let back: RunRecord = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("a record read back, written again, does not read: {e}"));
        assert_eq!(back.implausible(), None);
        assert!(
            back == record,
            "a record read back, written again, reads otherwise"
        );
    }
    if let Ok(new) = Results::read(&dir) {
        let base = baseline();
        for (a, b) in [(base, &new), (&new, base)] {
            let c = compare::compare(a, b, &Limits::default());
            let _ = compare::render_text(&c);
            let _ = compare::render_html(&c, a, b);
        }
    }
});
