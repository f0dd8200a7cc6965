//! Client-bottleneck detection (AutoPerf section 2.1.3): a closed-loop load
//! generator that cannot keep up shows it as *think-time inflation*. By
//! Little's law for the closed loop, `N = X · (R + Z_achieved)`, so
//!
//! ```text
//!   Z_achieved = N / X − R
//! ```
//!
//! If the users' requests queue inside the generator (for a CPU, a scheduler,
//! a connection) the time lost shows up in `Z_achieved`, not in `R`, which the
//! generator measures from the first byte written. The paper found this a
//! more reliable sign than the generator's own CPU utilisation (below 70% in
//! every bottlenecked case of its Figure 5).

#[cfg(test)]
/// `Z_achieved = N/X − R` in seconds; `None` without throughput.
pub(crate) fn achieved_think_time_s(
    users: u32,
    throughput_rps: f64,
    response_time_s: f64,
) -> Option<f64> {
    (throughput_rps > 0.0).then(|| users as f64 / throughput_rps - response_time_s)
}

use crate::scenario::ThinkTime;

/// Think-time excess below which no client bottleneck is called: timers
/// fire on a 1 ms wheel, so a few ms of lateness on a tiny think time is
/// resolution, not a generator falling behind.
const TIMER_RESOLUTION_S: f64 = 0.002;

/// What a level tells about its own generator.
pub(crate) struct ClientEvidence<'a> {
    pub think: &'a ThinkTime,
    /// The relative think-time excess that counts (`capacity.think_gap`).
    pub gap: f64,
    /// Little's law: `N/X − R`.
    pub achieved_s: f64,
    /// The mean pause the users actually took.
    pub measured_s: f64,
    pub response_s: f64,
    pub window_s: f64,
    pub lateness_p99_s: f64,
    /// Timers the lateness was measured on.
    pub lateness_samples: u64,
    /// Pauses taken and requests completed in the window: a mean of a few
    /// random think times is itself noisy.
    pub thinks: u64,
    pub requests: u64,
}

/// The generator was the bottleneck when it could not keep the configured
/// think time (AutoPerf 2.1.3). Three witnesses, any one suffices:
/// - Little's law: `N/X − R` exceeds the configured think time — only when
///   the window holds enough cycles (`MIN_CYCLES`): with responses as long
///   as the window, requests still outstanding at its end leave `R` short
///   and `N/X − R` inflated, though nothing is wrong with the generator;
/// - the pauses the users actually took were longer than asked;
/// - think timers fired late (p99) by more than the gap allows.
///
/// Excesses below the 1 ms timer wheel's resolution never count.
pub(crate) fn client_bottleneck(e: &ClientEvidence) -> bool {
    let z = e.think.mean().as_secs_f64();
    let cycles = e.window_s / (e.response_s + z).max(1e-6);
    // A mean of n draws with coefficient of variation cv strays by cv/√n;
    // three of those are noise, not a generator falling behind.
    let noise = |n: u64| NOISE_SIGMAS * e.think.cv() / (n.max(1) as f64).sqrt();
    let excess = |achieved: f64, n: u64, counting: f64| {
        think_gap(e.think, achieved, e.response_s) > e.gap + noise(n) + counting
            && achieved - z > TIMER_RESOLUTION_S
    };
    // p99 of fewer than a hundred timers is their largest: one scheduling
    // hiccup, which the mean pause (the second witness) already weighs.
    let late = e.lateness_samples >= LATENESS_MIN_SAMPLES
        && e.lateness_p99_s > TIMER_RESOLUTION_S.max(e.gap * z).max(LATENESS_FLOOR_S);
    (cycles >= MIN_CYCLES && excess(e.achieved_s, e.requests, window_count_noise(e)))
        || excess(e.measured_s, e.thinks, 0.0)
        || late
}

/// Timers a lateness p99 needs before it is more than the largest one.
const LATENESS_MIN_SAMPLES: u64 = 100;

/// Little's law's `X` counts the requests completed in the window, and each
/// user's count is off by up to one cycle at the window's edges (by their
/// phase): with one user cycling ten times in it, `X` is ±10%. The users'
/// phases are independent, so the miscount is about `√N / 2` requests
/// (never more than `N`); three of those, relative to the count, in units
/// of the think gap.
fn window_count_noise(e: &ClientEvidence) -> f64 {
    if e.requests == 0 || e.window_s <= 0.0 {
        return 0.0;
    }
    let cycle_s = e.achieved_s + e.response_s; // N / X
    let users = e.requests as f64 * cycle_s / e.window_s;
    let miscount = (NOISE_SIGMAS * users.sqrt() / 2.0).min(users);
    let z = e.think.mean().as_secs_f64();
    let base = if z > 0.0 { z } else { e.response_s.max(1e-3) };
    cycle_s * miscount / e.requests as f64 / base
}

/// Standard errors of a mean think time that count as sampling noise.
const NOISE_SIGMAS: f64 = 3.0;

/// Cycles (`R + Z`) a window must hold for Little's law to be trusted.
const MIN_CYCLES: f64 = 5.0;

/// Timer lateness that is scheduling noise on a shared machine, not a
/// generator falling behind.
pub(crate) const LATENESS_FLOOR_S: f64 = 0.010;

/// The relative excess of achieved over configured think time. With no
/// think time configured, the excess is taken relative to the response
/// time instead, so a generator that cannot keep up still shows.
pub(crate) fn think_gap(configured: &ThinkTime, achieved_s: f64, response_s: f64) -> f64 {
    let z = configured.mean().as_secs_f64();
    let base = if z > 0.0 { z } else { response_s.max(1e-3) };
    (achieved_s - z) / base
}

/// An open level's generator was the bottleneck when arrivals could not
/// start at all, or started later than scheduling noise explains. The one
/// arrival in a thousand still waiting for its connection when the level
/// ended is not news: a server past its capacity holds a few up anyway.
pub(crate) fn arrivals_bottleneck(unstarted: u64, due: u64, lateness_p99_s: f64) -> bool {
    unstarted * 1000 > due || lateness_p99_s > LATENESS_FLOOR_S
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn little_law_gives_the_achieved_think_time() {
        // 100 users, 1 s think, 10 ms response: X = 100/1.01.
        let z = achieved_think_time_s(100, 100.0 / 1.01, 0.01).unwrap();
        assert!((z - 1.0).abs() < 1e-9);
        assert_eq!(achieved_think_time_s(10, 0.0, 0.01), None);
    }

    #[test]
    fn think_gap_relative_to_configured_or_response() {
        let z = ThinkTime::Constant(Duration::from_secs(1));
        assert!((think_gap(&z, 1.2, 0.01) - 0.2).abs() < 1e-9);
        let zero = ThinkTime::Constant(Duration::ZERO);
        assert!((think_gap(&zero, 0.002, 0.010) - 0.2).abs() < 1e-9);
    }

    #[test]
    fn client_bottleneck_needs_a_witness_it_can_trust() {
        let z = ThinkTime::Constant(Duration::from_millis(500));
        let base = ClientEvidence {
            think: &z,
            gap: 0.1,
            achieved_s: 0.5,
            measured_s: 0.5,
            response_s: 0.01,
            window_s: 30.0,
            lateness_p99_s: 0.001,
            lateness_samples: 1000,
            thinks: 1000,
            requests: 1000,
        };
        assert!(!client_bottleneck(&base));
        assert!(client_bottleneck(&ClientEvidence {
            achieved_s: 0.7,
            ..base
        }));
        // Responses as long as the window: Little's law is not trusted.
        assert!(!client_bottleneck(&ClientEvidence {
            achieved_s: 3.0,
            response_s: 13.0,
            window_s: 8.0,
            ..base
        }));
        assert!(client_bottleneck(&ClientEvidence {
            measured_s: 0.8,
            ..base
        }));
        assert!(client_bottleneck(&ClientEvidence {
            lateness_p99_s: 0.2,
            ..base
        }));
        // 40 exponential pauses averaging 15% long: sampling noise.
        let exp = ThinkTime::Exponential {
            mean: Duration::from_millis(500),
        };
        let few = ClientEvidence {
            think: &exp,
            measured_s: 0.575,
            thinks: 40,
            requests: 40,
            ..base
        };
        assert!(!client_bottleneck(&few));
        assert!(client_bottleneck(&ClientEvidence {
            thinks: 10_000,
            requests: 10_000,
            ..few
        }));
    }

    #[test]
    fn one_user_over_a_short_window_is_not_judged_on_its_edges() {
        // As the lock analysis's first level in CI: 1 user thinking 200 ms
        // for a 5 ms request, here over a 1.2 s window: 5 requests complete
        // in it, or 6, by where the window cuts the user's cycle. Five make
        // Little's law's think time 17.5% long: the window's edges, not the
        // generator.
        let z = ThinkTime::Constant(Duration::from_millis(200));
        let one = ClientEvidence {
            think: &z,
            gap: 0.1,
            achieved_s: 1.2 / 5.0 - 0.005,
            measured_s: 0.2005,
            response_s: 0.005,
            window_s: 1.2,
            lateness_p99_s: 0.0005,
            lateness_samples: 5,
            thinks: 5,
            requests: 5,
        };
        assert!(!client_bottleneck(&one));
        // One timer 30 ms late of five is their largest, not a p99.
        assert!(!client_bottleneck(&ClientEvidence {
            lateness_p99_s: 0.030,
            ..one
        }));
        // A generator that really fell behind shows in the pauses taken,
        // and in Little's law once the miscount cannot explain it.
        assert!(client_bottleneck(&ClientEvidence {
            measured_s: 0.240,
            ..one
        }));
        assert!(client_bottleneck(&ClientEvidence {
            achieved_s: 1.2 / 3.0 - 0.005,
            requests: 3,
            ..one
        }));
        // The same miscount is small among many users.
        assert!(client_bottleneck(&ClientEvidence {
            achieved_s: 0.23,
            response_s: 0.005,
            window_s: 30.0,
            requests: 100 * 30 * 4,
            thinks: 100 * 30 * 4,
            ..one
        }));
    }

    #[test]
    fn open_levels_blame_the_generator_for_late_or_missing_arrivals() {
        assert!(!arrivals_bottleneck(0, 100, 0.001));
        assert!(arrivals_bottleneck(1, 100, 0.0));
        assert!(!arrivals_bottleneck(1, 10_000, 0.0));
        assert!(arrivals_bottleneck(0, 100, 0.05));
    }
}
