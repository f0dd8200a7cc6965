//! `autoperf capacity`: the automatic analysis, its manual levels, its
//! resumption, the open search and the per-resource series of `--vary`.

use std::path::PathBuf;
use std::time::Duration;

use autoperf_core::scenario::SearchStrategy;
use clap::Args;

use super::{parse_duration, parse_rate, BaselineArgs, GeneratorArgs, OutputArgs, SetArgs};

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Manual override: run exactly these user levels (comma-separated).
    #[arg(long, value_delimiter = ',', requires = "duration")]
    pub levels: Vec<u32>,
    /// Measured duration of each manual level.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Continue an interrupted analysis in this results directory.
    #[arg(long, conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// How levels inside the range are chosen: `model` (a queueing model of
    /// the measured demands runs the levels where the curve bends) or
    /// `bisection` (the paper's) [default: the scenario's `capacity.search`,
    /// else model].
    #[arg(long, value_name = "STRATEGY", value_parser = parse_search, conflicts_with = "levels")]
    pub search: Option<SearchStrategy>,
    /// Search the highest arrival rate that meets the SLOs (an open
    /// workload), as on a scenario with `arrivals:`, even without them.
    #[arg(long, conflicts_with_all = ["levels", "search"])]
    pub open: bool,
    /// The open search's first rate, e.g. 50/s [default: the scenario's
    /// `arrivals:` rate, else 10/s]. Implies --open.
    #[arg(long, value_parser = parse_rate, conflicts_with_all = ["levels", "search"])]
    pub rate: Option<f64>,
    /// Open search per resource value, as Theodolite's scalability
    /// benchmark: NAME=v1,v2,… (e.g. web_workers=1,2). Needs --apply.
    #[arg(long, value_name = "NAME=VALUES", requires = "apply", conflicts_with_all = ["levels", "search", "resume"])]
    pub vary: Option<String>,
    /// The shell command that reconfigures the system under test for each
    /// --vary value, `{NAME}` replaced by it (e.g. 'scripts/restart.sh
    /// {web_workers}'); it runs before each series, and may start a server
    /// in the background.
    #[arg(long, value_name = "COMMAND", requires = "vary")]
    pub apply: Option<String>,
    /// After --apply, wait until GET URL answers 2xx [default: until the
    /// target accepts connections].
    #[arg(long, value_name = "URL", requires = "vary")]
    pub ready: Option<String>,
    /// How long to wait for readiness after --apply.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Run without the profiler agents named under `servers:`.
    #[arg(long)]
    pub no_agents: bool,
    /// Fit a queueing model of the measured demands against the measured
    /// curve (prediction.json, the report's charts). On by default when the
    /// agents measured demands; with this flag, their absence is an error.
    #[arg(long, conflicts_with_all = ["no_predict", "no_agents"])]
    pub predict: bool,
    /// No queueing model after the analysis.
    #[arg(long)]
    pub no_predict: bool,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

fn parse_search(text: &str) -> Result<SearchStrategy, String> {
    SearchStrategy::parse(text).ok_or_else(|| format!("`{text}`: expected `model` or `bisection`"))
}
