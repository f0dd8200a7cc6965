//! `autoperf run`: one load test at one level, closed (users) or open
//! (an arrival rate).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{parse_duration, parse_rate, BaselineArgs, GeneratorArgs, OutputArgs, SetArgs};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Number of concurrent virtual users (closed workload). Without it and
    /// without --rate, the scenario's `arrivals:` run.
    #[arg(long, short = 'u', conflicts_with = "rate")]
    pub users: Option<u32>,
    /// Arrival rate of an open workload, e.g. 500/s: each arrival starts a session.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// How open-workload arrivals are spaced (default: poisson, or the scenario's).
    #[arg(long, value_enum)]
    pub arrivals: Option<ArrivalSpacing>,
    /// Open workload: sessions in flight at most; later arrivals wait, and are
    /// counted (default 10000, or the scenario's).
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    /// Measured duration after the warm-up, e.g. 30s, 2m (default 30s, or
    /// what the scenario's arrival stages last).
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up excluded from every figure (default: twice the think time, 3–30 s).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Run without the profiler agents named under `servers:`.
    #[arg(long)]
    pub no_agents: bool,
    /// Print every exchange as it happens — the request as sent, the
    /// answer's head and body, checks, values extracted, the transition
    /// taken and why — for one user (or --users N, one after another) and
    /// one session each (or --sessions N); think times are not waited and
    /// nothing is measured or written. Exit 1 when an exchange failed.
    #[arg(long, conflicts_with_all = ["rate", "duration", "warmup"])]
    pub trace: bool,
    /// With --trace: sessions each traced user walks (default 1).
    #[arg(long, requires = "trace", value_parser = clap::value_parser!(u32).range(1..))]
    pub sessions: Option<u32>,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ArrivalSpacing {
    /// A Poisson process: exponential gaps.
    Poisson,
    /// Evenly spaced arrivals.
    Even,
}
