//! The open-workload capacity search: the highest arrival rate at which the
//! system still meets its SLOs, as Theodolite measures a scalability
//! benchmark's load dimension (Henning & Hasselbring; Konkel et al. 2023):
//! a rate passes when the scenario's thresholds hold and at least 95% of it
//! is delivered; the answer is the highest passing rate, the first failing
//! one and why it failed.
//!
//! ```text
//!  rate ▲            ✗ first failure (saturated: delivered E < 95%)
//!       │        ✓         E·(1+p/2) ✗
//!       │    ✓        E·(1−p/2) ✓          bracket ≤ p wide: done
//!       │ ✓
//!       └──────────────────────────────→ levels
//!         geometric ramp   probes around the measured capacity E,
//!                          else bisection of the bracket
//! ```
//!
//! **Beyond plain bisection.** A level offered more than the system can
//! take delivers what the system can do, `E` (an open system's throughput
//! past saturation is its capacity). The search probes just below and
//! just above `E` (by half the precision) before it bisects: on a system
//! whose latency holds until saturation, two levels after the first
//! failure end the search. When latency fails sooner (Poisson arrivals, a
//! tight percentile) the probes fail and the bracket is bisected as usual.
//!
//! **The generator's limit.** A level that failed while the generator could
//! not keep the rate tops the bracket like a failure, so the search still
//! narrows it down, but it ends as `client_bottleneck` and the rate is
//! reported as autoperf's limit (`generator_limit_rps`), never the system's.
//!
//! Pure: the controller (`run::open_capacity`) runs the levels and judges
//! them; this only chooses rates. No clock, no I/O.

/// Tunables of the rate search.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateSearchConfig {
    /// The first rate (arrivals per second).
    pub start_rps: f64,
    /// The ramp's step: each passing rate is multiplied by it until one
    /// fails (divided, while the first levels fail).
    pub factor: f64,
    /// The search ends when the first failing rate is within this fraction
    /// above the highest passing one.
    pub precision: f64,
    pub max_levels: u32,
    /// The highest rate tried (the generator's ceiling).
    pub max_rate_rps: f64,
}

impl Default for RateSearchConfig {
    fn default() -> Self {
        RateSearchConfig {
            start_rps: 10.0,
            factor: 2.0,
            precision: 0.02,
            max_levels: 30,
            max_rate_rps: crate::scenario::rate::MAX_RATE_PER_SECOND,
        }
    }
}

/// How a level at one rate went.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RateVerdict {
    /// Every SLO held.
    Pass,
    /// An SLO failed: `slo` names the first that did. `saturated_rps`: the
    /// rate the system delivered when that was short of the rate (its
    /// capacity, measured).
    Fail {
        slo: String,
        saturated_rps: Option<f64>,
    },
    /// An SLO failed, but the generator could not keep the rate: nothing
    /// is known about the system at this rate.
    GeneratorBound { why: String },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateOutcome {
    pub rate_rps: f64,
    pub verdict: RateVerdict,
}

/// Why the rate search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RateStop {
    /// The bracket is within the precision.
    Completed,
    /// A failing level was the generator's limit, not the system's.
    ClientBottleneck,
    MaxLevels,
    /// Every rate up to the ceiling passed.
    MaxRate,
    /// Even a small fraction of the start rate failed.
    NoPassingRate,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RateDecision {
    Run { rate_rps: f64, reason: String },
    Done { stop_reason: RateStop },
}

/// Rates below the start this many times divided by the factor are not
/// tried: a system that fails there fails at any rate worth measuring.
const MAX_STEPS_DOWN: i32 = 4;

/// The search's state: the bracket and the measured capacity.
#[derive(Debug, Clone)]
pub(crate) struct RateSearch {
    config: RateSearchConfig,
    /// The highest passing rate.
    pass: Option<f64>,
    /// The lowest failing rate and the SLO it failed.
    fail: Option<(f64, String)>,
    /// The latest capacity measured at a saturated level.
    capacity: Option<f64>,
    tried: Vec<f64>,
    /// The lowest rate the generator could not keep while an SLO failed:
    /// the bracket's top then is autoperf's limit, not the system's.
    generator: Option<f64>,
}

/// What the search found so far.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateSummary {
    pub max_passing_rate_rps: Option<f64>,
    pub first_failing_rate_rps: Option<f64>,
    pub failed_slo: Option<String>,
    pub capacity_rps: Option<f64>,
    /// The lowest rate the generator could not keep.
    pub generator_limit_rps: Option<f64>,
    pub levels: u32,
}

impl RateSearch {
    pub(crate) fn new(config: RateSearchConfig) -> RateSearch {
        RateSearch {
            config,
            pass: None,
            fail: None,
            capacity: None,
            tried: Vec::new(),
            generator: None,
        }
    }

    /// The lowest rate known to fail, and whether the generator (not the
    /// system) failed there.
    fn top(&self) -> Option<(f64, bool)> {
        match (&self.fail, self.generator) {
            (Some((f, _)), Some(g)) if g < *f => Some((g, true)),
            (Some((f, _)), _) => Some((*f, false)),
            (None, Some(g)) => Some((g, true)),
            (None, None) => None,
        }
    }

    /// The next rate to run, or the end.
    pub(crate) fn next(&self) -> RateDecision {
        let done = |stop_reason| RateDecision::Done { stop_reason };
        let run = |rate: f64, reason: String| RateDecision::Run {
            rate_rps: round_rate(rate),
            reason,
        };
        if self.tried.len() as u32 >= self.config.max_levels {
            return done(RateStop::MaxLevels);
        }
        let c = &self.config;
        // A bracket topped by the generator's failure ends as its limit.
        let end = |generator: bool| match generator {
            true => RateStop::ClientBottleneck,
            false => RateStop::Completed,
        };
        match (self.pass, self.top()) {
            (None, None) => run(c.start_rps, "start".into()),
            (Some(pass), None) => {
                if pass >= c.max_rate_rps {
                    return done(RateStop::MaxRate);
                }
                let rate = (pass * c.factor).min(c.max_rate_rps);
                run(
                    rate,
                    format!("ramp: ×{} the highest passing rate", c.factor),
                )
            }
            (None, Some((fail, generator))) => {
                let below = self
                    .capacity
                    .filter(|_| !generator)
                    .map(|e| e * (1.0 - c.precision / 2.0));
                match below {
                    Some(rate) if rate < fail && self.untried(rate) => run(
                        rate,
                        format!("just below the capacity measured at {fail}/s"),
                    ),
                    _ => {
                        let rate = fail / c.factor;
                        if rate < c.start_rps / c.factor.powi(MAX_STEPS_DOWN) {
                            return done(match generator {
                                true => RateStop::ClientBottleneck,
                                false => RateStop::NoPassingRate,
                            });
                        }
                        run(rate, format!("ramp down: ÷{} the failing rate", c.factor))
                    }
                }
            }
            (Some(pass), Some((fail, generator))) => {
                if fail - pass <= c.precision * fail {
                    return done(end(generator));
                }
                let inside = |r: f64| r > pass && r < fail && self.untried(r);
                let narrow = |r: f64| r - pass > c.precision * r && fail - r > c.precision * fail;
                if let Some(e) = self.capacity.filter(|_| !generator) {
                    let below = e * (1.0 - c.precision / 2.0);
                    let above = e * (1.0 + c.precision / 2.0);
                    if inside(below) && below - pass > c.precision * below {
                        return run(below, format!("just below the measured capacity {e:.1}/s"));
                    }
                    if inside(above) && fail - above > c.precision * fail {
                        return run(above, format!("just above the measured capacity {e:.1}/s"));
                    }
                    // Passing above the capacity: the backlog grows too
                    // slowly to break an SLO within a level. Small steps
                    // up find where it does sooner than halving the gap.
                    let step = pass * (1.0 + 2.0 * c.precision);
                    if pass >= e && inside(step) && narrow(step) {
                        return run(
                            step,
                            format!(
                                "a small step above {}/s, past the measured capacity {e:.1}/s",
                                round_rate(pass)
                            ),
                        );
                    }
                }
                let what = if generator {
                    "the generator's limit: "
                } else {
                    ""
                };
                run(
                    (pass + fail) / 2.0,
                    format!(
                        "bisection of {what}{}/s ✓ … {}/s ✗",
                        round_rate(pass),
                        round_rate(fail)
                    ),
                )
            }
        }
    }

    fn untried(&self, rate: f64) -> bool {
        let rate = round_rate(rate);
        !self.tried.iter().any(|&t| (t - rate).abs() < 1e-9)
    }

    /// A finished level.
    pub(crate) fn record(&mut self, outcome: RateOutcome) {
        let rate = outcome.rate_rps;
        self.tried.push(round_rate(rate));
        match outcome.verdict {
            RateVerdict::Pass => {
                if self.pass.is_none_or(|p| rate > p) {
                    self.pass = Some(rate);
                }
                // A pass above a failure (noise near the limit): the
                // failure no longer bounds anything.
                if self.fail.as_ref().is_some_and(|(f, _)| *f <= rate) {
                    self.fail = None;
                }
                if self.generator.is_some_and(|g| g <= rate) {
                    self.generator = None;
                }
            }
            RateVerdict::Fail { slo, saturated_rps } => {
                if self.fail.as_ref().is_none_or(|(f, _)| rate < *f) {
                    self.fail = Some((rate, slo));
                }
                if let Some(e) = saturated_rps.filter(|e| *e > 0.0) {
                    self.capacity = Some(e);
                }
                if self.pass.is_some_and(|p| p >= rate) {
                    self.pass = None;
                }
            }
            RateVerdict::GeneratorBound { .. } => {
                if self.generator.is_none_or(|g| rate < g) {
                    self.generator = Some(rate);
                }
                if self.pass.is_some_and(|p| p >= rate) {
                    self.pass = None;
                }
            }
        }
    }

    /// The highest passing rate and the lowest failing one (the system's
    /// or the generator's), so far.
    pub(crate) fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.pass, self.top().map(|t| t.0))
    }

    pub(crate) fn summary(&self) -> RateSummary {
        RateSummary {
            max_passing_rate_rps: self.pass,
            first_failing_rate_rps: self.fail.as_ref().map(|(f, _)| *f),
            failed_slo: self.fail.as_ref().map(|(_, s)| s.clone()),
            capacity_rps: self.capacity,
            generator_limit_rps: self.generator,
            levels: self.tried.len() as u32,
        }
    }
}

/// Rates to four significant digits: 242.6/s, not 242.5531/s.
pub(crate) fn round_rate(rate: f64) -> f64 {
    if rate <= 0.0 || !rate.is_finite() {
        return rate;
    }
    let digits = 4 - 1 - rate.log10().floor() as i32;
    let scale = 10f64.powi(digits);
    (rate * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A system of capacity `mu` whose latency SLO fails above `limit`.
    fn system(mu: f64, limit: f64) -> impl Fn(f64) -> RateVerdict {
        move |rate| {
            if rate <= limit {
                RateVerdict::Pass
            } else if rate > mu / 0.95 {
                RateVerdict::Fail {
                    slo: "achieved >= 95% of the rate".into(),
                    saturated_rps: Some(mu),
                }
            } else {
                RateVerdict::Fail {
                    slo: "p99 < 100ms".into(),
                    saturated_rps: None,
                }
            }
        }
    }

    fn search(
        config: RateSearchConfig,
        sut: impl Fn(f64) -> RateVerdict,
    ) -> (RateSearch, RateStop) {
        let mut s = RateSearch::new(config);
        loop {
            match s.next() {
                RateDecision::Run { rate_rps, .. } => s.record(RateOutcome {
                    rate_rps,
                    verdict: sut(rate_rps),
                }),
                RateDecision::Done { stop_reason } => return (s, stop_reason),
            }
        }
    }

    #[test]
    fn latency_that_holds_until_saturation_takes_two_levels_after_the_failure() {
        let config = RateSearchConfig {
            start_rps: 10.0,
            ..Default::default()
        };
        let (s, stop) = search(config, system(245.0, 245.0));
        let sum = s.summary();
        assert_eq!(stop, RateStop::Completed);
        let pass = sum.max_passing_rate_rps.unwrap();
        let fail = sum.first_failing_rate_rps.unwrap();
        assert!((245.0 * 0.98..=245.0).contains(&pass), "{sum:?}");
        assert!(fail > 245.0 && fail - pass <= 0.02 * fail, "{sum:?}");
        // 10..160 pass, 320 fails saturated, then one below and one above.
        assert_eq!(sum.levels, 8, "{sum:?}");
    }

    #[test]
    fn passing_past_the_capacity_steps_up_in_small_steps() {
        // A short level passes a little past the capacity: its backlog
        // has not grown enough to break the SLO yet.
        let (s, stop) = search(RateSearchConfig::default(), |rate| {
            if rate <= 255.0 {
                RateVerdict::Pass
            } else {
                RateVerdict::Fail {
                    slo: "p99 < 100ms".into(),
                    saturated_rps: Some(250.0),
                }
            }
        });
        let sum = s.summary();
        assert_eq!(stop, RateStop::Completed);
        assert!(sum.max_passing_rate_rps.unwrap() >= 250.0, "{sum:?}");
        assert!(sum.levels <= 10, "{sum:?}");
    }

    #[test]
    fn latency_failing_early_falls_back_to_bisection() {
        let (s, stop) = search(RateSearchConfig::default(), system(245.0, 200.0));
        let sum = s.summary();
        assert_eq!(stop, RateStop::Completed);
        let pass = sum.max_passing_rate_rps.unwrap();
        assert!((196.0..=200.0).contains(&pass), "{sum:?}");
        assert_eq!(sum.failed_slo.as_deref(), Some("p99 < 100ms"));
        assert!(sum.levels <= 14, "{sum:?}");
    }

    #[test]
    fn a_start_above_capacity_ramps_down_to_the_measured_capacity() {
        let config = RateSearchConfig {
            start_rps: 10_000.0,
            ..Default::default()
        };
        let (s, stop) = search(config, system(245.0, 245.0));
        let sum = s.summary();
        assert_eq!(stop, RateStop::Completed);
        assert!(sum.max_passing_rate_rps.unwrap() >= 240.0, "{sum:?}");
        assert!(sum.levels <= 4, "{sum:?}");
    }

    #[test]
    fn the_generator_ends_the_search_without_a_system_limit() {
        let (s, stop) = search(RateSearchConfig::default(), |rate| {
            if rate < 100.0 {
                RateVerdict::Pass
            } else {
                RateVerdict::GeneratorBound {
                    why: "arrivals late".into(),
                }
            }
        });
        // The generator's limit is bracketed like a system's, but never
        // reported as one.
        assert_eq!(stop, RateStop::ClientBottleneck);
        let sum = s.summary();
        let pass = sum.max_passing_rate_rps.unwrap();
        let limit = sum.generator_limit_rps.unwrap();
        assert!(
            pass < 100.0 && limit >= 100.0 && limit - pass <= 0.02 * limit,
            "{sum:?}"
        );
        assert_eq!(sum.first_failing_rate_rps, None);
        assert_eq!(sum.failed_slo, None);
    }

    #[test]
    fn nothing_passing_and_everything_passing_end_too() {
        let (_, stop) = search(RateSearchConfig::default(), |_| RateVerdict::Fail {
            slo: "error_rate < 1%".into(),
            saturated_rps: None,
        });
        assert_eq!(stop, RateStop::NoPassingRate);
        let config = RateSearchConfig {
            max_rate_rps: 1000.0,
            ..Default::default()
        };
        let (s, stop) = search(config, |_| RateVerdict::Pass);
        assert_eq!(stop, RateStop::MaxRate);
        assert_eq!(s.summary().max_passing_rate_rps, Some(1000.0));
    }

    #[test]
    fn rates_keep_four_digits() {
        assert_eq!(round_rate(242.5531), 242.6);
        assert_eq!(round_rate(12345.6), 12350.0);
        assert_eq!(round_rate(0.123456), 0.1235);
    }
}
