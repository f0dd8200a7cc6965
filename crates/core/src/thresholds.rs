//! Threshold evaluation: the scenario's SLOs (`p99 < 250ms`,
//! `login.error_rate < 1%`, `throughput > 100/s`) checked against one level
//! of the run record. Only figures the record holds are compared; a
//! percentile it does not keep (p75, p99.9) fails as "not measured" rather
//! than being guessed from a neighbour. A level (or request) without one
//! successful response fails every threshold: latency is measured on
//! successful responses, so with none it would read 0 and pass.

use crate::record::{Latency, LevelRecord, RunRecord, ThresholdResult, Unit};
use crate::scenario::{Comparison, Metric, Scenario, Threshold};

/// Evaluates every threshold of `scenario` against `level`, in the order
/// they are written.
pub(crate) fn evaluate(scenario: &Scenario, level: &LevelRecord) -> Vec<ThresholdResult> {
    scenario
        .thresholds
        .iter()
        .map(|t| evaluate_one(scenario, t, level))
        .collect()
}

/// Checks the scenario's thresholds against a run's (first) level and keeps
/// the results in its analysis; true when every one passed (and so the run
/// should exit 0).
pub fn check_run(scenario: &Scenario, record: &mut RunRecord) -> bool {
    let results = match record.levels.first() {
        Some(level) => evaluate(scenario, level),
        None => Vec::new(),
    };
    let passed = all_passed(&results);
    if !results.is_empty() {
        record.analysis.thresholds = Some(results);
    }
    passed
}

/// True when every result passed (and so the run should exit 0).
pub(crate) fn all_passed(results: &[ThresholdResult]) -> bool {
    results.iter().all(|r| r.passed)
}

/// The figures a threshold can be read from: the whole level or one request.
struct Figures<'a> {
    requests: u64,
    errors: u64,
    throughput_rps: f64,
    latency: &'a Latency,
    /// Checks passed and run.
    checks: (u64, u64),
}

fn checks<'a>(requests: impl Iterator<Item = &'a crate::record::PerRequestRecord>) -> (u64, u64) {
    requests
        .flat_map(|r| r.checks.values())
        .fold((0, 0), |(p, n), c| (p + c.passed, n + c.passed + c.failed))
}

fn evaluate_one(scenario: &Scenario, t: &Threshold, level: &LevelRecord) -> ThresholdResult {
    let unit = match t.metric {
        Metric::ErrorRate | Metric::Checks | Metric::Util => Unit::Fraction,
        Metric::Throughput => Unit::PerSecond,
        Metric::Memory => Unit::Bytes,
        Metric::Promql => Unit::Value,
        Metric::Lag => Unit::Records,
        Metric::LagTrend => Unit::RecordsPerSecond,
        _ => Unit::Ms,
    };
    if let Some(p) = &t.promql {
        return evaluate_promql(t, &p.query, level);
    }
    if let Some(group) = &t.group {
        return evaluate_lag(t, group, level);
    }
    if let Some(tier) = &t.tier {
        return evaluate_tier(t, tier, level, unit);
    }
    let not_measured = |note: String| ThresholdResult {
        source: t.source.clone(),
        passed: false,
        actual: None,
        bound: t.bound,
        unit,
        note: Some(note),
    };
    let figures = match (t.request, &t.class) {
        (None, Some(class)) => match level.per_class.get(class) {
            Some(c) => Figures {
                requests: c.requests,
                errors: c.errors,
                throughput_rps: c.throughput_rps,
                latency: &c.response_time_ms,
                checks: (0, 0),
            },
            None => return not_measured(format!("class `{class}` was not measured")),
        },
        (None, None) => Figures {
            requests: level.requests,
            errors: level.errors,
            throughput_rps: level.throughput_rps,
            latency: &level.response_time_ms,
            checks: checks(level.per_request.values()),
        },
        (Some(id), _) => {
            let name = &scenario.request(id).name;
            match level.per_request.get(name) {
                Some(r) => Figures {
                    requests: r.requests,
                    errors: r.errors,
                    throughput_rps: r.throughput_rps,
                    latency: &r.response_time_ms,
                    checks: checks(std::iter::once(r)),
                },
                None => return not_measured(format!("request `{name}` was not measured")),
            }
        }
    };
    let no_success = (figures.requests <= figures.errors).then(|| {
        let what = if figures.requests == 0 {
            "no request completed"
        } else {
            "no successful requests: every one failed"
        };
        match (t.request, &t.class) {
            (Some(id), _) => format!("{what} (`{}`)", scenario.request(id).name),
            (None, Some(class)) => format!("{what} (class `{class}`)"),
            (None, None) => what.to_string(),
        }
    });
    match &no_success {
        // The error rate of a level where all failed is a measurement (100%),
        // still never a pass; nothing else is measured there.
        Some(_) if t.metric == Metric::ErrorRate && figures.requests > 0 => {}
        Some(note) => return not_measured(note.clone()),
        None => {}
    }
    let actual = match t.metric {
        Metric::Mean => figures.latency.mean,
        Metric::Max => figures.latency.max,
        Metric::ErrorRate => figures.errors as f64 / figures.requests as f64,
        Metric::Checks => match figures.checks {
            (_, 0) => return not_measured("no check ran (`check:` on a request)".into()),
            (passed, all) => passed as f64 / all as f64,
        },
        Metric::Throughput => figures.throughput_rps,
        // Parsed only with a tier, evaluated above.
        Metric::CpuMs | Metric::Util | Metric::Memory => {
            return not_measured("a tier's metric without a tier".into())
        }
        Metric::Promql => return not_measured("a PromQL threshold without its query".into()),
        Metric::Lag | Metric::LagTrend => {
            return not_measured("a lag threshold without its consumer group".into())
        }
        Metric::Percentile(per_mille) => match percentile(figures.latency, per_mille) {
            Some(v) => v,
            None => {
                return not_measured(format!(
                    "p{} is not measured: the record keeps p50, p90, p95, p99 and max",
                    per_mille_label(per_mille)
                ))
            }
        },
    };
    ThresholdResult {
        source: t.source.clone(),
        passed: no_success.is_none() && t.op.holds(actual, t.bound),
        actual: Some(actual),
        bound: t.bound,
        unit,
        note: no_success,
    }
}

/// A tier's threshold (`web.cpu_ms < 5`, `web.util < 60%`) against what
/// its agent measured in `level`. CPU per request needs requests that
/// completed; without the tier's figures (no agent reading in the level)
/// it fails as not measured, never a pass.
fn evaluate_tier(t: &Threshold, tier: &str, level: &LevelRecord, unit: Unit) -> ThresholdResult {
    let verdict = |actual: Option<f64>, note: Option<String>| ThresholdResult {
        source: t.source.clone(),
        passed: note.is_none() && actual.is_some_and(|v| t.op.holds(v, t.bound)),
        actual,
        bound: t.bound,
        unit,
        note,
    };
    let Some(usage) = level.servers.get(tier) else {
        return verdict(
            None,
            Some(format!(
                "tier `{tier}` was not measured: no agent readings in this level"
            )),
        );
    };
    match t.metric {
        Metric::CpuMs if level.requests == 0 => verdict(None, Some("no request completed".into())),
        Metric::CpuMs => verdict(Some(usage.cpu_ms_per_request.values().sum()), None),
        Metric::Memory if usage.unmeasured.iter().any(|c| c == "memory") => verdict(
            None,
            Some(format!(
                "tier `{tier}`'s memory was not measured: its cgroups have no memory controller on {}",
                usage.agent
            )),
        ),
        // Agents before memory was sent report none: not a measurement.
        Metric::Memory if usage.memory_max_bytes == 0 => verdict(
            None,
            Some(format!(
                "tier `{tier}`'s memory was not measured (an older agent?)"
            )),
        ),
        Metric::Memory => verdict(Some(usage.memory_max_bytes as f64), None),
        _ => verdict(Some(usage.cpu_util_cores / usage.cores.max(1) as f64), None),
    }
}

/// A PromQL threshold against its query's points over the level: the
/// highest must stay below the bound, the lowest above it. A query not
/// read in the level fails as not measured.
fn evaluate_promql(t: &Threshold, query: &str, level: &LevelRecord) -> ThresholdResult {
    let figure = level.promql.get(query);
    let actual = figure.map(|f| match t.op {
        Comparison::Less | Comparison::LessOrEqual => f.max,
        Comparison::Greater | Comparison::GreaterOrEqual => f.min,
    });
    ThresholdResult {
        source: t.source.clone(),
        passed: actual.is_some_and(|v| t.op.holds(v, t.bound)),
        actual,
        bound: t.bound,
        unit: Unit::Value,
        note: figure.is_none().then(|| {
            "its query was not read in this level (Prometheus did not answer)".to_string()
        }),
    }
}

/// A lag threshold against its consumer group's figure over the level:
/// the trend (records/s) or the last reading (records). A group not read
/// in the level fails as not measured.
fn evaluate_lag(t: &Threshold, group: &str, level: &LevelRecord) -> ThresholdResult {
    let figure = level.kafka_lag.get(group);
    let (actual, unit) = match t.metric {
        Metric::LagTrend => (figure.map(|f| f.trend_rps), Unit::RecordsPerSecond),
        _ => (figure.map(|f| f.last as f64), Unit::Records),
    };
    ThresholdResult {
        source: t.source.clone(),
        passed: actual.is_some_and(|v| t.op.holds(v, t.bound)),
        actual,
        bound: t.bound,
        unit,
        note: match figure {
            None => Some(format!(
                "consumer group `{group}`'s lag was not read in this level (the warnings say why)"
            )),
            // How far the trend may be from the group's long-run one.
            Some(f) if t.metric == Metric::LagTrend => f.trend_ci95_rps.map(|ci| {
                format!(
                    "95% interval ±{} over {} readings",
                    Unit::RecordsPerSecond.format(ci),
                    f.readings
                )
            }),
            Some(_) => None,
        },
    }
}

/// The percentiles the record keeps (p100 is the maximum).
fn percentile(l: &Latency, per_mille: u16) -> Option<f64> {
    match per_mille {
        500 => Some(l.p50),
        900 => Some(l.p90),
        950 => Some(l.p95),
        990 => Some(l.p99),
        1000 => Some(l.max),
        _ => None,
    }
}

fn per_mille_label(per_mille: u16) -> String {
    if per_mille.is_multiple_of(10) {
        format!("{}", per_mille / 10)
    } else {
        format!("{}.{}", per_mille / 10, per_mille % 10)
    }
}

impl std::fmt::Display for ThresholdResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.passed { "pass" } else { "FAIL" };
        match (self.actual, &self.note) {
            (Some(v), None) => write!(
                f,
                "{verdict}  {}  (measured {})",
                self.source,
                self.unit.format(v)
            ),
            (Some(v), Some(note)) => write!(
                f,
                "{verdict}  {}  (measured {}; {note})",
                self.source,
                self.unit.format(v)
            ),
            (None, Some(note)) => write!(f, "{verdict}  {}  ({note})", self.source),
            (None, None) => write!(f, "{verdict}  {}", self.source),
        }
    }
}

#[cfg(test)]
mod tests;
