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
    let parse = |text| crate::scenario::threshold::parse_threshold(text, |_| None, &[]).unwrap();
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
fn class_thresholds_read_that_classes_requests() {
    let mut level = level();
    level.per_class.insert(
        "buyer".into(),
        crate::record::ClassRecord {
            share: 0.3,
            users: Some(3),
            requests: 50,
            errors: 1,
            throughput_rps: 5.0,
            response_time_ms: latency(2.0),
            errors_by_kind: BTreeMap::new(),
        },
    );
    let t = |text| {
        crate::scenario::threshold::parse_scoped(text, |_| None, &[], &["buyer", "browser"])
            .unwrap()
    };
    let scenario = scenario(&[]);
    let r = |text| evaluate_one(&scenario, &t(text), &level);
    assert_eq!(r("buyer.p99 < 250ms").actual, Some(200.0));
    assert!(r("buyer.p99 < 250ms").passed);
    assert_eq!(r("buyer.error_rate < 1%").actual, Some(0.02));
    let missing = r("browser.throughput > 1/s");
    assert!(!missing.passed);
    assert_eq!(
        missing.note.as_deref(),
        Some("class `browser` was not measured")
    );
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
