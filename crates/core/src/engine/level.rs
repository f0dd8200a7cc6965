//! What a load level is: a closed population of users (`LevelPlan`) or an
//! open stream of arrivals (`OpenPlan`), as one `Level`, and what each user
//! does (`Workload`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::load::{RateShape, Spacing, UserRamp};
use crate::scenario::{RequestId, Scenario};

/// One closed-workload load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelPlan {
    /// 1-based index of the level in its run.
    pub index: u32,
    /// Users at once: all of them, or a ramp's most.
    pub users: u32,
    /// Users over time from the level's start (warm-up included), instead
    /// of all `users` at once.
    pub ramp: Option<UserRamp>,
    pub warmup: Duration,
    /// Measured time after the warm-up (at most: a stop may end it sooner).
    pub duration: Duration,
    pub workload: Workload,
}

/// One load level: a closed population of users, or an open stream of
/// arrivals.
#[derive(Debug, Clone, PartialEq)]
pub enum Level {
    Closed(LevelPlan),
    Open(OpenPlan),
}

impl Level {
    /// 1-based index of the level in its run.
    pub fn index(&self) -> u32 {
        match self {
            Level::Closed(p) => p.index,
            Level::Open(p) => p.index,
        }
    }

    pub fn warmup(&self) -> Duration {
        match self {
            Level::Closed(p) => p.warmup,
            Level::Open(p) => p.warmup,
        }
    }

    /// Measured time after the warm-up (at most).
    pub fn duration(&self) -> Duration {
        match self {
            Level::Closed(p) => p.duration,
            Level::Open(p) => p.duration,
        }
    }

    pub(crate) fn workload(&self) -> &Workload {
        match self {
            Level::Closed(p) => &p.workload,
            Level::Open(p) => &p.workload,
        }
    }

    /// The users of a closed level.
    pub(crate) fn users(&self) -> Option<u32> {
        match self {
            Level::Closed(p) => Some(p.users),
            Level::Open(_) => None,
        }
    }

    /// The closed level's ramp of users, if it has one.
    pub(crate) fn ramp(&self) -> Option<&UserRamp> {
        match self {
            Level::Closed(p) => p.ramp.as_ref(),
            Level::Open(_) => None,
        }
    }

    /// Connections the level may hold at once: one per user, or one per
    /// in-flight arrival.
    pub(crate) fn connections(&self) -> u32 {
        match self {
            Level::Closed(p) => p.users,
            Level::Open(p) => p.max_in_flight,
        }
    }
}

/// What each user does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Workload {
    /// Walk the scenario's session graph, session after session.
    Session,
    /// Profiling mode (AutoPerf section 2.1.4): run the prerequisites once,
    /// then only `request`, over and over.
    Profile {
        request: RequestId,
        prerequisites: Vec<RequestId>,
    },
}

/// The warm-up a level gets when none is given: long enough for users
/// started over one think time to be in their steady rhythm.
pub fn default_warmup(scenario: &Scenario) -> Duration {
    let twice_think = scenario.mean_think_time() * 2;
    twice_think.clamp(Duration::from_secs(3), Duration::from_secs(30))
}

/// One open-workload load level.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpenPlan {
    /// 1-based index of the level in its run.
    pub index: u32,
    /// Arrivals per second over time, from the level's start (warm-up
    /// included).
    pub shape: RateShape,
    pub spacing: Spacing,
    pub warmup: Duration,
    /// Measured time after the warm-up (at most: a stop may end it sooner).
    pub duration: Duration,
    /// Sessions in flight at most, over the whole generator. Arrivals past
    /// it wait for a slot, and are counted.
    pub max_in_flight: u32,
    /// `Session`: each arrival walks one session. `Profile`: each arrival
    /// sends the one request (prerequisites are not run).
    pub workload: Workload,
}

impl OpenPlan {
    /// A constant rate with evenly spaced arrivals.
    pub fn constant(index: u32, rate: f64, warmup: Duration, duration: Duration) -> OpenPlan {
        OpenPlan {
            index,
            shape: RateShape::constant(rate),
            spacing: Spacing::Even,
            warmup,
            duration,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            workload: Workload::Session,
        }
    }

    /// Mean target rate over the measured window (arrivals per second).
    pub fn target_rate(&self) -> f64 {
        let from = self.warmup;
        let to = self.warmup + self.duration;
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            (self.shape.count_at(to) - self.shape.count_at(from)) / secs
        } else {
            self.shape.rate_at(from)
        }
    }
}

/// Enough for a slow server at a high rate, yet bounded: each in-flight
/// session holds a connection (a file descriptor) and its buffers.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 10_000;
