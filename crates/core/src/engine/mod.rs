//! Runs one load level — N closed-loop users, or arrivals at a rate (open
//! workload) — spread over one shard per core, with a warm-up, the measured
//! window, and a stop that ends the level on time however the server behaves.

mod arrival_timer;
mod checks;
mod coalesce;
mod error;
mod extract;
mod feed;
pub mod fleet;
mod level;
mod open;
mod shard;
mod split;
mod start;
mod stop;
mod user;
pub mod workers;

pub use coalesce::DEFAULT_NAP;
pub use error::EngineError;
pub use fleet::Generators;
pub use level::{default_warmup, Level, LevelPlan, OpenPlan, Workload, DEFAULT_MAX_IN_FLIGHT};
pub use stop::StopSignal;
pub use workers::{WorkerPool, WorkerShare};

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::measure::{Collector, LevelInfo, LevelTotals, TickSink};
use crate::protocol::HttpTransport;
use crate::scenario::{Endpoint, Scenario};

use fleet::HostPlan;
use split::Load;
use start::Clock;

/// A finished level: what was planned and what was measured.
#[derive(Debug, Clone)]
pub struct LevelRun {
    pub level: Level,
    pub started_at: SystemTime,
    pub totals: LevelTotals,
    /// Load that went missing: a generator process or worker that died or
    /// went silent mid-level, each a sentence naming it. Not empty: the
    /// level ran under-loaded and is incomplete.
    pub lost: Vec<String>,
    /// The workers the level ran on, with their shares (empty: this host).
    pub workers: Vec<WorkerShare>,
    /// Workers that did not answer (the level ran on the others).
    pub warnings: Vec<String>,
}

/// Checks that the target accepts connections, before any level runs.
pub fn probe_target(scenario: &Scenario) -> Result<(), EngineError> {
    let base = match &scenario.target.endpoint {
        Endpoint::Http(base) => base,
        #[cfg(feature = "kafka")]
        Endpoint::Kafka(kafka) => return Ok(crate::protocol::kafka::probe(scenario, kafka)?),
        #[cfg(not(feature = "kafka"))]
        Endpoint::Kafka(_) => unreachable!("decoding rejects Kafka targets without the feature"),
    };
    let transport = HttpTransport::new(scenario, base)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Start(e.to_string()))?;
    runtime.block_on(transport.probe())?;
    Ok(())
}

/// Runs `level` to its end (or until `stop`), feeding every tick to
/// `sinks`, with its users or arrivals spread over the generator processes
/// `generators` allows and the level needs (`Generators::default()`: this
/// process alone, unless the level cannot fit in it).
pub fn run_level(
    scenario: &Arc<Scenario>,
    level: &Level,
    generators: &Generators,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<LevelRun, EngineError> {
    let load = match level {
        Level::Closed(plan) => Load::Closed {
            users: plan.users,
            ramp: plan.ramp.clone(),
        },
        Level::Open(plan) => Load::Open {
            plan: plan.clone(),
            seed: fastrand::u64(..),
        },
    };
    let info = LevelInfo {
        index: level.index(),
        users: level.users().unwrap_or(0),
        warmup: level.warmup(),
        duration: level.duration(),
    };
    let seed = fastrand::u64(..);
    let nap = generators.coalesce.unwrap_or(DEFAULT_NAP);
    let ran = match &generators.workers {
        Some(pool) => workers::drive(scenario, level, &load, pool, &info, seed, nap, sinks, stop)?,
        None => drive_here(
            scenario, level, &load, generators, &info, seed, nap, sinks, stop,
        )?,
    };
    Ok(LevelRun {
        level: level.clone(),
        started_at: ran.started_at,
        totals: ran.totals,
        lost: ran.lost,
        workers: ran.workers,
        warnings: ran.warnings,
    })
}

/// What driving a level gave, wherever it ran.
pub(crate) struct Driven {
    /// When the level's clock started.
    pub started_at: SystemTime,
    pub totals: LevelTotals,
    pub lost: Vec<String>,
    pub workers: Vec<WorkerShare>,
    pub warnings: Vec<String>,
}

/// Runs the level on this host: its shards in this process, or over the
/// generator processes the level needs, collecting their ticks until it
/// ends.
#[allow(clippy::too_many_arguments)]
fn drive_here(
    scenario: &Arc<Scenario>,
    level: &Level,
    load: &Load,
    generators: &Generators,
    info: &LevelInfo,
    seed: u64,
    nap: Duration,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<Driven, EngineError> {
    let placement = fleet::place(scenario, load.connections(), generators)?;
    let host = HostPlan::whole(load, &placement);
    // Shards start a moment from now, all on the same clock; generator
    // processes get longer, to start and read the scenario.
    let lead = Duration::from_millis(if placement.is_local() { 20 } else { 500 });
    let start = Instant::now() + lead;
    let started_at = SystemTime::now() + lead;
    let clock = Clock {
        start,
        deadline: start + level.warmup() + level.duration(),
        seed,
        nap,
    };
    let collector = Collector::new(
        host.range.total,
        scenario.requests.len(),
        start,
        level.warmup(),
        clock.deadline,
    );
    let (totals, lost) =
        fleet::run_host_share(scenario, level.workload(), load, &host, clock, stop, |rx| {
            collector.run(info, rx, sinks)
        })?;
    Ok(Driven {
        started_at,
        totals,
        lost,
        workers: Vec::new(),
        warnings: Vec::new(),
    })
}
