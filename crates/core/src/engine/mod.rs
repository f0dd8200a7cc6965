//! Runs one load level — N closed-loop users, or arrivals at a rate (open
//! workload) — spread over one shard per core, with a warm-up, the measured
//! window, and a stop that ends the level on time however the server behaves.
//!
//! - `level`: what a level is (closed users or open arrivals) and what each
//!   user does.
//! - `split`: how a level's load is split over processes and shards.
//! - `fleet`: where it runs — this process, generator processes, or
//!   (through `workers`) other hosts.
//! - `start`, `shard`: a process's shards, one thread and runtime each.
//! - `user`, `open`: a closed-loop user; the open workload's arrivals;
//!   `think`: the user's stream of think-time draws, which keeps its mean.
//! - `arrival_timer`, `coalesce`: precise arrival wake-ups; coalesced
//!   reply wake-ups.
//! - `feed`, `extract`, `checks`: data rows in, values out of responses,
//!   responses judged.
//! - `stop`, `error`: how a level ends early, and why it could not run.
//! - `trace`, `tracer`: `run --trace`, a few users' exchanges printed as
//!   they happen.

mod arrival_timer;
mod checks;
mod coalesce;
mod error;
mod extract;
mod feed;
pub mod fleet;
mod hooks;
mod level;
mod open;
mod shard;
mod split;
mod start;
mod stop;
mod think;
mod tick_clock;
mod trace;
mod tracer;
mod user;
pub mod workers;

pub use coalesce::DEFAULT_NAP;
pub use error::EngineError;
pub use fleet::Generators;
pub use level::{default_warmup, Level, LevelPlan, OpenPlan, Workload, DEFAULT_MAX_IN_FLIGHT};
pub use stop::StopSignal;
pub use trace::trace;
pub use tracer::TraceSummary;
pub use workers::WorkerPool;
pub(crate) use workers::WorkerShare;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::measure::{warmup_ticks, Collector, LevelInfo, LevelTotals, TickSink};
use crate::protocol::HttpTransport;
use crate::scenario::{Endpoint, Scenario};

use fleet::HostPlan;
use split::Load;
use start::{Clock, LevelContext};

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
pub(crate) fn probe_target(scenario: &Scenario) -> Result<(), EngineError> {
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

/// Where a run's levels run: on this host, or on workers on other hosts.
#[derive(Debug, Clone, Default)]
pub struct LoadSources {
    /// This host's generator processes and source addresses (and the
    /// wake-up coalescing of every shard, wherever it runs).
    pub here: Generators,
    /// Workers on other hosts that run the levels instead of this one.
    pub workers: Option<WorkerPool>,
}

/// A level as it starts, wherever it runs.
pub(crate) struct LevelStart {
    pub load: Load,
    /// The level as the collector reports it.
    pub info: LevelInfo,
    /// The seed of the level's random choices, the same on every host.
    pub seed: u64,
    /// Wake-up coalescing's nap.
    pub nap: Duration,
}

impl LevelStart {
    fn of(level: &Level, nap: Duration) -> LevelStart {
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
            rate: match level {
                Level::Open(plan) => Some(plan.shape.clone()),
                Level::Closed(_) => None,
            },
        };
        LevelStart {
            load,
            info,
            seed: fastrand::u64(..),
            nap,
        }
    }
}

/// Runs `level` to its end (or until `stop`), feeding every tick to
/// `sinks`: on the workers of `sources`, or else on this host, its users
/// or arrivals spread over the generator processes `sources.here` allows
/// and the level needs (`LoadSources::default()`: this process alone,
/// unless the level cannot fit in it).
pub fn run_level(
    scenario: &Arc<Scenario>,
    level: &Level,
    sources: &LoadSources,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<LevelRun, EngineError> {
    let start = LevelStart::of(level, sources.here.coalesce.unwrap_or(DEFAULT_NAP));
    let ran = match &sources.workers {
        Some(pool) => workers::drive(scenario, level, &start, pool, sinks, stop)?,
        None => drive_here(scenario, level, &start, &sources.here, sinks, stop)?,
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
fn drive_here(
    scenario: &Arc<Scenario>,
    level: &Level,
    start: &LevelStart,
    generators: &Generators,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<Driven, EngineError> {
    let LevelStart {
        load,
        info,
        seed,
        nap,
    } = start;
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
        seed: *seed,
        nap: *nap,
        measured_from: warmup_ticks(level.warmup()),
    };
    let collector = Collector::new(
        host.range.total,
        scenario.requests.len(),
        start,
        level.warmup(),
        clock.deadline,
    );
    let context = LevelContext {
        scenario,
        workload: level.workload(),
        load,
        clock,
    };
    let (totals, lost) =
        fleet::run_host_share(context, &host, stop, |rx| collector.run(info, rx, sinks))?;
    Ok(Driven {
        started_at,
        totals,
        lost,
        workers: Vec::new(),
        warnings: Vec::new(),
    })
}
