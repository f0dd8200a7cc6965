//! The closed-workload engine against real servers on loopback: the
//! testbed for Little's law and the request mix, raw servers that close or
//! hang for the error paths. Every run is bounded by its own duration.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoperf_core::engine::{run_level, Level, LevelPlan, LoadSources, StopSignal, Workload};
use autoperf_core::measure::TickSink;
use autoperf_core::record::LevelRecord;
use autoperf_core::scenario::Scenario;
use support::Misbehaviour;

fn run(scenario: &Arc<Scenario>, users: u32, warmup: u64, secs: u64) -> LevelRecord {
    let plan = LevelPlan {
        index: 1,
        users,
        ramp: None,
        warmup: Duration::from_secs(warmup),
        duration: Duration::from_secs(secs),
        workload: Workload::Session,
    };
    let mut sinks: [&mut dyn TickSink; 0] = [];
    let level = Level::Closed(plan);
    let level = run_level(
        scenario,
        &level,
        &LoadSources::default(),
        &mut sinks,
        &StopSignal::default(),
    )
    .unwrap();
    LevelRecord::from_run(&level, scenario)
}

#[test]
fn below_saturation_levels_obey_littles_law_and_keep_think_time() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("little");
    let s = support::scenario(
        &dir,
        "little",
        &format!(
            r#"
name: little
target: {{base_url: "{}"}}
think_time: 200ms
requests:
  cpu: {{path: "/cpu?ms=0.5"}}
  sleep: {{path: "/sleep?ms=5"}}
session:
  start: cpu
  transitions:
    cpu: {{sleep: 0.5, cpu: 0.3}}
    sleep: {{cpu: 0.6}}
"#,
            tb.web_url
        ),
    );
    let level = run(&s, 40, 2, 10);
    eprintln!("{level:#?}");
    assert_eq!(level.errors, 0);
    assert!(level.requests > 1000, "{} requests", level.requests);
    // Little's law with the think time the users actually took.
    assert!(
        level.little.relative_gap < 0.03,
        "N = {} but X(R+Z) = {}",
        level.little.users,
        level.little.x_r_plus_z
    );
    // Achieved think time N/X − R within 5% of the configured 200 ms.
    let z = &level.think_time_s;
    assert!(
        (z.achieved - z.configured).abs() / z.configured < 0.05,
        "achieved {} vs configured {}",
        z.achieved,
        z.configured
    );
    assert!(!level.client_bottleneck);
    // Ten seconds are ten batches: each figure has its interval, a few
    // percent of the throughput (40 users' cycles of about 0.2 s, some
    // 2,000 requests), neither zero nor the figure itself.
    let ci = level.ci95.as_ref().expect("10 batches give intervals");
    assert_eq!((ci.batches, ci.batch_s), (10, 1.0), "{ci:?}");
    let relative = ci.relative_throughput(level.throughput_rps).unwrap();
    assert!(relative > 0.0 && relative < 0.2, "{ci:?}");
    let r = ci.response_time_ms.expect("every second had responses");
    assert!(r.p99 > 0.0 && r.mean > 0.0, "{ci:?}");
}

#[test]
fn request_mix_matches_the_cbmg_visit_counts() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("mix");
    let s = support::scenario(
        &dir,
        "mix",
        &format!(
            r#"
name: mix
target: {{base_url: "{}"}}
think_time: 2ms
requests:
  home: {{path: /health}}
  browse: {{path: "/bytes?n=100"}}
  buy: {{path: "/bytes?n=10"}}
session:
  start: home
  transitions:
    home: {{browse: 0.7, buy: 0.2}}
    browse: {{browse: 0.5, buy: 0.3}}
    buy: {{}}
"#,
            tb.web_url
        ),
    );
    let visits = s.session.expected_visits();
    let level = run(&s, 16, 1, 15);
    assert_eq!(level.errors, 0);
    let total_visits: f64 = visits.iter().sum();
    for (i, req) in s.requests.iter().enumerate() {
        let expected = visits[i] / total_visits;
        let got = level.per_request[&req.name].requests as f64 / level.requests as f64;
        assert!(
            (got - expected).abs() / expected < 0.10,
            "{}: share {got:.4}, CBMG expects {expected:.4}",
            req.name
        );
    }
}

fn raw_scenario(name: &str, addr: std::net::SocketAddr, timeout: &str) -> Arc<Scenario> {
    let dir = support::scratch_dir(name);
    support::scenario(
        &dir,
        name,
        &format!(
            r#"
target: {{base_url: "http://{addr}", timeout: {timeout}}}
think_time: 50ms
requests:
  only: {{path: /}}
"#
        ),
    )
}

#[test]
fn a_server_that_closes_connections_counts_errors_and_ends_on_time() {
    let (addr, accepted) = support::misbehaving_server(Misbehaviour::CloseWithoutAnswer);
    let s = raw_scenario("closer", addr, "1s");
    let begin = Instant::now();
    let level = run(&s, 4, 1, 2);
    assert!(
        begin.elapsed() < Duration::from_secs(5),
        "took {:?}",
        begin.elapsed()
    );
    assert!(level.errors > 10, "{level:#?}");
    assert_eq!(level.errors, level.requests);
    assert_eq!(
        level.errors_by_kind.get("closed").copied(),
        Some(level.errors)
    );
    assert!(accepted.load(Ordering::Relaxed) > 10);
}

#[test]
fn a_server_that_never_answers_times_out_and_the_run_ends_on_time() {
    let (addr, _) = support::misbehaving_server(Misbehaviour::NeverAnswer);
    let s = raw_scenario("hanger", addr, "300ms");
    let begin = Instant::now();
    let level = run(&s, 4, 1, 3);
    assert!(
        begin.elapsed() < Duration::from_secs(6),
        "took {:?}",
        begin.elapsed()
    );
    assert!(level.errors >= 4, "{level:#?}");
    assert_eq!(
        level.errors_by_kind.get("timeout").copied(),
        Some(level.errors)
    );
    // The users spent their cycles waiting on the server, not on the
    // generator: a level of timeouts is the server's.
    assert!(!level.client_bottleneck, "{level:#?}");
}

#[test]
fn interim_responses_are_skipped_and_an_impossible_status_is_an_error() {
    let (addr, _) = support::misbehaving_server(Misbehaviour::InterimThenOk);
    let level = run(&raw_scenario("interim", addr, "1s"), 2, 1, 2);
    assert!(level.requests > 5, "{level:#?}");
    assert_eq!(level.errors, 0, "{level:#?}");
    let (addr, _) = support::misbehaving_server(Misbehaviour::Status999);
    let level = run(&raw_scenario("status999", addr, "1s"), 2, 1, 2);
    assert!(level.requests > 5, "{level:#?}");
    assert_eq!(level.errors, level.requests, "{level:#?}");
    assert!(level.errors_by_kind.contains_key("malformed"), "{level:#?}");
}

#[test]
fn a_server_that_closes_idle_keep_alive_connections_is_not_an_error() {
    let (addr, accepted) = support::misbehaving_server(Misbehaviour::AnswerOnceThenClose);
    let s = raw_scenario("oneshot", addr, "1s");
    let level = run(&s, 2, 1, 2);
    assert_eq!(level.errors, 0, "{level:#?}");
    assert!(level.requests > 20);
    // Every request needed a fresh connection.
    assert!(accepted.load(Ordering::Relaxed) >= level.requests);
}

#[test]
fn a_hung_server_does_not_hold_the_run_past_its_end() {
    // A timeout far beyond the run's length: the deadline, not the
    // timeout, must end the level.
    let (addr, _) = support::misbehaving_server(Misbehaviour::NeverAnswer);
    let s = raw_scenario("deadline", addr, "60s");
    let begin = Instant::now();
    let level = run(&s, 3, 1, 2);
    assert!(
        begin.elapsed() < Duration::from_secs(5),
        "took {:?}",
        begin.elapsed()
    );
    assert_eq!(level.requests, 0);
}

#[test]
fn stop_signal_ends_a_level_early_and_marks_it_interrupted() {
    let (addr, _) = support::misbehaving_server(Misbehaviour::AnswerOnceThenClose);
    let s = raw_scenario("stopper", addr, "1s");
    let stop = StopSignal::default();
    let stopper = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        stopper.stop();
    });
    let plan = LevelPlan {
        index: 1,
        users: 2,
        ramp: None,
        warmup: Duration::from_secs(1),
        duration: Duration::from_secs(30),
        workload: Workload::Session,
    };
    let begin = Instant::now();
    let mut sinks: [&mut dyn TickSink; 0] = [];
    let level = run_level(
        &s,
        &Level::Closed(plan),
        &LoadSources::default(),
        &mut sinks,
        &stop,
    )
    .unwrap();
    assert!(begin.elapsed() < Duration::from_secs(5));
    let rec = LevelRecord::from_run(&level, &s);
    assert!(rec.interrupted);
    assert!(rec.requests > 0);
}
