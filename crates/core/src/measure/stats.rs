//! The mergeable statistics of an interval: one histogram of response times
//! per request plus counters. A shard fills one `IntervalStats` on its hot
//! path without locks; the collector merges them exactly (histograms add,
//! counters add — percentiles are never averaged).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::outcome::{ErrorCounts, ErrorKind};

/// A latency histogram in nanoseconds, 3 significant digits, growing its
/// range as needed (so small until a long value is seen).
pub(crate) fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("3 significant digits is a valid precision");
    h.auto(true);
    h
}

/// Rounded to `decimals` decimals: the one rounding of the record's
/// figures (a power of ten up to 1e22 is exact, so `round_to(x, 3)` is
/// exactly `(x * 1e3).round() / 1e3`).
pub(crate) fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// Rounded to three decimals, as run.json keeps figures in ms or s.
pub fn round3(x: f64) -> f64 {
    round_to(x, 3)
}

/// Rounded to six decimals: a float's trailing noise left out.
pub fn round6(x: f64) -> f64 {
    round_to(x, 6)
}

/// How late timers (think pauses, or arrivals) fired, in milliseconds, as
/// run.json keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimerLateness {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl TimerLateness {
    /// The summary of a lateness histogram in nanoseconds.
    pub(crate) fn of(ns: &Histogram<u64>) -> TimerLateness {
        let ms = |ns: u64| round3(ns as f64 / 1e6);
        TimerLateness {
            p50: ms(ns.value_at_quantile(0.5)),
            p99: ms(ns.value_at_quantile(0.99)),
            max: ms(ns.max()),
        }
    }
}

pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Statistics of one request type (or of all) over an interval.
#[derive(Debug, Clone)]
pub struct RequestStats {
    /// Attempts that finished (success or error) in the interval.
    pub requests: u64,
    pub errors: ErrorCounts,
    /// Response time (first byte written to last byte read) of every attempt
    /// that got a complete response, including 4xx/5xx.
    pub response_time: Histogram<u64>,
    /// Per check of the request (in the scenario's order): passed, failed.
    /// Empty for requests without checks.
    pub checks: Vec<CheckCount>,
    /// Redirects followed on the way to the final responses.
    pub redirects: u64,
    /// Kafka: times records' batches were sent again after a retriable
    /// refusal (each record counts its batch's retries).
    pub retries: u64,
    /// Body bytes of the final responses, as received and as decoded.
    pub body_bytes: u64,
    pub decoded_bytes: u64,
    /// Time spent in attempts that got no response (timeouts, resets,
    /// refusals), in nanoseconds: a user waited for the server that long,
    /// though no response time was measured.
    pub failed_ns: u64,
    /// Times a user came to the request and its `skip_if:` held: nothing
    /// was sent (not among `requests`).
    pub skipped: u64,
    /// Why the scenario's script failed the request, with how often: the
    /// first `MAX_REASONS` reasons, later ones under `OTHER_REASONS`.
    pub script_failures: Vec<(String, u64)>,
}

/// Distinct reasons a request's script failures are kept under, so a
/// script that puts a counter in its reason cannot grow the record.
pub(crate) const MAX_REASONS: usize = 16;
pub(crate) const OTHER_REASONS: &str = "(other reasons)";
const MAX_REASON_CHARS: usize = 200;

/// How often one check passed and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckCount {
    pub passed: u64,
    pub failed: u64,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            requests: 0,
            errors: ErrorCounts::default(),
            response_time: new_histogram(),
            checks: Vec::new(),
            redirects: 0,
            retries: 0,
            body_bytes: 0,
            decoded_bytes: 0,
            failed_ns: 0,
            skipped: 0,
            script_failures: Vec::new(),
        }
    }
}

impl RequestStats {
    pub(crate) fn record_response(&mut self, elapsed: Duration) {
        self.requests += 1;
        // Auto-resizing: recording only fails for values past u64 range.
        let _ = self.response_time.record(nanos(elapsed).max(1));
    }

    pub(crate) fn record_error(&mut self, kind: ErrorKind, elapsed: Duration) {
        self.errors.add(kind);
        if kind.has_response() {
            self.record_response(elapsed);
        } else {
            self.requests += 1;
            self.failed_ns = self.failed_ns.saturating_add(nanos(elapsed));
        }
    }

    /// Counts `n` script failures for `reason`.
    pub(crate) fn record_script_failure(&mut self, reason: &str, n: u64) {
        // A reason is a line, not a document (a worker's too): its first
        // line, without control characters, cut at MAX_REASON_CHARS.
        let line = reason.lines().next().unwrap_or_default();
        let clean: String = line
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_REASON_CHARS)
            .collect();
        let reason = clean.as_str();
        let reason = match self.script_failures.iter().any(|(r, _)| r == reason) {
            false if self.script_failures.len() >= MAX_REASONS => OTHER_REASONS,
            _ => reason,
        };
        match self.script_failures.iter_mut().find(|(r, _)| r == reason) {
            Some((_, count)) => *count = count.saturating_add(n),
            None => self.script_failures.push((reason.to_string(), n)),
        }
    }

    /// Counts check `index` of the request.
    pub(crate) fn record_check(&mut self, index: usize, passed: bool) {
        if self.checks.len() <= index {
            self.checks.resize(index + 1, CheckCount::default());
        }
        let c = &mut self.checks[index];
        if passed {
            c.passed += 1;
        } else {
            c.failed += 1;
        }
    }

    /// Adds `other` in. Sums saturate: figures from a worker are checked
    /// for what they can be (`engine::workers::plausible`), and a sum that
    /// still overflowed must not wrap to a small number or panic.
    pub(crate) fn merge(&mut self, other: &RequestStats) {
        self.requests = self.requests.saturating_add(other.requests);
        self.redirects = self.redirects.saturating_add(other.redirects);
        self.retries = self.retries.saturating_add(other.retries);
        self.body_bytes = self.body_bytes.saturating_add(other.body_bytes);
        self.decoded_bytes = self.decoded_bytes.saturating_add(other.decoded_bytes);
        self.failed_ns = self.failed_ns.saturating_add(other.failed_ns);
        self.skipped = self.skipped.saturating_add(other.skipped);
        self.errors.merge(&other.errors);
        for (reason, n) in &other.script_failures {
            self.record_script_failure(reason, *n);
        }
        if self.checks.len() < other.checks.len() {
            self.checks
                .resize(other.checks.len(), CheckCount::default());
        }
        for (a, b) in self.checks.iter_mut().zip(&other.checks) {
            a.passed = a.passed.saturating_add(b.passed);
            a.failed = a.failed.saturating_add(b.failed);
        }
        self.response_time
            .add(&other.response_time)
            .expect("auto-resizing histograms always add");
    }

    pub(crate) fn mean_ms(&self) -> f64 {
        if self.response_time.is_empty() {
            0.0
        } else {
            self.response_time.mean() / 1e6
        }
    }

    /// Quantile `q` in [0, 1] in milliseconds (0 when empty).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.response_time.is_empty() {
            0.0
        } else {
            self.response_time.value_at_quantile(q) as f64 / 1e6
        }
    }

    pub fn max_ms(&self) -> f64 {
        self.response_time.max() as f64 / 1e6
    }
}

/// A running sum of durations, for think times and connect times.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DurationSum {
    pub count: u64,
    pub total: Duration,
}

impl DurationSum {
    pub(crate) fn add(&mut self, d: Duration) {
        self.count += 1;
        self.total += d;
    }

    pub(crate) fn merge(&mut self, other: &DurationSum) {
        self.count = self.count.saturating_add(other.count);
        self.total = self.total.saturating_add(other.total);
    }

    pub(crate) fn mean(&self) -> Option<Duration> {
        (self.count > 0).then(|| self.total / self.count as u32)
    }
}

/// Everything a shard measured in one interval.
#[derive(Debug, Clone)]
pub struct IntervalStats {
    /// Indexed by `RequestId`.
    pub per_request: Vec<RequestStats>,
    /// Think times as actually slept (measured, not configured).
    pub think: DurationSum,
    /// How late think timers fired past their intended time.
    pub timer_lateness: Histogram<u64>,
    /// TCP connection set-up times (kept apart from response times).
    pub connect: DurationSum,
    /// TLS handshakes after the TCP connect, timed apart from it.
    pub tls: DurationSum,
    /// Of those, handshakes that resumed an earlier session.
    pub tls_resumed: u64,
    /// Connections opened that speak HTTP/2.
    pub http2_connections: u64,
    /// Sessions begun.
    pub sessions: u64,
    /// Open workloads only: response times from the moment each request
    /// was actually written (the uncorrected figure), where `per_request`
    /// holds them from the moment it was meant to be (wrk2's correction).
    pub service_time: Histogram<u64>,
    /// Open workloads: arrivals due in this interval.
    pub arrivals: u64,
    /// Arrivals that found no idle slot and could not open another (every
    /// slot taken, or enough of them still connecting) and had to wait
    /// (they start late; their latency still counts from the intended time).
    pub arrivals_queued: u64,
    /// Arrivals still waiting for a slot when the level ended.
    pub arrivals_unstarted: u64,
    /// How far past its intended time the scheduler woke for an arrival.
    pub arrival_lateness: Histogram<u64>,
    /// How the closed users shared the interval's completions: what the
    /// throughput's interval is estimated from (`measure::precision`).
    pub users: UserTally,
    /// Indexed by class (`classes:`): every request of the class's users,
    /// as `total()` is of all. Empty without classes; grows as recorded.
    pub per_class: Vec<RequestStats>,
}

/// How an interval's completions fall among the closed users who made
/// them. Over a measured window the sums give `Σ n_u` and `Σ n_u²` (each
/// user `u`'s completions `n_u`) without a list of users, so shards,
/// generator processes and workers merge them by adding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserTally {
    /// Whether this interval's completions are tallied: it lies in the
    /// measured window. Set by the shard for the interval it opens; not
    /// merged.
    pub counting: bool,
    /// Completions tallied: `Σ n_u` over the window.
    pub completions: u64,
    /// `Σ (2n + 1)` over the tallied completions, `n` the completing
    /// user's tallied completions before it: over the window, `Σ n_u²`.
    pub squares: u64,
    /// Tallied completions of the users in the first of two random halves.
    pub first_half: u64,
}

impl UserTally {
    /// Tallies one completion of a user who had made `made` before it in
    /// the window (and now has made one more), in `first_half` or not.
    pub(crate) fn complete(&mut self, made: &mut u32, first_half: bool) {
        if !self.counting {
            return;
        }
        self.completions += 1;
        self.squares += 2 * u64::from(*made) + 1;
        self.first_half += u64::from(first_half);
        *made += 1;
    }

    pub(crate) fn merge(&mut self, other: &UserTally) {
        self.completions = self.completions.saturating_add(other.completions);
        self.squares = self.squares.saturating_add(other.squares);
        self.first_half = self.first_half.saturating_add(other.first_half);
    }
}

impl IntervalStats {
    pub(crate) fn new(requests: usize) -> IntervalStats {
        IntervalStats {
            per_request: (0..requests).map(|_| RequestStats::default()).collect(),
            think: DurationSum::default(),
            timer_lateness: new_histogram(),
            connect: DurationSum::default(),
            tls: DurationSum::default(),
            tls_resumed: 0,
            http2_connections: 0,
            sessions: 0,
            service_time: new_histogram(),
            arrivals: 0,
            arrivals_queued: 0,
            arrivals_unstarted: 0,
            arrival_lateness: new_histogram(),
            users: UserTally::default(),
            per_class: Vec::new(),
        }
    }

    /// Class `class`'s figures, there from now on.
    pub(crate) fn class_mut(&mut self, class: usize) -> &mut RequestStats {
        if self.per_class.len() <= class {
            self.per_class.resize_with(class + 1, RequestStats::default);
        }
        &mut self.per_class[class]
    }

    pub(crate) fn merge(&mut self, other: &IntervalStats) {
        for (a, b) in self.per_request.iter_mut().zip(other.per_request.iter()) {
            a.merge(b);
        }
        self.think.merge(&other.think);
        self.timer_lateness
            .add(&other.timer_lateness)
            .expect("auto-resizing histograms always add");
        self.connect.merge(&other.connect);
        self.tls.merge(&other.tls);
        self.tls_resumed = self.tls_resumed.saturating_add(other.tls_resumed);
        self.http2_connections = self
            .http2_connections
            .saturating_add(other.http2_connections);
        self.sessions = self.sessions.saturating_add(other.sessions);
        self.service_time
            .add(&other.service_time)
            .expect("auto-resizing histograms always add");
        self.arrivals = self.arrivals.saturating_add(other.arrivals);
        self.arrivals_queued = self.arrivals_queued.saturating_add(other.arrivals_queued);
        self.arrivals_unstarted = self
            .arrivals_unstarted
            .saturating_add(other.arrivals_unstarted);
        self.arrival_lateness
            .add(&other.arrival_lateness)
            .expect("auto-resizing histograms always add");
        self.users.merge(&other.users);
        for (class, stats) in other.per_class.iter().enumerate() {
            self.class_mut(class).merge(stats);
        }
    }

    /// All requests together.
    pub fn total(&self) -> RequestStats {
        let mut all = RequestStats::default();
        for r in &self.per_request {
            all.merge(r);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_two_intervals_keeps_exact_percentiles() {
        let mut a = RequestStats::default();
        let mut b = RequestStats::default();
        for ms in 1..=50 {
            a.record_response(Duration::from_millis(ms));
        }
        for ms in 51..=100 {
            b.record_response(Duration::from_millis(ms));
        }
        b.record_error(ErrorKind::Timeout, Duration::from_secs(10));
        a.merge(&b);
        assert_eq!(a.requests, 101);
        assert_eq!(a.errors.get(ErrorKind::Timeout), 1);
        assert!((a.quantile_ms(0.5) - 50.0).abs() < 0.1);
        assert!((a.quantile_ms(0.99) - 99.0).abs() < 0.1);
        assert!((a.mean_ms() - 50.5).abs() < 0.1);
    }

    #[test]
    fn http_errors_keep_their_response_time() {
        let mut s = RequestStats::default();
        s.record_error(ErrorKind::Http5xx, Duration::from_millis(3));
        assert_eq!(s.requests, 1);
        assert_eq!(s.response_time.len(), 1);
        assert_eq!(s.errors.total(), 1);
    }
}
