use super::generator::GeneratorLimit;
use super::*;

fn slo(source: &str, actual: f64, bound: f64, unit: Unit) -> ThresholdResult {
    ThresholdResult {
        source: source.into(),
        passed: false,
        actual: Some(actual),
        bound,
        unit,
        note: None,
    }
}

#[test]
fn late_arrivals_explain_only_what_their_lateness_can_add() {
    let late = GeneratorLimit::Late {
        p99_ms: 15.0,
        max_ms: 40.0,
    };
    let p99 = |actual| slo("p99 < 100ms", actual, 100.0, Unit::Ms);
    // 40 ms of lateness can push a 90 ms p99 past 100 ms, not 5 s.
    assert!(late.explains(&p99(120.0), 250.0, 250.0, 10.0));
    assert!(!late.explains(&p99(5000.0), 250.0, 250.0, 10.0));
    // Nor a latency under a lower bound.
    assert!(!late.explains(&slo("p50 > 5ms", 2.0, 5.0, Unit::Ms), 250.0, 250.0, 10.0));
    // Arrivals late by 40 ms in 10 s take at most 0.4% of the rate.
    let achieved = |actual| slo("achieved >= 95% of the rate", actual, 0.95, Unit::Fraction);
    assert!(late.explains(&achieved(0.947), 400.0, 378.8, 10.0));
    assert!(!late.explains(&achieved(0.57), 400.0, 227.0, 10.0));
    // What it cannot bound, it does not clear; a spent CPU explains all.
    let errors = slo("error_rate < 1%", 0.2, 0.01, Unit::Fraction);
    assert!(late.explains(&errors, 400.0, 227.0, 10.0));
    let cpu = GeneratorLimit::Cpu {
        used: 1.98,
        cores: 2.0,
    };
    assert!(cpu.explains(&p99(5000.0), 400.0, 227.0, 10.0));
    assert!(cpu.explains(&achieved(0.57), 400.0, 227.0, 10.0));
}

#[test]
fn a_throttled_generator_explains_a_period_more_than_its_lateness() {
    // Seen under a 0.1-core quota: arrivals late by at most 40 ms, a p99
    // of 139 ms against 50 ms: the responses waited for the quota too.
    let throttled = GeneratorLimit::Throttled {
        quota_cores: 0.1,
        periods: 30,
        throttled_periods: 2,
        period_ms: 100.0,
        held_ms: 180.0,
        late_max_ms: 40.0,
    };
    let p99 = |actual| slo("p99 < 50ms", actual, 50.0, Unit::Ms);
    assert!(throttled.explains(&p99(139.0), 50.0, 50.0, 3.0));
    assert!(GeneratorLimit::Late {
        p99_ms: 12.0,
        max_ms: 40.0
    }
    .explains(&p99(60.0), 50.0, 50.0, 3.0));
    assert!(!GeneratorLimit::Late {
        p99_ms: 12.0,
        max_ms: 40.0
    }
    .explains(&p99(139.0), 50.0, 50.0, 3.0));
    // Not a system seconds past its SLO, nor a tier's CPU or a lag.
    assert!(!throttled.explains(&p99(2000.0), 50.0, 50.0, 3.0));
    let tier = slo("web.util < 60%", 0.9, 0.6, Unit::Fraction);
    assert!(tier.of_tier());
    assert!(!throttled.explains(&tier, 50.0, 50.0, 3.0));
    let why = throttled.why();
    assert!(
        why.contains("quota (0.1 cores) held it back in 2 of 30 periods"),
        "{why}"
    );
    // Held 180 ms, late 40 ms at most, in 3 s at 400/s: at most 29
    // arrivals of 1,200 lost, 2.4% — a 75% delivery is the system's.
    let achieved = slo("achieved >= 95% of the rate", 0.75, 0.95, Unit::Fraction);
    assert!(!throttled.explains(&achieved, 400.0, 300.0, 3.0));
    let close = slo("achieved >= 95% of the rate", 0.94, 0.95, Unit::Fraction);
    assert!(throttled.explains(&close, 400.0, 376.0, 3.0));
}

/// Poisson arrivals offer the rate give or take √n: a level whose system
/// served every arrival due is judged against those, not the nominal rate
/// (seen on Kafka: 1,897 due at 200/s over 10 s, 1,896 acknowledged,
/// failed "achieved ≥ 95%" at 94.8% of 200/s).
#[test]
fn achieved_is_judged_against_the_arrivals_due() {
    let text = "target: {base_url: \"http://127.0.0.1:1\"}\narrivals: {rate: 200/s}\nrequests:\n  a: {path: /}\n";
    let scenario = crate::scenario::parse(text, std::path::Path::new("s.yaml")).unwrap();
    let controller = OpenCapacityController::new(Arc::new(scenario), None);
    let run: crate::record::RunRecord =
        serde_json::from_str(include_str!("../../report/html/testdata/open-lag/run.json")).unwrap();
    let mut level = run.levels[0].clone();
    level.rate_rps = Some(200.0);
    (level.requests, level.errors, level.duration_s) = (1896, 0, 10.002);
    level.arrivals = Some(crate::record::ArrivalsRecord {
        due: 1897,
        queued: 0,
        unstarted: 0,
        max_in_flight: 10_000,
    });
    let (verdict, judged) = controller.judge(&level);
    let achieved = judged.slos.last().unwrap();
    assert!(achieved.passed, "{achieved:?}");
    assert!(
        (achieved.actual.unwrap() - 0.9995).abs() < 1e-3,
        "{achieved:?}"
    );
    assert!(matches!(verdict, RateVerdict::Pass), "{verdict:?}");
    // A system that served a tenth fewer than were due still fails.
    level.requests = 1700;
    let (verdict, _) = controller.judge(&level);
    assert!(matches!(verdict, RateVerdict::Fail { .. }), "{verdict:?}");
    // A generator behind its schedule counts only the arrivals it got
    // to: its own count cannot clear it. Out of CPU, 1,700 of 1,700
    // "due" is the generator's limit, against the nominal rate.
    level.arrivals.as_mut().unwrap().due = 1700;
    level.client.cpu_util_cores = level.client.cores.max(1) as f64;
    let (verdict, judged) = controller.judge(&level);
    assert!(
        matches!(verdict, RateVerdict::GeneratorBound { .. }),
        "{verdict:?} {:?}",
        judged.slos.last()
    );
    level.client.cpu_util_cores = 0.1;
    // Without a count of arrivals due, the nominal rate.
    (level.requests, level.arrivals) = (1896, None);
    let (verdict, _) = controller.judge(&level);
    assert!(matches!(verdict, RateVerdict::Fail { .. }), "{verdict:?}");
}
