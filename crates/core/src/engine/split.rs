//! How a level's load is split: over generator processes, then over the
//! shards (one per core) of each process — users dealt round-robin, or
//! every shard taking every n-th arrival of one shared schedule.

use serde::{Deserialize, Serialize};

use super::level::OpenPlan;
use super::open;
use crate::load::UserRamp;
use crate::scenario::Scenario;

/// What a level's load is, dealt to shards by their index in the whole
/// level (every host, every process): closed users round-robin, open
/// arrivals every n-th. A host or process running a range of shards runs
/// exactly their part, so the parts add up to the level however it is
/// spread, and a host with more shards (more cores) takes more of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Load {
    Closed {
        users: u32,
        /// Users over time instead of all at once.
        #[serde(default)]
        ramp: Option<UserRamp>,
    },
    /// `seed` is shared by every shard, so all walk the same schedule.
    Open { plan: OpenPlan, seed: u64 },
}

impl Load {
    /// Connections the whole level may hold at once (one per user or slot).
    pub(crate) fn connections(&self) -> u32 {
        match self {
            Load::Closed { users, .. } => *users,
            Load::Open { plan, .. } => plan.max_in_flight,
        }
    }

    /// Connections the shards of `range` hold at most: their users, or
    /// their share of the in-flight slots.
    pub(crate) fn connections_in(&self, range: ShardRange) -> u32 {
        let whole = self.connections();
        range.globals().map(|g| share(whole, range.total, g)).sum()
    }

    /// Shard `global` of `total` in the whole level: its users, or its
    /// share of the arrivals.
    pub(crate) fn shard(&self, global: usize, total: usize) -> (u32, Option<open::OpenShard>) {
        match self {
            // Users are dealt round-robin, so shard sizes differ by one at most.
            Load::Closed { users, .. } => (share(*users, total, global), None),
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

    /// Shard `global` of `total`'s part of the ramp, if the load has one.
    pub(crate) fn ramp_share(&self, global: usize, total: usize) -> Option<RampShare> {
        match self {
            Load::Closed {
                ramp: Some(ramp), ..
            } => Some(RampShare {
                ramp: ramp.clone(),
                shard: (global, total),
            }),
            _ => None,
        }
    }
}

/// Which class (`classes:`) each of a shard's users, or arrivals, joins:
/// users by their index in the whole level (`scenario::deal`), so the mix
/// holds however the level is spread; arrivals by their shares at random.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassDeal {
    /// The level's users' classes by index (empty: one class), dealt once
    /// for all the process's shards.
    dealt: std::sync::Arc<[u8]>,
    shares: Vec<f64>,
    /// (index, of how many) shards in the whole level.
    shard: (usize, usize),
}

impl ClassDeal {
    /// The deal of `load`'s users; `for_shard` places it.
    pub(crate) fn new(scenario: &Scenario, load: &Load) -> ClassDeal {
        if scenario.classes.is_empty() {
            return ClassDeal::default();
        }
        let shares = scenario.class_shares();
        let users = match load {
            Load::Closed { users, .. } => *users as usize,
            Load::Open { .. } => 0,
        };
        ClassDeal {
            dealt: crate::scenario::deal(&shares, users.max(1)).into(),
            shares,
            shard: (0, 1),
        }
    }

    /// The deal as shard `index` of `total` in the whole level sees it.
    pub(crate) fn for_shard(&self, index: usize, total: usize) -> ClassDeal {
        ClassDeal {
            shard: (index, total),
            ..self.clone()
        }
    }

    /// The class of the shard's user in place `slot` (from 0): users are
    /// dealt to shards round-robin, so it is the level's user `shard +
    /// slot · shards`.
    pub(crate) fn user(&self, slot: u32) -> usize {
        if self.dealt.is_empty() {
            return 0;
        }
        let (index, of) = self.shard;
        let global = index as u64 + u64::from(slot) * of.max(1) as u64;
        self.dealt[(global % self.dealt.len() as u64) as usize] as usize
    }

    /// The class of an arrival, for `u` uniform in [0, 1).
    pub(crate) fn arrival(&self, u: f64) -> usize {
        match self.shares.len() {
            0 | 1 => 0,
            _ => crate::scenario::pick(&self.shares, u),
        }
    }
}

/// Shards one process on a host of `cores` runs for `connections`: one
/// per core, but never more than there are users or slots to give them.
pub(crate) fn shards_for(connections: u32, cores: usize) -> usize {
    cores.clamp(1, connections.max(1) as usize)
}

/// Shards each of `processes` processes on a host of `cores` runs, for
/// the host's `connections`.
pub(crate) fn process_shards(connections: u32, processes: u32, cores: usize) -> Vec<usize> {
    (0..processes as usize)
        .map(|p| shards_for(share(connections, processes as usize, p), cores))
        .collect()
}

/// A shard's part of a ramp: of the plan's users at any time, the share
/// dealt to its index exactly as a level's fixed users are, so the shards'
/// counts add up to the plan's wherever they run.
#[derive(Debug, Clone)]
pub(crate) struct RampShare {
    pub ramp: UserRamp,
    /// (index, of how many) shards in the whole level.
    pub shard: (usize, usize),
}

impl RampShare {
    /// This shard's users at `t` seconds from the level's start, at most `cap`.
    pub(crate) fn users_at(&self, t: f64, cap: u32) -> u32 {
        let all = self.ramp.users_at(t).floor() as u32;
        share(all, self.shard.1.max(1), self.shard.0).min(cap)
    }
}

pub(crate) fn reseed(spacing: crate::load::Spacing, seed: u64) -> crate::load::Spacing {
    match spacing {
        crate::load::Spacing::Poisson { seed: 0 } => crate::load::Spacing::Poisson { seed },
        other => other,
    }
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Part `index` of `total` dealt round-robin over `parts`.
pub(crate) fn share(total: u32, parts: usize, index: usize) -> u32 {
    total / parts as u32 + u32::from((index as u32) < total % parts as u32)
}

/// Where one process's (or host's) shards sit in the whole level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ShardRange {
    /// Global index of the first shard.
    pub first: usize,
    pub count: usize,
    /// Shards in the whole level.
    pub total: usize,
}

impl ShardRange {
    /// The whole level, all in one place.
    pub(crate) fn whole(total: usize) -> ShardRange {
        ShardRange {
            first: 0,
            count: total,
            total,
        }
    }

    pub(crate) fn globals(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.count
    }

    /// Consecutive sub-ranges of `counts` shards each, from this range's
    /// first (the counts add up to `count`).
    pub(crate) fn split(&self, counts: &[usize]) -> Vec<ShardRange> {
        debug_assert_eq!(counts.iter().sum::<usize>(), self.count);
        let mut first = self.first;
        counts
            .iter()
            .map(|&count| {
                let r = ShardRange {
                    first,
                    count,
                    total: self.total,
                };
                first += count;
                r
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ramps_shares_add_up_over_hosts_and_shards_as_fixed_users_do() {
        let ramp = UserRamp::new(&[(10, Duration::from_secs(10))]);
        let load = Load::Closed {
            users: 10,
            ramp: Some(ramp),
        };
        // Two hosts: one of three shards, one of one.
        let hosts = ShardRange::whole(4).split(&[3, 1]);
        let mut total = 0;
        for host in &hosts {
            for g in host.globals() {
                let (cap, _) = load.shard(g, 4);
                let users = load.ramp_share(g, 4).unwrap().users_at(10.0, cap);
                assert_eq!(users, cap, "shard {g}");
                total += users;
            }
        }
        assert_eq!(total, 10);
        assert_eq!(load.connections_in(hosts[0]), 8, "3 of 4 shards: 3 + 3 + 2");
        assert_eq!(load.connections_in(hosts[1]), 2);
    }

    #[test]
    fn processes_get_one_shard_per_core_but_never_more_than_users() {
        assert_eq!(process_shards(10_000, 2, 4), vec![4, 4]);
        assert_eq!(process_shards(3, 2, 4), vec![2, 1]);
        assert_eq!(process_shards(0, 1, 4), vec![1]);
    }
}
