//! Placement of a level over the workers: what each said it can hold
//! (`Capacity`), and how the level's shards, users and generator processes
//! are dealt to them by their CPU (`plan_hosts`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::link::Link;
use crate::engine::error::EngineError;
use crate::engine::fleet::{self, Generators, HostPlan, Limits};
use crate::engine::split::{Load, ShardRange};
use crate::protocol::HttpTransport;
use crate::scenario::{Endpoint, Scenario};

/// What a worker said it can hold, for the split.
#[derive(Debug, Clone)]
pub(super) struct Capacity {
    who: String,
    cores: usize,
    /// Cores' worth of CPU (fractional under a quota): its weight.
    cpu: f64,
    limits: Limits,
    local_addresses: Vec<IpAddr>,
}

impl Capacity {
    pub(super) fn of(link: &Link) -> Capacity {
        Capacity {
            who: link.who(),
            cores: link.cores,
            cpu: link.cpu,
            limits: link.limits,
            local_addresses: link.local_addresses.clone(),
        }
    }
}

/// Where the level's connections go, if it has any to spread: the
/// target's address (whether it is loopback decides whether 127.0.0.x
/// addresses may be added). Kafka: one producer per shard, nothing to spread.
pub(super) fn spread_target(scenario: &Scenario) -> (Option<SocketAddr>, bool) {
    match &scenario.target.endpoint {
        Endpoint::Http(base) => (
            HttpTransport::new(scenario, base).map(|t| t.addr()).ok(),
            true,
        ),
        #[allow(unreachable_patterns)]
        _ => (None, false),
    }
}

/// Splits the level over the workers by their CPU: each gets a range of
/// the level's shards, as many as its share of the CPU — one per core for
/// workers of whole cores alike, more on a big worker beside a throttled
/// one — and users and arrivals are dealt by shard, so they follow the
/// CPU. Every worker runs the same number of generator processes (as many
/// as the most burdened needs for its connections), each an equal number
/// of its shards: so every process holds what its worker was checked for,
/// divided evenly.
pub(super) fn plan_hosts(
    (target, spread): (Option<SocketAddr>, bool),
    load: &Load,
    workers: &[Capacity],
) -> Result<Vec<HostPlan>, EngineError> {
    let weighted = weighted_shards(workers, load.connections());
    let mut processes = 1usize;
    loop {
        // Whole rounds of the processes on every worker.
        let shards: Vec<usize> = weighted
            .iter()
            .map(|&n| n.max(processes).div_ceil(processes) * processes)
            .collect();
        let ranges = ShardRange::whole(shards.iter().sum()).split(&shards);
        let mut placements = Vec::with_capacity(workers.len());
        for (w, range) in workers.iter().zip(&ranges) {
            let generators = Generators {
                local_addresses: w.local_addresses.clone(),
                // The worker runs its own binary; any path says "may spawn".
                program: Some(PathBuf::from("autoperf")),
                processes: Some(processes as u32),
                ..Generators::default()
            };
            let connections = if spread {
                load.connections_in(*range)
            } else {
                0
            };
            let placement = fleet::plan(connections, target, w.limits, &generators)
                .map_err(|e| EngineError::Placement(format!("worker {}: {e}", w.who)))?;
            placements.push(placement);
        }
        let needed = placements
            .iter()
            .map(|p| p.processes as usize)
            .max()
            .unwrap_or(1);
        // More processes deal the shards anew; the count only grows, and
        // `plan` refuses more than it may start, so this ends.
        if needed > processes {
            processes = needed;
            continue;
        }
        return Ok(ranges
            .into_iter()
            .zip(placements)
            .map(|(range, placement)| HostPlan {
                range,
                process_shards: vec![range.count / processes; processes],
                addresses: placement.addresses,
                program: None,
                shipped: None,
            })
            .collect());
    }
}

/// Shards per worker in proportion to their CPU: the smallest gets one
/// shard per core's worth it has (one at least), the others as many more
/// as they have CPU — at most 8 a core, so a starved neighbour cannot make
/// a big worker run hundreds — and no more in all than there are users
/// (or slots) to give them.
fn weighted_shards(workers: &[Capacity], connections: u32) -> Vec<usize> {
    let unit = workers
        .iter()
        .map(|w| w.cpu.max(0.001))
        .fold(1.0f64, f64::min);
    let mut shards: Vec<usize> = workers
        .iter()
        .map(|w| ((w.cpu.max(0.001) / unit).round() as usize).clamp(1, w.cores.max(1) * 8))
        .collect();
    let total: usize = shards.iter().sum();
    if connections > 0 && total > connections as usize {
        for n in &mut shards {
            *n = (*n * connections as usize / total).max(1);
        }
    }
    shards
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(cores: usize) -> Capacity {
        Capacity {
            who: format!("w{cores}"),
            cores,
            cpu: cores as f64,
            limits: Limits {
                open_files: 20_000,
                ports: 64_512,
            },
            local_addresses: Vec::new(),
        }
    }

    fn closed(users: u32) -> Load {
        Load::Closed { users, ramp: None }
    }

    fn remote() -> (Option<SocketAddr>, bool) {
        (Some("198.18.0.1:80".parse().unwrap()), true)
    }

    #[test]
    fn sixty_thousand_users_over_three_workers_fit_their_processes() {
        let load = closed(60_000);
        let hosts = plan_hosts(remote(), &load, &[worker(2), worker(2), worker(2)]).unwrap();
        assert_eq!(hosts.len(), 3);
        for host in &hosts {
            // 20,000 each: two processes of 10,000, under 19,744 a process,
            // one shard (one core) each.
            assert_eq!(load.connections_in(host.range), 20_000);
            assert_eq!(host.process_shards, vec![1, 1]);
            for process in host.range.split(&host.process_shards) {
                assert!(load.connections_in(process) <= 19_744);
            }
        }
        assert_eq!(hosts[2].range.first + hosts[2].range.count, 6);
    }

    #[test]
    fn users_and_arrivals_follow_the_cores() {
        let load = closed(400);
        let hosts = plan_hosts(remote(), &load, &[worker(1), worker(3)]).unwrap();
        assert_eq!(load.connections_in(hosts[0].range), 100);
        assert_eq!(load.connections_in(hosts[1].range), 300);
        // An open level: every shard takes every n-th arrival, so a host's
        // share is its shards' share.
        assert_eq!((hosts[0].range.count, hosts[1].range.count), (1, 3));
    }

    #[test]
    fn a_throttled_worker_gets_its_share_of_the_cpu_not_of_the_cores() {
        // A twentieth of a core (a CPU quota) beside two whole cores.
        let mut small = worker(1);
        small.cpu = 0.05;
        let load = closed(600);
        let hosts = plan_hosts(remote(), &load, &[small, worker(2)]).unwrap();
        // The big one runs 16 shards (8 a core at most), the small one 1.
        assert_eq!((hosts[0].range.count, hosts[1].range.count), (1, 16));
        assert_eq!(load.connections_in(hosts[0].range), 36);
        assert_eq!(load.connections_in(hosts[1].range), 564);
        // Few users: no shard without one.
        let few = plan_hosts(remote(), &closed(5), &[worker(2), worker(2)]).unwrap();
        assert!(few.iter().map(|h| h.range.count).sum::<usize>() <= 5);
    }

    #[test]
    fn every_process_of_every_worker_holds_what_its_worker_was_checked_for() {
        // One and a half cores' worth beside one: by CPU the first would
        // run two shards of three (21,334 users), too many for one process;
        // with two processes each, every process holds an equal part.
        let mut big = worker(2);
        big.cpu = 1.5;
        for load in [closed(32_000), closed(70_000)] {
            let hosts = plan_hosts(remote(), &load, &[big.clone(), worker(3)]).unwrap();
            let all: u32 = hosts.iter().map(|h| load.connections_in(h.range)).sum();
            assert_eq!(all, load.connections());
            for host in &hosts {
                assert_eq!(host.process_shards.iter().sum::<usize>(), host.range.count);
                for process in host.range.split(&host.process_shards) {
                    assert!(load.connections_in(process) <= 19_744, "{hosts:?}");
                }
            }
        }
    }

    #[test]
    fn a_worker_that_cannot_hold_its_share_is_named() {
        let mut tiny = worker(2);
        tiny.who = "tiny".into();
        tiny.limits.ports = 1_500;
        let e = plan_hosts(remote(), &closed(60_000), &[worker(2), tiny]).unwrap_err();
        assert!(e.to_string().starts_with("worker tiny:"), "{e}");
    }
}
