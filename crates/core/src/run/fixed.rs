//! A fixed list of levels, run in order (`autoperf run`, the manual
//! override), and the plan of `autoperf run`'s one level: closed (users) or
//! open (a rate, or the scenario's `arrivals:` stages).

use std::time::Duration;

use super::{LevelController, Next};
use crate::engine::{default_warmup, Level, LevelPlan, OpenPlan, Workload, DEFAULT_MAX_IN_FLIGHT};
use crate::load::{RateShape, Spacing, Stage, UserRamp};
use crate::record::{LevelRecord, StopReason};
use crate::scenario::{ArrivalSpacing, Scenario, UserStages};

/// A fixed list of levels, run in order.
pub struct FixedLevels {
    levels: std::vec::IntoIter<Level>,
}

impl FixedLevels {
    pub fn new(levels: Vec<Level>) -> FixedLevels {
        FixedLevels {
            levels: levels.into_iter(),
        }
    }
}

impl LevelController for FixedLevels {
    fn next(&mut self, _: &[LevelRecord]) -> Next {
        match self.levels.next() {
            Some(level) => Next::Run(level),
            None => Next::Finish(StopReason::Completed),
        }
    }
}

/// A level's measured time when none is given.
pub(crate) const DEFAULT_DURATION: Duration = Duration::from_secs(30);

/// What `autoperf run` was asked for; `None` takes the scenario's setting
/// or the default.
#[derive(Debug, Clone, Default)]
pub struct SingleLevel {
    /// A closed workload of this many users.
    pub users: Option<u32>,
    /// An open workload at this rate (arrivals per second), replacing the
    /// scenario's `arrivals:` rate but keeping its spacing and cap.
    pub rate: Option<f64>,
    pub spacing: Option<Spacing>,
    pub max_in_flight: Option<u32>,
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
}

/// Why no level could be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("--users must be at least 1")]
    NoUsers,
    /// Neither users nor a rate, and no `arrivals:` in the scenario.
    #[error("give --users N (closed workload), --rate R/s (open workload), or `users:` or `arrivals:` in the scenario")]
    NoLoad,
}

/// The one level of `autoperf run`: users win over a rate, a rate over the
/// scenario's `arrivals:`.
pub fn single_level(scenario: &Scenario, ask: &SingleLevel) -> Result<Level, PlanError> {
    let warmup = ask.warmup.unwrap_or_else(|| default_warmup(scenario));
    let arrivals = scenario.arrivals.as_ref();
    let open = |mut plan: OpenPlan, scenario_spacing: Option<ArrivalSpacing>| {
        plan.spacing = ask
            .spacing
            .or(scenario_spacing.map(spacing))
            .unwrap_or(Spacing::Poisson { seed: 0 });
        plan.max_in_flight = ask
            .max_in_flight
            .or(arrivals.and_then(|a| a.max_in_flight))
            .unwrap_or(DEFAULT_MAX_IN_FLIGHT)
            .max(1);
        Level::Open(plan)
    };
    match (ask.users, ask.rate, arrivals) {
        (Some(0), _, _) => Err(PlanError::NoUsers),
        (Some(users), _, _) => Ok(Level::Closed(LevelPlan {
            index: 1,
            users,
            ramp: None,
            warmup,
            duration: ask.duration.unwrap_or(DEFAULT_DURATION),
            workload: Workload::Session,
        })),
        (None, Some(rate), _) => {
            let duration = ask.duration.unwrap_or(DEFAULT_DURATION);
            let plan = OpenPlan::constant(1, rate, warmup, duration);
            Ok(open(plan, arrivals.map(|a| a.spacing)))
        }
        (None, None, Some(arrivals)) => {
            // Stages run from the level's start, warm-up included: by
            // default the level lasts exactly as long as they do.
            let duration = ask.duration.unwrap_or_else(|| {
                arrivals.total().map_or(DEFAULT_DURATION, |t| {
                    t.saturating_sub(warmup).max(Duration::from_secs(1))
                })
            });
            let stages = arrivals
                .stages
                .iter()
                .map(|s| Stage {
                    rate: s.rate_per_s,
                    length: s.length.unwrap_or(Duration::ZERO),
                })
                .collect();
            let mut plan = OpenPlan::constant(1, 1.0, warmup, duration);
            plan.shape = RateShape::stages(stages);
            Ok(open(plan, Some(arrivals.spacing)))
        }
        (None, None, None) => match &scenario.users {
            Some(UserStages::All(users)) => Ok(Level::Closed(LevelPlan {
                index: 1,
                users: *users,
                ramp: None,
                warmup,
                duration: ask.duration.unwrap_or(DEFAULT_DURATION),
                workload: Workload::Session,
            })),
            Some(UserStages::Ramp(stages)) => {
                // Like arrival stages: from the level's start, warm-up
                // included, and by default the level lasts as they do.
                let stages: Vec<(u32, Duration)> = stages.iter().map(|s| (s.to, s.over)).collect();
                let ramp = UserRamp::new(&stages);
                let duration = ask.duration.unwrap_or_else(|| {
                    ramp.total()
                        .saturating_sub(warmup)
                        .max(Duration::from_secs(1))
                });
                Ok(Level::Closed(LevelPlan {
                    index: 1,
                    users: ramp.max(),
                    ramp: Some(ramp),
                    warmup,
                    duration,
                    workload: Workload::Session,
                }))
            }
            None => Err(PlanError::NoLoad),
        },
    }
}

/// The scenario's `arrivals.spacing` as the engine takes it.
fn spacing(s: ArrivalSpacing) -> Spacing {
    match s {
        ArrivalSpacing::Poisson => Spacing::Poisson { seed: 0 },
        ArrivalSpacing::Even => Spacing::Even,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ArrivalStage, Arrivals};

    fn scenario(arrivals: Option<Arrivals>) -> Scenario {
        let mut s = crate::scenario::parse(
            "name: s\ntarget: {base_url: \"http://127.0.0.1:1\"}\nrequests: {a: {path: /}}\n",
            std::path::Path::new("s.yaml"),
        )
        .expect("a minimal scenario");
        s.arrivals = arrivals;
        s
    }

    #[test]
    fn users_a_rate_or_the_scenarios_arrivals() {
        let plain = scenario(None);
        assert_eq!(
            single_level(&plain, &SingleLevel::default()),
            Err(PlanError::NoLoad)
        );
        let zero = SingleLevel {
            users: Some(0),
            ..Default::default()
        };
        assert_eq!(single_level(&plain, &zero), Err(PlanError::NoUsers));
        let closed = SingleLevel {
            users: Some(5),
            rate: Some(10.0),
            ..Default::default()
        };
        assert_eq!(single_level(&plain, &closed).unwrap().users(), Some(5));
        // A rate keeps the scenario's spacing and cap.
        let staged = scenario(Some(Arrivals {
            stages: vec![
                ArrivalStage {
                    rate_per_s: 5.0,
                    length: Some(Duration::from_secs(10)),
                },
                ArrivalStage {
                    rate_per_s: 20.0,
                    length: Some(Duration::from_secs(10)),
                },
            ],
            spacing: ArrivalSpacing::Even,
            max_in_flight: Some(7),
        }));
        let rate = SingleLevel {
            rate: Some(100.0),
            warmup: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let Level::Open(plan) = single_level(&staged, &rate).unwrap() else {
            panic!("a rate makes an open level");
        };
        assert_eq!(
            (plan.spacing, plan.max_in_flight, plan.duration),
            (Spacing::Even, 7, DEFAULT_DURATION)
        );
        assert!((plan.target_rate() - 100.0).abs() < 1e-9);
        // The stages alone: the level lasts as long as they do.
        let stages = SingleLevel {
            warmup: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let Level::Open(plan) = single_level(&staged, &stages).unwrap() else {
            panic!("arrivals make an open level");
        };
        assert_eq!(plan.duration, Duration::from_secs(18));
    }
}
