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

pub use coalesce::DEFAULT_NAP;
pub use error::EngineError;
pub use fleet::Generators;
pub use level::{default_warmup, Level, LevelPlan, OpenPlan, Workload, DEFAULT_MAX_IN_FLIGHT};
pub use stop::StopSignal;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::measure::{Collector, LevelInfo, LevelTotals, TickSink};
use crate::protocol::HttpTransport;
use crate::scenario::{Endpoint, Scenario};

use split::{Load, ShardRange};
use start::{start_shards, Clock};

/// A finished level: what was planned and what was measured.
#[derive(Debug, Clone)]
pub struct LevelRun {
    pub level: Level,
    pub started_at: SystemTime,
    pub totals: LevelTotals,
    /// Trouble with generator processes (one that died mid-level).
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
            part: (0, 1),
        },
        Level::Open(plan) => Load::Open {
            plan: plan.clone(),
            seed: fastrand::u64(..),
        },
    };
    let (totals, started_at, warnings) = drive(scenario, level, &load, generators, sinks, stop)?;
    Ok(LevelRun {
        level: level.clone(),
        started_at,
        totals,
        warnings,
    })
}

/// Starts the shards (here or in generator processes), collects their
/// ticks until the level ends.
fn drive(
    scenario: &Arc<Scenario>,
    level: &Level,
    load: &Load,
    generators: &Generators,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<(LevelTotals, SystemTime, Vec<String>), EngineError> {
    let placement = fleet::place(scenario, load.connections(), generators)?;
    let started_at = SystemTime::now();
    // Shards start a moment from now, all on the same clock; generator
    // processes get longer, to start and read the scenario.
    let lead = if placement.is_local() { 20 } else { 500 };
    let start = Instant::now() + Duration::from_millis(lead);
    let clock = Clock {
        start,
        deadline: start + level.warmup() + level.duration(),
        seed: fastrand::u64(..),
        nap: generators.coalesce.unwrap_or(DEFAULT_NAP),
    };
    let (tx, rx) = mpsc::channel();
    let info = LevelInfo {
        index: level.index(),
        users: level.users().unwrap_or(0),
        warmup: level.warmup(),
        duration: level.duration(),
    };
    if placement.is_local() {
        let shards = load.local_shards();
        let range = ShardRange {
            first: 0,
            count: shards,
            total: shards,
        };
        let collector = Collector::new(
            shards,
            scenario.requests.len(),
            start,
            level.warmup(),
            clock.deadline,
        );
        let totals = std::thread::scope(|scope| -> Result<LevelTotals, EngineError> {
            let addresses = &placement.addresses;
            start_shards(
                scope,
                scenario,
                level.workload(),
                load,
                range,
                clock,
                addresses,
                tx,
                stop,
            )?;
            Ok(collector.run(&info, rx, sinks))
        })?;
        return Ok((totals, started_at, Vec::new()));
    }
    let fleet = fleet::Fleet::start(
        scenario,
        level.workload(),
        load,
        &placement,
        clock,
        tx,
        stop,
    )?;
    let collector = Collector::new(
        fleet.shards(),
        scenario.requests.len(),
        start,
        level.warmup(),
        clock.deadline,
    );
    let totals = collector.run(&info, rx, sinks);
    let warnings = fleet.finish()?;
    Ok((totals, started_at, warnings))
}
