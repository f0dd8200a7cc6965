//! A generator process's side (`autoperf generator`): its job on stdin,
//! its shards' snapshots on stdout, one JSON line each.

use std::io::{BufRead, Write};
use std::sync::{mpsc, Arc};

use super::place::raise_open_file_limit;
use super::Job;
use crate::engine::start::{start_shards, Clock, LevelContext};
use crate::engine::stop::StopSignal;
use crate::measure::cgroup::CpuLimit;
use crate::measure::collector::process_cpu_time;
use crate::measure::wire::{from_monotonic_ns, WireSnapshot};
use crate::measure::Snapshot;

/// Reads its job from `input`, runs its shards, writes their snapshots to
/// `output`, and stops early on a "stop" line or when `input` closes.
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
    let scenario = Arc::new(job.scenario.decode()?);
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
    let clock = job.clock();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| -> Result<(), String> {
        let level = LevelContext {
            scenario: &scenario,
            workload: &job.workload,
            load: &job.load,
            clock,
        };
        start_shards(scope, level, job.range, &job.addresses, tx, &stop)
            .map_err(|e| e.to_string())?;
        forward(rx, |wire| {
            let line = serde_json::to_string(&wire).expect("a snapshot always serialises");
            writeln!(output, "{line}").and_then(|_| output.flush())
        })
        .map_err(|e| format!("cannot write to the parent: {e}"))
    })
}

impl Job {
    /// The level's clock as the job gives it, on this host.
    pub(crate) fn clock(&self) -> Clock {
        Clock {
            start: from_monotonic_ns(self.start_ns),
            deadline: from_monotonic_ns(self.deadline_ns),
            seed: self.seed,
            nap: self.nap,
            measured_from: self.measured_from,
        }
    }
}

/// Sends every snapshot from `rx` through `send` as it travels, with the
/// CPU this process (and the generator processes it heard from) used
/// since the previous one, and what its CPU quota did to its cgroup in
/// that time, until every shard has ended. A generator process beside it
/// shares its cgroup: the group's counters already hold that one's.
pub fn forward(
    rx: mpsc::Receiver<Snapshot>,
    mut send: impl FnMut(WireSnapshot) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut cpu = process_cpu_time();
    let limit = CpuLimit::of_this_process();
    let throttling = || limit.as_ref().and_then(CpuLimit::throttling);
    let mut throttled = throttling();
    for snapshot in rx {
        let now = process_cpu_time();
        let spent = now.saturating_sub(cpu) + snapshot.remote_cpu;
        cpu = now;
        let mut wire = WireSnapshot::new(&snapshot, spent);
        if let Some(now) = throttling() {
            if let Some(before) = throttled {
                wire.quota = Some(now.since(&before).into());
            }
            throttled = Some(now);
        }
        send(wire)?;
    }
    Ok(())
}
