//! The run wing: everything that drives load levels. `run_levels` runs the
//! levels a `LevelController` chooses against a scenario's target, samples
//! the profiler agents, and keeps the results directory current as it goes.
//!
//! - `levels`: `run_levels`, level after level: checked, measured, kept.
//! - `redo`: a level that cannot stand, run again on other workers.
//! - `warnings`: what a level says beyond its figures, in words.
//! - `fixed`: a given list of levels (`run`, the manual override), and the
//!   plan of `autoperf run`'s one level.
//! - `capacity`: the capacity analysis (AutoPerf 2.1) as a controller.
//! - `profile`: the profiling mode (2.1.4) as a controller.
//! - `open_capacity`: the open-workload search for the highest arrival rate
//!   that meets the SLOs, optionally per resource value (`--vary`).
//! - `vary`: `--vary`, one open search per resource value.
//! - `validity`: levels whose data cannot be trusted (failed requests).
//! - `completions`: when requests completed, to divide the agents' figures.
//!
//! The pure algorithms these lean on live below this wing, in `capacity/`
//! and `profile/`; nothing there imports from here.

pub mod capacity;
mod completions;
pub mod fixed;
mod levels;
pub mod open_capacity;
pub mod profile;
mod redo;
pub(crate) mod validity;
pub mod vary;
mod warnings;

pub use levels::run_levels;

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::{self, EngineError, Level};
use crate::measure::{LevelInfo, Tick, TickSink};
use crate::profile::{AgentError, Sampler};
use crate::record::{Analysis, LevelRecord, Mode, StopReason};
use crate::results::ResultsError;

/// How often the agents are read (AutoPerf's profilers report every second).
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// Hears about a run as it goes (the live view, tests).
pub trait RunObserver: TickSink {
    fn level_started(&mut self, _level: &Level) {}
    fn level_finished(&mut self, _level: &LevelRecord) {}
    fn warning(&mut self, _message: &str) {}
    /// A warning no one may miss (every request failed): shown even when
    /// the observer is otherwise quiet.
    fn alarm(&mut self, message: &str) {
        self.warning(message)
    }
    /// A controller's note on what it does next and why.
    fn note(&mut self, _message: &str) {}
    /// The consumer groups' latest lag, when lag thresholds are watched:
    /// told once, before the first level.
    fn watching_lag(&mut self, _latest: crate::profile::latest_lag::LatestLag) {}
}

/// What a controller wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Run(Level),
    /// No more levels; the reason goes to `analysis.stop_reason`.
    Finish(StopReason),
}

/// Chooses the levels of a run and may end a level early.
pub trait LevelController {
    /// The next level, given every level finished so far.
    fn next(&mut self, finished: &[LevelRecord]) -> Next;

    /// Every tick of the running level; returning true ends the level now
    /// (steady state reached, demands converged). `sampler` reads the
    /// agents, when there are any.
    fn on_tick(&mut self, _level: &LevelInfo, _tick: &Tick, _sampler: Option<&Sampler>) -> bool {
        false
    }

    /// A finished level before it is written: the controller may add to it.
    fn finish_level(&mut self, _level: &mut LevelRecord, _sampler: Option<&Sampler>) {}

    /// `run.json`'s `analysis` so far, refreshed after every level; the
    /// runner sets its `stop_reason`.
    fn analysis(&self) -> Analysis {
        Analysis::default()
    }

    /// Why the controller chose what it is running now, for the live view.
    fn reason(&self) -> Option<String> {
        None
    }

    /// Idle time before the level `next` chose: an overloaded level leaves
    /// a backlog the server works off before the next one is measured.
    fn pause(&mut self) -> Duration {
        Duration::ZERO
    }

    /// `level` cannot stand (the generator limited it and more workers
    /// will carry the next one, or it lost a worker and the others are
    /// left): the level to run instead (the same load, a new index; `why`
    /// is added to its reason), or `None` to take the finished level as
    /// it is.
    fn rerun(&mut self, _level: &Level, _why: &str) -> Option<Level> {
        None
    }

    /// Whether `rerun` may give a level (asked before waiting for workers
    /// to come back for one).
    fn reruns(&self) -> bool {
        false
    }
}

pub struct RunPlan {
    pub mode: Mode,
    pub out: PathBuf,
    /// Sample the profiler agents named under `servers:` (when there are any).
    pub use_agents: bool,
    /// Levels already measured (resuming): they are not run again.
    pub resumed: Vec<LevelRecord>,
    /// Where each level's load comes from: this host's processes and
    /// source addresses, or workers on other hosts.
    pub sources: engine::LoadSources,
    /// What was asked, kept in run.json's `plan` for `--resume`.
    pub asked: Option<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error(transparent)]
    Agent(#[from] AgentError),
}
