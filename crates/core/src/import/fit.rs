//! The think-time distribution fitted to the gaps between a session's
//! requests: exponential and lognormal, the better one chosen by the
//! Kolmogorov–Smirnov distance to the gaps.
//!
//! Logs in the common formats stamp whole seconds, so a gap `D` is
//! `⌊φ + X⌋` for the true gap `X` and the first request's phase `φ`
//! uniform in [0, 1): its mean is still `E[X]`, its variance `Var X + 1/6`,
//! and a model `F` of `X` predicts `P(D ≤ k) = ∫₀¹ F(k + 1 − φ) dφ`. The
//! fits and distances below use that when the gaps are whole seconds.
//! Both models keep the gaps' mean: what Little's law and every think
//! time after it depend on.

use hdrhistogram::Histogram;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

/// The gaps seen, in the memory of a histogram and a few sums.
pub struct Gaps {
    /// Milliseconds, three significant digits.
    hist: Histogram<u64>,
    n: u64,
    sum: f64,
    sum_sq: f64,
    /// Every gap a whole number of seconds so far.
    pub whole_seconds: bool,
}

impl Default for Gaps {
    fn default() -> Self {
        Gaps {
            hist: Histogram::new(3).expect("3 significant digits is a valid precision"),
            n: 0,
            sum: 0.0,
            sum_sq: 0.0,
            whole_seconds: true,
        }
    }
}

impl Gaps {
    pub(crate) fn add(&mut self, seconds: f64) {
        let s = seconds.max(0.0);
        self.n += 1;
        self.sum += s;
        self.sum_sq += s * s;
        if s.fract() != 0.0 {
            self.whole_seconds = false;
        }
        let _ = self.hist.record((s * 1000.0).round() as u64);
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.n
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    fn variance(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let m = self.mean();
        ((self.sum_sq - self.n as f64 * m * m) / (self.n - 1) as f64).max(0.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Exponential,
    Lognormal,
}

/// Both fits, and the chosen one.
#[derive(Debug, Clone, Serialize)]
pub struct ThinkFit {
    pub gaps: u64,
    pub mean_s: f64,
    /// Of the gaps as logged (whole seconds add 1/6 s² of variance).
    pub cv: f64,
    pub whole_seconds: bool,
    pub exponential_ks: f64,
    pub lognormal_mean_s: f64,
    pub lognormal_cv: f64,
    pub lognormal_ks: f64,
    pub chosen: Model,
}

impl ThinkFit {}

/// `None` with no gap at all (every session one request long).
pub(crate) fn fit(g: &Gaps) -> Option<ThinkFit> {
    if g.n == 0 {
        return None;
    }
    let mean = g.mean();
    let var = g.variance();
    let quantized = g.whole_seconds;
    // The lognormal by its moments: its mean is the gaps' mean whatever
    // their spread (a maximum-likelihood fit's mean, exp(μ + σ²/2), runs
    // away on mixed gaps — 20 ms beside 60 s), its cv theirs, less the
    // rounding's variance for whole seconds, within what a scenario takes.
    let var_x = if quantized {
        (var - 1.0 / 6.0).max(0.0)
    } else {
        var
    };
    let (ln_mean, ln_cv) = (mean, (var_x.sqrt() / mean.max(1e-9)).clamp(0.01, 100.0));
    let exp_cdf = |x: f64| {
        if mean <= 0.0 {
            1.0
        } else {
            1.0 - (-x.max(0.0) / mean).exp()
        }
    };
    let sigma2 = (1.0 + ln_cv * ln_cv).ln();
    let mu = ln_mean.max(1e-9).ln() - sigma2 / 2.0;
    let normal = Normal::standard();
    let ln_cdf = |x: f64| {
        if x <= 0.0 {
            0.0
        } else {
            normal.cdf((x.ln() - mu) / sigma2.sqrt())
        }
    };
    let exponential_ks = ks(g, quantized, exp_cdf);
    let lognormal_ks = ks(g, quantized, ln_cdf);
    Some(ThinkFit {
        gaps: g.n,
        mean_s: mean,
        cv: var.sqrt() / mean.max(1e-9),
        whole_seconds: quantized,
        exponential_ks,
        lognormal_mean_s: ln_mean,
        lognormal_cv: ln_cv,
        lognormal_ks,
        // The simpler model unless the other is clearly closer.
        chosen: if lognormal_ks < exponential_ks * 0.8 {
            Model::Lognormal
        } else {
            Model::Exponential
        },
    })
}

/// The largest gap between the gaps' distribution and the model's.
fn ks(g: &Gaps, quantized: bool, cdf: impl Fn(f64) -> f64) -> f64 {
    let n = g.n as f64;
    let mut below = 0u64;
    let mut worst: f64 = 0.0;
    for v in g.hist.iter_recorded() {
        let x = g.hist.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        let model_before;
        let model_at;
        if quantized {
            let k = (v.value_iterated_to() as f64 / 1000.0).round();
            model_before = rounded_cdf(&cdf, k - 1.0);
            model_at = rounded_cdf(&cdf, k);
        } else {
            let lo = g.hist.lowest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
            model_before = cdf(lo);
            model_at = cdf(x);
        }
        let emp_before = below as f64 / n;
        below += v.count_at_value();
        let emp_at = below as f64 / n;
        worst = worst
            .max((emp_before - model_before).abs())
            .max((emp_at - model_at).abs());
    }
    worst
}

/// `P(⌊φ + X⌋ ≤ k)` for φ uniform in [0, 1): Simpson's rule over φ.
fn rounded_cdf(cdf: &impl Fn(f64) -> f64, k: f64) -> f64 {
    if k < 0.0 {
        return 0.0;
    }
    const N: usize = 32;
    let h = 1.0 / N as f64;
    let mut s = 0.0;
    for i in 0..=N {
        let w = if i == 0 || i == N {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        s += w * cdf(k + 1.0 - i as f64 * h);
    }
    s * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(n: usize, seed: u64, mut one: impl FnMut(&mut fastrand::Rng) -> f64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n).map(|_| one(&mut rng)).collect()
    }

    fn gaps_of(xs: &[f64]) -> Gaps {
        let mut g = Gaps::default();
        xs.iter().for_each(|&x| g.add(x));
        g
    }

    #[test]
    fn exponential_gaps_fit_the_exponential() {
        let xs = draws(50_000, 1, |r| -8.0 * (1.0 - r.f64()).ln());
        let f = fit(&gaps_of(&xs)).unwrap();
        assert_eq!(f.chosen, Model::Exponential, "{f:?}");
        assert!((f.mean_s - 8.0).abs() < 0.15, "{f:?}");
        assert!(f.exponential_ks < 0.01, "{f:?}");
    }

    #[test]
    fn lognormal_gaps_fit_the_lognormal() {
        let normal = Normal::standard();
        // Mean 5 s, cv 2.
        let s2 = (1.0f64 + 4.0).ln();
        let mu = 5f64.ln() - s2 / 2.0;
        let xs = draws(50_000, 2, |r| {
            (mu + s2.sqrt() * normal.inverse_cdf(r.f64().max(1e-12))).exp()
        });
        let f = fit(&gaps_of(&xs)).unwrap();
        assert_eq!(f.chosen, Model::Lognormal, "{f:?}");
        assert!((f.lognormal_cv - 2.0).abs() < 0.2, "{f:?}");
    }

    #[test]
    fn whole_second_stamps_keep_the_mean_and_the_choice() {
        // Requests at phase φ, gaps exponential with mean 20 s: as logged
        // with whole-second stamps.
        let mut rng = fastrand::Rng::with_seed(3);
        let xs: Vec<f64> = (0..50_000)
            .map(|_| {
                let phi = rng.f64();
                let x = -20.0 * (1.0 - rng.f64()).ln();
                (phi + x).floor()
            })
            .collect();
        let g = gaps_of(&xs);
        assert!(g.whole_seconds);
        let f = fit(&g).unwrap();
        assert_eq!(f.chosen, Model::Exponential, "{f:?}");
        assert!((f.mean_s - 20.0).abs() / 20.0 < 0.02, "{f:?}");
        assert!(f.exponential_ks < 0.01, "{f:?}");
    }

    #[test]
    fn no_gap_no_fit() {
        assert!(fit(&Gaps::default()).is_none());
    }
}
