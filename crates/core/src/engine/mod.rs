//! Runs one load level — N closed-loop users, or arrivals at a rate (open
//! workload) — spread over one shard per core, with a warm-up, the measured
//! window, and a stop that ends the level on time however the server behaves.

mod open;
mod shard;
mod user;

pub use open::{OpenPlan, DEFAULT_MAX_IN_FLIGHT};

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use crate::measure::{Collector, LevelInfo, LevelTotals, TickSink};
use crate::protocol::{HttpTransport, TargetError, Transport};
use crate::scenario::{Endpoint, RequestId, Scenario};

use shard::{run_shard, ShardPlan};
use user::Shared;

/// One closed-workload load level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelPlan {
    /// 1-based index of the level in its run.
    pub index: u32,
    pub users: u32,
    pub warmup: Duration,
    /// Measured time after the warm-up (at most: a stop may end it sooner).
    pub duration: Duration,
    pub workload: Workload,
}

/// What each user does.
#[derive(Debug, Clone, PartialEq)]
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
    /// For an open level: its index, warm-up, duration and workload, with
    /// `users` 0 (the arrivals are in `open`).
    pub plan: LevelPlan,
    /// The open workload's plan (`None` for a closed level).
    pub open: Option<OpenPlan>,
    pub started_at: SystemTime,
    pub totals: LevelTotals,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The OS would not give us threads or a runtime.
    #[error("cannot start the load generator: {0}")]
    Start(String),
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

/// Runs `plan` to its end (or until `stop`), feeding every tick to `sinks`.
pub fn run_level(
    scenario: &Arc<Scenario>,
    plan: &LevelPlan,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<LevelRun, EngineError> {
    let shards = cores().clamp(1, plan.users.max(1) as usize);
    let totals = drive(scenario, plan, shards, sinks, stop, |index| {
        // Users are dealt round-robin, so shard sizes differ by one at most.
        (share(plan.users, shards, index), None)
    })?;
    Ok(LevelRun {
        plan: plan.clone(),
        open: None,
        started_at: totals.1,
        totals: totals.0,
    })
}

/// Runs an open-workload level: arrivals at `plan.shape`'s rate, each
/// starting a session, latency counted from the intended start.
pub fn run_open_level(
    scenario: &Arc<Scenario>,
    plan: &OpenPlan,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<LevelRun, EngineError> {
    let closed = LevelPlan {
        index: plan.index,
        users: 0,
        warmup: plan.warmup,
        duration: plan.duration,
        workload: plan.workload.clone(),
    };
    let shards = cores().clamp(1, plan.max_in_flight.max(1) as usize);
    let seed = fastrand::u64(..);
    let totals = drive(scenario, &closed, shards, sinks, stop, |index| {
        // Every shard walks the same schedule and takes every shards-th
        // arrival, so together they follow it exactly.
        let arrivals = open::OpenShard {
            pacer: crate::load::Pacer::new(plan.shape.clone(), reseed(plan.spacing, seed)),
            first: index as u64,
            stride: shards as u64,
            max_in_flight: share(plan.max_in_flight, shards, index).max(1),
        };
        (0, Some(arrivals))
    })?;
    Ok(LevelRun {
        plan: closed,
        open: Some(plan.clone()),
        started_at: totals.1,
        totals: totals.0,
    })
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

/// Shard `index`'s part of `total` dealt round-robin over `shards`.
fn share(total: u32, shards: usize, index: usize) -> u32 {
    total / shards as u32 + u32::from((index as u32) < total % shards as u32)
}

/// Makes one transport per shard for the scenario's kind of target, then
/// drives the level with them.
fn drive(
    scenario: &Arc<Scenario>,
    plan: &LevelPlan,
    shards: usize,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
    load: impl Fn(usize) -> (u32, Option<open::OpenShard>),
) -> Result<(LevelTotals, SystemTime), EngineError> {
    match &scenario.target.endpoint {
        Endpoint::Http(base) => {
            let transports = (0..shards)
                .map(|_| HttpTransport::new(scenario, base))
                .collect::<Result<Vec<_>, _>>()?;
            drive_with(transports, scenario, plan, sinks, stop, load)
        }
        #[cfg(feature = "kafka")]
        Endpoint::Kafka(kafka) => {
            use crate::protocol::kafka::{KafkaTransport, ProducePlans};
            let plans = ProducePlans::new(scenario)?;
            let transports = (0..shards)
                .map(|_| KafkaTransport::new(kafka, scenario.target.timeout, plans.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            drive_with(transports, scenario, plan, sinks, stop, load)
        }
        #[cfg(not(feature = "kafka"))]
        Endpoint::Kafka(_) => unreachable!("decoding rejects Kafka targets without the feature"),
    }
}

/// Starts the shards, collects their ticks until the level ends.
fn drive_with<T: Transport + Send>(
    transports: Vec<T>,
    scenario: &Arc<Scenario>,
    plan: &LevelPlan,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
    load: impl Fn(usize) -> (u32, Option<open::OpenShard>),
) -> Result<(LevelTotals, SystemTime), EngineError> {
    let shards = transports.len();
    let cursors: Arc<Vec<AtomicUsize>> = Arc::new(
        scenario
            .feeders
            .iter()
            .map(|_| AtomicUsize::new(0))
            .collect(),
    );

    let started_at = SystemTime::now();
    // Shards start a moment from now, all on the same clock.
    let start = Instant::now() + Duration::from_millis(20);
    let deadline = start + plan.warmup + plan.duration;
    let (tx, rx) = mpsc::channel();
    let info = LevelInfo {
        index: plan.index,
        users: plan.users,
        warmup: plan.warmup,
        duration: plan.duration,
    };
    let collector = Collector::new(
        shards,
        scenario.requests.len(),
        start,
        plan.warmup,
        deadline,
    );
    let seed = fastrand::u64(..);
    let totals = std::thread::scope(|scope| -> Result<LevelTotals, EngineError> {
        for (index, transport) in transports.into_iter().enumerate() {
            let (users, open) = load(index);
            let shard_plan = ShardPlan {
                index,
                users,
                open,
                start,
                deadline,
                seed: seed.wrapping_add(index as u64 * 0x9E37_79B9_7F4A_7C15),
            };
            let shared = Shared {
                scenario: scenario.clone(),
                workload: plan.workload.clone(),
                transport,
                feeder_cursors: cursors.clone(),
            };
            let tx = tx.clone();
            let stop = stop.subscribe();
            std::thread::Builder::new()
                .name(format!("autoperf-shard-{index}"))
                .spawn_scoped(scope, move || run_shard(shard_plan, shared, tx, stop))
                .map_err(|e| EngineError::Start(e.to_string()))?;
        }
        drop(tx);
        Ok(collector.run(&info, rx, sinks))
    })?;
    Ok((totals, started_at))
}
