//! Sessions from a stream of classified requests: a client's requests
//! belong to one session until it is silent longer than the inactivity
//! timeout. Each closed session adds to the CBMG's counts — where it
//! started, every step from one class to the next, where it ended — and
//! each step's gap to the think-time statistics.
//!
//! Only sessions still open are held (one small entry per client active
//! within the timeout); the rest is counters, so memory does not grow with
//! the log.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use super::fit::Gaps;

struct Open {
    last_time: f64,
    last: usize,
}

/// The counts a CBMG is estimated from.
pub struct SessionCounts {
    pub classes: usize,
    /// `starts[c]`: sessions that began at class `c`.
    pub starts: Vec<u64>,
    /// `steps[a][b]`: a request of class `a` followed by one of `b` in the
    /// same session.
    pub steps: Vec<Vec<u64>>,
    /// `exits[c]`: sessions whose last request was of class `c`.
    pub exits: Vec<u64>,
    pub sessions: u64,
    pub gaps: Gaps,
    /// Sessions begun in each hour of the day (UTC), and the distinct
    /// hours of the log's span seen with any request, by hour of the day.
    pub starts_by_hour: [u64; 24],
    hours_seen: HashSet<i64>,
}

impl SessionCounts {
    /// How many hours of the log fell on each hour of the day.
    pub fn hours_observed(&self) -> [u64; 24] {
        let mut n = [0u64; 24];
        for h in &self.hours_seen {
            n[h.rem_euclid(24) as usize] += 1;
        }
        n
    }
}

pub struct Sessionizer {
    timeout: f64,
    open: HashMap<u64, Open>,
    latest: f64,
    since_sweep: u32,
    counts: SessionCounts,
}

/// A client's key hashed to 64 bits: the open sessions' map holds no
/// strings (collisions are negligible below billions of clients).
pub fn client_key(parts: &[&str]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(parts)
}

impl Sessionizer {
    pub fn new(classes: usize, timeout_s: f64) -> Sessionizer {
        Sessionizer {
            timeout: timeout_s,
            open: HashMap::new(),
            latest: f64::NEG_INFINITY,
            since_sweep: 0,
            counts: SessionCounts {
                classes,
                starts: vec![0; classes],
                steps: vec![vec![0; classes]; classes],
                exits: vec![0; classes],
                sessions: 0,
                gaps: Gaps::default(),
                starts_by_hour: [0; 24],
                hours_seen: HashSet::new(),
            },
        }
    }

    /// A request of class `class` by client `key` at `time` (seconds).
    /// Lines a little out of order (logs are written as responses end)
    /// count as a gap of zero.
    pub fn add(&mut self, key: u64, time: f64, class: usize) {
        self.latest = self.latest.max(time);
        let hour = (time / 3600.0).floor() as i64;
        self.counts.hours_seen.insert(hour);
        let c = &mut self.counts;
        match self.open.get_mut(&key) {
            Some(o) if time - o.last_time <= self.timeout => {
                c.steps[o.last][class] += 1;
                c.gaps.add(time - o.last_time);
                o.last_time = o.last_time.max(time);
                o.last = class;
            }
            found => {
                if let Some(o) = found {
                    c.exits[o.last] += 1;
                    o.last_time = time;
                    o.last = class;
                } else {
                    self.open.insert(
                        key,
                        Open {
                            last_time: time,
                            last: class,
                        },
                    );
                }
                c.starts[class] += 1;
                c.sessions += 1;
                c.starts_by_hour[hour.rem_euclid(24) as usize] += 1;
            }
        }
        self.since_sweep += 1;
        if self.since_sweep >= 100_000 {
            self.sweep(self.latest - self.timeout);
        }
    }

    /// Ends the sessions silent since before `before`.
    fn sweep(&mut self, before: f64) {
        self.since_sweep = 0;
        let exits = &mut self.counts.exits;
        self.open.retain(|_, o| {
            let keep = o.last_time >= before;
            if !keep {
                exits[o.last] += 1;
            }
            keep
        });
    }

    pub fn open_sessions(&self) -> usize {
        self.open.len()
    }

    /// Ends every session still open.
    pub fn finish(mut self) -> SessionCounts {
        self.sweep(f64::INFINITY);
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_split_on_silence_and_count_every_step() {
        let mut s = Sessionizer::new(3, 60.0);
        let (a, b) = (
            client_key(&["1.1.1.1", "ua"]),
            client_key(&["2.2.2.2", "ua"]),
        );
        s.add(a, 0.0, 0);
        s.add(b, 1.0, 0);
        s.add(a, 10.0, 1);
        s.add(a, 9.0, 2); // a little out of order: a gap of 0
        s.add(b, 100.0, 1); // silent for 99 s: a new session
        s.add(a, 500.0, 0);
        let c = s.finish();
        assert_eq!(c.sessions, 4);
        assert_eq!(c.starts, vec![3, 1, 0]);
        assert_eq!(c.steps[0][1], 1);
        assert_eq!(c.steps[1][2], 1);
        assert_eq!(c.exits, vec![2, 1, 1]);
        assert_eq!(c.gaps.count(), 2);
        assert!((c.gaps.mean() - 5.0).abs() < 1e-9);
        assert_eq!(c.starts_by_hour[0], 4);
        assert_eq!(c.hours_observed()[0], 1);
    }
}
