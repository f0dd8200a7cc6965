//! Load level selection (AutoPerf section 2.1.2) as a resumable state machine.
//! It never runs anything: the controller asks [`LevelSearch::next`] which
//! level to run, runs it, and hands the finished level back with
//! [`LevelSearch::record`]. Its whole state is a function of the levels
//! recorded, so [`LevelSearch::replay`] rebuilds an interrupted analysis from
//! `levels.jsonl` and it carries on with the same levels.
//!
//! ```text
//!  FindMin: 1 ─too low─→ N_min (≥ 2×) ─too low─→ … ─ok─→ n_min
//!  Range:   run ⌈N*⌉, then fill in [n_min, N*]: by the model (guided.rs,
//!           the default) or by bisection, left half first;
//!           when the stack empties and N* has grown: run N*', fill [N*, N*']
//!  Beyond:  N*×1.1, N*×1.2 …  (levels_beyond of them; the model's search
//!           stops after the first that confirms its plateau) → Done(completed)
//!  any level: client bottleneck → Done(client_bottleneck)
//!             K_ovld overloaded in a row (overload.rs) → Done(overload)
//!             level cap → Done(max_levels); user cap → Done(max_users)
//! ```
//!
//! **Bisection without recursion.** The paper's recursive algorithm runs the
//! midpoint of a range and recurses into both halves, left first, unless the
//! midpoint's throughput lies on the straight line between the ends. Here the
//! ranges wait on an explicit stack (right half pushed first, so the left
//! half pops first), so the machine can stop after any level and resume. A
//! midpoint already run is judged without running it again; a range of
//! adjacent integers is not split.
//!
//! **Where the paper is silent** (each choice is commented where it is made):
//! the minimum search also stops when throughput stops scaling with users
//! (a non-CPU bottleneck saturates before the CPU reaches `ρ_min`); `N*` comes
//! from the demands of the highest level measured, not the latest; a new `N*`
//! must beat the top by more than the tolerance to extend the range; without
//! CPU demands the range grows by doubling while throughput still grows; the
//! search stops at the first client-bottlenecked level; a midpoint is judged
//! against the line through the ends (integer midpoints are not exact).
//!
//! One file per part of the machine; several hold an `impl LevelSearch`:
//!
//! - `mod.rs`: the public types, the machine's state and its entry points
//!   (`new`, `replay`, `next`, `record`).
//! - `minimum`: the minimum search (`FindMin`) and its `N_min` estimate.
//! - `bisection`: filling in a range: the strategy's work item and the
//!   bisection's midpoint test.
//! - `guide`: the model-guided search's questions to the fitted model
//!   (`guided.rs`): the next level, a hidden station, the plateau.
//! - `advance`: the stack is empty: start the range, extend it, go past
//!   its top, or finish.
//! - `summary`: `N*`, the bottleneck and the analysis summary, with their
//!   types.
//! - `formulas`: pure arithmetic: estimates rounded to users, the linearity
//!   test, the levels past the top.
//! - `fixtures` (tests only): synthetic levels and curves.

mod advance;
mod bisection;
#[cfg(test)]
mod fixtures;
mod formulas;
mod guide;
mod minimum;
mod summary;

use std::collections::BTreeMap;

use super::guided;
use super::overload::OverloadDetector;
use super::range::TierDemand;
use crate::scenario::CapacitySettings;
pub(crate) use crate::scenario::SearchStrategy as Strategy;
use guide::Guidance;

/// Tunables of the search.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchConfig {
    /// Minimum bottleneck utilisation of the lowest level of the range.
    pub rho_min: f64,
    /// Relative tolerance of the piecewise-linear test.
    pub tolerance: f64,
    /// Consecutive overloaded levels that confirm overload.
    pub k_ovld: u32,
    /// Levels run past the saturation estimate.
    pub levels_beyond: u32,
    /// Step of those levels as a fraction of the top (0.1: ×1.1, ×1.2, …).
    pub beyond_step: f64,
    /// Hard cap on levels run (default 30), so the search always ends.
    pub max_levels: u32,
    /// Hard cap on users at any level (default 10 000).
    pub max_users: u32,
    /// Fraction of the maximum throughput that defines saturation (0.95).
    pub saturation_fraction: f64,
    /// During the minimum search, throughput grown by less than this fraction
    /// of the growth in users means the knee was passed (0.5).
    pub stall_ratio: f64,
    /// How levels inside the range are chosen.
    pub strategy: Strategy,
}

impl SearchConfig {
    pub(crate) fn from_settings(s: &CapacitySettings) -> Self {
        SearchConfig {
            rho_min: s.rho_min,
            tolerance: s.tolerance,
            k_ovld: s.k_ovld,
            levels_beyond: s.levels_beyond,
            beyond_step: 0.1,
            max_levels: 30,
            max_users: 10_000,
            saturation_fraction: 0.95,
            stall_ratio: 0.5,
            strategy: s.search,
        }
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self::from_settings(&CapacitySettings::default())
    }
}

/// A finished level, as the search needs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LevelOutcome {
    pub users: u32,
    pub throughput_rps: f64,
    /// Mean response time `R(L)`, seconds.
    pub response_time_s: f64,
    /// Configured mean think time `γ`, seconds.
    pub think_time_s: f64,
    /// CPU demand per process (converged or eq. 2's); empty without agents.
    pub demands: Vec<TierDemand>,
    /// The demand tracker timed out with every process at zero (2.1.1).
    pub load_too_low: bool,
    /// Achieved think time inflated past the threshold (2.1.3).
    pub client_bottleneck: bool,
    /// Requests measured: how precise the throughput is (0: unknown).
    pub requests: u64,
    /// The throughput's 95% half-width relative to it, when measured.
    pub precision: Option<f64>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Run { users: u32, reason: String },
    Done { stop_reason: StopReason },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// The range was covered and the levels past `N*` run.
    Completed,
    /// The power state machine confirmed overload.
    Overload,
    /// A level's achieved think time showed the generator was the limit.
    ClientBottleneck,
    /// The cap on the number of levels was reached with work left.
    MaxLevels,
    /// The minimum search or the range hit the cap on users.
    MaxUsers,
}

impl StopReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Overload => "overload",
            StopReason::ClientBottleneck => "client_bottleneck",
            StopReason::MaxLevels => "max_levels",
            StopReason::MaxUsers => "max_users",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    FindMin,
    Range,
    Beyond,
}

/// A unit of pending work on the stack.
#[derive(Debug, Clone, PartialEq)]
enum Work {
    /// Run this level (unless it has been run).
    Probe { users: u32, reason: String },
    /// Both ends have been run (or will be, by a probe above on the stack):
    /// run the midpoint and judge linearity.
    Bisect { lo: u32, hi: u32 },
    /// Both ends have been run (or will be): ask the model for levels in
    /// between until it is satisfied (`guided.rs`); it stays on the stack
    /// under each level it asks for.
    Guided { lo: u32, hi: u32 },
}

#[derive(Debug, Clone, PartialEq)]
struct Pending {
    users: u32,
    reason: String,
    /// Set when the level is the midpoint of this range.
    range: Option<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub(crate) struct LevelSearch {
    config: SearchConfig,
    phase: Phase,
    /// Last element is the next work item.
    work: Vec<Work>,
    pending: Option<Pending>,
    runs: Vec<(LevelOutcome, String)>,
    by_users: BTreeMap<u32, usize>,
    overload: OverloadDetector,
    n_min: Option<u32>,
    /// Upper ends of the range, in the order they were set.
    tops: Vec<u32>,
    stop: Option<StopReason>,
    first_client_bottleneck: Option<u32>,
    /// Levels past the top planned so far (steps of `beyond_step`).
    beyond: u32,
    /// The curve was flat below the top when the search went past it (a
    /// non-CPU bottleneck): the overload machine decides the end.
    beyond_flat: bool,
}

impl LevelSearch {
    pub(crate) fn new(config: SearchConfig) -> Self {
        let overload = OverloadDetector::new(config.k_ovld);
        LevelSearch {
            config,
            phase: Phase::FindMin,
            work: vec![Work::Probe {
                users: 1,
                reason: "start at 1 user (2.1.2)".into(),
            }],
            pending: None,
            runs: Vec::new(),
            by_users: BTreeMap::new(),
            overload,
            n_min: None,
            tops: Vec::new(),
            stop: None,
            first_client_bottleneck: None,
            beyond: 0,
            beyond_flat: false,
        }
    }

    /// Rebuilds the search from finished levels, in the order they ran, by
    /// asking and recording exactly as the live run did: the state is a pure
    /// function of the outcomes, so the run resumes with the same levels.
    pub(crate) fn replay(config: SearchConfig, outcomes: &[LevelOutcome]) -> Self {
        let mut search = LevelSearch::new(config);
        for o in outcomes {
            let _ = search.next();
            search.record(o.clone());
        }
        search
    }

    /// The next level to run, or why the search is over. Asking again before
    /// recording returns the same level, which is why this is not an
    /// `Iterator`: it does not advance until a level is recorded.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> Decision {
        loop {
            if let Some(stop_reason) = self.stop {
                return Decision::Done { stop_reason };
            }
            if let Some(p) = &self.pending {
                return Decision::Run {
                    users: p.users,
                    reason: p.reason.clone(),
                };
            }
            let Some(work) = self.work.pop() else {
                self.advance_phase();
                continue;
            };
            let pending = match work {
                Work::Probe { users, reason } => {
                    let users = users.clamp(1, self.config.max_users.max(1));
                    if self.by_users.contains_key(&users) {
                        continue;
                    }
                    Pending {
                        users,
                        reason,
                        range: None,
                    }
                }
                Work::Guided { lo, hi } => match self.guide(lo, hi) {
                    Guidance::Run(p) => {
                        self.work.push(Work::Guided { lo, hi });
                        Pending {
                            users: p.users,
                            reason: p.reason,
                            range: None,
                        }
                    }
                    Guidance::Satisfied => continue,
                    Guidance::NoModel => {
                        self.work.push(Work::Bisect { lo, hi });
                        continue;
                    }
                },
                Work::Bisect { lo, hi } => {
                    if guided::gap_resolved(lo, hi, self.config.tolerance) {
                        continue;
                    }
                    let mid = lo + (hi - lo) / 2;
                    if self.by_users.contains_key(&mid) {
                        self.split(lo, mid, hi);
                        continue;
                    }
                    Pending {
                        users: mid,
                        reason: format!("midpoint of {lo}..{hi} (bisection, 2.1.2)"),
                        range: Some((lo, hi)),
                    }
                }
            };
            if self.runs.len() >= self.config.max_levels as usize {
                self.stop = Some(StopReason::MaxLevels);
                continue;
            }
            self.pending = Some(pending);
        }
    }

    /// Takes a finished level. A level the search did not ask for is kept as
    /// data (and never run again) but moves no state.
    pub(crate) fn record(&mut self, outcome: LevelOutcome) {
        let users = outcome.users;
        let asked = self.pending.as_ref().is_some_and(|p| p.users == users);
        let pending = if asked { self.pending.take() } else { None };
        let reason = pending.as_ref().map_or_else(
            || "recorded (not chosen by the search)".to_string(),
            |p| p.reason.clone(),
        );
        self.by_users.insert(users, self.runs.len());
        self.runs.push((outcome, reason));
        if self.stop.is_some() {
            return;
        }
        let o = &self.runs[self.runs.len() - 1].0;
        // 2.1.3. The paper only warns; a search that carried on would take
        // the generator's limit for the server's. Left half first means all
        // pending work lies above this level, where only the generator would
        // be measured, so stop here and keep every level measured so far.
        if o.client_bottleneck {
            self.first_client_bottleneck.get_or_insert(users);
            self.stop = Some(StopReason::ClientBottleneck);
            return;
        }
        if self
            .overload
            .observe(users, o.throughput_rps, o.response_time_s)
        {
            self.stop = Some(StopReason::Overload);
            return;
        }
        let Some(pending) = pending else { return };
        match (self.phase, pending.range) {
            (Phase::FindMin, _) => self.after_min_probe(users),
            (_, Some((lo, hi))) => self.split(lo, users, hi),
            _ => {}
        }
    }

    /// The finished levels, in the order they ran.
    pub(crate) fn outcomes(&self) -> impl Iterator<Item = &LevelOutcome> {
        self.runs.iter().map(|(o, _)| o)
    }

    #[cfg(test)]
    /// Consecutive overloaded levels so far (the overload machine's state).
    pub(crate) fn overload_state(&self) -> u32 {
        self.overload.state()
    }

    fn outcome(&self, users: u32) -> Option<&LevelOutcome> {
        self.by_users.get(&users).map(|&i| &self.runs[i].0)
    }

    fn throughput(&self, users: u32) -> f64 {
        self.outcome(users).map_or(0.0, |o| o.throughput_rps)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{level, run_to_end, web};
    use super::*;

    #[test]
    fn the_level_cap_ends_the_search() {
        let config = SearchConfig {
            max_levels: 3,
            ..SearchConfig::default()
        };
        let mut s = LevelSearch::new(config);
        let levels = run_to_end(&mut s, |u| level(u, u as f64, 0.01, web(0.004)));
        assert_eq!(levels.len(), 3);
        assert_eq!(s.summary().stop_reason, Some(StopReason::MaxLevels));
    }

    #[test]
    fn a_level_not_asked_for_is_kept_and_never_run_again() {
        let mut s = LevelSearch::new(SearchConfig::default());
        assert!(matches!(s.next(), Decision::Run { users: 1, .. }));
        s.record(level(7, 14.0, 0.01, web(0.5 / 63.0)));
        // Still waiting for level 1.
        assert!(matches!(s.next(), Decision::Run { users: 1, .. }));
        s.record(level(1, 2.0, 0.01, web(0.5 / 63.0)));
        // N_min is 7, already run: the search goes on to N* = 64.
        assert!(matches!(s.next(), Decision::Run { users: 64, .. }));
        assert_eq!(
            s.summary().levels[0].reason,
            "recorded (not chosen by the search)"
        );
    }
}
