//! Where a level's load runs: shards (threads) in this process, generator
//! processes on this host, or workers on other hosts — each running a
//! range of the level's shards, so their parts add up to the level (see
//! `split`) and their snapshots merge exactly, as one process's shards do.
//!
//! ```text
//!   controller (collector, live view, results)
//!     ├─ shards in this process                       (a small level)
//!     ├─ autoperf generator ×P   stdin: Job, "stop"   (too many connections
//!     │                          stdout: snapshots     for one process)
//!     └─ autoperf worker ×W      TCP: the same Job    (other hosts, see
//!          └─ shards, or generator processes           `engine::workers`)
//! ```
//!
//! - `place`: how many processes a host's share needs, from which addresses.
//! - `processes`: the generator processes of this host.
//! - `serve`: a generator process's side (`autoperf generator`).

mod place;
mod processes;
mod serve;

pub use place::open_file_limit;

pub use place::place;

pub use place::raise_open_file_limit;

pub use place::Limits;

pub use place::Placement;
pub use place::{plan, MAX_PROCESSES};
pub use processes::end_shards;
pub use serve::{forward, serve};

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::EngineError;
use super::level::Workload;
use super::split::{Load, ShardRange};
use super::start::{start_shards, Clock, LevelContext};
use super::stop::StopSignal;
use crate::measure::wire::to_monotonic_ns;
use crate::measure::Snapshot;
use crate::scenario::sources::Shipped;
use crate::scenario::{BaseUrl, Endpoint, Scenario};

/// Where a level's load comes from.
#[derive(Debug, Clone, Default)]
pub struct Generators {
    /// Generator processes to use at least; more are started when the
    /// level needs more connections than one process may hold.
    pub processes: Option<u32>,
    /// Source addresses of the connections, dealt to shards round-robin.
    /// Empty: the OS chooses, unless the level needs more ports than one
    /// address has toward a loopback target (then 127.0.0.1, .2, …).
    pub local_addresses: Vec<IpAddr>,
    /// The autoperf binary that generator processes run (`None`: this
    /// process only, as in library use and tests of the engine).
    pub program: Option<PathBuf>,
    /// Wake-up coalescing's nap (`None`: `DEFAULT_NAP`; zero: off).
    pub coalesce: Option<Duration>,
}

/// One host's share of a level.
#[derive(Debug, Clone)]
pub(crate) struct HostPlan {
    /// The host's shards in the whole level.
    pub range: ShardRange,
    /// Shards of each generator process on the host, in order (one entry:
    /// the host's own process runs them all).
    pub process_shards: Vec<usize>,
    pub addresses: Vec<IpAddr>,
    /// The binary generator processes run.
    pub program: Option<PathBuf>,
    /// The scenario's files and variables, on a host that has not its own.
    pub shipped: Option<Shipped>,
}

impl HostPlan {
    /// This host running the whole level as `placement` chose.
    pub(crate) fn whole(load: &Load, placement: &Placement) -> HostPlan {
        let process_shards = super::split::process_shards(
            load.connections(),
            placement.processes,
            super::split::cores(),
        );
        HostPlan {
            range: ShardRange::whole(process_shards.iter().sum()),
            process_shards,
            addresses: placement.addresses.clone(),
            program: placement.program.clone(),
            shipped: None,
        }
    }
}

/// The scenario as the controller has it, for a process or host to decode
/// the same: its text, `--set` overrides, the target as resolved, and
/// (for another host) the files and variables it reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ScenarioSource {
    pub path: PathBuf,
    pub text: String,
    /// `--set KEY=VALUE` applied over the text, as the parent applied them.
    #[serde(default)]
    pub overrides: Vec<String>,
    /// The target as the parent resolved it (`demo` points the bundled
    /// scenario at the testbed it started), when it is HTTP.
    pub base_url: Option<BaseUrl>,
    /// The files and variables the scenario reads, read on the controller
    /// (a worker on another host decodes the scenario from these).
    #[serde(default)]
    pub shipped: Option<Shipped>,
}

impl ScenarioSource {
    pub(crate) fn of(scenario: &Scenario, shipped: Option<Shipped>) -> ScenarioSource {
        ScenarioSource {
            path: scenario.source.clone(),
            text: scenario.text.clone(),
            overrides: scenario.overrides.clone(),
            base_url: match &scenario.target.endpoint {
                Endpoint::Http(base) => Some(base.clone()),
                #[allow(unreachable_patterns)]
                _ => None,
            },
            shipped,
        }
    }

    /// For another host: what decoding the scenario reads on this one,
    /// recorded by decoding it again.
    pub(crate) fn shipping(scenario: &Scenario) -> Result<ScenarioSource, String> {
        let overrides = parse_overrides(&scenario.overrides)?;
        let (decoded, shipped) = crate::scenario::sources::record(|| {
            crate::scenario::parse_with(&scenario.text, &scenario.source, &overrides)
        });
        decoded.map_err(|d| format!("scenario: {d}"))?;
        Ok(ScenarioSource::of(scenario, Some(shipped)))
    }

    /// The scenario as the sender had it, decoded from the shipped files
    /// and variables when there are some, aimed at the sender's target.
    pub(crate) fn decode(&self) -> Result<Scenario, String> {
        let overrides = parse_overrides(&self.overrides)?;
        let decode = || crate::scenario::parse_with(&self.text, &self.path, &overrides);
        let mut scenario = match &self.shipped {
            Some(shipped) => crate::scenario::sources::replay(shipped.clone(), decode),
            None => decode(),
        }
        .map_err(|d| format!("scenario: {d}"))?;
        if let Some(base) = &self.base_url {
            scenario.target.endpoint = Endpoint::Http(base.clone());
        }
        Ok(scenario)
    }
}

fn parse_overrides(overrides: &[String]) -> Result<Vec<crate::scenario::Override>, String> {
    overrides
        .iter()
        .map(|o| crate::scenario::Override::parse(o))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--set: {e}"))
}

/// What a generator process — or a worker — runs: its shards of one level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub scenario: ScenarioSource,
    pub workload: Workload,
    /// The whole level's load: `range` says which shards of it run here.
    pub load: Load,
    pub range: ShardRange,
    pub addresses: Vec<IpAddr>,
    /// The level's clock on the receiving host's CLOCK_MONOTONIC.
    pub start_ns: u64,
    pub deadline_ns: u64,
    pub seed: u64,
    pub nap: Duration,
    /// `Clock::measured_from`; a job from a controller that predates it
    /// tallies nothing.
    #[serde(default = "never_measured")]
    pub measured_from: u64,
}

fn never_measured() -> u64 {
    u64::MAX
}

impl Job {
    /// The job for `range` of `load`, on this host's clock.
    pub(crate) fn new(
        scenario: ScenarioSource,
        workload: &Workload,
        load: &Load,
        range: ShardRange,
        addresses: Vec<IpAddr>,
        clock: Clock,
    ) -> Job {
        Job {
            scenario,
            workload: workload.clone(),
            load: load.clone(),
            range,
            addresses,
            start_ns: to_monotonic_ns(clock.start),
            deadline_ns: to_monotonic_ns(clock.deadline),
            seed: clock.seed,
            nap: clock.nap,
            measured_from: clock.measured_from,
        }
    }
}

/// Runs one host's share of a level here — its shards in this process, or
/// over generator processes — and hands their snapshots to `consume`
/// until every shard has ended. Returns what `consume` returned and what
/// went wrong with generator processes (each a sentence).
pub(crate) fn run_host_share<R>(
    level: LevelContext<'_>,
    host: &HostPlan,
    stop: &StopSignal,
    consume: impl FnOnce(mpsc::Receiver<Snapshot>) -> R,
) -> Result<(R, Vec<String>), EngineError> {
    let (tx, rx) = mpsc::channel();
    if host.process_shards.len() <= 1 {
        return std::thread::scope(|scope| {
            start_shards(scope, level, host.range, &host.addresses, tx, stop)?;
            Ok((consume(rx), Vec::new()))
        });
    }
    let fleet = processes::Fleet::start(level, host, tx, stop)?;
    let out = consume(rx);
    let trouble = fleet.finish()?;
    Ok((out, trouble))
}
