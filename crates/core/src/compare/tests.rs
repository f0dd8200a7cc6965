use std::path::PathBuf;

use super::*;
use crate::record::RunRecord;

fn record(name: &str) -> RunRecord {
    let path = format!(
        "{}/src/report/html/testdata/{name}/run.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Seconds of every level's requests and of `*`: `latency` ms at the median
/// (p99 twice that), `rps` requests per second, each second a little off
/// (a deterministic wobble of ±4%).
fn seconds(r: &RunRecord, latency: f64, rps: f64) -> Vec<RequestSecond> {
    let mut v = Vec::new();
    for l in &r.levels {
        for i in 0..20 {
            let wobble = 1.0 + ((i * 7) % 9) as f64 / 100.0 - 0.04;
            for request in l
                .per_request
                .keys()
                .map(String::as_str)
                .chain([ALL_REQUESTS])
            {
                v.push(RequestSecond {
                    t_s: i as f64,
                    level: l.level,
                    request: request.into(),
                    requests: rps as u64,
                    errors: 0,
                    throughput_rps: rps * wobble,
                    mean_ms: latency * wobble,
                    p50_ms: latency * wobble,
                    p90_ms: 1.5 * latency * wobble,
                    p95_ms: 1.8 * latency * wobble,
                    p99_ms: 2.0 * latency * wobble,
                });
            }
        }
    }
    v
}

fn results(record: RunRecord, seconds: Vec<RequestSecond>) -> Results {
    Results {
        dir: PathBuf::from("x"),
        record,
        seconds,
        server_seconds: Vec::new(),
    }
}

/// The same run, every response time `factor` times as long.
fn slower(mut r: RunRecord, factor: f64) -> RunRecord {
    for l in &mut r.levels {
        let scale = |rt: &mut crate::record::Latency| {
            for v in [
                &mut rt.mean,
                &mut rt.p50,
                &mut rt.p90,
                &mut rt.p95,
                &mut rt.p99,
                &mut rt.max,
            ] {
                *v *= factor;
            }
        };
        scale(&mut l.response_time_ms);
        for pr in l.per_request.values_mut() {
            scale(&mut pr.response_time_ms);
        }
    }
    r
}

#[test]
fn a_run_against_itself_shows_no_regression() {
    let r = record("run");
    let base = results(r.clone(), seconds(&r, 10.0, 100.0));
    let c = compare(
        &base,
        &results(r.clone(), seconds(&r, 10.0, 100.0)),
        &Limits::default(),
    );
    assert_eq!(c.regressions, 0, "{}", render_text(&c));
    assert_eq!(c.levels.len(), 1);
    assert!(c.levels[0]
        .changes
        .iter()
        .all(|ch| ch.verdict == Verdict::Same));
    assert!(render_text(&c).ends_with("no regression\n"));
}

#[test]
fn thirty_percent_slower_everywhere_is_a_regression_naming_request_and_percentile() {
    let r = record("run");
    let base = results(r.clone(), seconds(&r, 10.0, 100.0));
    let new = results(slower(r.clone(), 1.3), seconds(&r, 13.0, 100.0));
    let c = compare(
        &base,
        &new,
        &Limits::parse("p99=10%,throughput=5%").unwrap(),
    );
    let text = render_text(&c);
    // p99 of `cpu` and of all requests; throughput held.
    assert_eq!(c.regressions, 2, "{text}");
    assert!(text.contains("request `cpu`: p99"), "{text}");
    assert!(text.contains("+30.0%, limit +10%, p < 0.001"), "{text}");
    let throughput = c.levels[0]
        .changes
        .iter()
        .find(|ch| ch.metric == Metric::Throughput)
        .unwrap();
    assert_eq!(throughput.verdict, Verdict::Same);
}

#[test]
fn a_change_beyond_the_limit_within_the_seconds_noise_is_not_a_regression() {
    // The level's p99 moved 30% (a few slow outliers), but second by second
    // the two runs are alike.
    let r = record("run");
    let base = results(r.clone(), seconds(&r, 10.0, 100.0));
    let new = results(slower(r.clone(), 1.3), seconds(&r, 10.0, 100.0));
    let c = compare(&base, &new, &Limits::parse("p99=10%").unwrap());
    assert_eq!(c.regressions, 0, "{}", render_text(&c));
    assert!(c.levels[0]
        .changes
        .iter()
        .all(|ch| ch.verdict == Verdict::Noise));
}

#[test]
fn without_seconds_the_limit_alone_decides_and_says_so() {
    let r = record("run");
    let c = compare(
        &results(r.clone(), Vec::new()),
        &results(slower(r, 1.3), Vec::new()),
        &Limits::parse("p50=10%").unwrap(),
    );
    assert_eq!(c.regressions, 2);
    assert!(
        c.notes.iter().any(|n| n.contains("untested")),
        "{:?}",
        c.notes
    );
    assert!(render_text(&c).contains("untested: too few seconds"));
}

#[test]
fn capacity_runs_match_levels_by_users_and_compare_their_highest_throughput() {
    let r = record("capacity");
    let mut other = r.clone();
    other.levels.retain(|l| l.users != Some(65));
    if let Some(a) = other.analysis.capacity.as_mut() {
        a.max_throughput_rps *= 0.8;
    }
    let c = compare(
        &results(r.clone(), seconds(&r, 10.0, 100.0)),
        &results(other.clone(), seconds(&other, 10.0, 80.0)),
        &Limits::default(),
    );
    assert_eq!(c.levels.len(), r.levels.len() - 1);
    assert_eq!(c.only_in_base, vec!["65 users".to_string()]);
    let max = c.max_throughput.as_ref().unwrap();
    assert_eq!(max.verdict, Verdict::Regression, "{}", render_text(&c));
    let page = render_html(
        &c,
        &results(r.clone(), seconds(&r, 10.0, 100.0)),
        &results(other.clone(), seconds(&other, 10.0, 80.0)),
    );
    assert!(
        page.contains("Against load") && page.contains("<svg"),
        "charts drawn"
    );
    assert!(page.contains("<p id=\"saturation\">Saturation: base "));
}

#[test]
fn a_profiles_levels_are_matched_by_the_request_they_measured() {
    let r = record("profile");
    let c = compare(
        &results(r.clone(), seconds(&r, 10.0, 100.0)),
        &results(r.clone(), seconds(&r, 10.0, 100.0)),
        &Limits::default(),
    );
    let loads: Vec<&str> = c.levels.iter().map(|l| l.load.as_str()).collect();
    assert_eq!(
        loads,
        [
            "4 users · cpu",
            "4 users · db",
            "4 users · bytes",
            "4 users · lock"
        ]
    );
    assert_eq!(c.regressions, 0);
}

#[test]
fn open_searches_compare_their_highest_passing_rate_within_their_precision() {
    use crate::record::{RateAnalysis, RateFound};
    let with_rate = |rate: f64| {
        let mut r = record("run");
        r.analysis.rates = Some(RateAnalysis {
            found: RateFound {
                max_passing_rate_rps: Some(rate),
                ..Default::default()
            },
            min_achieved: 0.95,
            rate_precision: 0.08,
            rates_chosen: Vec::new(),
            series: Vec::new(),
            demand: Vec::new(),
        });
        results(r, Vec::new())
    };
    let limits = Limits::default();
    // 6% lower: beyond the 5% throughput limit, within the 8% precision.
    let c = compare(&with_rate(100.0), &with_rate(94.0), &limits);
    assert_eq!(c.max_passing_rate.as_ref().unwrap().verdict, Verdict::Same);
    let c = compare(&with_rate(100.0), &with_rate(80.0), &limits);
    assert_eq!(
        c.max_passing_rate.as_ref().unwrap().verdict,
        Verdict::Regression
    );
    assert!(render_text(&c)
        .contains("highest rate meeting the SLOs, all requests: throughput 100.0 → 80.0"));
}

/// Each tier's intervals of every level: `cpu_ms` a request, each a little
/// off (±4%, as `seconds`).
fn server_seconds(r: &RunRecord, cpu_ms: f64) -> Vec<crate::profile::ServerSecond> {
    let mut v = Vec::new();
    for l in &r.levels {
        for tier in l.servers.keys() {
            for i in 0..20 {
                let wobble = 1.0 + ((i * 7) % 9) as f64 / 100.0 - 0.04;
                v.push(crate::profile::ServerSecond {
                    window_s: i as f64 + 1.0,
                    level: l.level,
                    tier: tier.clone(),
                    requests: 100.0,
                    cpu_ms_per_request: cpu_ms * wobble,
                    cpu_util_cores: 0.1 * cpu_ms * wobble,
                    memory_bytes: 0,
                });
            }
        }
    }
    v
}

/// The same run costing 30% more CPU a request at every tier: a cost
/// regression named by tier, while every latency and the throughput stay
/// the same; against itself, none.
#[test]
fn thirty_percent_more_cpu_a_request_is_a_cost_regression_named_by_tier() {
    let r = record("run");
    let costlier = {
        let mut r = r.clone();
        for l in &mut r.levels {
            for usage in l.servers.values_mut() {
                usage
                    .cpu_ms_per_request
                    .values_mut()
                    .for_each(|ms| *ms *= 1.3);
            }
        }
        r
    };
    let base_cost: f64 = r.levels[0].servers["web"].cpu_ms_per_request.values().sum();
    let with = |record: &RunRecord, factor: f64| Results {
        server_seconds: server_seconds(record, base_cost * factor),
        ..results(record.clone(), seconds(record, 10.0, 100.0))
    };
    let c = compare(&with(&r, 1.0), &with(&costlier, 1.3), &Limits::default());
    let text = render_text(&c);
    // db's cost is 0 in the test data: nothing to compare there.
    assert_eq!(c.regressions, 1, "{text}");
    assert!(!text.contains("tier db"), "{text}");
    let web = c.levels[0]
        .changes
        .iter()
        .find(|ch| ch.tier.as_deref() == Some("web"))
        .unwrap();
    assert_eq!(
        (web.metric, web.verdict),
        (Metric::CpuMs, Verdict::Regression)
    );
    assert!(web.p_value.is_some_and(|p| p < ALPHA), "{web:?}");
    assert!(text.contains("tier `web`: cpu_ms"), "{text}");
    let c = compare(&with(&r, 1.0), &with(&r, 1.0), &Limits::default());
    assert_eq!(c.regressions, 0, "{}", render_text(&c));
}
