//! Generator workers on other hosts (`autoperf worker`), for when one host
//! cannot generate the load: the controller splits each level over the
//! workers by their cores, each runs its range of the level's shards (in
//! its own process, or over generator processes of its own), and their
//! snapshots merge exactly, as one process's shards do.
//!
//! - `protocol`: the messages and their framing, the token's proof.
//! - `wire`: the byte stream under them, plain TCP or TLS.
//! - `link`: the controller's connection to one worker, its clock offset.
//! - `remote`: one level running on the linked workers.
//! - `server`: the worker's side.
//!
//! A capacity analysis may start on fewer workers than it has and add
//! more when a level shows the generator as the bottleneck
//! (`WorkerPool::scale_out`): AutoPerf's "bank of client load generator
//! machines".

mod cpu;
mod link;
pub mod protocol;
mod remote;
pub mod server;
mod wire;

pub use server::{worker_main, WorkerOptions};

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::EngineError;
use super::fleet::{self, Generators, HostPlan, Limits, ScenarioSource};
use super::level::Level;
use super::split::{Load, ShardRange};
use super::start::Clock;
use super::stop::StopSignal;
use super::{Driven, LevelStart};
use crate::measure::{round6, Collector, TickSink, TimerLateness};
use crate::protocol::HttpTransport;
pub use crate::scenario::WorkerSpec;
use crate::scenario::{Endpoint, Scenario};
use link::{Link, WorkerTls};

/// How long a run waits for its workers to answer before the first level.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The name a worker's TLS certificate is checked against: the host as
/// `spec` writes it (a DNS name, or an address).
fn tls_name(spec: &WorkerSpec) -> String {
    match spec {
        WorkerSpec::Host(text) => {
            let host = text.rsplit_once(':').map_or(text.as_str(), |(h, _)| h);
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        }
        WorkerSpec::Dns { name, .. } => name.clone(),
    }
}

/// The addresses `spec` names now.
fn resolve(spec: &WorkerSpec) -> Result<Vec<SocketAddr>, String> {
    match spec {
        WorkerSpec::Host(text) => text
            .to_socket_addrs()
            .map_err(|e| format!("worker {text}: {e}"))?
            .next()
            .map(|a| vec![a])
            .ok_or_else(|| format!("worker {text}: the name has no address")),
        WorkerSpec::Dns { name, port } => Ok((name.as_str(), *port)
            .to_socket_addrs()
            .map(|a| a.collect())
            // No ready pod yet: no address, which waiting may change.
            .unwrap_or_default()),
    }
}

/// The workers a run may use, and how many its levels use now.
#[derive(Clone)]
pub struct WorkerPool {
    specs: Vec<WorkerSpec>,
    token: Option<String>,
    /// TLS to the workers (`--worker-ca-file`): the trust, and each
    /// address's name as its spec wrote it.
    tls: Option<Arc<rustls::ClientConfig>>,
    names: Arc<Mutex<HashMap<SocketAddr, String>>>,
    /// Workers that must answer before the first level.
    min: usize,
    /// Workers a level runs on now (`usize::MAX`: all there are).
    active: Arc<AtomicUsize>,
    /// The scenario's files and variables as shipped, read once per run.
    source: Arc<Mutex<Option<ScenarioSource>>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("WorkerPool")
            .field("specs", &self.specs)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("tls", &self.tls.is_some())
            .field("min", &self.min)
            .field("active", &self.active())
            .finish()
    }
}

impl WorkerPool {
    /// `min`: workers to wait for (default: every address listed, or one
    /// behind a DNS name); `start`: workers the first level runs on
    /// (default: all).
    pub fn new(
        specs: Vec<WorkerSpec>,
        token: Option<String>,
        min: Option<usize>,
        start: Option<usize>,
    ) -> Result<WorkerPool, String> {
        if specs.is_empty() {
            return Err("--workers names no worker".into());
        }
        let listed = specs
            .iter()
            .filter(|s| matches!(s, WorkerSpec::Host(_)))
            .count();
        let min = min.unwrap_or(listed.max(1));
        if min == 0 {
            return Err("--min-workers must be at least 1".into());
        }
        Ok(WorkerPool {
            specs,
            token,
            tls: None,
            names: Arc::new(Mutex::new(HashMap::new())),
            min,
            active: Arc::new(AtomicUsize::new(start.unwrap_or(usize::MAX).max(1))),
            source: Arc::new(Mutex::new(None)),
        })
    }

    /// Speaks TLS to the workers, trusting the CA certificates of
    /// `ca_file` (PEM; its path for messages) for their `--tls-cert`.
    pub fn with_tls(mut self, ca_file: crate::scenario::PemFile) -> Result<WorkerPool, String> {
        let settings = crate::scenario::TlsSettings {
            ca_file: Some(ca_file),
            ..Default::default()
        };
        let config = crate::protocol::tls::client_config(&settings, &[], &link::WORKER_SETTINGS)?;
        self.tls = Some(Arc::new(config));
        Ok(self)
    }

    /// Workers a level runs on now, at most.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Every worker address the specs name now, sorted (so a level's
    /// first N are the same workers as the last level's, whatever order
    /// DNS answered in) and without repeats; and the specs that named
    /// none, each a sentence.
    pub fn addresses(&self) -> (Vec<SocketAddr>, Vec<String>) {
        let mut all = Vec::new();
        let mut troubles = Vec::new();
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        for spec in &self.specs {
            match resolve(spec) {
                Ok(addrs) => {
                    for &addr in &addrs {
                        names.entry(addr).or_insert_with(|| tls_name(spec));
                    }
                    all.extend(addrs)
                }
                Err(e) => troubles.push(e),
            }
        }
        all.sort();
        all.dedup();
        (all, troubles)
    }

    /// Runs the next levels on `n` workers at least (a resumed analysis
    /// goes on where it had scaled out to).
    pub fn use_at_least(&self, n: usize) {
        self.active.fetch_max(n.max(1), Ordering::Relaxed);
    }

    /// Whether a level could run on more workers than now.
    pub fn can_scale_out(&self) -> bool {
        self.active() < self.addresses().0.len()
    }

    /// More workers for the next level, because the generator was the
    /// bottleneck: twice as many, at most every worker there is. Returns
    /// (before, after), or `None` when every worker is in use already.
    pub fn scale_out(&self) -> Option<(usize, usize)> {
        let available = self.addresses().0.len();
        let before = self.active().min(available);
        if before >= available {
            return None;
        }
        let after = (before * 2).min(available);
        self.active.store(after, Ordering::Relaxed);
        Some((before, after))
    }

    /// Workers that must answer (`--min-workers`).
    pub fn min(&self) -> usize {
        self.min
    }

    /// How many workers answer now, counting up to `want`.
    pub fn answering(&self, want: usize) -> usize {
        let (addrs, _) = self.addresses();
        match self.connect_all(&addrs, want) {
            Ok((links, _)) => links.into_iter().map(Link::bye).count(),
            Err(_) => 0,
        }
    }

    /// Waits (up to `READY_TIMEOUT`, or until `stop`) for `min` workers to
    /// answer, checks each reaches the target, and describes them. A
    /// worker that refuses us (token, version) fails at once.
    pub fn wait_ready(
        &self,
        scenario: &Scenario,
        stop: &StopSignal,
    ) -> Result<String, EngineError> {
        let source = self.source(scenario)?;
        let give_up = Instant::now() + READY_TIMEOUT;
        let last = loop {
            let (addrs, mut troubles) = self.addresses();
            let (links, unreachable) = self.connect_all(&addrs, usize::MAX)?;
            troubles.extend(unreachable);
            if links.len() >= self.min {
                let mut described = Vec::new();
                for mut link in links {
                    link.probe(&source).map_err(EngineError::Workers)?;
                    described.push(format!(
                        "{} ({} cores, clock {:+.3} ms, round trip {:.3} ms)",
                        link.who(),
                        link.cores,
                        link.offset_ns as f64 / 1e6,
                        link.rtt.as_secs_f64() * 1e3
                    ));
                    link.bye();
                }
                return Ok(format!(
                    "{} worker{}: {}",
                    described.len(),
                    if described.len() == 1 { "" } else { "s" },
                    described.join(", ")
                ));
            }
            let answered = links.len();
            for link in links {
                link.bye();
            }
            if stop.wait(Duration::from_secs(1)) {
                return Err(EngineError::Interrupted(format!(
                    "interrupted while waiting for workers ({answered} of {} answered); no load was sent",
                    self.min
                )));
            }
            if Instant::now() >= give_up {
                break match troubles.first() {
                    Some(t) => t.clone(),
                    None => format!("{answered} of {} answered", self.min),
                };
            }
        };
        Err(EngineError::Workers(format!(
            "fewer than {} worker{} of {} answered within {} s ({last}); start them with `autoperf worker --listen ADDR`, or lower --min-workers",
            self.min,
            if self.min == 1 { "" } else { "s" },
            self.specs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            READY_TIMEOUT.as_secs()
        )))
    }

    /// Connects to the first `want` of `addrs` that answer; those that do
    /// not are described. A refusal (token, version) is an error.
    fn connect_all(
        &self,
        addrs: &[SocketAddr],
        want: usize,
    ) -> Result<(Vec<Link>, Vec<String>), EngineError> {
        let mut links = Vec::new();
        let mut troubles = Vec::new();
        for &addr in addrs {
            if links.len() >= want {
                break;
            }
            let tls = self.tls_for(addr)?;
            match Link::connect(addr, self.token.as_deref(), tls.as_ref()) {
                Ok(link) => links.push(link),
                Err(e) if e.fatal => return Err(EngineError::Workers(e.message)),
                Err(e) => troubles.push(e.message),
            }
        }
        Ok((links, troubles))
    }

    /// TLS to the worker at `addr`, if the workers speak it.
    fn tls_for(&self, addr: SocketAddr) -> Result<Option<WorkerTls>, EngineError> {
        let Some(config) = &self.tls else {
            return Ok(None);
        };
        let name = self
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| addr.ip().to_string());
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|_| {
            EngineError::Workers(format!(
                "`{name}` is not a name a worker's TLS certificate can hold"
            ))
        })?;
        Ok(Some(WorkerTls {
            config: config.clone(),
            name,
        }))
    }

    fn source(&self, scenario: &Scenario) -> Result<ScenarioSource, EngineError> {
        let mut cached = self.source.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(source) = &*cached {
            return Ok(source.clone());
        }
        let source = ScenarioSource::shipping(scenario).map_err(EngineError::Workers)?;
        *cached = Some(source.clone());
        Ok(source)
    }
}

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
}

impl WorkerShare {
    /// The p99 lateness of whichever timers it ran, in milliseconds.
    pub fn lateness_p99_ms(&self) -> Option<f64> {
        let timers = [&self.timer_lateness_ms, &self.arrival_lateness_ms];
        timers.into_iter().flatten().map(|l| l.p99).reduce(f64::max)
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
            })
            .collect();
        match remote::prepare(links, &hosts, &source, level.workload(), load, seed, nap) {
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
    }
    Ok(Driven {
        started_at,
        totals,
        lost,
        workers: shares,
        warnings: troubles,
    })
}

/// What a worker said it can hold, for the split.
#[derive(Debug, Clone)]
struct Capacity {
    who: String,
    cores: usize,
    /// Cores' worth of CPU (fractional under a quota): its weight.
    cpu: f64,
    limits: Limits,
    local_addresses: Vec<IpAddr>,
}

impl Capacity {
    fn of(link: &Link) -> Capacity {
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
fn spread_target(scenario: &Scenario) -> (Option<SocketAddr>, bool) {
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
fn plan_hosts(
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

    #[test]
    fn worker_lists_take_addresses_and_dns_names() {
        assert_eq!(
            WorkerSpec::parse("10.0.0.5:7420").unwrap(),
            WorkerSpec::Host("10.0.0.5:7420".into())
        );
        assert_eq!(
            WorkerSpec::parse("dns:autoperf-workers.autoperf.svc:7420").unwrap(),
            WorkerSpec::Dns {
                name: "autoperf-workers.autoperf.svc".into(),
                port: 7420
            }
        );
        for bad in ["10.0.0.5", "dns:name", "dns::7420", ":7420", "host:99999"] {
            assert!(WorkerSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_controller_links_to_a_worker_with_its_token_and_reads_its_clock() {
        const TOKEN: &str = "link-test-token-0123456789";
        let dir = std::env::temp_dir().join(format!("autoperf-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let options = WorkerOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            token_file: Some(token),
            name: Some("w-test".into()),
            local_addresses: Vec::new(),
            program: None,
            tls_cert: None,
            tls_key: None,
        };
        std::thread::spawn(move || worker_main(options, |a| tx.send(a).unwrap()));
        let addr = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let link =
            Link::connect(addr, Some(TOKEN), None).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(link.name, "w-test");
        assert!(link.cores >= 1);
        // One host, one clock: the offset is the measurement's error.
        assert!(link.offset_ns.abs() < 5_000_000, "{} ns", link.offset_ns);
        assert!(link.rtt < Duration::from_millis(100));
        link.bye();
        let e = Link::connect(addr, None, None).err().unwrap();
        assert!(
            e.fatal && e.message.contains("requires a token"),
            "{}",
            e.message
        );
        let e = Link::connect(addr, Some("another-token-0123456789"), None)
            .err()
            .unwrap();
        assert!(
            e.fatal && e.message.contains("does not match"),
            "{}",
            e.message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scaling_out_doubles_the_workers_up_to_the_pool() {
        let specs = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            .iter()
            .map(|s| WorkerSpec::parse(s).unwrap())
            .collect();
        let pool = WorkerPool::new(specs, None, None, Some(1)).unwrap();
        assert_eq!(pool.active(), 1);
        assert_eq!(pool.scale_out(), Some((1, 2)));
        assert_eq!(pool.scale_out(), Some((2, 3)));
        assert_eq!(pool.scale_out(), None);
    }
}
