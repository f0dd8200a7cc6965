//! Several generator processes for one level, when one process cannot hold
//! its connections: each process may keep only as many sockets open as its
//! open-file limit allows (often 20,000 and not raisable without
//! privileges), and one source address has only ~28,000 ephemeral ports
//! toward one server port.
//!
//! ```text
//!   autoperf (parent: collector, live view, results)
//!     │ stdin: one Job line, then "stop" (or EOF)      ▲ stdout: one WireSnapshot
//!     ▼                                                │ line per shard per second
//!   autoperf generator  ×P   (shards = threads, users spread round-robin;
//!                             shard i connects from address i mod A)
//! ```
//!
//! The coordination is deliberately small and explicit — a job in, snapshots
//! out, a stop — so the same protocol can later run over ssh to other hosts.
//! The parent merges the processes' snapshots exactly like its own shards'.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::EngineError;
use super::level::Workload;
use super::split::{Load, ShardRange};
use super::start::{start_shards, Clock};
use super::stop::StopSignal;
use crate::measure::collector::process_cpu_time;
use crate::measure::wire::{from_monotonic_ns, to_monotonic_ns, WireSnapshot};
use crate::measure::{IntervalStats, Snapshot};
use crate::protocol::HttpTransport;
use crate::scenario::{BaseUrl, Endpoint, Scenario};

/// File descriptors a generator keeps for itself (runtime, pipes, results
/// files, agent connections), beyond one per connection.
const FD_RESERVE: u64 = 256;

/// Ephemeral ports left unused per source address (TIME_WAIT, other
/// programs on the host).
const PORT_RESERVE: u32 = 1_000;

/// Where a level's load comes from.
#[derive(Debug, Clone, Default)]
pub struct Generators {
    /// Generator processes to use at least; more are started when the
    /// level needs more connections than one process may hold.
    pub processes: Option<u32>,
    /// Source addresses of the connections, dealt to shards round-robin.
    /// Empty: the OS chooses, unless the level needs more ports than one
    /// address has toward a loopback target (then 127.0.0.1, .2, …).
    pub local_addresses: Vec<IpAddr>,
    /// The autoperf binary that generator processes run (`None`: this
    /// process only, as in library use and tests of the engine).
    pub program: Option<PathBuf>,
    /// Wake-up coalescing's nap (`None`: `DEFAULT_NAP`; zero: off).
    pub coalesce: Option<Duration>,
}

/// How one level is spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub processes: u32,
    /// Source addresses, taken in turn by every shard's connections; empty:
    /// the OS chooses.
    pub addresses: Vec<IpAddr>,
    /// The addresses were chosen here (127.0.0.x), not given.
    automatic: bool,
    connections: u32,
    per_process: u64,
    program: Option<PathBuf>,
}

impl Placement {
    pub fn is_local(&self) -> bool {
        self.processes <= 1
    }

    /// What the live view says about a spread level (nothing for one
    /// process connecting from any address).
    pub fn note(&self) -> Option<String> {
        if self.is_local() && (self.addresses.is_empty() || self.automatic) {
            return None;
        }
        let from = if self.addresses.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self.addresses.iter().map(IpAddr::to_string).collect();
            format!(", connecting from {}", list.join(", "))
        };
        let connections = match self.connections {
            0 => String::new(),
            n => format!("{n} connections: "),
        };
        Some(format!(
            "{connections}{} generator process{} (one holds at most {} under its open-file limit){from}",
            self.processes,
            if self.processes == 1 { "" } else { "es" },
            self.per_process,
        ))
    }
}

/// Chooses processes and source addresses for a level of `connections`.
pub fn place(
    scenario: &Scenario,
    connections: u32,
    generators: &Generators,
) -> Result<Placement, EngineError> {
    let (target, connections) = match &scenario.target.endpoint {
        Endpoint::Http(base) => (
            HttpTransport::new(scenario, base).map(|t| t.addr()).ok(),
            connections,
        ),
        // One producer per shard, whatever the users: nothing to spread.
        #[allow(unreachable_patterns)]
        _ => (None, 0),
    };
    // A typo in --local-addresses would otherwise cost a whole level of
    // connect errors.
    for &ip in &generators.local_addresses {
        if let Err(e) = std::net::TcpListener::bind((ip, 0)) {
            return Err(EngineError::Placement(format!(
                "cannot connect from {ip}: {e} (--local-addresses takes addresses of this host)"
            )));
        }
    }
    let limits = Limits {
        open_files: open_file_limit(),
        ports: ephemeral_ports(),
    };
    plan(connections, target, limits, generators)
}

/// What bounds one generator process on this host.
#[derive(Debug, Clone, Copy)]
struct Limits {
    open_files: u64,
    /// Ephemeral ports per source address toward one server port.
    ports: u32,
}

/// Generator processes started by themselves at most.
const MAX_PROCESSES: u32 = 64;

fn plan(
    connections: u32,
    target: Option<std::net::SocketAddr>,
    limits: Limits,
    generators: &Generators,
) -> Result<Placement, EngineError> {
    let limit = limits.open_files;
    let per_process = limit.saturating_sub(FD_RESERVE).max(1);
    let ports = limits.ports.saturating_sub(PORT_RESERVE).max(1);
    let need = |room: u64| (u64::from(connections).div_ceil(room)).max(1) as u32;
    let processes = generators.processes.unwrap_or(1).max(need(per_process));
    if processes > 1 && generators.program.is_none() {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections, more than one process may hold ({per_process} under its open-file limit of {limit}); run it with the autoperf command, which spreads it over generator processes"
        )));
    }
    if processes > MAX_PROCESSES {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections: {processes} generator processes of {per_process} each (open-file limit {limit}), more than the {MAX_PROCESSES} autoperf starts; raise the hard open-file limit or run fewer users"
        )));
    }
    let loopback = matches!(target.map(|a| a.ip()), Some(IpAddr::V4(ip)) if ip.is_loopback());
    let fast = fast_ports(limits.ports);
    let (addresses, automatic) = if !generators.local_addresses.is_empty() {
        (generators.local_addresses.clone(), false)
    } else if loopback && need(u64::from(fast)) > 1 {
        // Every 127.0.0.0/8 address is this host's: plenty to spare, so
        // each carries only what it can connect quickly.
        let count = need(u64::from(fast)).min(254);
        let addresses = (1..=count)
            .map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 0, i as u8)))
            .collect();
        (addresses, true)
    } else if need(u64::from(ports)) > 1 {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections, but one source address has only about {ports} ephemeral ports toward {}; give several local addresses of this host with --local-addresses",
            target.map_or("the target".to_string(), |a| a.to_string())
        )));
    } else {
        (Vec::new(), false)
    };
    // Every shard deals its connections over all the addresses in turn, so
    // each address carries an equal share.
    if !addresses.is_empty() {
        let each = u64::from(connections).div_ceil(addresses.len() as u64);
        if each > u64::from(ports) {
            return Err(EngineError::Placement(format!(
                "{connections} connections over {} source addresses is {each} each, more than the about {ports} ephemeral ports one address has toward one server port; give more local addresses with --local-addresses",
                addresses.len()
            )));
        }
    }
    Ok(Placement {
        processes,
        addresses,
        automatic,
        connections,
        per_process,
        program: generators.program.clone(),
    })
}

/// The soft limit on open files (raised to the hard one at start-up).
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// Raises the soft open-file limit to the hard one: every connection is a
/// file descriptor, and the default soft limit (often 1,024) is far below
/// what a load generator needs. Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit read and write only the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        }
    }
    open_file_limit()
}

/// Connections one source address takes toward one server port without
/// slowing down. Linux's connect() gives out the even half of the port range
/// first and, once it is full, scans it port by port under a lock before
/// trying the odd half: past about half the range every connect costs a
/// scan of thousands of ports in the kernel, on the shard's thread (18,000
/// users from 127.0.0.1 stalled all responses for 4 s; from two addresses,
/// p99 stayed 2 ms).
fn fast_ports(ports: u32) -> u32 {
    ports * 7 / 20
}

/// Ports the kernel hands out for outgoing connections from one address.
fn ephemeral_ports() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u32>().ok());
            let (lo, hi) = (it.next()??, it.next()??);
            Some(hi.saturating_sub(lo) + 1)
        })
        .unwrap_or(28_232)
}

/// What a generator process runs: its part of one level.
#[derive(Debug, Serialize, Deserialize)]
struct Job {
    scenario_path: PathBuf,
    scenario_text: String,
    /// `--set KEY=VALUE` applied over the text, as the parent applied them.
    #[serde(default)]
    overrides: Vec<String>,
    /// The target as the parent resolved it (`demo` points the bundled
    /// scenario at the testbed it started), when it is HTTP.
    base_url: Option<BaseUrl>,
    workload: Workload,
    load: Load,
    range: ShardRange,
    addresses: Vec<IpAddr>,
    start_ns: u64,
    deadline_ns: u64,
    seed: u64,
    nap: Duration,
}

/// How long after the deadline (or a stop) a generator process may take to
/// send its last snapshots before it is killed.
const GRACE: Duration = Duration::from_secs(3);

/// The running generator processes of one level.
pub(super) struct Fleet {
    children: Arc<Mutex<Vec<Child>>>,
    stdins: Arc<Mutex<Vec<ChildStdin>>>,
    /// One per process: what went wrong with its output, if anything.
    readers: Vec<JoinHandle<Heard>>,
    watchdog: Option<JoinHandle<()>>,
    done: Arc<AtomicBool>,
    shards: usize,
}

/// What the parent heard from one generator process.
struct Heard {
    snapshots: u64,
    /// Why it stopped before all its shards had finished.
    trouble: Option<String>,
}

impl Fleet {
    pub fn start(
        scenario: &Arc<Scenario>,
        workload: &Workload,
        load: &Load,
        placement: &Placement,
        clock: Clock,
        tx: Sender<Snapshot>,
        stop: &StopSignal,
    ) -> Result<Fleet, EngineError> {
        let program = placement.program.clone().ok_or_else(|| {
            EngineError::Start("generator processes need the autoperf binary".into())
        })?;
        let parts: Vec<Load> = (0..placement.processes)
            .map(|p| load.part(p, placement.processes))
            .collect();
        let counts: Vec<usize> = parts.iter().map(Load::local_shards).collect();
        let total: usize = counts.iter().sum();
        let mut fleet = Fleet {
            children: Arc::new(Mutex::new(Vec::new())),
            stdins: Arc::new(Mutex::new(Vec::new())),
            readers: Vec::new(),
            watchdog: None,
            done: Arc::new(AtomicBool::new(false)),
            shards: total,
        };
        let base_url = match &scenario.target.endpoint {
            Endpoint::Http(base) => Some(base.clone()),
            #[allow(unreachable_patterns)]
            _ => None,
        };
        let mut first = 0;
        for (p, (part, count)) in parts.into_iter().zip(counts).enumerate() {
            let range = ShardRange {
                first,
                count,
                total,
            };
            first += count;
            let job = Job {
                scenario_path: scenario.source.clone(),
                scenario_text: scenario.text.clone(),
                overrides: scenario.overrides.clone(),
                base_url: base_url.clone(),
                workload: workload.clone(),
                load: part,
                range,
                addresses: placement.addresses.clone(),
                start_ns: to_monotonic_ns(clock.start),
                deadline_ns: to_monotonic_ns(clock.deadline),
                seed: clock.seed,
                nap: clock.nap,
            };
            let mut child = Command::new(&program)
                .arg("generator")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Its own process group: Ctrl-C on the terminal reaches the
                // parent alone, which stops the level through stdin.
                .process_group(0)
                .spawn()
                .map_err(|e| {
                    EngineError::Start(format!(
                        "cannot start generator process {} ({}): {e}",
                        p + 1,
                        program.display()
                    ))
                })?;
            let mut stdin = child.stdin.take().expect("stdin is piped");
            let stdout = child.stdout.take().expect("stdout is piped");
            let stderr = child.stderr.take().expect("stderr is piped");
            // Owned from here on: whatever fails next, it is reaped.
            lock(&fleet.children).push(child);
            let line = serde_json::to_string(&job).expect("a job always serialises");
            writeln!(stdin, "{line}")
                .and_then(|_| stdin.flush())
                .map_err(|e| {
                    EngineError::Start(format!(
                        "generator process {} did not take its job: {e}",
                        p + 1
                    ))
                })?;
            lock(&fleet.stdins).push(stdin);
            let reader = Reader {
                range,
                start: clock.start,
                tx: tx.clone(),
            };
            fleet.readers.push(
                std::thread::Builder::new()
                    .name(format!("autoperf-generator-{}", p + 1))
                    .spawn(move || reader.run(stdout, stderr))
                    .map_err(|e| EngineError::Start(e.to_string()))?,
            );
        }
        // Ctrl-C and a controller's stop reach the processes as "stop"; one
        // that is still running GRACE after that, or after the deadline, is
        // killed, which ends its output and so its part of the level.
        let (stdins, children, done, stop) = (
            fleet.stdins.clone(),
            fleet.children.clone(),
            fleet.done.clone(),
            stop.clone(),
        );
        let mut kill_at = clock.deadline + GRACE;
        let mut told = false;
        fleet.watchdog = Some(std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if stop.is_stopped() && !told {
                    told = true;
                    kill_at = kill_at.min(Instant::now() + GRACE);
                    for stdin in lock(&stdins).iter_mut() {
                        let _ = stdin.write_all(b"stop\n").and_then(|_| stdin.flush());
                    }
                }
                if Instant::now() >= kill_at {
                    for child in lock(&children).iter_mut() {
                        if matches!(child.try_wait(), Ok(None)) {
                            let _ = child.kill();
                        }
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
        Ok(fleet)
    }

    /// Shards over all processes, for the collector.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Reaps the processes (by now they have ended their output) and says
    /// what went wrong with any of them; an error when none ran at all.
    pub fn finish(mut self) -> Result<Vec<String>, EngineError> {
        self.done.store(true, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
        // EOF on stdin stops a generator that is somehow still running.
        lock(&self.stdins).clear();
        let give_up = Instant::now() + GRACE;
        let mut warnings = Vec::new();
        let mut heard_any = false;
        let mut children = std::mem::take(&mut *lock(&self.children));
        for (i, (child, reader)) in children.iter_mut().zip(self.readers.drain(..)).enumerate() {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < give_up => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            let heard = reader.join().unwrap_or(Heard {
                snapshots: 0,
                trouble: Some("lost its reader".into()),
            });
            heard_any |= heard.snapshots > 0;
            let status = match status {
                Some(s) if s.success() => None,
                Some(s) => Some(s.to_string()),
                None => Some("did not stop by itself, killed".into()),
            };
            if heard.trouble.is_some() || status.is_some() {
                let what: Vec<String> = status.into_iter().chain(heard.trouble).collect();
                warnings.push(format!(
                    "generator process {} ended early ({}); its users' load is missing from the rest of the level",
                    i + 1,
                    what.join("; ")
                ));
            }
        }
        if !heard_any {
            return Err(EngineError::Start(format!(
                "no generator process ran: {}",
                warnings.first().map_or("no output", String::as_str)
            )));
        }
        Ok(warnings)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // An error path before `finish`: no generator outlives its level.
        self.done.store(true, Ordering::Relaxed);
        for child in lock(&self.children).iter_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forwards one generator process's snapshots to the collector.
struct Reader {
    range: ShardRange,
    start: Instant,
    tx: Sender<Snapshot>,
}

impl Reader {
    /// Forwards until the process closes its output.
    fn run(self, stdout: impl Read, stderr: impl Read + Send + 'static) -> Heard {
        let errors = std::thread::spawn(move || {
            // Read to the end (so the process never blocks on a full pipe),
            // keeping the last lines for the message.
            let mut tail = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !line.trim().is_empty() {
                    tail = line;
                }
            }
            tail
        });
        let mut running: BTreeSet<usize> =
            (self.range.first..self.range.first + self.range.count).collect();
        let mut trouble = None;
        let mut snapshots = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parsed = serde_json::from_str::<WireSnapshot>(&line)
                .map_err(|e| e.to_string())
                .and_then(|w| w.into_snapshot().map_err(|e| e.to_string()));
            match parsed {
                Ok(snapshot) => {
                    snapshots += 1;
                    if snapshot.last {
                        running.remove(&snapshot.shard);
                    }
                    let _ = self.tx.send(snapshot);
                }
                // Keep reading, so it never blocks on a full pipe; a line
                // cut short by its death is no news either.
                Err(e) => {
                    trouble.get_or_insert(format!("unreadable output: {e}"));
                }
            }
        }
        if running.is_empty() {
            return Heard {
                snapshots,
                trouble: None,
            };
        }
        // It died: its shards end now, with what they sent so far, so the
        // level still ends on time.
        let seq = self.start.elapsed().as_secs();
        for shard in running {
            let _ = self.tx.send(Snapshot {
                shard,
                seq,
                last: true,
                at: Instant::now(),
                stats: IntervalStats::new(0),
                active_users: 0,
                remote_cpu: Duration::ZERO,
            });
        }
        drop(self.tx);
        let said = errors.join().unwrap_or_default();
        let why = (!said.is_empty()).then_some(said).or(trouble);
        Heard {
            snapshots,
            trouble: Some(why.unwrap_or_else(|| "its output ended".into())),
        }
    }
}

/// The generator process's side (`autoperf generator`): reads its job from
/// `input`, runs its shards, writes their snapshots to `output`, and stops
/// early on a "stop" line or when `input` closes.
pub fn serve(
    mut input: impl BufRead + Send + 'static,
    mut output: impl Write,
) -> Result<(), String> {
    raise_open_file_limit();
    let mut line = String::new();
    input
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the job: {e}"))?;
    let job: Job = serde_json::from_str(&line).map_err(|e| format!("bad job: {e}"))?;
    let overrides = job
        .overrides
        .iter()
        .map(|o| crate::scenario::Override::parse(o))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--set: {e}"))?;
    let mut scenario =
        crate::scenario::parse_with(&job.scenario_text, &job.scenario_path, &overrides)
            .map_err(|d| format!("scenario: {d}"))?;
    if let Some(base) = job.base_url {
        scenario.target.endpoint = Endpoint::Http(base);
    }
    let scenario = Arc::new(scenario);
    let stop = StopSignal::default();
    let watcher = stop.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.trim() == "stop" => break,
                Ok(_) => {}
            }
        }
        watcher.stop();
    });
    let clock = Clock {
        start: from_monotonic_ns(job.start_ns),
        deadline: from_monotonic_ns(job.deadline_ns),
        seed: job.seed,
        nap: job.nap,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| -> Result<(), String> {
        start_shards(
            scope,
            &scenario,
            &job.workload,
            &job.load,
            job.range,
            clock,
            &job.addresses,
            tx,
            &stop,
        )
        .map_err(|e| e.to_string())?;
        let mut cpu = process_cpu_time();
        for snapshot in rx {
            let now = process_cpu_time();
            let wire = WireSnapshot::new(&snapshot, now.saturating_sub(cpu));
            cpu = now;
            let line = serde_json::to_string(&wire).expect("a snapshot always serialises");
            writeln!(output, "{line}")
                .and_then(|_| output.flush())
                .map_err(|e| format!("cannot write to the parent: {e}"))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: Limits = Limits {
        open_files: 20_000,
        ports: 28_232,
    };

    fn with_program() -> Generators {
        Generators {
            program: Some(PathBuf::from("autoperf")),
            ..Generators::default()
        }
    }

    fn loopback() -> Option<std::net::SocketAddr> {
        Some("127.0.0.1:8080".parse().unwrap())
    }

    #[test]
    fn a_loopback_level_past_half_the_port_range_takes_a_second_address() {
        let p = plan(18_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!(p.processes, 1);
        assert_eq!(p.addresses.len(), 2);
        assert!(p.note().is_none(), "nothing to say for one process");
    }

    #[test]
    fn a_small_level_stays_in_this_process() {
        let p = plan(5_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!((p.processes, p.addresses.len()), (1, 0));
        assert!(p.is_local() && p.note().is_none());
    }

    #[test]
    fn fifty_thousand_users_spread_over_processes_and_loopback_addresses() {
        let p = plan(50_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!(p.processes, 3, "19,744 connections per process at most");
        let want: Vec<IpAddr> = (1..=6)
            .map(|i| format!("127.0.0.{i}").parse().unwrap())
            .collect();
        assert_eq!(p.addresses, want, "at most 9,881 connections per address");
        let note = p.note().unwrap();
        assert!(
            note.contains("3 generator processes") && note.contains("127.0.0.6"),
            "{note}"
        );
    }

    #[test]
    fn without_the_binary_a_level_too_big_for_one_process_is_refused() {
        let e = plan(50_000, loopback(), HERE, &Generators::default()).unwrap_err();
        assert!(e.to_string().contains("open-file limit of 20000"), "{e}");
    }

    #[test]
    fn too_few_ports_toward_a_remote_target_asks_for_local_addresses() {
        let remote = Some("10.0.0.5:80".parse().unwrap());
        let e = plan(50_000, remote, HERE, &with_program()).unwrap_err();
        assert!(e.to_string().contains("--local-addresses"), "{e}");
        let two = Generators {
            local_addresses: vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            ..with_program()
        };
        let p = plan(50_000, remote, HERE, &two).unwrap();
        assert_eq!(p.addresses.len(), 2);
        let one = Generators {
            local_addresses: vec!["10.0.0.1".parse().unwrap()],
            ..with_program()
        };
        let e = plan(50_000, remote, HERE, &one).unwrap_err();
        assert!(
            e.to_string()
                .contains("over 1 source addresses is 50000 each"),
            "{e}"
        );
    }

    #[test]
    fn asked_for_processes_are_started_even_for_a_small_level() {
        let g = Generators {
            processes: Some(2),
            ..with_program()
        };
        let p = plan(10, loopback(), HERE, &g).unwrap();
        assert_eq!(p.processes, 2);
        assert!(!p.is_local());
    }
}
