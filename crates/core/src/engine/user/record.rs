//! How a request's outcome is counted: in its request's figures and, with
//! workload classes, in its user's class's; connects and TLS handshakes
//! apart, and an open workload's latency from the intended start.

use std::time::{Duration, Instant};

use crate::measure::{ErrorKind, IntervalStats, RequestStats};
use crate::protocol::CallOutcome;
use crate::scenario::RequestId;

/// Records one request's outcome, in `class`'s figures too when given;
/// true when it could not connect.
///
/// Open workloads (`open` given: the intended start and now) count from
/// the intended start (so waiting for a slot, a connection or a late timer
/// is in the figure) and keep the uncorrected service time beside it.
pub(crate) fn record(
    rec: &mut IntervalStats,
    request: RequestId,
    class: Option<usize>,
    open: Option<(Instant, Instant)>,
    outcome: &CallOutcome,
) -> bool {
    let intended = open.map(|(t, _)| t);
    let latency = match open {
        Some((t, now)) => now.saturating_duration_since(t),
        None => outcome.response_time,
    };
    if let Some(c) = outcome.connect_time {
        rec.connect.add(c);
        rec.http2_connections += u64::from(outcome.http2_connection);
    }
    if let Some(tls) = outcome.tls {
        rec.tls.add(tls.took);
        rec.tls_resumed += u64::from(tls.resumed);
    }
    if intended.is_some()
        && outcome
            .result
            .map_or_else(ErrorKind::has_response, |_| true)
    {
        let _ = rec
            .service_time
            .record(crate::measure::stats::nanos(outcome.response_time).max(1));
    }
    count(&mut rec.per_request[request.index()], latency, outcome);
    if let Some(class) = class {
        count(rec.class_mut(class), latency, outcome);
    }
    match outcome.result {
        Ok(_) => false,
        // A request its script failed was never sent, nor connected.
        Err(kind) => kind != ErrorKind::ScriptRequest && outcome.response_time.is_zero(),
    }
}

/// Counts an outcome in `stats`.
fn count(stats: &mut RequestStats, latency: Duration, outcome: &CallOutcome) {
    stats.redirects += u64::from(outcome.redirects);
    stats.retries += u64::from(outcome.retries);
    stats.body_bytes += outcome.body_bytes;
    stats.decoded_bytes += outcome.decoded_bytes;
    match outcome.result {
        Ok(_) => stats.record_response(latency),
        Err(kind) => stats.record_error(kind, latency),
    }
}
