//! A level's figures per workload class (`classes:`): each class's users,
//! requests, throughput and response times, from the requests its users
//! sent (design §4.3, `per_class`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::level::Latency;
use super::round3;
use crate::measure::IntervalStats;
use crate::scenario::{users_per_class, Scenario};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassRecord {
    /// Its share of the users (or of the arrivals), as the scenario sets it.
    pub share: f64,
    /// Its users at this level (a closed level of fixed users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    pub requests: u64,
    pub errors: u64,
    pub throughput_rps: f64,
    pub response_time_ms: Latency,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
}

/// The think time per request the users were set to take, with classes:
/// each class's mean weighted by its share of the requests measured. As
/// `N = Σ_c X_c (R_c + Z_c)`, it is what `N/X − R` comes to when the
/// users think as set (the share of the users would over-weight the
/// class that thinks longer, which sends less). `None` without classes
/// or requests (a profiled level's users, of no class, think the
/// scenario's own think time).
pub(crate) fn configured_think_s(scenario: &Scenario, stats: &IntervalStats) -> Option<f64> {
    let total: u64 = stats.per_class.iter().map(|s| s.requests).sum();
    if scenario.classes.is_empty() || total == 0 {
        return None;
    }
    let weighted: f64 = stats
        .per_class
        .iter()
        .enumerate()
        .map(|(c, s)| s.requests as f64 * scenario.mean_think_time_of(c).as_secs_f64())
        .sum();
    Some(weighted / total as f64)
}

/// Each class's figures over a measured window of `secs`; `users` the
/// level's fixed users, when it has them. Empty without classes, and for
/// a level that counted none (profiling, whose users are of no class).
pub(crate) fn per_class(
    scenario: &Scenario,
    stats: &IntervalStats,
    users: Option<u32>,
    secs: f64,
) -> BTreeMap<String, ClassRecord> {
    if stats.per_class.is_empty() {
        return BTreeMap::new();
    }
    let shares = scenario.class_shares();
    let dealt = users.map(|n| users_per_class(&shares, n));
    let empty = crate::measure::RequestStats::default();
    scenario
        .classes
        .iter()
        .enumerate()
        .map(|(c, class)| {
            let s = stats.per_class.get(c).unwrap_or(&empty);
            let record = ClassRecord {
                share: class.share,
                users: dealt.as_ref().map(|d| d[c]),
                requests: s.requests,
                errors: s.errors.total(),
                throughput_rps: round3(s.requests as f64 / secs),
                response_time_ms: Latency::of(s),
                errors_by_kind: super::level::owned(s.errors.by_name()),
            };
            (class.name.clone(), record)
        })
        .collect()
}
