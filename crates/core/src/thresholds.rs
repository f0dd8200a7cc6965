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
    let figures = match t.request {
        None => Figures {
            requests: level.requests,
            errors: level.errors,
            throughput_rps: level.throughput_rps,
            latency: &level.response_time_ms,
            checks: checks(level.per_request.values()),
        },
        Some(id) => {
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
        match t.request {
            None => what.to_string(),
            Some(id) => format!("{what} (`{}`)", scenario.request(id).name),
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
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::record::{ClientRecord, LittleCheck, PerRequestRecord, ThinkRecord, TimerLateness};

    fn latency(scale: f64) -> Latency {
        Latency {
            mean: 10.0 * scale,
            p50: 8.0 * scale,
            p90: 20.0 * scale,
            p95: 30.0 * scale,
            p99: 100.0 * scale,
            max: 400.0 * scale,
        }
    }

    fn level() -> LevelRecord {
        let mut per_request = BTreeMap::new();
        per_request.insert(
            "login".to_string(),
            PerRequestRecord {
                requests: 100,
                errors: 5,
                throughput_rps: 10.0,
                response_time_ms: latency(3.0),
                errors_by_kind: BTreeMap::new(),
                checks: BTreeMap::new(),
                redirects: 0,
                skipped: 0,
                script_failures: Default::default(),
                retries: 0,
                body_bytes: 0,
                decoded_bytes: 0,
            },
        );
        per_request.insert(
            "home".to_string(),
            PerRequestRecord {
                requests: 900,
                errors: 0,
                throughput_rps: 90.0,
                response_time_ms: latency(1.0),
                errors_by_kind: BTreeMap::new(),
                checks: BTreeMap::new(),
                redirects: 0,
                skipped: 0,
                script_failures: Default::default(),
                retries: 0,
                body_bytes: 0,
                decoded_bytes: 0,
            },
        );
        LevelRecord {
            level: 1,
            users: Some(10),
            rate_rps: None,
            duration_s: 10.0,
            warmup_s: 2.0,
            started_at: "2026-01-01T00:00:00Z".into(),
            requests: 1000,
            errors: 5,
            errors_by_kind: BTreeMap::new(),
            sessions: 100,
            throughput_rps: 100.0,
            response_time_ms: latency(1.0),
            ci95: None,
            think_time_s: ThinkRecord {
                configured: 0.1,
                achieved: 0.1,
                measured: 0.1,
            },
            client_bottleneck: false,
            steady_state: true,
            interrupted: false,
            invalid: None,
            incomplete: None,
            workers: Vec::new(),
            little: LittleCheck {
                users: 10.0,
                x_r_plus_z: 10.0,
                relative_gap: 0.0,
                cycles: 100.0,
            },
            client: ClientRecord {
                cpu_util_cores: 0.1,
                cores: 2,
                timer_lateness_ms: TimerLateness {
                    p50: 0.1,
                    p99: 0.2,
                    max: 0.3,
                },
                connect_ms: 0.1,
                connects: 10,
                arrival_lateness_ms: None,
                tls_handshake_ms: None,
                tls_handshakes: None,
                tls_resumed: None,
                http2_connections: None,
                cpu_quota: None,
            },
            achieved_rate_rps: None,
            service_time_ms: None,
            arrivals: None,
            per_request,
            servers: BTreeMap::new(),
            promql: BTreeMap::new(),
            kafka_lag: BTreeMap::new(),
            per_class: BTreeMap::new(),
            capacity: None,
            rate_search: None,
        }
    }

    #[test]
    fn a_lag_threshold_judges_its_groups_trend_or_last_reading_and_never_passes_unread() {
        let parse =
            |text| crate::scenario::threshold::parse_threshold(text, |_| None, &[]).unwrap();
        let mut level = level();
        level.kafka_lag.insert(
            "app".into(),
            crate::record::LagFigure {
                trend_rps: 250.0,
                trend_ci95_rps: Some(40.0),
                last: 4000,
                max: 4100,
                readings: 10,
                unread: 0,
            },
        );
        let s = scenario(&[]);
        let result = evaluate_one(&s, &parse("lag_trend(app) < 100/s"), &level);
        assert!(!result.passed);
        assert_eq!(
            (result.actual, result.unit),
            (Some(250.0), Unit::RecordsPerSecond)
        );
        assert!(evaluate_one(&s, &parse("lag_trend(app) < 300/s"), &level).passed);
        let result = evaluate_one(&s, &parse("lag(app) < 10000"), &level);
        assert!(result.passed);
        assert_eq!((result.actual, result.unit), (Some(4000.0), Unit::Records));
        // A group not read in the level is not measured: it fails.
        let result = evaluate_one(&s, &parse("lag_trend(other) < 1000000/s"), &level);
        assert!(!result.passed && result.actual.is_none());
        assert!(result.note.unwrap().contains("`other`"));
    }

    fn scenario(thresholds: &[&str]) -> Scenario {
        let mut text = String::from(
            "target: {base_url: \"http://127.0.0.1:1\"}\nrequests:\n  home: {path: \"/\"}\n  login: {path: \"/login\"}\nsession: {start: home, transitions: {home: {login: 0.5}}}\nthresholds:\n",
        );
        for t in thresholds {
            text.push_str(&format!("  - \"{t}\"\n"));
        }
        crate::scenario::parse(&text, Path::new("t.yaml")).expect("valid scenario")
    }

    fn run(thresholds: &[&str]) -> Vec<ThresholdResult> {
        evaluate(&scenario(thresholds), &level())
    }

    #[test]
    fn global_thresholds_read_the_level() {
        let r = run(&[
            "p99 < 250ms",
            "p95 < 20ms",
            "mean <= 10ms",
            "max < 1s",
            "p50 > 1ms",
            "p90 < 2s",
        ]);
        let passed: Vec<bool> = r.iter().map(|r| r.passed).collect();
        assert_eq!(passed, [true, false, true, true, true, true]);
        assert_eq!(r[0].actual, Some(100.0));
        assert_eq!(r[0].bound, 250.0);
        assert_eq!(r[0].unit, Unit::Ms);
        assert_eq!(r[1].actual, Some(30.0));
    }

    #[test]
    fn error_rate_and_throughput() {
        let r = run(&["error_rate < 1%", "error_rate < 0.1%", "throughput > 50/s"]);
        assert!(r[0].passed);
        assert_eq!(r[0].actual, Some(0.005));
        assert_eq!(r[0].unit, Unit::Fraction);
        assert!(!r[1].passed);
        assert!(r[2].passed);
        assert_eq!(r[2].unit, Unit::PerSecond);
    }

    #[test]
    fn per_request_thresholds_read_that_request() {
        let r = run(&[
            "login.p99 < 250ms",
            "home.p99 < 250ms",
            "login.error_rate < 1%",
        ]);
        assert!(!r[0].passed, "login p99 is 300 ms");
        assert_eq!(r[0].actual, Some(300.0));
        assert!(r[1].passed);
        assert!(!r[2].passed, "login error rate is 5%");
        assert_eq!(r[2].actual, Some(0.05));
    }

    #[test]
    fn nothing_successful_passes_nothing() {
        let s = scenario(&[
            "p99 < 250ms",
            "mean < 100ms",
            "max < 500ms",
            "error_rate > 50%",
            "throughput < 1000/s",
            "home.p99 < 1s",
        ]);
        let mut dead = level();
        dead.errors = dead.requests;
        for r in dead.per_request.values_mut() {
            r.errors = r.requests;
        }
        dead.response_time_ms = latency(0.0);
        let r = evaluate(&s, &dead);
        for r in &r {
            assert!(!r.passed, "{r}");
            assert!(r.to_string().contains("no successful requests"), "{r}");
        }
        assert_eq!(r[0].actual, None);
        assert_eq!(r[3].actual, Some(1.0), "the error rate is still reported");
        assert!(r[5].to_string().contains("(`home`)"), "{}", r[5]);
        // No request at all (`--duration 0s`).
        let mut empty = level();
        empty.requests = 0;
        empty.errors = 0;
        for r in empty.per_request.values_mut() {
            r.requests = 0;
            r.errors = 0;
        }
        let r = evaluate(&s, &empty);
        assert!(r.iter().all(|r| !r.passed));
        assert!(
            r[0].to_string().contains("no request completed"),
            "{}",
            r[0]
        );
    }

    #[test]
    fn unkept_percentiles_fail_as_not_measured() {
        let r = run(&["p99.9 < 10s", "p75 < 10s"]);
        for r in &r {
            assert!(!r.passed);
            assert_eq!(r.actual, None);
            assert!(r.note.as_deref().unwrap().contains("not measured"));
        }
        assert!(
            r[0].to_string().contains("p99.9 is not measured"),
            "{}",
            r[0]
        );
        assert!(!all_passed(&r));
    }

    #[test]
    fn display_shows_verdict_and_value() {
        let r = run(&["p99 < 250ms", "error_rate < 1%"]);
        assert_eq!(r[0].to_string(), "pass  p99 < 250ms  (measured 100.000 ms)");
        assert_eq!(r[1].to_string(), "pass  error_rate < 1%  (measured 0.50%)");
    }
}
