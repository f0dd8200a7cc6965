//! How load is offered when `run` is given neither users nor a rate:
//! `users:` over time (a closed workload) or `arrivals:` over time (an open
//! one); and `think_time:`, the pause a user takes between requests.

use std::time::Duration;

/// `users:`.
#[derive(Debug, Clone, PartialEq)]
pub enum UserStages {
    /// This many, all from the start.
    All(u32),
    /// From 0, in straight lines through each stage's count.
    Ramp(Vec<UserStage>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserStage {
    /// Users at the stage's end (a hold: the count already reached).
    pub to: u32,
    /// How long the stage takes (zero: a step).
    pub over: Duration,
}

/// `arrivals:`: rates over time, how arrivals are spaced, and the cap on
/// sessions in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrivals {
    /// One after the other; the last rate holds after its stage.
    pub stages: Vec<ArrivalStage>,
    pub spacing: ArrivalSpacing,
    pub max_in_flight: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalStage {
    pub rate_per_s: f64,
    /// `None` for a constant rate (no end).
    pub length: Option<Duration>,
}

impl Arrivals {
    /// The length of all stages together (`None` for a constant rate).
    pub(crate) fn total(&self) -> Option<Duration> {
        self.stages.iter().map(|s| s.length).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalSpacing {
    /// A Poisson process: exponential gaps.
    Poisson,
    /// Exactly 1/rate apart.
    Even,
}

/// The pause a user takes between receiving a response and sending its next
/// request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkTime {
    Constant(Duration),
    Exponential {
        mean: Duration,
    },
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Long-tailed: most pauses short, a few very long (what access logs
    /// of real users often show), given by its mean and coefficient of
    /// variation.
    LogNormal {
        mean: Duration,
        cv: f64,
    },
}

impl ThinkTime {
    pub(crate) fn mean(&self) -> Duration {
        match *self {
            ThinkTime::Constant(d) => d,
            ThinkTime::Exponential { mean } => mean,
            ThinkTime::Uniform { min, max } => (min + max) / 2,
            ThinkTime::LogNormal { mean, .. } => mean,
        }
    }

    /// Coefficient of variation (standard deviation over mean) of one draw.
    pub(crate) fn cv(&self) -> f64 {
        match *self {
            ThinkTime::Constant(_) => 0.0,
            ThinkTime::Exponential { .. } => 1.0,
            ThinkTime::Uniform { min, max } => {
                let mean = (min + max).as_secs_f64() / 2.0;
                if mean > 0.0 {
                    (max - min).as_secs_f64() / 12f64.sqrt() / mean
                } else {
                    0.0
                }
            }
            ThinkTime::LogNormal { cv, .. } => cv,
        }
    }

    /// The uniform variate of a *length-biased* draw, from one uniform `r`
    /// in [0, 1) through its inverse CDF (so evenly spread `r`s give
    /// evenly spread draws): `u` with density proportional to `sample(u)`,
    /// as the think time a user is in at a random moment is (a long pause
    /// is more often caught than a short one). The length-biased
    /// exponential is Gamma(2) (inverted by bisection); the length-biased
    /// lognormal is lognormal with `μ + σ²`; the uniform's inverts a
    /// quadratic.
    pub(crate) fn length_biased(&self, r: f64) -> f64 {
        match *self {
            ThinkTime::Constant(_) => r,
            // x = −ln(1 − u) has density x·e^(−x): P(X > x) = (1 + x)·e^(−x)
            // = 1 − r, solved for x. Once per user start: 64 halvings.
            ThinkTime::Exponential { .. } => {
                let tail = 1.0 - r;
                let (mut lo, mut hi) = (0.0f64, 64.0f64);
                for _ in 0..64 {
                    let x = (lo + hi) / 2.0;
                    if (1.0 + x) * (-x).exp() > tail {
                        lo = x;
                    } else {
                        hi = x;
                    }
                }
                (1.0 - (-lo).exp()).min(1.0 - f64::EPSILON)
            }
            ThinkTime::Uniform { min, max } => {
                let (a, b) = (min.as_secs_f64(), max.as_secs_f64());
                if b - a <= f64::EPSILON * b.max(1.0) {
                    return r;
                }
                // ∫₀ᵘ (a + (b − a)s) ds = r · (a + b)/2, for u.
                let u = (-a + (a * a + (b - a) * r * (a + b)).sqrt()) / (b - a);
                u.clamp(0.0, 1.0 - f64::EPSILON)
            }
            ThinkTime::LogNormal { cv, .. } => {
                use statrs::distribution::{ContinuousCDF, Normal};
                let sigma = (1.0 + cv * cv).ln().sqrt();
                let normal = Normal::standard();
                normal
                    .cdf(normal.inverse_cdf(r.max(f64::MIN_POSITIVE)) + sigma)
                    .min(1.0 - f64::EPSILON)
            }
        }
    }

    /// One draw, from a uniform variate `u` in [0, 1).
    pub(crate) fn sample(&self, u: f64) -> Duration {
        match *self {
            ThinkTime::Constant(d) => d,
            // Inverse transform; 1-u is in (0, 1] so the log is finite.
            ThinkTime::Exponential { mean } => mean.mul_f64(-(1.0 - u).ln()),
            ThinkTime::Uniform { min, max } => min + (max - min).mul_f64(u),
            ThinkTime::LogNormal { mean, cv } => {
                use statrs::distribution::{ContinuousCDF, Normal};
                // ln X ~ N(μ, σ²) with E[X] = mean and CV = cv.
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.as_secs_f64().max(1e-9).ln() - sigma2 / 2.0;
                let z = Normal::standard().inverse_cdf(u);
                let x = (mu + sigma2.sqrt() * z).exp();
                // u = 0 gives 0; a draw past a day is a day.
                Duration::from_secs_f64(if x.is_finite() { x.min(86_400.0) } else { 0.0 })
            }
        }
    }
}
