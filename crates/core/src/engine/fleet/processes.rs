//! The generator processes of one host, when one process cannot hold the
//! host's connections: each runs a range of the level's shards.
//!
//! ```text
//!   autoperf (parent: collector, live view, results — or a worker)
//!     │ stdin: one Job line, then "stop" (or EOF)      ▲ stdout: one WireSnapshot
//!     ▼                                                │ line per shard per second
//!   autoperf generator  ×P   (shards = threads, users dealt by shard index;
//!                             shard i connects from address i mod A)
//! ```
//!
//! The parent merges the processes' snapshots exactly like its own shards'.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{HostPlan, Job, ScenarioSource};
use crate::engine::error::EngineError;
use crate::engine::split::ShardRange;
use crate::engine::start::LevelContext;
use crate::engine::stop::StopSignal;
use crate::measure::wire::WireSnapshot;
use crate::measure::{IntervalStats, Snapshot};

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
}

/// What the parent heard from one generator process.
struct Heard {
    snapshots: u64,
    /// Why it stopped before all its shards had finished.
    trouble: Option<String>,
}

impl Fleet {
    pub(crate) fn start(
        level: LevelContext<'_>,
        host: &HostPlan,
        tx: Sender<Snapshot>,
        stop: &StopSignal,
    ) -> Result<Fleet, EngineError> {
        let LevelContext {
            scenario,
            workload,
            load,
            clock,
        } = level;
        let program = host.program.clone().ok_or_else(|| {
            EngineError::Start("generator processes need the autoperf binary".into())
        })?;
        let ranges = host.range.split(&host.process_shards);
        let mut fleet = Fleet {
            children: Arc::new(Mutex::new(Vec::new())),
            stdins: Arc::new(Mutex::new(Vec::new())),
            readers: Vec::new(),
            watchdog: None,
            done: Arc::new(AtomicBool::new(false)),
        };
        for (p, range) in ranges.into_iter().enumerate() {
            let job = Job::new(
                ScenarioSource::of(scenario, host.shipped.clone()),
                workload,
                load,
                range,
                host.addresses.clone(),
                clock,
            );
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

    /// Reaps the processes (by now they have ended their output) and says
    /// what went wrong with any of them; an error when none ran at all.
    pub(crate) fn finish(mut self) -> Result<Vec<String>, EngineError> {
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
        end_shards(running, self.start, &self.tx);
        drop(self.tx);
        let said = errors.join().unwrap_or_default();
        let why = (!said.is_empty()).then_some(said).or(trouble);
        Heard {
            snapshots,
            trouble: Some(why.unwrap_or_else(|| "its output ended".into())),
        }
    }
}

/// Ends the shards in `running` (of a process or worker that died) with
/// an empty last snapshot each, so the level still ends on time with what
/// they sent so far.
pub fn end_shards(running: BTreeSet<usize>, start: Instant, tx: &Sender<Snapshot>) {
    let seq = start.elapsed().as_secs();
    for shard in running {
        let _ = tx.send(Snapshot {
            shard,
            seq,
            last: true,
            at: Instant::now(),
            stats: IntervalStats::new(0),
            active_users: 0,
            remote_cpu: Duration::ZERO,
            remote_quota: None,
        });
    }
}
