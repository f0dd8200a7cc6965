//! Sessions from a stream of classified requests: a client's requests
//! belong to one session until it is silent longer than the inactivity
//! timeout. Each closed session adds to the CBMG's counts — where it
//! started, every step from one class to the next, where it ended — and
//! each step's gap to the think-time statistics.
//!
//! Only sessions still open are held (one small entry per client active
//! within the timeout); the rest is counters, so memory does not grow with
//! the log.

use std::collections::HashMap;
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
    /// `steps[&(a, b)]`: a request of class `a` followed by one of `b` in
    /// the same session (sparse: most pairs never follow each other).
    pub steps: HashMap<(usize, usize), u64>,
    /// `exits[c]`: sessions whose last request was of class `c`.
    pub exits: Vec<u64>,
    pub sessions: u64,
    pub gaps: Gaps,
    /// Sessions begun in each hour of the day (UTC).
    pub starts_by_hour: [u64; 24],
    /// The first and last request's time.
    pub span: (f64, f64),
}

impl SessionCounts {
    /// Seconds of the log's span that fell on each hour of the day (a log
    /// of ten minutes covers 600 s of one hour, not 3600).
    pub(crate) fn seconds_observed(&self) -> [f64; 24] {
        let mut n = [0.0; 24];
        let (first, last) = self.span;
        // NaN-safe: an empty log's span is (inf, -inf).
        if last.partial_cmp(&first).is_none_or(|o| o.is_lt()) {
            return n;
        }
        let mut hour = (first / 3600.0).floor();
        while hour * 3600.0 <= last {
            let (start, end) = (hour * 3600.0, hour * 3600.0 + 3600.0);
            n[(hour as i64).rem_euclid(24) as usize] += end.min(last) - start.max(first);
            hour += 1.0;
        }
        // A log whose requests all share one instant still covers a second.
        if last == first {
            n[((first / 3600.0).floor() as i64).rem_euclid(24) as usize] = 1.0;
        }
        n
    }
}

/// Seconds a client's line may lie before its previous one and still
/// continue its session.
const BACKWARDS: f64 = 60.0;

pub(crate) struct Sessionizer {
    timeout: f64,
    open: HashMap<u64, Open>,
    latest: f64,
    since_sweep: u32,
    counts: SessionCounts,
}

/// A client's key hashed to 64 bits: the open sessions' map holds no
/// strings (collisions are negligible below billions of clients).
pub(crate) fn client_key(parts: &[&str]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(parts)
}

impl Sessionizer {
    pub(crate) fn new(classes: usize, timeout_s: f64) -> Sessionizer {
        Sessionizer {
            timeout: timeout_s,
            open: HashMap::new(),
            latest: f64::NEG_INFINITY,
            since_sweep: 0,
            counts: SessionCounts {
                classes,
                starts: vec![0; classes],
                steps: HashMap::new(),
                exits: vec![0; classes],
                sessions: 0,
                gaps: Gaps::default(),
                starts_by_hour: [0; 24],
                span: (f64::INFINITY, f64::NEG_INFINITY),
            },
        }
    }

    /// A request of class `class` by client `key` at `time` (seconds).
    /// Lines a little out of order (logs are written as responses end)
    /// count as a gap of zero; a minute or more back in time (files
    /// concatenated out of order) starts a new session.
    pub(crate) fn add(&mut self, key: u64, time: f64, class: usize) {
        self.latest = self.latest.max(time);
        let hour = (time / 3600.0).floor() as i64;
        let c = &mut self.counts;
        c.span = (c.span.0.min(time), c.span.1.max(time));
        match self.open.get_mut(&key) {
            Some(o) if time - o.last_time <= self.timeout && o.last_time - time < BACKWARDS => {
                *c.steps.entry((o.last, class)).or_default() += 1;
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

    /// Whether `key` has a session open now.
    pub(crate) fn is_open(&self, key: u64) -> bool {
        self.open.contains_key(&key)
    }

    /// The session open under `from` continues under `to`: a visitor's
    /// first request came before its session cookie was set.
    pub(crate) fn rekey(&mut self, from: u64, to: u64) {
        if let Some(o) = self.open.remove(&from) {
            self.open.insert(to, o);
        }
    }

    pub(crate) fn open_sessions(&self) -> usize {
        self.open.len()
    }

    /// Ends every session still open.
    pub(crate) fn finish(mut self) -> SessionCounts {
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
        assert_eq!(c.steps[&(0, 1)], 1);
        assert_eq!(c.steps[&(1, 2)], 1);
        assert_eq!(c.exits, vec![2, 1, 1]);
        assert_eq!(c.gaps.count(), 2);
        assert!((c.gaps.mean() - 5.0).abs() < 1e-9);
        assert_eq!(c.starts_by_hour[0], 4);
        assert_eq!(c.seconds_observed()[0], 500.0);
    }

    #[test]
    fn a_session_begun_before_its_cookie_continues_under_it() {
        let mut s = Sessionizer::new(2, 60.0);
        let (client, cookie) = (
            client_key(&["1.1.1.1", "ua"]),
            client_key(&["session", "abc"]),
        );
        s.add(client, 0.0, 0);
        assert!(!s.is_open(cookie));
        s.rekey(client, cookie);
        s.add(cookie, 5.0, 1);
        // Far back in time: another session.
        s.add(cookie, -100.0, 0);
        let c = s.finish();
        assert_eq!(c.sessions, 2);
        assert_eq!(c.steps[&(0, 1)], 1);
    }
}
