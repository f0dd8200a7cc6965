//! What a worker takes on: each job is checked against this host before
//! anything of it runs. A controller plans within the limits a worker
//! announced, so a job past them is not one of its plans — a different
//! autoperf, or someone else's program holding the token — and one of
//! 10^9 users made a worker abort out of memory at 3.85 GB. The reason
//! goes back to the controller, which shows it.

use crate::engine::fleet::{Job, Limits, MAX_PROCESSES};

/// More shards than any level has (one per core of every worker).
const MAX_SHARDS: usize = 1 << 16;

/// Memory one connection (a user, or an open workload's slot) may take:
/// 7 KiB measured per user at 50,000 (bench/README.md), with room for
/// larger bodies and sessions.
const BYTES_PER_CONNECTION: u64 = 16 << 10;

/// Why this host will not run `job` over `process_shards`, if it will
/// not. `available`: memory the host has free (MemAvailable), when known.
pub(super) fn refuse(
    job: &Job,
    process_shards: &[usize],
    limits: &Limits,
    available: Option<u64>,
) -> Option<String> {
    let range = job.range;
    if range.total == 0
        || range.total > MAX_SHARDS
        || range.count == 0
        || range.first.checked_add(range.count)? > range.total
    {
        return Some(format!(
            "the job's shards {}..{} of {} are not a level's",
            range.first,
            range.first.saturating_add(range.count),
            range.total
        ));
    }
    let processes = process_shards.len() as u64;
    if processes > u64::from(MAX_PROCESSES) {
        return Some(format!(
            "the job asks for {processes} generator processes, more than the {MAX_PROCESSES} a worker starts"
        ));
    }
    let connections = u64::from(job.load.connections_in(range));
    let fds = processes.max(1) * limits.open_files;
    if connections > fds {
        return Some(format!(
            "the job asks for {connections} connections over {processes} process{}, more than this worker's open-file limit ({}) lets them hold ({fds})",
            if processes == 1 { "" } else { "es" },
            limits.open_files
        ));
    }
    let needs = connections.saturating_mul(BYTES_PER_CONNECTION);
    match available {
        Some(free) if needs > free => Some(format!(
            "the job's {connections} connections need up to {} MiB and this host has {} MiB free: run fewer users on it, or add workers",
            needs >> 20,
            free >> 20
        )),
        _ => None,
    }
}

/// Memory this host has free for new work (MemAvailable), when known.
pub(super) fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::engine::fleet::ScenarioSource;
    use crate::engine::level::Workload;
    use crate::engine::split::{Load, ShardRange};
    use crate::engine::start::Clock;

    fn job(users: u32, shards: usize) -> Job {
        let scenario = ScenarioSource {
            path: "s.yaml".into(),
            text: String::new(),
            overrides: Vec::new(),
            base_url: None,
            shipped: None,
        };
        let load = Load::Closed { users, ramp: None };
        let clock = Clock {
            start: Instant::now(),
            deadline: Instant::now(),
            seed: 0,
            nap: std::time::Duration::ZERO,
            measured_from: 0,
        };
        Job::new(
            scenario,
            &Workload::Session,
            &load,
            ShardRange::whole(shards),
            Vec::new(),
            clock,
        )
    }

    const HOST: Limits = Limits {
        open_files: 20_000,
        ports: 28_000,
    };

    #[test]
    fn a_job_within_the_hosts_limits_runs_and_one_past_them_is_refused_saying_why() {
        let gib = 1 << 30;
        assert_eq!(refuse(&job(500, 2), &[2], &HOST, Some(4 * gib)), None);
        // 40,000 users over two processes of 20,000 descriptors: a plan.
        assert_eq!(refuse(&job(40_000, 2), &[1, 1], &HOST, Some(4 * gib)), None);
        let e = refuse(&job(1_000_000_000, 2), &[2], &HOST, Some(4 * gib)).unwrap();
        assert!(
            e.contains("1000000000 connections") && e.contains("20000"),
            "{e}"
        );
        let e = refuse(&job(40_000, 2), &[1, 1], &HOST, Some(512 << 20)).unwrap();
        assert!(e.contains("MiB free"), "{e}");
        let e = refuse(&job(10, 2), &[1; 65], &HOST, None).unwrap();
        assert!(e.contains("65 generator processes"), "{e}");
        let e = refuse(&job(10, 1 << 20), &[1 << 20], &HOST, None).unwrap();
        assert!(e.contains("not a level's"), "{e}");
    }
}
