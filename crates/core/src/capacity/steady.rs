//! Steady state of one load level (AutoPerf section 2.1: a level runs "until
//! *throughput convergence* has been achieved … the difference between
//! consecutive time-averaged values of throughput falling under a certain
//! threshold").
//!
//! Fed one per-second throughput at a time, it compares the means of the last
//! two adjacent windows of `window` seconds:
//!
//! ```text
//!   x/s ▲        ┌──────────────────────
//!       │      ╱ │  window A │  window B │   steady when |B − A| ≤ bound,
//!       │    ╱   │           │           │   t ≥ min_duration;
//!       │  ╱     │           │           │   gave up at max_duration
//!       └────────┴───────────┴───────────┴─→ t (s)
//!                       t − 2w      t − w       t
//! ```
//!
//! **Window means, not cumulative averages.** The paper's "consecutive
//! time-averaged values" could be read as the running mean since the start
//! of the level. But consecutive running means differ by about `x/t` whatever
//! the series does, so they "converge" during a slow ramp, and they drag the
//! warm-up into the figure. Two adjacent, disjoint windows compare like with
//! like: their difference is a real test that the rate stopped moving, and
//! the first of them marks where the steady part begins, so the caller can
//! exclude the warm-up before it.
//!
//! **A statistical floor.** At low throughput a window holds few completions
//! and their count is roughly Poisson: a window mean of `m` req/s over `w`
//! seconds has standard deviation `sqrt(m/w)`, and the difference of two
//! independent ones `sqrt(2m/w)`. At 2 req/s over 5 s that is ±0.9 req/s, far
//! above `ε·m = 0.1`, so a relative test alone would never pass. The bound is
//! therefore `max(ε·m, z·sqrt(2m/w))` with `z = 2` (a stationary series passes
//! about 95% of the time). A closed workload is usually *more* regular than
//! Poisson, so the floor errs on the generous side only at low rates, where
//! the difference is within what can be measured at all. The price: a slow
//! drift hidden in that noise (say +2 req/s each second at 60 req/s, 10 req/s
//! between 5 s windows against a floor of 10) passes as steady. Longer
//! windows shrink the floor as `1/sqrt(w)`.

use std::time::Duration;

use crate::scenario::CapacitySettings;

/// Tunables of the steady-state check.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SteadyConfig {
    /// Relative difference (fraction) of adjacent window means below which
    /// the level is steady (`CapacitySettings::epsilon`).
    pub epsilon: f64,
    /// Width of each window, whole seconds, at least 1.
    pub window_s: u32,
    /// Never steady before this many seconds.
    pub min_duration_s: u32,
    /// Give up at this many seconds (at least `min_duration_s`).
    pub max_duration_s: u32,
    /// Standard deviations of the Poisson noise floor (default 2).
    pub noise_z: f64,
}

impl SteadyConfig {
    pub(crate) fn from_settings(s: &CapacitySettings) -> Self {
        SteadyConfig {
            epsilon: s.epsilon,
            window_s: whole_seconds(s.window).max(1),
            min_duration_s: whole_seconds(s.min_duration),
            max_duration_s: whole_seconds(s.max_duration),
            noise_z: 2.0,
        }
    }
}

impl Default for SteadyConfig {
    fn default() -> Self {
        Self::from_settings(&CapacitySettings::default())
    }
}

fn whole_seconds(d: Duration) -> u32 {
    d.as_secs_f64().round().min(u32::MAX as f64) as u32
}

/// What the check says after the latest second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SteadyVerdict {
    /// Keep running.
    NotYet,
    /// Steady: the last two windows agree. `since_s` is where the first of
    /// them began (the warm-up ends there); `throughput_rps` is the mean over
    /// both windows.
    Steady { since_s: u32, throughput_rps: f64 },
    /// Reached the maximum duration without agreement.
    GaveUp { elapsed_s: u32 },
}

/// Steady-state detector of one level; one per level, fed once per second.
#[derive(Debug, Clone)]
pub(crate) struct SteadyState {
    config: SteadyConfig,
    /// One value per elapsed second; at most `max_duration_s` of them.
    series: Vec<f64>,
    verdict: SteadyVerdict,
}

impl SteadyState {
    pub(crate) fn new(config: SteadyConfig) -> Self {
        SteadyState {
            config,
            series: Vec::new(),
            verdict: SteadyVerdict::NotYet,
        }
    }

    /// Adds the throughput of the second just ended. Once `Steady` or
    /// `GaveUp`, the verdict stays.
    pub(crate) fn push(&mut self, x_rps: f64) -> SteadyVerdict {
        if self.verdict != SteadyVerdict::NotYet {
            return self.verdict;
        }
        self.series.push(if x_rps.is_finite() {
            x_rps.max(0.0)
        } else {
            0.0
        });
        let elapsed = self.series.len() as u32;
        let w = self.config.window_s.max(1) as usize;
        if elapsed >= self.config.min_duration_s && self.series.len() >= 2 * w {
            let n = self.series.len();
            let a = mean(&self.series[n - 2 * w..n - w]);
            let b = mean(&self.series[n - w..]);
            if windows_agree(a, b, w as f64, self.config.epsilon, self.config.noise_z) {
                self.verdict = SteadyVerdict::Steady {
                    since_s: (n - 2 * w) as u32,
                    throughput_rps: (a + b) / 2.0,
                };
                return self.verdict;
            }
        }
        if elapsed >= self.config.max_duration_s.max(self.config.min_duration_s) {
            self.verdict = SteadyVerdict::GaveUp { elapsed_s: elapsed };
        }
        self.verdict
    }

    #[cfg(test)]
    pub(crate) fn verdict(&self) -> SteadyVerdict {
        self.verdict
    }

    pub(crate) fn elapsed_s(&self) -> u32 {
        self.series.len() as u32
    }
}

/// The test of two adjacent window means `a`, `b` over `window_s` seconds:
/// `|b − a| ≤ max(ε·m, z·sqrt(2m/w))` with `m` their mean (see the module
/// comment for the noise floor).
pub(crate) fn windows_agree(a: f64, b: f64, window_s: f64, epsilon: f64, z: f64) -> bool {
    let m = (a + b) / 2.0;
    let floor = z * (2.0 * m / window_s.max(1.0)).sqrt();
    (b - a).abs() <= (epsilon * m).max(floor)
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Relative change of throughput between the two halves of the measured
/// window above which a level is not called steady (unless the change is
/// within counting noise, see `halves_agree`).
pub(crate) const STEADY_HALVES_GAP: f64 = 0.10;

/// Standard deviations of counting noise a change between halves may have
/// and still be called steady: the detector's `noise_z`.
const HALVES_NOISE_Z: f64 = 2.0;

/// A level is steady (`steady_state` in the record, every mode) when the
/// throughput of its measured window's two halves agree: within
/// `STEADY_HALVES_GAP`, or within the Poisson floor of `windows_agree` for
/// halves of that many seconds. The detector above decides when a capacity
/// level may end (`capacity.steady_after_s`); this judges any finished
/// window, fixed-length ones included, by the same test, so a level the
/// detector accepted is not called unsteady for noise it forgave (at
/// 100 req/s, 3 s halves differ by 8% at one standard deviation).
///
/// `series` holds one throughput per second of the measured window.
pub(crate) fn halves_agree(series: &[f64]) -> bool {
    if series.len() < 2 {
        return false;
    }
    let mid = series.len() / 2;
    let (a, b) = (mean(&series[..mid]), mean(&series[mid..]));
    // The shorter half sets the noise; its length in seconds.
    let half_s = mid.min(series.len() - mid) as f64;
    (a + b) > 0.0 && windows_agree(a, b, half_s, STEADY_HALVES_GAP, HALVES_NOISE_Z)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SteadyConfig {
        SteadyConfig {
            epsilon: 0.05,
            window_s: 5,
            min_duration_s: 10,
            max_duration_s: 120,
            noise_z: 2.0,
        }
    }

    /// Feeds a series and returns the second (1-based) of the first verdict
    /// other than `NotYet`, with the verdict.
    fn run(config: SteadyConfig, xs: impl IntoIterator<Item = f64>) -> (u32, SteadyVerdict) {
        let mut s = SteadyState::new(config);
        for x in xs {
            let v = s.push(x);
            if v != SteadyVerdict::NotYet {
                return (s.elapsed_s(), v);
            }
        }
        (s.elapsed_s(), s.verdict())
    }

    /// Poisson counts by Knuth's method, from a seeded generator.
    fn poisson(rng: &mut fastrand::Rng, mean: f64) -> f64 {
        let l = (-mean).exp();
        let (mut k, mut p) = (0u32, 1.0);
        loop {
            p *= rng.f64();
            if p <= l {
                return k as f64;
            }
            k += 1;
        }
    }

    #[test]
    fn ramp_then_flat_is_steady_only_after_the_ramp() {
        // 0 → 200 req/s over 30 s, then flat with ±2% wobble.
        let xs = (0..200).map(|t| {
            if t < 30 {
                200.0 * t as f64 / 30.0
            } else {
                200.0 * (1.0 + 0.02 * ((t % 3) as f64 - 1.0))
            }
        });
        let (t, v) = run(config(), xs);
        match v {
            SteadyVerdict::Steady {
                since_s,
                throughput_rps,
            } => {
                // The earlier window may end in the ramp's last seconds only
                // where the ramp's slope is within ε; both windows start no
                // earlier than the ramp's last stretch.
                assert!(since_s >= 25, "since {since_s}");
                assert!((35..=45).contains(&t), "steady at {t}");
                assert!((throughput_rps - 200.0).abs() < 10.0, "{throughput_rps}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn never_steady_before_min_duration() {
        let (t, v) = run(config(), std::iter::repeat_n(100.0, 50));
        assert!(matches!(v, SteadyVerdict::Steady { since_s: 0, .. }));
        assert_eq!(t, 10);
        let mut c = config();
        c.min_duration_s = 17;
        let (t, v) = run(c, std::iter::repeat_n(100.0, 50));
        assert_eq!(t, 17);
        assert!(matches!(v, SteadyVerdict::Steady { since_s: 7, .. }));
    }

    #[test]
    fn a_steady_ramp_gives_up_at_max_duration() {
        // Growing 3% a second: adjacent windows always differ by ~16%.
        let growing = |t: u32| 200.0 * 1.03f64.powi(t as i32);
        let (t, v) = run(config(), (0..500).map(growing));
        assert_eq!(t, 120);
        assert_eq!(v, SteadyVerdict::GaveUp { elapsed_s: 120 });
        // The verdict is sticky.
        let mut s = SteadyState::new(config());
        for t in 0..121 {
            s.push(growing(t));
        }
        assert_eq!(s.push(1e6), SteadyVerdict::GaveUp { elapsed_s: 120 });
    }

    #[test]
    fn noisy_flat_high_rate_is_steady_soon() {
        let mut rng = fastrand::Rng::with_seed(7);
        let xs: Vec<f64> = (0..120).map(|_| poisson(&mut rng, 300.0)).collect();
        let (t, v) = run(config(), xs);
        assert!(matches!(v, SteadyVerdict::Steady { .. }), "{v:?}");
        assert!(t <= 20, "steady at {t}");
    }

    #[test]
    fn noisy_flat_low_rate_passes_thanks_to_the_noise_floor() {
        // 3 req/s: window means of 15 completions differ by ±1.1 req/s, 35%.
        let mut steady_soon = 0;
        let mut relative_only_failed = 0;
        for seed in 0..20 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let xs: Vec<f64> = (0..120).map(|_| poisson(&mut rng, 3.0)).collect();
            let (t, v) = run(config(), xs.clone());
            if matches!(v, SteadyVerdict::Steady { .. }) && t <= 30 {
                steady_soon += 1;
            }
            let no_floor = SteadyConfig {
                noise_z: 0.0,
                ..config()
            };
            let (t_rel, v_rel) = run(no_floor, xs);
            if !matches!(v_rel, SteadyVerdict::Steady { .. }) || t_rel > 30 {
                relative_only_failed += 1;
            }
        }
        assert!(steady_soon >= 18, "{steady_soon}/20 steady within 30 s");
        assert!(relative_only_failed >= 1);
    }

    #[test]
    fn the_floor_does_not_hide_a_real_jump() {
        // 100 → 150 req/s: a 50% step is far beyond both ε and the floor.
        assert!(!windows_agree(100.0, 150.0, 5.0, 0.05, 2.0));
        assert!(windows_agree(100.0, 104.0, 5.0, 0.05, 2.0));
        // At 2 req/s, 2 vs 3 is within noise; zero throughput is steady.
        assert!(windows_agree(2.0, 3.0, 5.0, 0.05, 2.0));
        assert!(windows_agree(0.0, 0.0, 5.0, 0.05, 2.0));
    }

    #[test]
    fn settings_map_to_whole_seconds() {
        let c = SteadyConfig::default();
        assert_eq!(
            (c.window_s, c.min_duration_s, c.max_duration_s),
            (5, 10, 120)
        );
    }

    #[test]
    fn steady_needs_agreeing_halves() {
        assert!(halves_agree(&[100.0, 101.0, 99.0, 100.0]));
        assert!(!halves_agree(&[50.0, 60.0, 100.0, 110.0]));
        assert!(!halves_agree(&[100.0]));
        assert!(!halves_agree(&[0.0, 0.0, 0.0, 0.0]));
    }

    #[test]
    fn halves_forgive_counting_noise_only() {
        // 20 req/s, 3 s halves: one standard deviation of the difference is
        // sqrt(2·20/3) = 3.7 req/s, 18%: a 25% change is noise, not drift.
        assert!(halves_agree(&[20.0, 17.0, 18.0, 22.0, 23.0, 21.0]));
        // The same relative change at 2,000 req/s is a real one.
        assert!(!halves_agree(&[
            2000.0, 1700.0, 1800.0, 2200.0, 2300.0, 2100.0
        ]));
        // A halving is never noise at 200 req/s over 5 s halves.
        assert!(!halves_agree(
            &[200.0; 5]
                .iter()
                .chain(&[100.0; 5])
                .copied()
                .collect::<Vec<_>>()
        ));
    }
}
