//! The files a results directory derives from its run.json — levels.csv
//! and report.html — written after every run, and again by
//! `autoperf report`.

use std::path::Path;

use autoperf_core::record::RunRecord;
use autoperf_core::report;
use autoperf_core::results::{read_run, write_run_file};

use super::Outcome;
use crate::cli::OutputArgs;
use crate::{exit, print_out, Failure};

/// After a run: rewrites run.json (with what the CLI added), writes
/// levels.csv and report.html, and prints the summary or run.json.
pub(super) fn finish(
    out: &Path,
    record: &RunRecord,
    output: &OutputArgs,
    summary: &str,
) -> Result<(), Failure> {
    let failed = |e: String| Failure::cannot_proceed(e);
    write_run_file(out, record).map_err(|e| failed(e.to_string()))?;
    report::csv::write_levels_csv(out, &record.levels)
        .map_err(|e| failed(format!("cannot write levels.csv in {}: {e}", out.display())))?;
    let html = report::html::write_report(out).map_err(|e| failed(e.to_string()))?;
    if output.json {
        let text = serde_json::to_string_pretty(record).unwrap_or_default();
        print_out(&format!("{text}\n"));
    } else {
        print_out(&format!(
            "{summary}results: {}\nreport: {}\n",
            out.display(),
            html.display()
        ));
    }
    Ok(())
}

pub fn report(dir: &Path) -> Outcome {
    let record = read_run(dir).map_err(|e| Failure::bad_input(e.to_string()))?;
    report::csv::write_levels_csv(dir, &record.levels)
        .map_err(|e| Failure::cannot_proceed(format!("cannot write levels.csv: {e}")))?;
    let html =
        report::html::write_report(dir).map_err(|e| Failure::cannot_proceed(e.to_string()))?;
    print_out(&format!("report: {}\n", html.display()));
    Ok(exit::OK)
}
