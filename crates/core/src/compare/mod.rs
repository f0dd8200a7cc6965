//! `autoperf compare BASE NEW`: did the new run get slower? Level by level
//! (matched by users, or by offered rate), request by request, each gated
//! figure's change is held to its limit (`limits`), and a change beyond it
//! is called a regression only when the measured seconds show it beyond
//! the limit significantly (`rank`: a one-sided Mann–Whitney test of the
//! new run's per-second figures against the base's shifted by the limit,
//! from `request_series.csv`). A test against no change at all would call
//! any drift of a shared machine a regression, since a few hundred
//! seconds detect a 3% shift; a test against the limit asks the question
//! the limit states, and one noisy second or a few slow samples still move
//! it no more than any other second.
//!
//! - `limits`: the metrics and `--max-regression`.
//! - `load`: a results directory as read for a comparison.
//! - `rank`: the significance test.
//! - `text`, `html`: the comparison on a terminal and as a page.

mod html;
mod limits;
mod load;
mod rank;
mod text;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use html::render as render_html;
pub use limits::{Limits, Metric};
pub use load::{RequestSecond, Results};
pub use rank::{mann_whitney_p, p_exceeds, MIN_SAMPLES};
pub use text::render as render_text;

use crate::record::{LevelRecord, Mode};
use crate::results::{ResultsError, ALL_REQUESTS};

/// A change beyond its limit is a regression when the seconds differ at
/// this significance level.
pub(crate) const ALPHA: f64 = 0.01;

/// What a comparison found.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub base_mode: Mode,
    pub new_mode: Mode,
    pub limits: Limits,
    pub alpha: f64,
    /// Levels run at the same load in both, in the new run's order.
    pub levels: Vec<LevelComparison>,
    /// Loads run in one only (capacity analyses choose their own levels:
    /// `--levels` makes them comparable everywhere).
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// Capacity analyses: the highest throughput measured, held to the
    /// throughput limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_throughput: Option<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saturation_users: Option<(Option<u32>, Option<u32>)>,
    /// Open capacity searches: the highest arrival rate that met every
    /// SLO, held to the throughput limit or the searches' precision,
    /// whichever is wider (a search resolves nothing finer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_passing_rate: Option<Change>,
    pub regressions: usize,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LevelComparison {
    /// `20 users` or `50 req/s`.
    pub load: String,
    pub base_level: u32,
    pub new_level: u32,
    pub changes: Vec<Change>,
}

/// One figure of one request (or `*`, all of them) in one level.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// A request's name, or `*` for all of them (and for a tier's figure).
    pub request: String,
    /// The tier (`servers:`) of a server-side figure (`cpu_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    pub metric: Metric,
    pub base: f64,
    pub new: f64,
    /// How much worse, as `Metric::worsening` measures it (negative:
    /// better); null when the base is zero.
    pub worsening: Option<f64>,
    pub limit: Option<f64>,
    /// The significance test's p-value: that the new seconds are worse than
    /// the base's shifted by the limit (or, for a change for the better,
    /// better than the base's shifted the other way); null when a side has
    /// fewer than `MIN_SAMPLES` measured seconds (then the limit alone
    /// decides).
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the limit, significantly beyond it (or untestable).
    Regression,
    /// Worse beyond the limit, but not significantly beyond it.
    Noise,
    /// Better beyond the limit, significantly beyond it.
    Improvement,
    Same,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "REGRESSION",
            Verdict::Noise => "noise",
            Verdict::Improvement => "better",
            Verdict::Same => "same",
        }
    }
}

pub fn compare(base: &Results, new: &Results, limits: &Limits) -> Comparison {
    let mut notes = Vec::new();
    if base.record.scenario.text != new.record.scenario.text {
        notes.push(format!(
            "the scenarios differ ({} and {}): figures of requests in both are compared",
            base.record.scenario.file, new.record.scenario.file
        ));
    }
    for (name, r) in [("base", base), ("new", new)] {
        if r.seconds.is_empty() {
            notes.push(format!(
                "{name} ({}) has no request_series.csv (written before autoperf kept one): its changes are judged by the limits alone, untested",
                r.dir.display()
            ));
        }
    }
    let (base_mode, new_mode) = (base.record.mode, new.record.mode);
    let load_of = |l: &LevelRecord| key(l, new_mode);
    let base_levels = comparable(&base.record.levels, base_mode, "base", &mut notes);
    let new_levels = comparable(&new.record.levels, new_mode, "new", &mut notes);
    let mut levels = Vec::new();
    let mut only_in_new = Vec::new();
    for n in &new_levels {
        match base_levels.iter().find(|b| key(b, base_mode) == load_of(n)) {
            Some(b) => levels.push(LevelComparison {
                load: load_of(n),
                base_level: b.level,
                new_level: n.level,
                changes: level_changes(base, b, new, n, limits),
            }),
            None => only_in_new.push(load_of(n)),
        }
    }
    let only_in_base: Vec<String> = base_levels
        .iter()
        .map(|b| key(b, base_mode))
        .filter(|l| !new_levels.iter().any(|n| &load_of(n) == l))
        .collect();
    let (max_throughput, saturation_users) = match (
        &base.record.analysis.capacity,
        &new.record.analysis.capacity,
    ) {
        (Some(b), Some(n)) => {
            let seconds = |r: &Results, users: Option<u32>| -> Vec<f64> {
                r.record
                    .levels
                    .iter()
                    .filter(|l| users.is_some() && l.users == users)
                    .flat_map(|l| r.seconds_of(l.level, ALL_REQUESTS))
                    .map(|s| s.throughput_rps)
                    .collect()
            };
            let change = judge(
                ALL_REQUESTS,
                Metric::Throughput,
                (b.max_throughput_rps, n.max_throughput_rps),
                limits.of(Metric::Throughput),
                (
                    &seconds(base, b.max_throughput_users),
                    &seconds(new, n.max_throughput_users),
                ),
            );
            (Some(change), Some((b.saturation_users, n.saturation_users)))
        }
        _ => (None, None),
    };
    let max_passing_rate = match (&base.record.analysis.rates, &new.record.analysis.rates) {
        (Some(b), Some(n)) => match (b.found.max_passing_rate_rps, n.found.max_passing_rate_rps) {
            (Some(bv), Some(nv)) => {
                let limit = limits
                    .of(Metric::Throughput)
                    .map(|l| l.max(b.rate_precision).max(n.rate_precision));
                Some(judge(
                    ALL_REQUESTS,
                    Metric::Throughput,
                    (bv, nv),
                    limit,
                    (&[], &[]),
                ))
            }
            _ => None,
        },
        _ => None,
    };
    let untested: Vec<&str> = levels
        .iter()
        .filter(|l| l.changes.iter().any(|c| c.p_value.is_none()))
        .map(|l| l.load.as_str())
        .collect();
    if !untested.is_empty() && !base.seconds.is_empty() && !new.seconds.is_empty() {
        notes.push(format!(
            "{} had fewer than {MIN_SAMPLES} measured seconds a side for some figures: those are judged by the limits alone, untested; measure at least {MIN_SAMPLES} s per level for the test",
            untested.join(", ")
        ));
    }
    if levels.is_empty() {
        notes.push(
            "no load was run in both: run both at the same users or rate (capacity --levels) to compare levels"
                .into(),
        );
    }
    let regressions = levels
        .iter()
        .flat_map(|l| &l.changes)
        .chain(&max_throughput)
        .chain(&max_passing_rate)
        .filter(|c| c.verdict == Verdict::Regression)
        .count();
    Comparison {
        base: base.dir.display().to_string(),
        new: new.dir.display().to_string(),
        base_mode: base.record.mode,
        new_mode: new.record.mode,
        limits: limits.clone(),
        alpha: ALPHA,
        levels,
        only_in_base,
        only_in_new,
        max_throughput,
        saturation_users,
        max_passing_rate,
        regressions,
        notes,
    }
}

impl Comparison {
    /// Every regression, worst first within the run's order of levels.
    pub(crate) fn regressions(&self) -> impl Iterator<Item = (&str, &Change)> {
        self.levels
            .iter()
            .flat_map(|l| l.changes.iter().map(move |c| (l.load.as_str(), c)))
            .chain(
                self.max_throughput
                    .iter()
                    .map(|c| ("highest throughput", c)),
            )
            .chain(
                self.max_passing_rate
                    .iter()
                    .map(|c| ("highest rate meeting the SLOs", c)),
            )
            .filter(|(_, c)| c.verdict == Verdict::Regression)
    }

    /// Writes `compare.json` and `compare.html` into `dir`.
    pub fn write(
        &self,
        dir: &Path,
        base: &Results,
        new: &Results,
    ) -> Result<(PathBuf, PathBuf), ResultsError> {
        let at = |path: &Path| {
            let path = path.to_path_buf();
            move |source: std::io::Error| ResultsError {
                path,
                source,
                reading: false,
            }
        };
        std::fs::create_dir_all(dir).map_err(at(dir))?;
        let json = dir.join("compare.json");
        let text = serde_json::to_vec_pretty(self).expect("a comparison serialises");
        std::fs::write(&json, text).map_err(at(&json))?;
        let page = dir.join("compare.html");
        std::fs::write(&page, html::render(self, base, new)).map_err(at(&page))?;
        Ok((json, page))
    }
}

/// Levels a comparison can use: finished and trustworthy ones; the last
/// one run at a load when a load repeats.
fn comparable<'a>(
    levels: &'a [LevelRecord],
    mode: Mode,
    which: &str,
    notes: &mut Vec<String>,
) -> Vec<&'a LevelRecord> {
    let load_of = |l: &LevelRecord| key(l, mode);
    let mut kept: Vec<&LevelRecord> = Vec::new();
    for l in levels {
        if let Some(why) = &l.invalid {
            notes.push(format!(
                "{which} level {} ({}) is left out: {why}",
                l.level,
                load_of(l)
            ));
            continue;
        }
        if l.interrupted {
            notes.push(format!(
                "{which} level {} ({}) is left out: interrupted",
                l.level,
                load_of(l)
            ));
            continue;
        }
        kept.retain(|k| load_of(k) != load_of(l));
        kept.push(l);
    }
    kept
}

/// What a level is matched by: its load, and in a profile (whose levels
/// share one load) the request type it measured.
fn key(l: &LevelRecord, mode: Mode) -> String {
    let load = match (l.users, l.rate_rps) {
        (Some(u), _) => format!("{u} user{}", if u == 1 { "" } else { "s" }),
        (None, Some(r)) => format!("{} req/s", crate::report::svg::num(r)),
        (None, None) => format!("level {}", l.level),
    };
    match (mode, profiled(l)) {
        (Mode::Profile, Some(request)) => format!("{load} · {request}"),
        _ => load,
    }
}

/// The request a profile level measured: the one request type it sent,
/// when the level's record names several.
fn profiled(l: &LevelRecord) -> Option<&str> {
    let mut sent = l.per_request.iter().filter(|(_, r)| r.requests > 0);
    match (sent.next(), sent.next()) {
        (Some((name, _)), None) if l.per_request.len() > 1 => Some(name),
        _ => None,
    }
}

/// The gated figures of every request in both levels, and of the level.
fn level_changes(
    base: &Results,
    b: &LevelRecord,
    new: &Results,
    n: &LevelRecord,
    limits: &Limits,
) -> Vec<Change> {
    let requests: BTreeSet<&str> = b
        .per_request
        .keys()
        .filter(|r| n.per_request.contains_key(*r))
        .map(String::as_str)
        .collect();
    let mut changes = Vec::new();
    for request in std::iter::once(ALL_REQUESTS).chain(requests) {
        for &(metric, limit) in limits.0.iter().filter(|(m, _)| !m.of_tier()) {
            let (Some(bv), Some(nv)) = (figure(b, request, metric), figure(n, request, metric))
            else {
                continue;
            };
            let samples = |r: &Results, level: u32| -> Vec<f64> {
                r.seconds_of(level, request)
                    .filter_map(|s| per_second(s, metric))
                    .collect()
            };
            changes.push(judge(
                request,
                metric,
                (bv, nv),
                Some(limit),
                (&samples(base, b.level), &samples(new, n.level)),
            ));
        }
    }
    for metric in [Metric::CpuMs, Metric::Memory] {
        let Some(limit) = limits.of(metric) else {
            continue;
        };
        for (tier, bu) in &b.servers {
            let Some(nu) = n.servers.get(tier) else {
                continue;
            };
            let figure = |u: &crate::record::TierUsage| match metric {
                Metric::CpuMs => u.cpu_ms_per_request.values().sum::<f64>(),
                _ => u.memory_mean_bytes as f64,
            };
            // A tier that measured none (no CPU; memory from an older
            // agent) has nothing to change.
            if figure(bu) <= 0.0 || (figure(nu) <= 0.0 && metric == Metric::Memory) {
                continue;
            }
            let samples = |r: &Results, level: u32| -> Vec<f64> {
                r.server_seconds_of(level, tier)
                    .filter_map(|s| match metric {
                        Metric::CpuMs => (s.requests > 0.0).then_some(s.cpu_ms_per_request),
                        _ => (s.memory_bytes > 0).then_some(s.memory_bytes as f64),
                    })
                    .collect()
            };
            let mut change = judge(
                ALL_REQUESTS,
                metric,
                (figure(bu), figure(nu)),
                Some(limit),
                (&samples(base, b.level), &samples(new, n.level)),
            );
            change.tier = Some(tier.clone());
            changes.push(change);
        }
    }
    changes
}

impl Change {
    /// Whose figure it is, in a table's first column: `(all)`, a request's
    /// name, `tier web`.
    pub(crate) fn who(&self) -> String {
        match &self.tier {
            Some(tier) => format!("tier {tier}"),
            None if self.request == ALL_REQUESTS => "(all)".into(),
            None => self.request.clone(),
        }
    }
}

/// One figure's verdict: `(base, new)` the level's figures, `seconds` the
/// per-second figures the test compares.
fn judge(
    request: &str,
    metric: Metric,
    (base, new): (f64, f64),
    limit: Option<f64>,
    seconds: (&[f64], &[f64]),
) -> Change {
    let worsening = metric.worsening(base, new);
    let (p_worse, p_better) = match limit {
        Some(l) => (
            rank::p_exceeds(&shifted(metric, seconds.0, l), &badness(metric, seconds.1)),
            rank::p_exceeds(&badness(metric, seconds.1), &shifted(metric, seconds.0, -l)),
        ),
        None => (None, None),
    };
    let significant = |p: Option<f64>| p.is_none_or(|p| p < ALPHA);
    let verdict = match (worsening, limit) {
        (Some(w), Some(l)) if w > l && significant(p_worse) => Verdict::Regression,
        (Some(w), Some(l)) if w > l => Verdict::Noise,
        (Some(w), Some(l)) if w < -l && p_better.is_some_and(|p| p < ALPHA) => Verdict::Improvement,
        _ => Verdict::Same,
    };
    let p_value = if worsening.is_some_and(|w| w < 0.0) {
        p_better
    } else {
        p_worse
    };
    Change {
        request: request.to_string(),
        tier: None,
        metric,
        base,
        new,
        worsening,
        limit,
        p_value,
        verdict,
    }
}

/// Per-second figures oriented so that larger is worse.
fn badness(metric: Metric, values: &[f64]) -> Vec<f64> {
    let sign = if metric == Metric::Throughput {
        -1.0
    } else {
        1.0
    };
    values.iter().map(|v| sign * v).collect()
}

/// The base's per-second figures made worse by the limit `l` (better, for
/// a negative `l`), oriented as `badness`: response times times 1 + l,
/// throughput times 1 − l, the error share plus l.
fn shifted(metric: Metric, values: &[f64], l: f64) -> Vec<f64> {
    let moved: Vec<f64> = values
        .iter()
        .map(|v| match metric {
            Metric::Errors => v + l,
            Metric::Throughput => v * (1.0 - l),
            _ => v * (1.0 + l),
        })
        .collect();
    badness(metric, &moved)
}

/// A level's figure for one request (or `*`).
fn figure(l: &LevelRecord, request: &str, metric: Metric) -> Option<f64> {
    let (requests, errors, throughput, rt) = if request == ALL_REQUESTS {
        (l.requests, l.errors, l.throughput_rps, &l.response_time_ms)
    } else {
        let r = l.per_request.get(request)?;
        (r.requests, r.errors, r.throughput_rps, &r.response_time_ms)
    };
    Some(match metric {
        Metric::Throughput => throughput,
        Metric::Errors if requests > 0 => errors as f64 / requests as f64,
        Metric::Errors => return None,
        // No response timed: no response time to compare.
        _ if requests == errors && rt.max == 0.0 => return None,
        Metric::Mean => rt.mean,
        Metric::P50 => rt.p50,
        Metric::P90 => rt.p90,
        Metric::P95 => rt.p95,
        Metric::P99 => rt.p99,
        Metric::CpuMs | Metric::Memory => return None,
    })
}

/// One measured second's figure; none for a second without the responses
/// it needs.
fn per_second(s: &RequestSecond, metric: Metric) -> Option<f64> {
    let timed = s.requests > 0 && s.p50_ms > 0.0;
    match metric {
        Metric::Throughput => Some(s.throughput_rps),
        Metric::Errors => (s.requests > 0).then(|| s.errors as f64 / s.requests as f64),
        Metric::Mean => timed.then_some(s.mean_ms),
        Metric::P50 => timed.then_some(s.p50_ms),
        Metric::P90 => timed.then_some(s.p90_ms),
        Metric::P95 => timed.then_some(s.p95_ms),
        Metric::P99 => timed.then_some(s.p99_ms),
        Metric::CpuMs | Metric::Memory => None,
    }
}

#[cfg(test)]
mod tests;
