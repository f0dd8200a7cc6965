use super::super::network::Tier;
use super::*;

fn testbed(web_cores: u32) -> Model {
    // The testbed's /db?web_ms=4&db_ms=1 at Z = 0.5 s (tests/it/capacity.rs).
    Model {
        user_classes: Vec::new(),
        arrival_mix: Vec::new(),
        classes: vec!["db".into()],
        mix: vec![1.0],
        tiers: vec![
            Tier {
                name: "web".into(),
                cores: web_cores,
                host: "a".into(),
            },
            Tier {
                name: "db".into(),
                cores: 1,
                host: "a".into(),
            },
        ],
        demand_s: vec![vec![0.004, 0.001]],
        process_share: vec![
            [("tb-web".to_string(), 1.0)].into(),
            [("tb-db".to_string(), 1.0)].into(),
        ],
        think_s: 0.5,
        host_cores: BTreeMap::new(),
    }
}

#[test]
fn the_testbeds_known_saturation() {
    let m = testbed(1);
    let b = bounds(&m);
    assert_eq!(b.max_throughput_rps, 250.0);
    assert_eq!(b.n_star, 126.3);
    assert_eq!(b.bottleneck, "web");
    let p = closed(&m, &[1, 300]);
    // One user: no queueing, R = ΣD, X = 1/(Z + R).
    assert!((p[0].response_time_ms - 5.0).abs() < 1e-9);
    assert!((p[0].throughput_rps - 1.0 / 0.505).abs() < 1e-3);
    // Far past N*: X at the bound, the web tier's one core busy.
    assert!((p[1].throughput_rps - 250.0).abs() < 0.5);
    assert!((p[1].utilization["web"] - 1.0).abs() < 0.002);
    assert!((p[1].utilization_per_process["web/tb-web"] - 1.0).abs() < 0.002);
    // Twice the web cores: the bound moves to 500/s.
    let two = m.with_cores("web", 2).unwrap();
    assert_eq!(bounds(&two).max_throughput_rps, 500.0);
}

#[test]
fn tiers_that_overbook_a_host_share_its_cores() {
    let mut m = testbed(2);
    m.tiers[1].cores = 2;
    m.host_cores.insert("a".into(), 2);
    assert_eq!(m.stations(), vec![vec![0, 1]]);
    // One 2-core station with D = 5 ms: X ≤ 400/s, not web's 500/s.
    assert_eq!(bounds(&m).max_throughput_rps, 400.0);
    let p = closed(&m, &[1000]);
    assert!((p[0].throughput_rps - 400.0).abs() < 1.0);
    // Four cores on the host: no sharing.
    m.host_cores.insert("a".into(), 4);
    assert_eq!(m.stations(), vec![vec![0], vec![1]]);
}

#[test]
fn user_steps_cover_the_range() {
    assert_eq!(user_steps(1, 10, 4), vec![1, 4, 7, 10]);
    assert_eq!(user_steps(1, 3, 20), vec![1, 2, 3]);
    assert_eq!(user_steps(0, 0, 5), vec![1]);
}

#[test]
fn open_what_ifs_use_erlang_c() {
    // M/M/1: C = ρ, R = D/(1 − ρ).
    assert!((erlang_c(1, 0.5) - 0.5).abs() < 1e-12);
    // M/M/2 at a = 1: C = 1/3.
    assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    let m = testbed(1);
    let p = open(&m, &[125.0, 300.0]);
    // web ρ = 0.5: 8 ms; db ρ = 0.125: 1/0.875 ms.
    assert!((p[0].response_time_ms - (8.0 + 1.0 / 0.875)).abs() < 1e-3);
    assert!(p[1].saturated);
}

fn fixture() -> RunRecord {
    serde_json::from_str(include_str!("../../report/html/testdata/run/run.json")).unwrap()
}

/// The fixture's level at `users` (`None`: an open level).
fn level(users: Option<u32>, interrupted: bool) -> LevelRecord {
    let mut l = fixture().levels.swap_remove(0);
    (l.users, l.interrupted) = (users, interrupted);
    l
}

#[test]
fn default_users_reach_twice_n_star_and_every_measured_level() {
    let m = testbed(1);
    // N* = 126.3: 1 to 253, in steps of 2 (at most 200 counts).
    let users = default_users(&m, &[]);
    assert_eq!((users[0], users[1], users.len()), (1, 3, 127));
    // A measured level past 2·N* moves the top; each one is a point.
    let users = default_users(&m, &[level(Some(400), false), level(Some(6), false)]);
    assert!(users.ends_with(&[400]) && users.contains(&6), "{users:?}");
    // N* = 2 (no think time, two equal demands): still up to 10.
    let mut small = testbed(1);
    (small.think_s, small.demand_s) = (0.0, vec![vec![0.004, 0.004]]);
    assert_eq!(default_users(&small, &[]), (1..=10).collect::<Vec<_>>());
}

#[test]
fn an_analysis_prediction_leaves_out_open_and_interrupted_levels() {
    let levels = [10, 20, 377].map(|u| level(Some(u), u == 377));
    let levels = [&levels[..], &[level(None, false)]].concat();
    assert_eq!(closed_levels(&levels).len(), 3);
    // A run that was no capacity analysis is compared with nothing.
    assert!(measured_levels(&fixture(), false).is_empty());
    let p = of_analysis(&testbed(1), &levels);
    let compared: Vec<u32> = p.measured.iter().map(|c| c.users).collect();
    assert_eq!(compared, [10, 20]);
    assert!(!p.points.iter().any(|p| p.users == Some(377)));
}

#[test]
fn a_difference_inside_a_levels_interval_is_agreement() {
    let m = testbed(1);
    let model_x = |users: u32| closed(&m, &[users])[0].throughput_rps;
    let with = |users: u32, measured: f64, half: Option<f64>| {
        let mut l = level(Some(users), false);
        l.throughput_rps = measured;
        l.ci95 = half.map(|h| crate::measure::Ci95 {
            batches: 10,
            batch_s: 1.0,
            throughput_rps: h,
            throughput_from: None,
            response_time_ms: None,
        });
        l
    };
    // 4% off with ±5%: inside; 4% off with ±2%: outside; no interval.
    let (a, b) = (model_x(10), model_x(20));
    let levels = [
        with(10, a * 0.96, Some(a * 0.96 * 0.05)),
        with(20, b * 0.96, Some(b * 0.96 * 0.02)),
        with(30, model_x(30), None),
    ];
    let compared = compare(&m, &levels);
    let within: Vec<Option<bool>> = compared.iter().map(|c| c.within_interval).collect();
    assert_eq!(within, [Some(true), Some(false), None]);
    let p = of_analysis(&m, &levels);
    let fit = p.fit().unwrap();
    assert_eq!(
        (fit.levels, fit.with_interval, fit.within_interval),
        (3, 2, 1)
    );
    assert!(
        (fit.median_precision.unwrap() - 0.05).abs() < 1e-9,
        "{fit:?}"
    );
}
