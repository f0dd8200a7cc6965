//! Verdicts on the data, not only on thresholds: a level whose requests
//! all failed, or more of them than `capacity.max_error_rate` (default
//! half), measured something other than the system working — its
//! throughput is of errors, its response times of the few that got
//! through. Such a level is marked `invalid` with the reason, kept on
//! disk, and never becomes a curve point; when its errors say the target
//! is gone (connections refused: nothing listens), the analysis stops there
//! (`target_down`) instead of measuring a dead port level after level.
//! A level that lost part of its load mid-way (a worker or generator
//! process died: `incomplete`) is invalid too: it ran under-loaded. And a
//! level that completed no request at all measured nothing: a hung server
//! (it accepts connections and never answers, or answers only with
//! frames that are not a response) must never look like a clean run.

use crate::record::LevelRecord;

/// Error kinds that mean the target is gone: nothing listens. Connect
/// timeouts, resets and early closes are left out: an overloaded server
/// (its accept queue full, its workers shedding) causes them too, and
/// overload is what a capacity analysis is there to find.
const DOWN_KINDS: [&str; 1] = ["connect_refused"];

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Invalid {
    pub reason: String,
    /// Most errors were connection-level: the target is down.
    pub target_down: bool,
}

/// Why `level` is not trustworthy, if it is not.
pub(crate) fn judge(level: &LevelRecord, max_error_rate: f64) -> Option<Invalid> {
    // A worker or generator process lost mid-level: the level ran with
    // less load than planned, so its figures belong to no load level.
    if let Some(lost) = &level.incomplete {
        return Some(Invalid {
            reason: format!(
                "incomplete: part of its load was lost mid-level, so it ran under-loaded: {lost}"
            ),
            target_down: false,
        });
    }
    if level.requests == 0 {
        return Some(Invalid {
            reason: nothing_completed(level),
            target_down: false,
        });
    }
    let rate = level.errors as f64 / level.requests as f64;
    let all = level.errors >= level.requests;
    if !all && rate <= max_error_rate {
        return None;
    }
    let down: u64 = level
        .errors_by_kind
        .iter()
        .filter(|(kind, _)| DOWN_KINDS.contains(&kind.as_str()))
        .map(|(_, n)| n)
        .sum();
    let kinds: Vec<String> = level
        .errors_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let what = if all {
        format!("every request failed ({})", kinds.join(", "))
    } else {
        format!(
            "{:.1}% of the requests failed, over the {:.0}% limit ({})",
            rate * 100.0,
            max_error_rate * 100.0,
            kinds.join(", ")
        )
    };
    let target_down = down * 2 > level.errors;
    let why = if target_down {
        "the target is down: nothing listens there any more"
    } else {
        "what it measured is errors, not the system working"
    };
    Some(Invalid {
        reason: format!("{what}; {why}"),
        target_down,
    })
}

/// Why a level completed no request, success or failure (a level cut
/// short by Ctrl-C is never judged).
fn nothing_completed(level: &LevelRecord) -> String {
    let window = format!("no request completed in {:.1} s", level.duration_s);
    match &level.arrivals {
        Some(a) if a.due == 0 => format!(
            "{window}: no arrival was due in it ({} /s over {:.1} s); a higher rate or a longer --duration measures something",
            level.rate_rps.unwrap_or(0.0),
            level.duration_s
        ),
        _ => format!(
            "{window}: the target accepted connections but answered none within the level, so nothing was measured (a hung server, or a timeout longer than the level)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn level(requests: u64, errors: &[(&str, u64)]) -> LevelRecord {
        let run: crate::record::RunRecord =
            serde_json::from_str(include_str!("../report/html/testdata/run/run.json"))
                .expect("the fixture is a run record");
        let mut l = run.levels[0].clone();
        l.requests = requests;
        l.errors = errors.iter().map(|e| e.1).sum();
        l.errors_by_kind = errors
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect::<BTreeMap<_, _>>();
        l
    }

    #[test]
    fn errors_past_the_limit_make_a_level_invalid() {
        assert_eq!(judge(&level(100, &[("http_5xx", 50)]), 0.5), None);
        let half = judge(&level(100, &[("http_5xx", 51)]), 0.5).unwrap();
        assert!(
            !half.target_down && half.reason.contains("51.0%"),
            "{half:?}"
        );
        let all = judge(&level(100, &[("http_5xx", 100)]), 0.9).unwrap();
        assert!(all
            .reason
            .starts_with("every request failed (http_5xx 100)"));
        assert!(!all.target_down);
    }

    #[test]
    fn a_level_that_completed_nothing_is_invalid() {
        let mut hung = level(0, &[]);
        hung.duration_s = 2.0;
        let i = judge(&hung, 0.5).unwrap();
        assert!(!i.target_down, "{i:?}");
        assert!(
            i.reason.starts_with(
                "no request completed in 2.0 s: the target accepted connections but answered none"
            ),
            "{i:?}"
        );
        hung.arrivals = Some(crate::record::ArrivalsRecord {
            due: 0,
            queued: 0,
            unstarted: 0,
            max_in_flight: 10,
        });
        hung.rate_rps = Some(0.2);
        let idle = judge(&hung, 0.5).unwrap();
        assert!(idle.reason.contains("no arrival was due"), "{idle:?}");
    }

    #[test]
    fn a_level_that_lost_a_worker_is_invalid_whatever_its_errors() {
        let mut l = level(1000, &[]);
        l.incomplete = Some("worker w-1 (198.18.0.12:7420) was lost 6.0 s into the level".into());
        let i = judge(&l, 0.5).unwrap();
        assert!(!i.target_down && i.reason.contains("w-1"), "{i:?}");
    }

    #[test]
    fn connection_level_errors_say_the_target_is_down() {
        let dead = judge(
            &level(900, &[("connect_refused", 880), ("timeout", 20)]),
            0.5,
        )
        .unwrap();
        assert!(dead.target_down && dead.reason.contains("down"), "{dead:?}");
        let slow = judge(&level(900, &[("timeout", 880), ("reset", 20)]), 0.5).unwrap();
        assert!(!slow.target_down, "{slow:?}");
    }
}
