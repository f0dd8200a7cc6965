//! Generator workers on other hosts (`autoperf worker`), for when one host
//! cannot generate the load: the controller splits each level over the
//! workers by their cores, each runs its range of the level's shards (in
//! its own process, or over generator processes of its own), and their
//! snapshots merge exactly, as one process's shards do.
//!
//! This file drives one level on the workers (`drive`) and keeps each
//! worker's part of it (`WorkerShare`). The rest:
//!
//! - `pool`: the workers a run may use — specs, DNS, token, TLS, waiting
//!   for them, connecting, scaling out.
//! - `plan`: placing a level over the workers by their CPU.
//! - `protocol`: the messages and their framing, the token's proof.
//! - `wire`: the byte stream under them, plain TCP or TLS.
//! - `link`: the controller's connection to one worker, its clock offset.
//! - `remote`: one level running on the linked workers.
//! - `plausible`: what a worker's snapshots can be, checked before they
//!   count.
//! - `server`: the worker's side.
//! - `job_limits`: a job checked against this host before it runs.
//! - `door`: the worker's connections that have not said hello yet: a
//!   deadline from their first moment, and room for a controller however
//!   many strangers trickle.
//! - `cpu`: how much CPU the worker's host gives it.
//!
//! A capacity analysis may start on fewer workers than it has and add
//! more when a level shows the generator as the bottleneck
//! (`WorkerPool::scale_out`): AutoPerf's "bank of client load generator
//! machines".

mod cpu;
mod door;
mod job_limits;
mod link;
mod plan;
mod plausible;
mod pool;
pub mod protocol;
mod remote;
pub(crate) mod server;
mod wire;

pub use crate::scenario::WorkerSpec;
pub use pool::{WorkerPool, READY_TIMEOUT};
pub use server::{worker_main, WorkerError, WorkerOptions};

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::EngineError;
use super::level::Level;
use super::start::Clock;
use super::stop::StopSignal;
use super::{Driven, LevelStart};
use crate::measure::{round6, warmup_ticks, Collector, TickSink, TimerLateness};
use crate::scenario::Scenario;
use plan::{plan_hosts, spread_target, Capacity};

/// One worker's part of a level, as run.json keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerShare {
    pub name: String,
    pub address: String,
    pub cores: usize,
    /// Cores' worth of CPU it had (fractional under a quota): its weight.
    pub cpu: f64,
    /// Its shards of the level, and the generator processes running them.
    pub shards: usize,
    pub processes: usize,
    /// Users (closed) or in-flight slots (open) it held at most.
    pub connections: u32,
    /// Its clock minus the controller's, and the round trip it was read
    /// over: the level's start is sent on the worker's own clock.
    pub clock_offset_ms: f64,
    pub rtt_ms: f64,
    /// How late its think timers (closed) or arrivals (open) fired in the
    /// measured window: the level's figure merges every worker's, so a
    /// late one is named here. Absent when it had none to time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_lateness_ms: Option<TimerLateness>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_lateness_ms: Option<TimerLateness>,
    /// Under a CPU quota (a container's limit): the measured window's
    /// periods, and those in which the quota held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_throttled_periods: Option<u64>,
    /// The period its quota is granted in: a held-back worker waits up to
    /// about that long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_period_ms: Option<f64>,
}

impl WorkerShare {
    /// The p99 lateness of whichever timers it ran, in milliseconds.
    pub(crate) fn lateness_p99_ms(&self) -> Option<f64> {
        let timers = [&self.timer_lateness_ms, &self.arrival_lateness_ms];
        timers.into_iter().flatten().map(|l| l.p99).reduce(f64::max)
    }

    /// Whether its CPU quota held it back in a tenth or more of the
    /// measured window's periods.
    pub(crate) fn held_back(&self) -> bool {
        match (self.quota_periods, self.quota_throttled_periods) {
            (Some(periods), Some(throttled)) => {
                crate::measure::cgroup::holds_back(periods, throttled)
            }
            _ => false,
        }
    }
}

/// Runs `level` on the pool's active workers and collects their ticks.
pub(crate) fn drive(
    scenario: &Arc<Scenario>,
    level: &Level,
    start: &LevelStart,
    pool: &WorkerPool,
    sinks: &mut [&mut dyn TickSink],
    stop: &StopSignal,
) -> Result<Driven, EngineError> {
    let LevelStart {
        load,
        info,
        seed,
        nap,
    } = start;
    let (seed, nap) = (*seed, *nap);
    let measured_from = warmup_ticks(level.warmup());
    // The start comes with `Go`, once every worker has its job.
    let provisional = Clock {
        start: Instant::now(),
        deadline: Instant::now(),
        seed,
        nap,
        measured_from,
    };
    let source = pool.source(scenario)?;
    let (mut addrs, mut troubles) = pool.addresses();
    // Workers that do not take their job (busy with another controller,
    // gone) are left out and the level planned again without them: each
    // round has one worker fewer, so this ends.
    let (prepared, hosts, mut shares) = loop {
        let (links, unreachable) = pool.connect_all(&addrs, pool.active())?;
        troubles.extend(unreachable);
        if links.is_empty() {
            return Err(EngineError::Workers(format!(
                "no worker answered for level {}: {}",
                level.index(),
                troubles.join("; ")
            )));
        }
        let capacities: Vec<Capacity> = links.iter().map(Capacity::of).collect();
        let hosts = plan_hosts(spread_target(scenario), load, &capacities)?;
        let shares: Vec<WorkerShare> = links
            .iter()
            .zip(&hosts)
            .map(|(link, host)| WorkerShare {
                name: link.name.clone(),
                address: link.addr.to_string(),
                cores: link.cores,
                cpu: (link.cpu * 1000.0).round() / 1000.0,
                shards: host.range.count,
                processes: host.process_shards.len(),
                connections: load.connections_in(host.range),
                clock_offset_ms: round6(link.offset_ns as f64 / 1e6),
                rtt_ms: round6(link.rtt.as_secs_f64() * 1e3),
                timer_lateness_ms: None,
                arrival_lateness_ms: None,
                quota_periods: None,
                quota_throttled_periods: None,
                quota_period_ms: None,
            })
            .collect();
        match remote::prepare(links, &hosts, &source, level.workload(), load, provisional) {
            Ok(prepared) => break (prepared, hosts, shares),
            Err(remote::Unready(unready)) => {
                for (addr, why) in unready {
                    troubles.push(why);
                    addrs.retain(|a| *a != addr);
                }
            }
        }
    };
    let total = hosts.last().map_or(0, |h| h.range.first + h.range.count);
    // Every worker has its job decoded: the level starts a moment from
    // now on every clock, later when workers start generator processes.
    let spawning = hosts.iter().any(|h| h.process_shards.len() > 1);
    let lead = Duration::from_millis(if spawning { 700 } else { 200 }) + prepared.slowest_rtt();
    let start = Instant::now() + lead;
    let started_at = std::time::SystemTime::now() + lead;
    let clock = Clock {
        start,
        deadline: start + level.warmup() + level.duration(),
        seed,
        nap,
        measured_from,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let fleet = prepared.go(clock, tx, stop)?;
    // Each shard's worker, so each worker's lateness is kept apart.
    let mut worker_of = vec![0; total];
    for (w, host) in hosts.iter().enumerate() {
        host.range.globals().for_each(|shard| worker_of[shard] = w);
    }
    let collector = Collector::new(
        total,
        scenario.requests.len(),
        start,
        level.warmup(),
        clock.deadline,
    )
    .grouped(worker_of);
    let totals = collector.run(info, rx, sinks);
    let lost = fleet.finish();
    for (share, late) in shares.iter_mut().zip(&totals.lateness_by_group) {
        let timed =
            |h: &hdrhistogram::Histogram<u64>| (!h.is_empty()).then(|| TimerLateness::of(h));
        share.timer_lateness_ms = timed(&late.timer);
        share.arrival_lateness_ms = timed(&late.arrival);
        share.quota_periods = late.quota.map(|q| q.periods);
        share.quota_throttled_periods = late.quota.map(|q| q.throttled_periods);
        share.quota_period_ms = late.quota.map(|q| round6(q.period.as_secs_f64() * 1e3));
    }
    Ok(Driven {
        started_at,
        totals,
        lost,
        workers: shares,
        warnings: troubles,
    })
}

/// The controller's side of the protocol fed any bytes (the fuzz target
/// `worker_protocol`): each message read as a link and a level's reader
/// read them — a clock reading made an offset, a snapshot decoded and
/// checked as what a worker can have measured — and none may panic.
#[cfg(fuzzing)]
#[doc(hidden)]
pub fn fuzz_from_worker(bytes: &[u8]) {
    use crate::measure::wire::{from_monotonic_ns, to_monotonic_ns};
    use protocol::FromWorker;
    // A level of shards 0..4 on 2 cores, the minute from 1 s on the
    // monotonic clock: a time a snapshot can name.
    let start = from_monotonic_ns(1_000_000_000);
    let end = start + Duration::from_secs(60);
    let mut expected = plausible::Expected::new((0..4).collect(), start, end);
    let mut input = bytes;
    while let Ok(Some(message)) = protocol::read::<FromWorker>(&mut input, protocol::MAX_LINE) {
        match message {
            FromWorker::Pong { now_ns } => {
                let _ = link::clock_offset(now_ns, to_monotonic_ns(start));
            }
            FromWorker::Snapshot { snapshot } => {
                if let Ok(snapshot) = snapshot.into_snapshot() {
                    let _ = expected.check(&snapshot, 2);
                }
            }
            _ => {}
        }
    }
}
