//! How a level's load is split: over generator processes, then over the
//! shards (one per core) of each process — users dealt round-robin, or
//! every shard taking every n-th arrival of one shared schedule.

use serde::{Deserialize, Serialize};

use super::level::OpenPlan;
use super::open;
use crate::load::UserRamp;

/// What a level's load is, split over shards (and processes) by `shard`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Load {
    Closed {
        users: u32,
        /// Users over time instead of all at once.
        #[serde(default)]
        ramp: Option<UserRamp>,
        /// Which part of the whole this process runs (index, of how many),
        /// so it takes the same share of a ramp's users as of the users.
        #[serde(default = "whole")]
        part: (u32, u32),
    },
    /// `seed` is shared by every shard, so all walk the same schedule.
    Open { plan: OpenPlan, seed: u64 },
}

impl Load {
    /// Connections the level may hold at once (one per user or slot).
    pub(crate) fn connections(&self) -> u32 {
        match self {
            Load::Closed { users, .. } => *users,
            Load::Open { plan, .. } => plan.max_in_flight,
        }
    }

    /// The part of this load one process of a fleet of `processes` runs.
    pub(crate) fn part(&self, process: u32, processes: u32) -> Load {
        match self {
            Load::Closed { users, ramp, .. } => Load::Closed {
                users: share(*users, processes as usize, process as usize),
                ramp: ramp.clone(),
                part: (process, processes),
            },
            Load::Open { .. } => self.clone(),
        }
    }

    /// Shards for this (part of the) load in one process.
    pub(crate) fn local_shards(&self) -> usize {
        match self {
            Load::Closed { users, .. } => cores().clamp(1, (*users).max(1) as usize),
            Load::Open { plan, .. } => cores().clamp(1, plan.max_in_flight.max(1) as usize),
        }
    }

    /// Shard `local` of `locals` in this process, which is shard `global` of
    /// `total` in the whole fleet: its users, or its share of the arrivals.
    pub(crate) fn shard(
        &self,
        local: usize,
        locals: usize,
        global: usize,
        total: usize,
    ) -> (u32, Option<open::OpenShard>) {
        match self {
            // Users are dealt round-robin, so shard sizes differ by one at most.
            Load::Closed { users, .. } => (share(*users, locals, local), None),
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

fn whole() -> (u32, u32) {
    (0, 1)
}

/// A shard's part of a ramp: of the plan's users at any time, the share
/// its process gets, then the shard's share of that — dealt exactly as a
/// level's fixed users are, so the shards' counts add up to the plan's.
#[derive(Debug, Clone)]
pub(crate) struct RampShare {
    pub ramp: UserRamp,
    /// (index, of how many) processes, then shards in the process.
    pub process: (u32, u32),
    pub shard: (usize, usize),
}

impl RampShare {
    /// This shard's users at `t` seconds from the level's start, at most `cap`.
    pub(crate) fn users_at(&self, t: f64, cap: u32) -> u32 {
        let all = self.ramp.users_at(t).floor() as u32;
        let (p, processes) = self.process;
        let here = share(all, processes.max(1) as usize, p as usize);
        share(here, self.shard.1.max(1), self.shard.0).min(cap)
    }
}

impl Load {
    /// Shard `local` of `locals` (in this process)'s part of the ramp, if
    /// the load has one.
    pub(crate) fn ramp_share(&self, local: usize, locals: usize) -> Option<RampShare> {
        match self {
            Load::Closed {
                ramp: Some(ramp),
                part,
                ..
            } => Some(RampShare {
                ramp: ramp.clone(),
                process: *part,
                shard: (local, locals),
            }),
            _ => None,
        }
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

/// Where one process's shards sit in the whole fleet.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct ShardRange {
    /// Global index of this process's first shard.
    pub first: usize,
    pub count: usize,
    /// Shards in the whole fleet.
    pub total: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ramps_shares_add_up_over_processes_and_shards_as_fixed_users_do() {
        let ramp = UserRamp::new(&[(10, Duration::from_secs(10))]);
        let load = Load::Closed {
            users: 10,
            ramp: Some(ramp),
            part: (0, 1),
        };
        // Two processes of two shards each, at the ramp's top.
        let mut total = 0;
        for p in 0..2 {
            let part = load.part(p, 2);
            for local in 0..2 {
                let (cap, _) = part.shard(local, 2, 0, 4);
                let share = part.ramp_share(local, 2).unwrap();
                let users = share.users_at(10.0, cap);
                assert_eq!(users, cap, "process {p} shard {local}");
                total += users;
            }
        }
        assert_eq!(total, 10);
    }
}
