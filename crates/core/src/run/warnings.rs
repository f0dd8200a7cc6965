//! What a finished level says beyond its figures, in words: requests no
//! one answered, a data feeder run dry, every request failed, the
//! generator as the bottleneck, servers short of CPU.

use crate::engine::Level;
use crate::record::{LevelRecord, Mode};
use crate::scenario::Scenario;

/// Names the workers whose timers fired later than scheduling noise
/// explains, latest first, and those their CPU quota held back — the
/// level's lateness merges every worker's, so one starved worker in a pool
/// would otherwise go unnamed: `", timers late on w1 (p99 85.7 ms), w1
/// held back by its CPU quota in 31 of 40 periods"`. Empty when none was.
pub(super) fn late_workers(level: &LevelRecord) -> String {
    let floor_ms = crate::capacity::client::LATENESS_FLOOR_S * 1e3;
    let mut late: Vec<(f64, &str)> = level
        .workers
        .iter()
        .filter_map(|w| Some((w.lateness_p99_ms()?, w.name.as_str())))
        .filter(|&(p99, _)| p99 > floor_ms)
        .collect();
    let mut text = String::new();
    if !late.is_empty() {
        late.sort_by(|a, b| b.0.total_cmp(&a.0));
        let named: Vec<String> = late
            .iter()
            .map(|(p99, name)| format!("{name} (p99 {p99:.1} ms)"))
            .collect();
        text = format!(", timers late on {}", named.join(", "));
    }
    for w in level.workers.iter().filter(|w| w.held_back()) {
        text.push_str(&format!(
            ", {} held back by its CPU quota in {} of {} periods",
            w.name,
            w.quota_throttled_periods.unwrap_or(0),
            w.quota_periods.unwrap_or(0)
        ));
    }
    text
}

/// Says so when every request of a level failed: its response times, if
/// any, are those of errors, and nothing it measured describes a working
/// system, whatever the thresholds say.
pub(super) fn all_failed(level: &LevelRecord, mode: Mode) -> Option<String> {
    if level.requests == 0 || level.errors < level.requests {
        return None;
    }
    let kinds: Vec<String> = level
        .errors_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    // Profiling sends one request type alone: a page behind a login has
    // no cookie unless the login is a prerequisite.
    let hint = match mode {
        Mode::Profile => "; a request that needs earlier steps (a login, a cookie, an extracted value) needs them listed in the scenario's `prerequisites:`",
        _ => "",
    };
    Some(format!(
        "level {}: EVERY request failed ({} of {}: {}); nothing here measures a working system{hint}",
        level.level,
        level.errors,
        level.requests,
        kinds.join(", ")
    ))
}

/// A `unique` data feeder ran out of rows during the level: say which, how
/// many requests found none, and the fix.
pub(super) fn data_exhausted(level: &LevelRecord, scenario: &Scenario) -> Option<String> {
    let count = *level.errors_by_kind.get("data_exhausted")?;
    let unique: Vec<String> = scenario
        .feeders
        .iter()
        .filter(|f| f.mode == crate::scenario::FeederMode::Unique)
        .map(|f| format!("`{}`, {} rows", f.name, f.rows.len()))
        .collect();
    Some(format!(
        "level {}: {count} request{} found no row left in a unique data feeder ({}) and {} not sent, their users stopped; give it more rows, or `mode: sequential` to go round again",
        level.level,
        if count == 1 { "" } else { "s" },
        unique.join("; "),
        if count == 1 { "was" } else { "were" }
    ))
}

/// Error kinds that mean no answer came at all: refused, reset, timed
/// out, closed before a byte.
const NO_ANSWER: [&str; 5] = ["connect_refused", "connect", "reset", "timeout", "closed"];

/// Error kinds the engine gives a request the target did answer, though
/// not as it should: a redirect loop or off the target, a failed check or
/// extraction, bytes that are not a response, a TLS handshake refused, a
/// broker's error, the scenario's script failing it. (`http_*` are the
/// server's own words, and `data_exhausted` has its warning.)
const ANSWERED_WRONG: [&str; 11] = [
    "malformed",
    "redirect_limit",
    "redirect_off_target",
    "check_failed",
    "extract_missing",
    "encode",
    "tls",
    "kafka_broker",
    "body_too_large",
    "script_request",
    "script_response",
];

/// Says so when answers were too large to check: the limit, and the fix.
pub(super) fn body_too_large(level: &LevelRecord, scenario: &Scenario) -> Option<String> {
    let count = *level.errors_by_kind.get("body_too_large")?;
    Some(format!(
        "level {}: {count} answer{} larger than `target.max_body` ({}), so {} checks and extraction could not read all of {}; raise `max_body` under `target` if such answers are expected",
        level.level,
        if count == 1 { " was" } else { "s were" },
        crate::scenario::files::human_bytes(scenario.target.max_body as u64),
        if count == 1 { "its" } else { "their" },
        if count == 1 { "it" } else { "them" },
    ))
}

/// Says so when requests got no answer at all: unlike error statuses,
/// those mean the target itself is down, gone mid-run or overwhelmed. A
/// stray timeout in a million is not news: it takes one request in a
/// thousand.
pub(super) fn unanswered(level: &LevelRecord, scenario: &Scenario) -> Option<String> {
    let (kinds, count) = errors_of(level, &NO_ANSWER)?;
    Some(format!(
        "level {}: {count} of {} requests got no answer from {} ({kinds}): is it still up, and not overloaded?",
        level.level,
        level.requests,
        scenario.target.endpoint,
    ))
}

/// Says so when requests failed though the target was up — it answered
/// them, or the scenario failed them before they went (`encode`,
/// `script_request`): what failed is named (a redirect, a check, a
/// malformed answer, the script), not taken for a target that is down.
pub(super) fn answered_wrong(level: &LevelRecord) -> Option<String> {
    let (kinds, count) = errors_of(level, &ANSWERED_WRONG)?;
    Some(format!(
        "level {}: {count} of {} requests failed though the target was up ({kinds})",
        level.level, level.requests,
    ))
}

/// The errors of `level` of these kinds, named with their counts, and how
/// many; `None` when they are fewer than one request in a thousand.
fn errors_of(level: &LevelRecord, of: &[&str]) -> Option<(String, u64)> {
    let (kinds, count) = level
        .errors_by_kind
        .iter()
        .filter(|(kind, _)| of.contains(&kind.as_str()))
        .fold((Vec::new(), 0u64), |(mut kinds, count), (kind, n)| {
            kinds.push(format!("{kind} {n}"));
            (kinds, count + n)
        });
    if count == 0 || count * 1000 < level.requests {
        return None;
    }
    Some((kinds.join(", "), count))
}

/// Says so when the servers had less CPU than they asked for: a process
/// queued for cores behind others (on the generator's host, its own
/// generator among them) or a hypervisor's steal. Such a level measures
/// the system on a busier machine than it is (a CPU-bound tier loses
/// throughput; one bound by a lock or a pool may not).
pub(super) fn servers_short_of_cpu(level: &LevelRecord) -> Option<String> {
    let why = crate::record::short_of_cpu(&level.servers)?;
    Some(format!(
        "level {}: the servers were short of CPU ({why}): its figures may fall short of what the system gives with the cores to itself; run the servers where nothing else takes their cores",
        level.level
    ))
}

/// Says so when the generator's CPU quota (a container's CPU limit) held
/// it back in a tenth or more of the level's periods: while held, it read
/// no response and sent no request, so its latencies count time it was
/// not allowed to run.
pub(super) fn generator_throttled(level: &LevelRecord) -> Option<String> {
    let q = level.client.cpu_quota.as_ref()?;
    if !q.holds_back() {
        return None;
    }
    Some(format!(
        "level {}: the generator's CPU quota ({} cores) held it back in {} of {} periods ({:.0} ms in all): its latencies include time it was not allowed to run; give it a larger CPU limit, or spread the load with --workers or --generators",
        level.level, q.cores, q.throttled_periods, q.periods, q.throttled_ms
    ))
}

/// Says so when the generator, not the server, may have limited the level:
/// arrivals started late (open), or users thought longer than configured
/// (closed).
pub(super) fn client_bottleneck(level_record: &LevelRecord, level: &Level) -> Option<String> {
    if !level_record.client_bottleneck {
        return None;
    }
    Some(match level {
        Level::Open(_) => format!(
            "level {} ({} arrivals/s): client bottleneck — arrivals started late (p99 {:.1} ms{}) or not at all; the generator, not the server, may limit throughput here",
            level_record.level,
            level_record.rate_rps.unwrap_or(0.0),
            level_record
                .client
                .arrival_lateness_ms
                .as_ref()
                .map_or(0.0, |l| l.p99),
            late_workers(level_record)
        ),
        Level::Closed(_) => format!(
            "level {} ({} users): client bottleneck — achieved think time {:.3}s against {:.3}s configured{}; the generator, not the server, may limit throughput here",
            level_record.level,
            level.users().unwrap_or(0),
            level_record.think_time_s.achieved,
            level_record.think_time_s.configured,
            late_workers(level_record)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::ErrorKind;

    /// Every error kind is either no answer, a wrong answer, the server's
    /// own status, or data run dry: a new kind must be placed.
    #[test]
    fn every_error_kind_is_either_unanswered_or_answered() {
        for kind in ErrorKind::ALL {
            let name = kind.name();
            let places = [
                NO_ANSWER.contains(&name),
                ANSWERED_WRONG.contains(&name),
                name.starts_with("http_"),
                name == "data_exhausted",
            ];
            assert_eq!(
                places.iter().filter(|&&p| p).count(),
                1,
                "{name} must be in exactly one place"
            );
        }
    }
}
