//! Load shapes, as pure functions of elapsed time and counts: "when should
//! arrival n start". No clock and no sleeping here; the open engine asks
//! and waits. Unit-tested with tables.
//!
//! ```text
//! rate ▲          ┌──────────┐
//!      │ ┌────────┘          │      stages: [{100/s, 30s}, {1000/s, 60s}]
//!      └─┴───────────────────┴──▶ t (the last rate holds after the end)
//! ```
//!
//! Arrivals are placed by inverting the cumulative count Λ(t) = ∫ rate:
//! evenly spaced arrivals are at Λ(t) = 0, 1, 2, …; Poisson arrivals at
//! Λ(t) = E₁, E₁+E₂, … with Eᵢ ~ Exp(1) (time rescaling: a unit-rate
//! Poisson process mapped through Λ⁻¹ has exactly the staged rate).
//!
//! `ramp`: a closed workload's users over time (`users:` stages).

use std::time::Duration;

mod ramp;
pub(crate) use ramp::UserRamp;

/// A constant rate held for a while.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stage {
    /// Arrivals per second (may be 0 for a pause).
    pub rate: f64,
    pub length: Duration,
}

/// How arrivals are spaced within a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Spacing {
    /// Exactly 1/rate apart.
    Even,
    /// Exponential gaps from a seeded generator (a Poisson process).
    /// Seed 0 asks the engine for a fresh random seed per level.
    Poisson { seed: u64 },
}

/// A rate over time: stages one after the other; the last one's rate
/// holds after its end, so a level may run longer than its stages.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RateShape {
    stages: Vec<Stage>,
}

impl RateShape {
    pub(crate) fn constant(rate: f64) -> RateShape {
        RateShape::stages(vec![Stage {
            rate,
            length: Duration::ZERO,
        }])
    }

    /// Panics on an empty list or a negative or non-finite rate: those are
    /// rejected when the scenario or the flags are validated.
    pub(crate) fn stages(stages: Vec<Stage>) -> RateShape {
        assert!(!stages.is_empty(), "a rate shape needs a stage");
        assert!(stages.iter().all(|s| s.rate.is_finite() && s.rate >= 0.0));
        RateShape { stages }
    }

    /// Arrivals per second at `t` from the start.
    pub(crate) fn rate_at(&self, t: Duration) -> f64 {
        let mut begin = Duration::ZERO;
        for s in &self.stages {
            if t < begin + s.length {
                return s.rate;
            }
            begin += s.length;
        }
        self.last().rate
    }

    /// Expected arrivals in [0, t): Λ(t).
    pub(crate) fn count_at(&self, t: Duration) -> f64 {
        let mut begin = Duration::ZERO;
        let mut count = 0.0;
        for s in &self.stages {
            let end = begin + s.length;
            if t < end {
                return count + s.rate * (t - begin).as_secs_f64();
            }
            count += s.rate * s.length.as_secs_f64();
            begin = end;
        }
        count + self.last().rate * (t - begin).as_secs_f64()
    }

    /// The time at which Λ reaches `count`: Λ⁻¹. `None` when it never
    /// does (the rate drops to zero for good).
    pub(crate) fn time_of(&self, count: f64) -> Option<Duration> {
        let mut begin = Duration::ZERO;
        let mut before = 0.0;
        for s in &self.stages {
            let in_stage = s.rate * s.length.as_secs_f64();
            if count < before + in_stage {
                return Some(begin + seconds((count - before) / s.rate));
            }
            before += in_stage;
            begin += s.length;
        }
        let rate = self.last().rate;
        (rate > 0.0).then(|| begin + seconds((count - before) / rate))
    }

    fn last(&self) -> &Stage {
        self.stages.last().expect("at least one stage")
    }
}

/// The arrival schedule: the intended start of arrival 0, 1, 2, … as an
/// offset from the level's start.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    shape: RateShape,
    spacing: Spacing,
    rng: fastrand::Rng,
    /// Λ position of the next arrival.
    next: f64,
    issued: u64,
}

impl Pacer {
    pub(crate) fn new(shape: RateShape, spacing: Spacing) -> Pacer {
        let mut rng = match spacing {
            Spacing::Even => fastrand::Rng::with_seed(0),
            Spacing::Poisson { seed } => fastrand::Rng::with_seed(seed),
        };
        let next = match spacing {
            Spacing::Even => 0.0,
            Spacing::Poisson { .. } => exp1(&mut rng),
        };
        Pacer {
            shape,
            spacing,
            rng,
            next,
            issued: 0,
        }
    }

    /// Arrivals handed out so far.
    pub(crate) fn issued(&self) -> u64 {
        self.issued
    }

    /// Intended start of the next arrival, or `None` when none will come.
    pub(crate) fn next_arrival(&mut self) -> Option<Duration> {
        let at = self.shape.time_of(self.next)?;
        self.issued += 1;
        self.next = match self.spacing {
            // Counted, not summed, so no rounding drift over long levels.
            Spacing::Even => self.issued as f64,
            Spacing::Poisson { .. } => self.next + exp1(&mut self.rng),
        };
        Some(at)
    }
}

/// `x` seconds (finite, not negative) to the nanosecond, truncated. The
/// scheduler asks once per arrival, and `Duration::from_secs_f64`'s exact
/// conversion was 2.6% of the generator's `perf` samples at 1.2 M
/// arrivals/s; an f64 holds nanoseconds exactly for 104 days.
fn seconds(x: f64) -> Duration {
    Duration::from_nanos((x * 1e9) as u64)
}

/// A draw from Exp(1).
fn exp1(rng: &mut fastrand::Rng) -> f64 {
    // 1 - u is in (0, 1], so the log is finite.
    -(1.0 - rng.f64()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn stages() -> RateShape {
        RateShape::stages(vec![
            Stage {
                rate: 100.0,
                length: ms(1000),
            },
            Stage {
                rate: 0.0,
                length: ms(500),
            },
            Stage {
                rate: 1000.0,
                length: ms(2000),
            },
        ])
    }

    #[test]
    fn constant_rate_is_evenly_spaced() {
        let mut p = Pacer::new(RateShape::constant(500.0), Spacing::Even);
        let got: Vec<Duration> = (0..5).map(|_| p.next_arrival().unwrap()).collect();
        assert_eq!(got, [ms(0), ms(2), ms(4), ms(6), ms(8)]);
        // No drift after many arrivals.
        let mut p = Pacer::new(RateShape::constant(3.0), Spacing::Even);
        let last = (0..=300_000).map(|_| p.next_arrival().unwrap()).last();
        assert_eq!(last.unwrap().as_millis(), 100_000_000);
    }

    #[test]
    fn stage_table() {
        let s = stages();
        // (t, rate, Λ(t))
        let table = [
            (0, 100.0, 0.0),
            (500, 100.0, 50.0),
            (1000, 0.0, 100.0),
            (1499, 0.0, 100.0),
            (1500, 1000.0, 100.0),
            (2500, 1000.0, 1100.0),
            (3500, 1000.0, 2100.0),
            (4500, 1000.0, 3100.0), // the last rate holds
        ];
        for (t, rate, count) in table {
            assert_eq!(s.rate_at(ms(t)), rate, "rate at {t}");
            assert!((s.count_at(ms(t)) - count).abs() < 1e-9, "Λ({t})");
        }
        // Λ⁻¹: the pause is skipped over.
        for (count, t) in [
            (0.0, 0),
            (50.0, 500),
            (99.0, 990),
            (100.0, 1500),
            (600.0, 2000),
        ] {
            assert_eq!(s.time_of(count), Some(ms(t)), "Λ⁻¹({count})");
        }
        let ends = RateShape::stages(vec![Stage {
            rate: 0.0,
            length: ms(1),
        }]);
        assert_eq!(ends.time_of(0.0), None);
    }

    #[test]
    fn even_arrivals_follow_the_stages() {
        let mut p = Pacer::new(stages(), Spacing::Even);
        let arrivals: Vec<Duration> = std::iter::from_fn(|| p.next_arrival())
            .take_while(|&t| t < ms(3500))
            .collect();
        assert_eq!(arrivals.len(), 100 + 2000);
        assert_eq!(arrivals[99], ms(990));
        assert_eq!(arrivals[100], ms(1500));
        assert_eq!(arrivals[101], ms(1501));
    }

    #[test]
    fn poisson_arrivals_have_the_rate_and_exponential_gaps() {
        let mut p = Pacer::new(RateShape::constant(1000.0), Spacing::Poisson { seed: 7 });
        let times: Vec<f64> = (0..100_000)
            .map(|_| p.next_arrival().unwrap().as_secs_f64())
            .collect();
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 1e-3).abs() < 2e-5, "mean gap {mean}");
        // Exponential: P(gap > mean) = e⁻¹.
        let above = gaps.iter().filter(|&&g| g > 1e-3).count() as f64 / gaps.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.01, "{above}");
        // Seeded: the same seed gives the same schedule.
        let mut again = Pacer::new(RateShape::constant(1000.0), Spacing::Poisson { seed: 7 });
        assert_eq!(again.next_arrival().unwrap().as_secs_f64(), times[0]);
    }
}
