//! Runs one load level — N closed-loop users, or arrivals at a rate (open
//! workload) — spread over one shard per core, with a warm-up, the measured
//! window, and a stop that ends the level on time however the server behaves.

mod arrival_timer;
mod coalesce;
pub mod fleet;
mod open;
mod shard;
mod user;

pub use coalesce::DEFAULT_NAP;
pub use fleet::Generators;
pub use open::{OpenPlan, DEFAULT_MAX_IN_FLIGHT};

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::measure::{Collector, LevelInfo, LevelTotals, TickSink};
use crate::protocol::{HttpTransport, TargetError, Transport};
use crate::scenario::{Endpoint, RequestId, Scenario};

use shard::{run_shard, ShardPlan};
use user::Shared;

/// One closed-workload load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelPlan {
    /// 1-based index of the level in its run.
    pub index: u32,
    pub users: u32,
    pub warmup: Duration,
    /// Measured time after the warm-up (at most: a stop may end it sooner).
    pub duration: Duration,
    pub workload: Workload,
}

/// One load level: a closed population of users, or an open stream of
/// arrivals.
#[derive(Debug, Clone, PartialEq)]
pub enum Level {
    Closed(LevelPlan),
    Open(OpenPlan),
}

impl Level {
    /// 1-based index of the level in its run.
    pub fn index(&self) -> u32 {
        match self {
            Level::Closed(p) => p.index,
            Level::Open(p) => p.index,
        }
    }

    pub fn warmup(&self) -> Duration {
        match self {
            Level::Closed(p) => p.warmup,
            Level::Open(p) => p.warmup,
        }
    }

    /// Measured time after the warm-up (at most).
    pub fn duration(&self) -> Duration {
        match self {
            Level::Closed(p) => p.duration,
            Level::Open(p) => p.duration,
        }
    }

    pub fn workload(&self) -> &Workload {
        match self {
            Level::Closed(p) => &p.workload,
            Level::Open(p) => &p.workload,
        }
    }

    /// The users of a closed level.
    pub fn users(&self) -> Option<u32> {
        match self {
            Level::Closed(p) => Some(p.users),
            Level::Open(_) => None,
        }
    }

    /// Connections the level may hold at once: one per user, or one per
    /// in-flight arrival.
    pub fn connections(&self) -> u32 {
        match self {
            Level::Closed(p) => p.users,
            Level::Open(p) => p.max_in_flight,
        }
    }
}

/// What each user does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Workload {
    /// Walk the scenario's session graph, session after session.
    Session,
    /// Profiling mode (AutoPerf section 2.1.4): run the prerequisites once,
    /// then only `request`, over and over.
    Profile {
        request: RequestId,
        prerequisites: Vec<RequestId>,
    },
}

/// The warm-up a level gets when none is given: long enough for users
/// started over one think time to be in their steady rhythm.
pub fn default_warmup(scenario: &Scenario) -> Duration {
    let twice_think = scenario.think_time.mean() * 2;
    twice_think.clamp(Duration::from_secs(3), Duration::from_secs(30))
}

/// Asks a running level (and the run around it) to stop early. Cloning
/// shares the signal; a `child` stops with its parent (Ctrl-C ends the
/// level) but can also be stopped alone (a controller ends one level).
#[derive(Clone)]
pub struct StopSignal(Arc<StopInner>);

struct StopInner {
    flag: watch::Sender<bool>,
    children: Mutex<Vec<Weak<StopInner>>>,
}

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal(Arc::new(StopInner {
            flag: watch::channel(false).0,
            children: Mutex::new(Vec::new()),
        }))
    }
}

impl StopSignal {
    pub fn stop(&self) {
        self.0.stop();
    }

    pub fn is_stopped(&self) -> bool {
        *self.0.flag.borrow()
    }

    /// A signal that also stops when this one does.
    pub fn child(&self) -> StopSignal {
        let child = StopSignal::default();
        let mut children = self.0.children.lock().unwrap_or_else(|e| e.into_inner());
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&child.0));
        drop(children);
        if self.is_stopped() {
            child.stop();
        }
        child
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.flag.subscribe()
    }
}

impl StopInner {
    fn stop(&self) {
        self.flag.send_replace(true);
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        for child in children.iter().filter_map(Weak::upgrade) {
            child.stop();
        }
    }
}

/// A finished level: what was planned and what was measured.
#[derive(Debug, Clone)]
pub struct LevelRun {
    pub level: Level,
    pub started_at: SystemTime,
    pub totals: LevelTotals,
    /// Trouble with generator processes (one that died mid-level).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The OS would not give us threads or a runtime.
    #[error("cannot start the load generator: {0}")]
    Start(String),
    /// The level needs more connections than the generators allowed can
    /// hold; the message says which limit and the fix.
    #[error("{0}")]
    Placement(String),
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
        Level::Closed(plan) => Load::Closed { users: plan.users },
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

/// What a level's load is, split over shards (and processes) by `shard`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Load {
    Closed {
        users: u32,
    },
    /// `seed` is shared by every shard, so all walk the same schedule.
    Open {
        plan: OpenPlan,
        seed: u64,
    },
}

impl Load {
    /// Connections the level may hold at once (one per user or slot).
    fn connections(&self) -> u32 {
        match self {
            Load::Closed { users } => *users,
            Load::Open { plan, .. } => plan.max_in_flight,
        }
    }

    /// The part of this load one process of a fleet of `processes` runs.
    fn part(&self, process: u32, processes: u32) -> Load {
        match self {
            Load::Closed { users } => Load::Closed {
                users: share(*users, processes as usize, process as usize),
            },
            Load::Open { .. } => self.clone(),
        }
    }

    /// Shards for this (part of the) load in one process.
    fn local_shards(&self) -> usize {
        match self {
            Load::Closed { users } => cores().clamp(1, (*users).max(1) as usize),
            Load::Open { plan, .. } => cores().clamp(1, plan.max_in_flight.max(1) as usize),
        }
    }

    /// Shard `local` of `locals` in this process, which is shard `global` of
    /// `total` in the whole fleet: its users, or its share of the arrivals.
    fn shard(
        &self,
        local: usize,
        locals: usize,
        global: usize,
        total: usize,
    ) -> (u32, Option<open::OpenShard>) {
        match self {
            // Users are dealt round-robin, so shard sizes differ by one at most.
            Load::Closed { users } => (share(*users, locals, local), None),
            // Every shard walks the same schedule and takes every total-th
            // arrival, so together they follow it exactly.
            Load::Open { plan, seed } => (
                0,
                Some(open::OpenShard {
                    pacer: crate::load::Pacer::new(plan.shape.clone(), reseed(plan.spacing, *seed)),
                    first: global as u64,
                    stride: total as u64,
                    max_in_flight: share(plan.max_in_flight, total, global).max(1),
                }),
            ),
        }
    }
}

fn reseed(spacing: crate::load::Spacing, seed: u64) -> crate::load::Spacing {
    match spacing {
        crate::load::Spacing::Poisson { seed: 0 } => crate::load::Spacing::Poisson { seed },
        other => other,
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Part `index` of `total` dealt round-robin over `parts`.
fn share(total: u32, parts: usize, index: usize) -> u32 {
    total / parts as u32 + u32::from((index as u32) < total % parts as u32)
}

/// Where one process's shards sit in the whole fleet.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct ShardRange {
    /// Global index of this process's first shard.
    pub first: usize,
    pub count: usize,
    /// Shards in the whole fleet.
    pub total: usize,
}

/// Timing every shard of a level shares, whichever process it runs in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub start: Instant,
    pub deadline: Instant,
    /// Per-shard random streams derive from it.
    pub seed: u64,
    /// Wake-up coalescing's nap (zero: none); see coalesce.rs.
    pub nap: Duration,
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

/// Starts the shards of `range` in this process on threads of `scope`,
/// each with a transport for the scenario's kind of target and sending its
/// snapshots to `tx`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_shards<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    scenario: &Arc<Scenario>,
    workload: &Workload,
    load: &Load,
    range: ShardRange,
    clock: Clock,
    addresses: &[std::net::IpAddr],
    tx: mpsc::Sender<crate::measure::Snapshot>,
    stop: &StopSignal,
) -> Result<(), EngineError> {
    let shards = range.first..range.first + range.count;
    match &scenario.target.endpoint {
        Endpoint::Http(base) => {
            // Every shard deals its connections over all the addresses,
            // from its own starting point, so they share the ephemeral
            // ports evenly.
            let transports = shards
                .map(|i| {
                    HttpTransport::new(scenario, base)
                        .map(|t| t.with_local_addresses(addresses.to_vec(), i))
                        .map(|t| move || t)
                })
                .collect::<Result<Vec<_>, _>>()?;
            spawn_shards(
                scope, transports, scenario, workload, load, range, clock, tx, stop,
            )
        }
        #[cfg(feature = "kafka")]
        Endpoint::Kafka(kafka) => {
            use crate::protocol::kafka::{self, KafkaTransport, ProducePlans};
            let plans = ProducePlans::new(scenario)?;
            let config = kafka::config(kafka, scenario.target.timeout);
            // Each shard's producer lives on the shard's thread.
            let transports = shards
                .map(|i| {
                    let (config, plans) = (config.clone(), plans.clone());
                    let seed = clock.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    move || KafkaTransport::new(config, plans, seed)
                })
                .collect();
            spawn_shards(
                scope, transports, scenario, workload, load, range, clock, tx, stop,
            )
        }
        #[cfg(not(feature = "kafka"))]
        Endpoint::Kafka(_) => unreachable!("decoding rejects Kafka targets without the feature"),
    }
}

#[allow(clippy::too_many_arguments)]
fn spawn_shards<'scope, T: Transport, M: FnOnce() -> T + Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    transports: Vec<M>,
    scenario: &Arc<Scenario>,
    workload: &Workload,
    load: &Load,
    range: ShardRange,
    clock: Clock,
    tx: mpsc::Sender<crate::measure::Snapshot>,
    stop: &StopSignal,
) -> Result<(), EngineError> {
    let cursors: Arc<Vec<AtomicUsize>> = Arc::new(
        scenario
            .feeders
            .iter()
            .map(|f| AtomicUsize::new(range.first * f.rows.len() / range.total.max(1)))
            .collect(),
    );
    for (local, transport) in transports.into_iter().enumerate() {
        let index = range.first + local;
        let (users, open) = load.shard(local, range.count, index, range.total);
        let shard_plan = ShardPlan {
            index,
            users,
            open,
            start: clock.start,
            deadline: clock.deadline,
            seed: clock
                .seed
                .wrapping_add(index as u64 * 0x9E37_79B9_7F4A_7C15),
            nap: clock.nap,
        };
        let (scenario, workload) = (scenario.clone(), workload.clone());
        let feeder_cursors = cursors.clone();
        let tx = tx.clone();
        let stop = stop.subscribe();
        std::thread::Builder::new()
            .name(format!("autoperf-shard-{index}"))
            .spawn_scoped(scope, move || {
                let shared = Shared {
                    scenario,
                    workload,
                    transport: transport(),
                    feeder_cursors,
                };
                run_shard(shard_plan, shared, tx, stop)
            })
            .map_err(|e| EngineError::Start(e.to_string()))?;
    }
    Ok(())
}
