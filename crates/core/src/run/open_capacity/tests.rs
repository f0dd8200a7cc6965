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
        cores: 2,
    };
    assert!(cpu.explains(&p99(5000.0), 400.0, 227.0, 10.0));
    assert!(cpu.explains(&achieved(0.57), 400.0, 227.0, 10.0));
}
