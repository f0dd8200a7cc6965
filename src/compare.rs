//! `autoperf compare`, and `--baseline` on `run` and `capacity`: the core's
//! comparison, printed and written next to the results, as an exit code.

use std::path::{Path, PathBuf};

use autoperf_core::compare::{self, Comparison, Limits, Results};

use crate::cli::{BaselineArgs, CompareArgs};
use crate::{exit, print_out, Failure};

pub fn command(args: CompareArgs) -> Result<u8, Failure> {
    let read = |dir: &Path, which: &str| {
        Results::read(dir).map_err(|e| {
            Failure::bad_input(format!(
                "{which} {}: {e} (expected a results directory written by autoperf run, capacity or profile)",
                dir.display()
            ))
        })
    };
    let base = read(&args.base, "BASE")?;
    let new = read(&args.new, "NEW")?;
    let limits = args.max_regression.unwrap_or_default();
    let comparison = compare::compare(&base, &new, &limits);
    let out = args.out.unwrap_or_else(|| args.new.clone());
    let (json, page) = comparison
        .write(&out, &base, &new)
        .map_err(|e| Failure::cannot_proceed(e.to_string()))?;
    if args.json {
        print_out(&format!(
            "{}\n",
            std::fs::read_to_string(&json).unwrap_or_default()
        ));
    } else {
        print_out(&format!(
            "{}comparison: {}\n",
            compare::render_text(&comparison),
            page.display()
        ));
    }
    Ok(code(&comparison))
}

fn code(c: &Comparison) -> u8 {
    if c.regressions > 0 {
        exit::THRESHOLD_FAILED
    } else {
        exit::OK
    }
}

/// The baseline of a run, read before any load so a wrong directory is
/// refused at once.
pub struct Baseline(Option<(Results, Limits)>);

impl Baseline {
    pub fn read(args: &BaselineArgs) -> Result<Baseline, Failure> {
        let Some(dir) = &args.baseline else {
            return Ok(Baseline(None));
        };
        let results = Results::read(dir).map_err(|e| {
            Failure::bad_input(format!(
                "--baseline {}: {e} (expected the results directory of an earlier run)",
                dir.display()
            ))
        })?;
        Ok(Baseline(Some((
            results,
            args.max_regression.clone().unwrap_or_default(),
        ))))
    }

    /// After the run ended with `code` and its results are in `out`:
    /// compares them with the baseline (unless the run was interrupted or
    /// measured nothing trustworthy), writes compare.json and compare.html
    /// into `out`, prints the comparison (to stderr when stdout carries
    /// run.json), and turns a regression into exit 1.
    pub fn judge(self, code: u8, out: &Path, json: bool) -> Result<u8, Failure> {
        let Some((base, limits)) = self.0 else {
            return Ok(code);
        };
        if code == exit::INTERRUPTED || code == exit::UNTRUSTWORTHY {
            eprintln!(
                "--baseline {}: not compared, the run did not finish trustworthy",
                base.dir.display()
            );
            return Ok(code);
        }
        let new = Results::read(out).map_err(|e| Failure::cannot_proceed(e.to_string()))?;
        let comparison = compare::compare(&base, &new, &limits);
        let (_, page): (PathBuf, PathBuf) = comparison
            .write(out, &base, &new)
            .map_err(|e| Failure::cannot_proceed(e.to_string()))?;
        let text = format!(
            "\n{}comparison: {}\n",
            compare::render_text(&comparison),
            page.display()
        );
        if json {
            eprint!("{text}");
        } else {
            print_out(&text);
        }
        Ok(code.max(self::code(&comparison)))
    }
}
