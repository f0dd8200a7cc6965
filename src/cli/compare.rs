//! `autoperf compare` and `--baseline` (the same comparison at the end of
//! `run` or `capacity`): the regression gate and its limits.

use std::path::PathBuf;

use autoperf_core::compare::Limits;
use clap::Args;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The earlier results directory (the baseline).
    pub base: PathBuf,
    /// The results directory to judge against it.
    pub new: PathBuf,
    /// How much worse each figure may get, e.g. p99=10%,throughput=5%
    /// (metrics not named are not gated) [default: throughput=5%,
    /// mean=10%, p50=10%, p90=10%, p99=10%, errors=1%].
    #[arg(long, value_name = "LIMITS", value_parser = parse_limits)]
    pub max_regression: Option<Limits>,
    /// Where compare.json and compare.html go [default: NEW].
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print compare.json to stdout instead of the table (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// `--baseline`: compare the run with an earlier one at its end, so one CI
/// step gates a release.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// An earlier results directory: at the end, compare with it (as
    /// `autoperf compare`; compare.json and compare.html in the results)
    /// and exit 1 on a regression.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// The limits the comparison with --baseline applies (as `autoperf
    /// compare --max-regression`).
    #[arg(long, value_name = "LIMITS", value_parser = parse_limits, requires = "baseline")]
    pub max_regression: Option<Limits>,
}

fn parse_limits(text: &str) -> Result<Limits, String> {
    Limits::parse(text)
}
