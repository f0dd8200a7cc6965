//! Snapshots across a process boundary. A generator process (see
//! `engine::fleet`) sends each of its shards' snapshots to the parent as one
//! JSON line; histograms travel in HdrHistogram's V2 encoding, so the parent
//! merges them exactly, as it merges its own shards' (never averaged).
//!
//! Instants travel as CLOCK_MONOTONIC nanoseconds: every process on the host
//! reads the same clock, so a parent and its generators agree on when a
//! level starts and when each interval ended.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::cgroup::Throttling;
use super::outcome::ErrorKind;
use super::stats::{
    new_histogram, CheckCount, DurationSum, IntervalStats, RequestStats, UserTally,
};
use super::Snapshot;

#[derive(Debug, Serialize, Deserialize)]
pub struct WireSnapshot {
    pub shard: usize,
    pub seq: u64,
    pub last: bool,
    pub at_ns: u64,
    pub active_users: u32,
    /// CPU the sending process used since its previous snapshot.
    pub cpu_ns: u64,
    /// Under a CPU quota: what the quota did to the sending process's
    /// group since its previous snapshot (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<WireThrottling>,
    pub stats: WireStats,
}

/// `Throttling` on the wire: periods, throttled periods, throttled ns, the
/// period in µs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct WireThrottling(pub u64, pub u64, pub u64, pub u64);

impl From<Throttling> for WireThrottling {
    fn from(t: Throttling) -> WireThrottling {
        WireThrottling(
            t.periods,
            t.throttled_periods,
            t.throttled.as_nanos() as u64,
            t.period.as_micros() as u64,
        )
    }
}

impl From<WireThrottling> for Throttling {
    fn from(w: WireThrottling) -> Throttling {
        Throttling {
            period: Duration::from_micros(w.3),
            periods: w.0,
            throttled_periods: w.1,
            throttled: Duration::from_nanos(w.2),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WireStats {
    per_request: Vec<WireRequest>,
    think: (u64, u64),
    timer_lateness: Vec<u8>,
    connect: (u64, u64),
    tls: (u64, u64),
    tls_resumed: u64,
    #[serde(default)]
    http2_connections: u64,
    sessions: u64,
    service_time: Vec<u8>,
    arrivals: u64,
    arrivals_queued: u64,
    arrivals_unstarted: u64,
    arrival_lateness: Vec<u8>,
    /// `UserTally`: completions, Σ(2n + 1), the first half's completions
    /// (absent from a sender that tallies nothing, or predates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    users: Option<(u64, u64, u64)>,
    /// By class (`classes:`); absent without classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    per_class: Vec<WireRequest>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireRequest {
    requests: u64,
    /// By `ErrorKind::name`, so both sides need not agree on the order.
    errors: BTreeMap<String, u64>,
    response_time: Vec<u8>,
    /// Passed and failed per check.
    #[serde(default)]
    checks: Vec<(u64, u64)>,
    #[serde(default)]
    redirects: u64,
    #[serde(default)]
    retries: u64,
    #[serde(default)]
    body_bytes: u64,
    #[serde(default)]
    decoded_bytes: u64,
    #[serde(default)]
    failed_ns: u64,
    #[serde(default)]
    skipped: u64,
    #[serde(default)]
    script_failures: Vec<(String, u64)>,
}

impl WireRequest {
    fn new(r: &RequestStats) -> WireRequest {
        WireRequest {
            requests: r.requests,
            errors: r
                .errors
                .by_name()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            response_time: encode(&r.response_time),
            checks: r.checks.iter().map(|c| (c.passed, c.failed)).collect(),
            redirects: r.redirects,
            retries: r.retries,
            body_bytes: r.body_bytes,
            decoded_bytes: r.decoded_bytes,
            failed_ns: r.failed_ns,
            skipped: r.skipped,
            script_failures: r.script_failures.clone(),
        }
    }

    fn into_stats(self) -> Result<RequestStats, WireError> {
        let r = self;
        let mut stats = RequestStats {
            requests: r.requests,
            response_time: decode(&r.response_time)?,
            checks: r
                .checks
                .iter()
                .map(|&(passed, failed)| CheckCount { passed, failed })
                .collect(),
            redirects: r.redirects,
            retries: r.retries,
            body_bytes: r.body_bytes,
            decoded_bytes: r.decoded_bytes,
            failed_ns: r.failed_ns,
            skipped: r.skipped,
            ..RequestStats::default()
        };
        for (reason, n) in &r.script_failures {
            stats.record_script_failure(reason, *n);
        }
        for (name, n) in r.errors {
            let kind = ErrorKind::ALL
                .iter()
                .find(|k| k.name() == name)
                .ok_or_else(|| WireError(format!("unknown error kind {name:?}")))?;
            stats.errors.add_many(*kind, n);
        }
        Ok(stats)
    }
}

/// A snapshot the parent could not read back.
#[derive(Debug, thiserror::Error)]
#[error("bad snapshot from a generator process: {0}")]
pub(crate) struct WireError(String);

impl WireSnapshot {
    pub(crate) fn new(snapshot: &Snapshot, cpu: Duration) -> WireSnapshot {
        let s = &snapshot.stats;
        WireSnapshot {
            shard: snapshot.shard,
            seq: snapshot.seq,
            last: snapshot.last,
            at_ns: to_monotonic_ns(snapshot.at),
            active_users: snapshot.active_users,
            cpu_ns: cpu.as_nanos() as u64,
            quota: None,
            stats: WireStats {
                per_request: s.per_request.iter().map(WireRequest::new).collect(),
                per_class: s.per_class.iter().map(WireRequest::new).collect(),
                think: sum_to_wire(&s.think),
                timer_lateness: encode(&s.timer_lateness),
                connect: sum_to_wire(&s.connect),
                tls: sum_to_wire(&s.tls),
                tls_resumed: s.tls_resumed,
                http2_connections: s.http2_connections,
                sessions: s.sessions,
                service_time: encode(&s.service_time),
                arrivals: s.arrivals,
                arrivals_queued: s.arrivals_queued,
                arrivals_unstarted: s.arrivals_unstarted,
                arrival_lateness: encode(&s.arrival_lateness),
                users: (s.users.completions > 0).then_some((
                    s.users.completions,
                    s.users.squares,
                    s.users.first_half,
                )),
            },
        }
    }

    /// The snapshot as the collector takes it; its shard index is kept (the
    /// sender numbers its shards in the whole fleet's numbering).
    pub(crate) fn into_snapshot(self) -> Result<Snapshot, WireError> {
        let w = self.stats;
        let per_request = w
            .per_request
            .into_iter()
            .map(WireRequest::into_stats)
            .collect::<Result<_, _>>()?;
        let per_class = w
            .per_class
            .into_iter()
            .map(WireRequest::into_stats)
            .collect::<Result<_, _>>()?;
        Ok(Snapshot {
            shard: self.shard,
            seq: self.seq,
            last: self.last,
            at: from_monotonic_ns(self.at_ns),
            active_users: self.active_users,
            remote_cpu: Duration::from_nanos(self.cpu_ns),
            remote_quota: self.quota.map(Throttling::from),
            stats: IntervalStats {
                per_request,
                think: sum_from_wire(w.think),
                timer_lateness: decode(&w.timer_lateness)?,
                connect: sum_from_wire(w.connect),
                tls: sum_from_wire(w.tls),
                tls_resumed: w.tls_resumed,
                http2_connections: w.http2_connections,
                sessions: w.sessions,
                service_time: decode(&w.service_time)?,
                arrivals: w.arrivals,
                arrivals_queued: w.arrivals_queued,
                arrivals_unstarted: w.arrivals_unstarted,
                arrival_lateness: decode(&w.arrival_lateness)?,
                per_class,
                users: w
                    .users
                    .map(|(completions, squares, first_half)| UserTally {
                        counting: false,
                        completions,
                        squares,
                        first_half,
                    })
                    .unwrap_or_default(),
            },
        })
    }
}

fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

/// HdrHistogram's V2 cookie, uncompressed: what `encode` writes.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_HEADER: usize = 40;

fn decode(bytes: &[u8]) -> Result<Histogram<u64>, WireError> {
    // The deserializer allocates the payload length its header names
    // before reading it (4 bytes saying 4 GiB took 4 GiB): only a
    // histogram as `encode` writes it is read, its payload the rest.
    let field = |at: usize| {
        let b = bytes.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if field(0) != Some(V2_COOKIE as usize)
        || field(4) != Some(bytes.len().saturating_sub(V2_HEADER))
    {
        return Err(WireError(
            "histogram: not an uncompressed HdrHistogram V2 of its own length".into(),
        ));
    }
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| WireError(format!("histogram: {e:?}")))?;
    // Back to an auto-resizing histogram of our precision, so merges work.
    let mut out = new_histogram();
    out.add(&h)
        .map_err(|e| WireError(format!("histogram: {e:?}")))?;
    Ok(out)
}

fn sum_to_wire(s: &DurationSum) -> (u64, u64) {
    (s.count, s.total.as_nanos() as u64)
}

fn sum_from_wire((count, nanos): (u64, u64)) -> DurationSum {
    DurationSum {
        count,
        total: Duration::from_nanos(nanos),
    }
}

/// `Instant` and CLOCK_MONOTONIC read at (nearly) the same moment.
fn anchor() -> &'static (Instant, u64) {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    ANCHOR.get_or_init(|| (Instant::now(), monotonic_ns()))
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `at` on the host's monotonic clock, in nanoseconds.
pub(crate) fn to_monotonic_ns(at: Instant) -> u64 {
    let (base, base_ns) = *anchor();
    if at >= base {
        base_ns + (at - base).as_nanos() as u64
    } else {
        base_ns.saturating_sub((base - at).as_nanos() as u64)
    }
}

/// The `Instant` of a monotonic-clock reading taken in another process.
pub(crate) fn from_monotonic_ns(ns: u64) -> Instant {
    let (base, base_ns) = *anchor();
    if ns >= base_ns {
        base + Duration::from_nanos(ns - base_ns)
    } else {
        base.checked_sub(Duration::from_nanos(base_ns - ns))
            .unwrap_or(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::ErrorKind;

    #[test]
    fn a_snapshot_survives_the_trip_exactly() {
        let mut stats = IntervalStats::new(2);
        for ms in 1..=100 {
            stats.per_request[1].record_response(Duration::from_millis(ms));
        }
        stats.per_request[0].record_error(ErrorKind::Timeout, Duration::from_secs(5));
        stats.per_request[0].record_error(ErrorKind::Http5xx, Duration::from_millis(3));
        stats.think.add(Duration::from_millis(1500));
        stats.class_mut(1).record_response(Duration::from_millis(8));
        stats.sessions = 7;
        stats.arrivals_unstarted = 3;
        let _ = stats.arrival_lateness.record(42_000);
        stats.users.counting = true;
        let mut made = [0u32; 2];
        for (user, first) in [(0, true), (1, false), (0, true)] {
            stats.users.complete(&mut made[user], first);
        }
        let at = Instant::now();
        let snapshot = Snapshot {
            shard: 3,
            seq: 9,
            last: true,
            at,
            stats,
            active_users: 12,
            remote_cpu: Duration::ZERO,
            remote_quota: None,
        };
        let line = serde_json::to_string(&WireSnapshot::new(&snapshot, Duration::from_millis(250)))
            .unwrap();
        let back: WireSnapshot = serde_json::from_str(&line).unwrap();
        let back = back.into_snapshot().unwrap();
        assert_eq!(
            (back.shard, back.seq, back.last, back.active_users),
            (3, 9, true, 12)
        );
        assert_eq!(back.remote_cpu, Duration::from_millis(250));
        let gap = if back.at > at {
            back.at - at
        } else {
            at - back.at
        };
        assert!(gap < Duration::from_micros(1), "{gap:?}");
        let (a, b) = (&snapshot.stats, &back.stats);
        assert_eq!(
            a.per_request[1].response_time,
            b.per_request[1].response_time
        );
        assert_eq!(
            b.per_request[1].quantile_ms(0.99),
            a.per_request[1].quantile_ms(0.99)
        );
        assert_eq!(b.per_request[0].errors.get(ErrorKind::Timeout), 1);
        assert_eq!(b.per_request[0].errors.get(ErrorKind::Http5xx), 1);
        assert_eq!(b.per_request[0].requests, 2);
        // A class it never counted stays one, empty.
        assert_eq!(b.per_class.len(), 2);
        assert_eq!((b.per_class[0].requests, b.per_class[1].requests), (0, 1));
        assert_eq!(b.per_class[1].response_time, a.per_class[1].response_time);
        assert_eq!(b.think, a.think);
        assert_eq!((b.sessions, b.arrivals_unstarted), (7, 3));
        // Users 0 and 1 made 2 and 1: Σn = 3, Σn² = 5, the first half 2.
        assert_eq!(
            (b.users.completions, b.users.squares, b.users.first_half),
            (3, 5, 2)
        );
        assert_eq!(b.arrival_lateness.max(), a.arrival_lateness.max());
    }

    /// A header naming a payload of 4 GiB allocated it
    /// (fuzz/regressions/worker_protocol).
    #[test]
    fn a_histogram_is_read_only_as_long_as_its_bytes() {
        let mut h = new_histogram();
        h.record(42).unwrap();
        let bytes = encode(&h);
        assert_eq!(decode(&bytes).unwrap(), h);
        let mut lying = bytes.clone();
        lying[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&lying).is_err());
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&bytes[..6]).is_err());
    }
}
