//! What a worker's snapshots can be, whatever it says: its own running
//! shards, times inside the level and moving forwards, no more errors,
//! responses or checks than attempts, no more requests
//! than a shard completes, no more CPU than its cores give. An
//! authenticated worker that replayed stale snapshots once made a level of
//! 78,000,000,000 req/s and "client CPU 17,690,000 of 2 cores"; now it is
//! named and its level handled like a lost worker's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::measure::Snapshot;
use crate::scenario::MAX_CLASSES;

/// More requests than one shard completes in a second, by far (one of
/// ours completes a few hundred thousand): a count past it is not a
/// measurement.
const MAX_SHARD_RATE: f64 = 20_000_000.0;

/// How far outside the level a snapshot's time may be: a clock offset
/// measured over a round trip is that good and better.
const CLOCK_SLACK: Duration = Duration::from_secs(2);

pub(super) struct Expected {
    /// Its shards that have not sent their last snapshot.
    running: BTreeSet<usize>,
    start: Instant,
    /// The latest a snapshot may be taken (the deadline and its grace).
    end: Instant,
    /// When each shard last reported.
    last_at: BTreeMap<usize, Instant>,
}

impl Expected {
    pub(super) fn new(shards: BTreeSet<usize>, start: Instant, end: Instant) -> Expected {
        Expected {
            running: shards,
            start,
            end,
            last_at: BTreeMap::new(),
        }
    }

    /// Why `snapshot` cannot be what a worker of `cores` cores measured,
    /// if it cannot; else takes it in (a last snapshot ends its shard).
    pub(super) fn check(&mut self, snapshot: &Snapshot, cores: usize) -> Result<(), String> {
        let shard = snapshot.shard;
        if !self.running.contains(&shard) {
            return Err(format!(
                "sent a snapshot of shard {shard}, which is not one of its running shards"
            ));
        }
        let at = snapshot.at;
        if at + CLOCK_SLACK < self.start || at > self.end + CLOCK_SLACK {
            return Err(format!(
                "sent a snapshot of shard {shard} taken outside the level ({} s from its start)",
                signed_secs(at, self.start)
            ));
        }
        let previous = self.last_at.insert(shard, at);
        if previous.is_some_and(|p| at < p) {
            return Err(format!(
                "sent a snapshot of shard {shard} older than its last one"
            ));
        }
        // The time the snapshot covers, at least a second (the first one
        // of a shard may come early).
        let seconds = at
            .saturating_duration_since(previous.unwrap_or(self.start))
            .as_secs_f64()
            .max(1.0);
        let requests = snapshot
            .stats
            .per_request
            .iter()
            .fold(0u64, |n, r| n.saturating_add(r.requests));
        if requests as f64 > MAX_SHARD_RATE * seconds {
            return Err(format!(
                "sent a snapshot of shard {shard} counting {requests} requests in {seconds:.1} s, more than a shard completes"
            ));
        }
        // Within a request, nothing outnumbers the attempts that ended.
        for (i, r) in snapshot.stats.per_request.iter().enumerate() {
            let responses = r.response_time.len();
            let errors = r.errors.total();
            let checked = r
                .checks
                .iter()
                .map(|c| c.passed.saturating_add(c.failed))
                .max();
            if errors > r.requests || responses > r.requests || checked > Some(r.requests) {
                return Err(format!(
                    "sent a snapshot of shard {shard} whose request {i} counts {} attempts but {errors} errors, {responses} responses and {} checks",
                    r.requests,
                    checked.unwrap_or(0)
                ));
            }
        }
        // Classes hold the requests, each counted once: no more classes
        // than a scenario may have, nor more requests in them than in all,
        // nor, within one, more errors or responses than attempts.
        let by_class = snapshot
            .stats
            .per_class
            .iter()
            .fold(0u64, |n, r| n.saturating_add(r.requests));
        let inconsistent = snapshot
            .stats
            .per_class
            .iter()
            .any(|r| r.errors.total() > r.requests || r.response_time.len() > r.requests);
        if snapshot.stats.per_class.len() > MAX_CLASSES || by_class > requests || inconsistent {
            return Err(format!(
                "sent a snapshot of shard {shard} with {} classes counting {by_class} requests of {requests}",
                snapshot.stats.per_class.len()
            ));
        }
        let cpu = snapshot.remote_cpu.as_secs_f64();
        if cpu > cores as f64 * (seconds + CLOCK_SLACK.as_secs_f64()) {
            return Err(format!(
                "sent a snapshot of shard {shard} with {cpu:.1} s of CPU in {seconds:.1} s on {cores} cores"
            ));
        }
        if snapshot.last {
            self.running.remove(&shard);
        }
        Ok(())
    }
}

/// `at - from` in seconds, negative when `at` is earlier.
fn signed_secs(at: Instant, from: Instant) -> String {
    if at >= from {
        format!("{:.1}", (at - from).as_secs_f64())
    } else {
        format!("-{:.1}", (from - at).as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::IntervalStats;

    fn snapshot(shard: usize, at: Instant, requests: u64) -> Snapshot {
        let mut stats = IntervalStats::new(1);
        stats.per_request[0].requests = requests;
        Snapshot {
            shard,
            seq: 0,
            last: false,
            at,
            stats,
            active_users: 1,
            remote_cpu: Duration::ZERO,
            remote_quota: None,
        }
    }

    #[test]
    fn a_workers_own_figures_pass_and_impossible_ones_are_named() {
        let start = Instant::now();
        let end = start + Duration::from_secs(10);
        let mut expected = Expected::new([4, 5].into(), start, end);
        let second = |s: u64| start + Duration::from_secs(s);
        assert_eq!(expected.check(&snapshot(4, second(1), 90_000), 2), Ok(()));
        assert_eq!(expected.check(&snapshot(5, second(1), 90_000), 2), Ok(()));
        // Another worker's shard.
        let e = expected.check(&snapshot(7, second(2), 10), 2).unwrap_err();
        assert!(e.contains("shard 7, which is not one of its"), "{e}");
        // Stale: long before the level, or back in time for its shard.
        let mut stale = snapshot(4, start, 10);
        stale.at = start.checked_sub(Duration::from_secs(60)).unwrap_or(start);
        if stale.at < start {
            let e = expected.check(&stale, 2).unwrap_err();
            assert!(e.contains("outside the level"), "{e}");
        }
        assert_eq!(expected.check(&snapshot(4, second(3), 10), 2), Ok(()));
        let e = expected.check(&snapshot(4, second(2), 10), 2).unwrap_err();
        assert!(e.contains("older than its last one"), "{e}");
        let e = expected.check(&snapshot(5, second(30), 10), 2).unwrap_err();
        assert!(e.contains("outside the level"), "{e}");
        // Counts of 2^64 − 1, and CPU no two cores give.
        let e = expected
            .check(&snapshot(5, second(2), u64::MAX), 2)
            .unwrap_err();
        assert!(e.contains("more than a shard completes"), "{e}");
        let mut burning = snapshot(5, second(4), 10);
        burning.remote_cpu = Duration::from_secs(1_000);
        let e = expected.check(&burning, 2).unwrap_err();
        assert!(e.contains("on 2 cores"), "{e}");
        // More errors than attempts.
        let mut errors = snapshot(5, second(5), 10);
        errors.stats.per_request[0]
            .errors
            .add_many(crate::measure::ErrorKind::Timeout, 11);
        let e = expected.check(&errors, 2).unwrap_err();
        assert!(e.contains("counts 10 attempts but 11 errors"), "{e}");
        // A shard's last snapshot ends it: nothing more from it.
        let mut last = snapshot(4, second(5), 10);
        last.last = true;
        assert_eq!(expected.check(&last, 2), Ok(()));
        assert!(expected.check(&snapshot(4, second(6), 10), 2).is_err());
    }
}
