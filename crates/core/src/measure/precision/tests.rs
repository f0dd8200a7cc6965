use super::*;

/// A second of `requests`, each taking `response_ms`, no user tallied.
fn second(requests: u64, response_ms: u64) -> IntervalStats {
    let mut s = IntervalStats::new(1);
    let r = &mut s.per_request[0];
    r.requests = requests;
    for _ in 0..requests {
        r.response_time.record(response_ms * 1_000_000).unwrap();
    }
    s
}

/// A second whose requests the users tallied: `first` of them by the
/// first half, and `squares` their Σ(2n + 1).
fn tallied(requests: u64, first: u64, squares: u64) -> IntervalStats {
    let mut s = second(requests, 5);
    s.users = UserTally {
        counting: true,
        completions: requests,
        squares,
        first_half: first,
    };
    s
}

#[test]
fn t_quantiles_are_students() {
    assert!((t_975(4) - 2.776).abs() < 1e-3);
    assert!((t_975(19) - 2.093).abs() < 1e-3);
    assert!((t_975(1000) - 1.962).abs() < 1e-3);
}

#[test]
fn a_steady_level_has_a_narrow_interval_and_a_noisy_one_a_wide_one() {
    let mut steady = Batches::default();
    let mut noisy = Batches::default();
    for i in 0..20u64 {
        steady.add(1.0, 100, &second(100 + i % 2, 10));
        noisy.add(
            1.0,
            100,
            &second(if i % 2 == 0 { 60 } else { 140 }, 5 + 10 * (i % 2)),
        );
    }
    let (a, b) = (steady.ci95().unwrap(), noisy.ci95().unwrap());
    assert_eq!((a.batches, a.batch_s), (20, 1.0));
    // 100 and 101 alternating: s = 0.513, t = 2.093, half = 0.240.
    assert!((a.throughput_rps - 0.240).abs() < 1e-3, "{a:?}");
    assert_eq!(a.response_time_ms.unwrap().mean, 0.0);
    // 60 and 140: s = 41.04, half = 19.21.
    assert!((b.throughput_rps - 19.21).abs() < 0.01, "{b:?}");
    let r = b.response_time_ms.unwrap();
    assert!(r.mean > 1.0 && r.p99 > 1.0, "{b:?}");
    assert!((a.relative_throughput(100.5).unwrap() - 0.00239).abs() < 1e-4);
}

#[test]
fn users_who_complete_evenly_give_a_narrow_interval_though_their_seconds_alternate() {
    // 40 users, 20 s, each making exactly 20 requests (Σn² = 40·400):
    // the seconds alternate 30 and 50, the halves 10/30 and 20/20, so
    // nothing moves both halves at once.
    let (mut users, mut seconds) = (Batches::default(), Batches::default());
    for i in 0..20u64 {
        let (n, first) = if i % 2 == 0 { (30, 10) } else { (50, 30) };
        users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
        seconds.add(1.0, 40, &second(n, 5));
    }
    let (u, s) = (users.ci95().unwrap(), seconds.ci95().unwrap());
    assert_eq!(u.throughput_from.as_deref(), Some("users"));
    assert_eq!(s.throughput_from.as_deref(), Some("batches"));
    assert!(u.throughput_rps < 1e-9, "{u:?}");
    // 30 and 50: s = 10.26, t = 2.093, half = 4.80.
    assert!((s.throughput_rps - 4.80).abs() < 0.01, "{s:?}");
}

#[test]
fn what_moves_every_user_at_once_widens_the_users_interval_as_batches_would() {
    // The same alternation, shared by both halves (15/25 each): it is
    // the server's, not the users', and counts in full.
    let (mut users, mut seconds) = (Batches::default(), Batches::default());
    for i in 0..20u64 {
        let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
        users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
        seconds.add(1.0, 40, &second(n, 5));
    }
    let (u, s) = (users.ci95().unwrap(), seconds.ci95().unwrap());
    assert!(
        (u.throughput_rps - s.throughput_rps).abs() < 1e-9,
        "{u:?} {s:?}"
    );
    // And the users' own spread adds to it: 20 users made 10, 20 made
    // 30 (Σn = 800, Σn² = 20·100 + 20·900 = 20,000): s_n² = 102.6,
    // N·s_n²/T² = 10.26 (req/s)², so the half-width grows.
    let mut spread = Batches::default();
    for i in 0..20u64 {
        let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
        spread.add(1.0, 40, &tallied(n, first, 20_000 / 20));
    }
    let w = spread.ci95().unwrap();
    // Welch–Satterthwaite: (10.26 + 5.26)² / (10.26²/39 + 5.26²/19) =
    // 58 degrees of freedom, t = 2.002.
    let shared = (s.throughput_rps / 2.093).powi(2);
    let expected = t_975(58) * (10.256 + shared).sqrt();
    assert!(
        (w.throughput_rps - expected).abs() < 0.01,
        "{w:?} {expected}"
    );
}

#[test]
fn too_few_users_or_untallied_requests_fall_back_to_batches() {
    let mut few = Batches::default();
    let mut open = Batches::default();
    let mut ramp = Batches::default();
    let mut lopsided = Batches::default();
    for i in 0..10u64 {
        few.add(1.0, 4, &tallied(40 + i % 2, 20, 100));
        let mut s = tallied(40 + i % 2, 20, 100);
        s.users.completions -= 1;
        open.add(1.0, 40, &s);
        // A stage of the ramp adds users in the window.
        ramp.add(1.0, 40 + 2 * i as u32, &tallied(40 + i % 2, 20, 100));
        lopsided.add(1.0, 40, &tallied(40 + i % 2, 8, 100));
    }
    for b in [few, open, ramp, lopsided] {
        assert_eq!(
            b.ci95().unwrap().throughput_from.as_deref(),
            Some("batches")
        );
    }
}

#[test]
fn a_precision_is_asked_only_of_what_the_users_tallied_or_a_few_users_cycle() {
    let mut users = Batches::default();
    let mut open = Batches::default();
    let mut one = Batches::default();
    for i in 0..20u64 {
        let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
        users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
        open.add(1.0, 40, &second(n, 5));
        one.add(1.0, 1, &second(2, 5));
    }
    // ±4.80 req/s around 40: 12%.
    assert!((users.precision(1.0).unwrap() - 0.120).abs() < 1e-3);
    assert_eq!(open.precision(1.0), None);
    // One user, 5 ms answers always: its cycle (1.005 s) is exact.
    assert_eq!(one.precision(1.0), Some(0.0));
    assert_eq!(open.full_batches(), 20);
}

#[test]
fn a_sliver_of_a_last_tick_is_no_batch_of_its_own() {
    let mut b = Batches::default();
    for i in 0..10u64 {
        b.add(1.0, 100, &second(100 + i % 2, 10));
    }
    let before = b.ci95().unwrap();
    // 3 requests in the 10 ms before the level was stopped: 300/s.
    b.add(0.01, 100, &second(3, 10));
    let after = b.ci95().unwrap();
    assert_eq!(before, after);
}

#[test]
fn too_few_batches_give_no_interval() {
    let mut b = Batches::default();
    for _ in 0..MIN_BATCHES - 1 {
        b.add(1.0, 100, &second(10, 1));
    }
    assert!(b.ci95().is_none());
    b.add(1.0, 100, &second(10, 1));
    assert_eq!(b.ci95().unwrap().batches, MIN_BATCHES as u32);
    // Seconds without a response (a stalled server) spread no
    // response time: its interval is not claimed.
    let mut stalled = Batches::default();
    for i in 0..10 {
        stalled.add(1.0, 100, &second(if i < 3 { 10 } else { 0 }, 1));
    }
    let ci = stalled.ci95().unwrap();
    assert!(
        ci.response_time_ms.is_none() && ci.throughput_rps > 0.0,
        "{ci:?}"
    );
}

#[test]
fn a_long_level_keeps_few_batches_of_doubling_length() {
    let mut b = Batches::default();
    for i in 0..1000u64 {
        b.add(1.0, 100, &second(100 + i % 3, 2));
    }
    let ci = b.ci95().unwrap();
    assert!(ci.batches as usize >= MAX_BATCHES / 2 && (ci.batches as usize) < MAX_BATCHES);
    // 1000 s in batches of 32 s (every full batch; the rest is partial).
    assert_eq!(ci.batch_s, 32.0);
    assert_eq!(ci.batches, 31);
    // Batches of 32 s average the 100/101/102 cycle out almost wholly.
    assert!(ci.throughput_rps < 0.1, "{ci:?}");
}
