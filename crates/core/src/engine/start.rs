//! Starting a level's shards in this process: one thread each, with a
//! transport for the scenario's kind of target, all on one shared clock.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::error::EngineError;
use super::feed::Feeds;
use super::level::Workload;
use super::shard::{run_shard, ShardPlan};
use super::split::{Load, ShardRange};
use super::stop::StopSignal;
use super::user::Shared;
use crate::protocol::{HttpTransport, Transport};
use crate::scenario::{Endpoint, Scenario};

/// Timing every shard of a level shares, whichever process it runs in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub start: Instant,
    pub deadline: Instant,
    /// Per-shard random streams derive from it.
    pub seed: u64,
    /// Wake-up coalescing's nap (zero: none); see coalesce.rs.
    pub nap: Duration,
    /// The first interval of the measured window (the warm-up's ticks):
    /// from it on, the users tally their completions (`UserTally`).
    pub measured_from: u64,
}

/// A level as each of its shards runs it, in whichever process.
#[derive(Clone, Copy)]
pub(crate) struct LevelContext<'a> {
    pub scenario: &'a Arc<Scenario>,
    pub workload: &'a Workload,
    /// The whole level's load, of which each process runs a range.
    pub load: &'a Load,
    pub clock: Clock,
}

/// Starts the shards of `range` in this process on threads of `scope`,
/// each with a transport for the scenario's kind of target and sending its
/// snapshots to `tx`.
pub(crate) fn start_shards<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    level: LevelContext<'_>,
    range: ShardRange,
    addresses: &[std::net::IpAddr],
    tx: mpsc::Sender<crate::measure::Snapshot>,
    stop: &StopSignal,
) -> Result<(), EngineError> {
    let LevelContext {
        scenario, clock, ..
    } = level;
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
            spawn_shards(scope, transports, level, range, tx, stop)
        }
        #[cfg(feature = "kafka")]
        Endpoint::Kafka(kafka) => {
            use crate::protocol::kafka::{self, KafkaTransport, ProducePlans};
            let plans = ProducePlans::new(scenario)?;
            let config = kafka::config(kafka, scenario.target.timeout)?;
            // Each shard's producer lives on the shard's thread.
            let transports = shards
                .map(|i| {
                    let (config, plans) = (config.clone(), plans.clone());
                    let seed = clock.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    move || KafkaTransport::new(config, plans, seed)
                })
                .collect();
            spawn_shards(scope, transports, level, range, tx, stop)
        }
        #[cfg(not(feature = "kafka"))]
        Endpoint::Kafka(_) => unreachable!("decoding rejects Kafka targets without the feature"),
    }
}

fn spawn_shards<'scope, T: Transport, M: FnOnce() -> T + Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    transports: Vec<M>,
    level: LevelContext<'_>,
    range: ShardRange,
    tx: mpsc::Sender<crate::measure::Snapshot>,
    stop: &StopSignal,
) -> Result<(), EngineError> {
    let LevelContext {
        scenario,
        workload,
        load,
        clock,
    } = level;
    let cursors = Arc::new(Feeds::new(scenario, range.first, range.count, range.total));
    let deal = super::split::ClassDeal::new(scenario, load);
    for (local, transport) in transports.into_iter().enumerate() {
        let index = range.first + local;
        let (users, open) = load.shard(index, range.total);
        let shard_plan = ShardPlan {
            index,
            users,
            ramp: load.ramp_share(index, range.total),
            open,
            start: clock.start,
            deadline: clock.deadline,
            seed: clock
                .seed
                .wrapping_add((index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            nap: clock.nap,
            measured_from: clock.measured_from,
        };
        let think_origin = fastrand::Rng::with_seed(shard_plan.seed ^ 0x7415_C0DE).f64();
        let classes = deal.for_shard(index, range.total);
        let (scenario, workload) = (scenario.clone(), workload.clone());
        let feeder_cursors = cursors.clone();
        let tx = tx.clone();
        let stop = stop.subscribe();
        std::thread::Builder::new()
            .name(format!("autoperf-shard-{index}"))
            .spawn_scoped(scope, move || {
                let shared = Shared {
                    hooks: super::hooks::Hooks::load(&scenario),
                    scenario,
                    workload,
                    transport: transport(),
                    feeder_cursors,
                    users_started: Default::default(),
                    think_origin,
                    classes,
                };
                run_shard(shard_plan, shared, tx, stop)
            })
            .map_err(|e| EngineError::Start(e.to_string()))?;
    }
    Ok(())
}
