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

use std::collections::BTreeMap;

use super::guided::{self, Guide, Point, Proposal};
use super::overload::OverloadDetector;
use super::range::{self, TierDemand};
use crate::scenario::CapacitySettings;
pub use crate::scenario::SearchStrategy as Strategy;

/// Tunables of the search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchConfig {
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
    pub fn from_settings(s: &CapacitySettings) -> Self {
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
pub struct LevelOutcome {
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
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Run { users: u32, reason: String },
    Done { stop_reason: StopReason },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
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
    pub fn as_str(self) -> &'static str {
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

/// A level in the order it was run, with why it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelChosen {
    pub users: u32,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bottleneck {
    pub tier: String,
    pub process: String,
}

/// The `analysis` of a capacity run.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSummary {
    pub n_min: Option<u32>,
    /// Kleinrock's `N*` from the latest measured demands.
    pub n_star: Option<f64>,
    /// Highest throughput of a level not limited by the client.
    pub max_throughput_rps: f64,
    pub max_throughput_users: Option<u32>,
    /// Smallest level reaching `saturation_fraction` of the maximum
    /// throughput; `None` when the generator, not the server, was the limit.
    pub saturation_users: Option<u32>,
    /// The tier with the largest demand per core, and its largest process.
    pub bottleneck: Option<Bottleneck>,
    /// `None` while the search is still running.
    pub stop_reason: Option<StopReason>,
    pub first_client_bottleneck: Option<u32>,
    pub levels: Vec<LevelChosen>,
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
pub struct LevelSearch {
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
    pub fn new(config: SearchConfig) -> Self {
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
    pub fn replay(config: SearchConfig, outcomes: &[LevelOutcome]) -> Self {
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
    pub fn next(&mut self) -> Decision {
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
    pub fn record(&mut self, outcome: LevelOutcome) {
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

    pub fn is_done(&self) -> bool {
        self.stop.is_some()
    }

    /// The finished levels, in the order they ran.
    pub fn outcomes(&self) -> impl Iterator<Item = &LevelOutcome> {
        self.runs.iter().map(|(o, _)| o)
    }

    /// Consecutive overloaded levels so far (the overload machine's state).
    pub fn overload_state(&self) -> u32 {
        self.overload.state()
    }

    fn outcome(&self, users: u32) -> Option<&LevelOutcome> {
        self.by_users.get(&users).map(|&i| &self.runs[i].0)
    }

    fn throughput(&self, users: u32) -> f64 {
        self.outcome(users).map_or(0.0, |o| o.throughput_rps)
    }

    /// Bottleneck CPU below `ρ_min` (less the slack), or the demand tracker
    /// timed out (2.1.1). Without demands the utilisation is unknown: not
    /// too low.
    pub fn too_low(&self, o: &LevelOutcome) -> bool {
        o.load_too_low
            || range::bottleneck_utilisation(o.throughput_rps, &o.demands)
                .is_some_and(|u| u < self.config.rho_min * RHO_MIN_SLACK)
    }

    /// After a level of the minimum search (2.1.2, "Determining the minimum
    /// load level").
    fn after_min_probe(&mut self, users: u32) {
        let o = self.outcome(users).expect("just recorded").clone();
        let prev = self.runs.iter().rev().nth(1).map(|(p, _)| p.users);
        let knee_passed = |p: u32| self.stalled(p, users) || self.model_past_knee(users);
        if let Some(prev) = prev.filter(|&p| p < users && knee_passed(p)) {
            // Not in the paper, which assumes nothing saturates before the
            // CPU reaches ρ_min. If throughput grew much less than the users,
            // a non-CPU resource saturated between `prev` and `users`: the
            // knee lies there, so the range starts at `prev` and this level,
            // already run, is its first top.
            self.n_min = Some(prev);
            self.tops.push(users);
            self.phase = Phase::Range;
            self.work.push(self.refine(prev, users));
        } else if !self.too_low(&o) {
            self.n_min = Some(users);
            self.start_range(users);
        } else if users >= self.config.max_users {
            self.stop = Some(StopReason::MaxUsers);
        } else {
            let (next, reason) = self.next_min_level(&o);
            self.work.push(Work::Probe {
                users: next,
                reason,
            });
        }
    }

    /// Throughput from `lo` to `hi` users grew by less than `stall_ratio` of
    /// the proportional growth `hi/lo` of a closed system below saturation.
    fn stalled(&self, lo: u32, hi: u32) -> bool {
        let (x_lo, x_hi) = (self.throughput(lo), self.throughput(hi));
        x_lo > 0.0 && x_hi / x_lo < self.config.stall_ratio * hi as f64 / lo as f64
    }

    /// The next level of the minimum search: `N_min` by the utilisation law
    /// from this level's `R` and `τ_b`, at least double, at most `N*` (when
    /// measured demands give one) and the user cap.
    pub fn next_min_level(&self, o: &LevelOutcome) -> (u32, String) {
        let doubled = o.users.saturating_mul(2);
        let estimate = range::n_min(
            o.response_time_s,
            o.think_time_s,
            &o.demands,
            self.config.rho_min,
        );
        let mut next = estimate.map_or(doubled, |n| ceil_users(n).max(doubled));
        let mut reason = match estimate {
            Some(n) => format!(
                "N_min ≈ (R + γ)/τ_b × ρ_min × n_b = {n:.1} from {} users (2.1.2), at least doubled",
                o.users
            ),
            None => format!("{} users too low, no demands: doubled", o.users),
        };
        if let Some(star) = self.n_star_estimate().map(ceil_users) {
            if star > o.users && star < next {
                next = star;
                reason.push_str(&format!(", capped at N* = {star}"));
            }
        }
        (next.min(self.config.max_users).max(o.users + 1), reason)
    }

    /// Kleinrock's `N*` (eq. 3), re-estimated whenever asked, from the
    /// demands of the *highest* level with measured demands that is not
    /// overloaded. The paper says `τ_i(L)` at the level `L` just run; but the
    /// bisection runs levels below the top after it, and demands measured
    /// nearest saturation are the ones that decide where saturation is (they
    /// can shift with load: caches, contention) and the most precise (the
    /// most CPU time per second, so the least tick error). Past saturation,
    /// though, the bottleneck host also spends CPU on queues of waiting
    /// connections, which inflates the per-request figure (5.0 ms for a 4 ms
    /// request at 2.3× N* on the testbed): a level whose bottleneck would
    /// be more than `OVERLOADED_UTILISATION` busy by its own demands is
    /// skipped while a lower one exists. Eq. 2's low-load guesses are never
    /// used: `S_low/n` would inflate `N*`.
    pub fn n_star_estimate(&self) -> Option<f64> {
        self.best_measured()
            .and_then(|o| range::n_star(o.think_time_s, &o.demands))
    }

    fn best_measured(&self) -> Option<&LevelOutcome> {
        let measured = || {
            self.by_users
                .values()
                .rev()
                .map(|&i| &self.runs[i].0)
                .filter(|o| !o.load_too_low && !o.demands.is_empty())
        };
        measured()
            .find(|o| {
                range::bottleneck_utilisation(o.throughput_rps, &o.demands)
                    .is_none_or(|u| u <= OVERLOADED_UTILISATION)
            })
            .or_else(|| measured().next())
    }

    /// The range `[n_min, ⌈N*⌉]`: run the top, then bisect.
    fn start_range(&mut self, lo: u32) {
        self.phase = Phase::Range;
        let (top, reason) = match self.n_star_estimate() {
            Some(n) => (
                ceil_users(n),
                format!("N* = (γ + Σ τ_i)/τ_b × n_b = {n:.1} (eq. 3): top of the range"),
            ),
            // Without CPU demands the range grows by doubling (see
            // `extension`).
            None => (lo.saturating_mul(2), "no CPU demands: double n_min".into()),
        };
        let top = top.clamp(lo, self.config.max_users);
        if top > lo {
            self.tops.push(top);
            self.work.push(self.refine(lo, top));
            self.work.push(Work::Probe { users: top, reason });
        } else {
            self.tops.push(lo);
        }
    }

    /// The midpoint test (2.1.2): if `Λ(mid)` lies within `tolerance` × the
    /// larger end of the straight line between the ends, the range is done;
    /// otherwise both halves wait, the left one on top.
    fn split(&mut self, lo: u32, mid: u32, hi: u32) {
        let (x_lo, x_mid, x_hi) = (
            self.throughput(lo),
            self.throughput(mid),
            self.throughput(hi),
        );
        if !is_linear(lo, x_lo, mid, x_mid, hi, x_hi, self.config.tolerance) {
            self.work.push(Work::Bisect { lo: mid, hi });
            self.work.push(Work::Bisect { lo, hi: mid });
        }
    }

    /// The stack is empty: extend the range, go past it, or finish.
    fn advance_phase(&mut self) {
        match self.phase {
            Phase::FindMin => {
                // Only reachable when the search was fed levels it did not
                // ask for: take the highest as the minimum.
                let lo = self.by_users.keys().next_back().copied().unwrap_or(1);
                self.n_min = Some(lo);
                self.start_range(lo);
            }
            Phase::Range => match self.extension() {
                Some((new_top, reason)) => {
                    let top = self.top();
                    self.tops.push(new_top);
                    self.work.push(self.refine(top, new_top));
                    self.work.push(Work::Probe {
                        users: new_top,
                        reason,
                    });
                }
                None if self.plateau_inside(self.top()) => {
                    self.stop = Some(StopReason::Completed);
                }
                None => {
                    self.phase = Phase::Beyond;
                    let top = self.top();
                    // A curve flat below the top is past saturation already
                    // (a non-CPU bottleneck): run enough levels past it for
                    // the overload state machine to confirm or clear it.
                    self.beyond_flat = self.flat_below(top);
                    let count = if self.beyond_flat {
                        self.config.levels_beyond.max(self.config.k_ovld)
                    } else {
                        self.config.levels_beyond
                    };
                    let mut levels =
                        beyond_levels(top, count, self.config.beyond_step, self.config.max_users);
                    // The model's search goes one level at a time past a
                    // knee it has seen, and stops when the model's plateau
                    // is confirmed (see the `Phase::Beyond` arm).
                    if self.config.strategy == Strategy::Model && !self.beyond_flat {
                        levels.truncate(1);
                    }
                    self.beyond = levels.len() as u32;
                    for (k, users) in levels.into_iter().enumerate().rev() {
                        self.work.push(Work::Probe {
                            users,
                            reason: format!(
                                "past the top {top}: ×{:.1} (2.1.2)",
                                1.0 + self.config.beyond_step * (k + 1) as f64
                            ),
                        });
                    }
                }
            },
            Phase::Beyond if self.config.strategy == Strategy::Model && !self.beyond_flat => {
                let top = self.top();
                let planned = beyond_levels(
                    top,
                    self.config.levels_beyond,
                    self.config.beyond_step,
                    self.config.max_users,
                );
                let k = self.beyond as usize;
                match planned.get(k) {
                    Some(&users) if !self.plateau_confirmed(planned[k - 1], users) => {
                        self.beyond += 1;
                        self.work.push(Work::Probe {
                            users,
                            reason: format!(
                                "past the top {top}: ×{:.1}, the plateau not yet confirmed (2.1.2)",
                                1.0 + self.config.beyond_step * (k + 1) as f64
                            ),
                        });
                    }
                    _ => self.stop = Some(StopReason::Completed),
                }
            }
            Phase::Beyond => {
                // K_ovld overloaded levels *in a row* confirm overload; on a
                // flat plateau a level can beat X_max by noise and reset the
                // count (a lock-bound run went 193.239 → 193.323/s and ended
                // "completed" one level short). While the machine is
                // counting on a flat curve, go one step further, at most
                // K_ovld more; a CPU-bound search ends as before.
                let state = self.overload.state();
                let top = self.top();
                let next = self.beyond + 1;
                let users = ceil_users(
                    (top as f64 * (1.0 + self.config.beyond_step * next as f64)).round(),
                );
                let counting = self.beyond_flat && state > 0 && state < self.config.k_ovld;
                let room = next <= self.config.levels_beyond.max(self.config.k_ovld) * 2
                    && users <= self.config.max_users
                    && !self.by_users.contains_key(&users);
                if counting && room {
                    self.beyond = next;
                    self.work.push(Work::Probe {
                        users,
                        reason: format!(
                            "past the top {top}: ×{:.1}, overload check at {state} of {} (2.1.2)",
                            1.0 + self.config.beyond_step * next as f64,
                            self.config.k_ovld
                        ),
                    });
                } else {
                    self.stop = Some(StopReason::Completed);
                }
            }
        }
    }

    /// The work that fills in the range `[lo, hi]` by the chosen strategy.
    fn refine(&self, lo: u32, hi: u32) -> Work {
        match self.config.strategy {
            Strategy::Model => Work::Guided { lo, hi },
            Strategy::Bisection => Work::Bisect { lo, hi },
        }
    }

    /// Asks the model, fitted to every level so far that the client did not
    /// limit, for the next level in `[lo, hi]`.
    fn guide(&self, lo: u32, hi: u32) -> Guidance {
        match self.fitted(hi) {
            None => Guidance::NoModel,
            Some((guide, points)) => {
                match guide.next_level(&points, lo, hi, self.config.tolerance) {
                    Some(p) => Guidance::Run(p),
                    None => Guidance::Satisfied,
                }
            }
        }
    }

    /// The model fitted to the levels up to `up_to` users that the client
    /// did not limit, solved to `up_to`, with those levels; `None` without
    /// measured CPU demands.
    fn fitted(&self, up_to: u32) -> Option<(Guide, Vec<Point>)> {
        // Demands the tracker gave up on (a process too idle to tick, as
        // the web tier in front of a lock is) still say the CPUs are not
        // what limits: the model takes the highest level's.
        let best = self.best_measured().or_else(|| {
            self.outcomes()
                .filter(|o| !o.demands.is_empty())
                .max_by_key(|o| o.users)
        })?;
        let points: Vec<Point> = self
            .outcomes()
            .filter(|o| !o.client_bottleneck && o.users <= up_to)
            .map(|o| Point {
                users: o.users,
                throughput_rps: o.throughput_rps,
                requests: o.requests,
            })
            .collect();
        let guide = Guide::fit(&points, &best.demands, best.think_time_s, up_to)?;
        Some((guide, points))
    }

    /// The level `last`, past the top, measured what the model predicts
    /// there (within the tolerance), and the model says the next planned
    /// level, `next`, would measure the same again: the plateau is shown.
    fn plateau_confirmed(&self, last: u32, next: u32) -> bool {
        let (Some(measured), Some((guide, _))) = (self.outcome(last), self.fitted(next)) else {
            return false;
        };
        let tolerance = self.config.tolerance;
        let (at_last, at_next) = (guide.throughput(last), guide.throughput(next));
        (measured.throughput_rps / at_last - 1.0).abs() <= tolerance
            && (at_next / at_last - 1.0).abs() <= tolerance
    }

    fn top(&self) -> u32 {
        self.tops.last().copied().or(self.n_min).unwrap_or(1)
    }

    /// 2.1.2: "we may have a new estimate of N'_max at the end of this run.
    /// In this case, the recursive algorithm is called again in the
    /// (N_max, N'_max) range." A new estimate must beat the top by more than
    /// the tolerance, so a wobbling estimate does not add a level per wobble.
    /// Without CPU demands, the top doubles while its throughput still grows
    /// by more than the tolerance over the previous top.
    fn extension(&self) -> Option<(u32, String)> {
        let top = self.top();
        if top >= self.config.max_users {
            return None;
        }
        match self.n_star_estimate() {
            // N* from CPU demands overestimates when the bottleneck is not a
            // CPU (2.1.2): if the curve is already flat — a level at most
            // 3/4 of the top reached the top's throughput — the system has
            // saturated, and extending the range would run levels far into
            // overload. The levels past the top, watched by the overload
            // state machine, finish the analysis instead.
            Some(_) if self.flat_below(top) => None,
            // The model's search knows more: fitted to the levels so far,
            // a resource the agents do not see (a lock) caps the curve, and
            // its N* counts that station too.
            Some(_) if self.hidden_n_star(top).is_some_and(|n| n <= top as f64) => None,
            Some(n) => {
                let new_top = ceil_users(n).min(self.config.max_users);
                (new_top as f64 > top as f64 * (1.0 + self.config.tolerance)).then(|| {
                    (
                        new_top,
                        format!("N* re-estimated at {n:.1} > top {top} (eq. 3): extend the range"),
                    )
                })
            }
            None => {
                let below = self.tops.iter().rev().nth(1).copied().or(self.n_min)?;
                let grew =
                    self.throughput(top) > (1.0 + self.config.tolerance) * self.throughput(below);
                (below < top && grew).then(|| {
                    (
                        top.saturating_mul(2).min(self.config.max_users),
                        format!("no CPU demands, throughput still growing at {top}: double"),
                    )
                })
            }
        }
    }

    /// In the model's search, with a hidden queue fitted: the range already
    /// holds levels well past the model's `N*` (the top at least 1.5 `N*`,
    /// and at least two above `N*`), all on the model's plateau within the
    /// tolerance. Levels past the top would show the plateau again: on the
    /// testbed's lock, 289 to 368 users after 112 and 263 had shown it.
    fn plateau_inside(&self, top: u32) -> bool {
        if self.config.strategy != Strategy::Model {
            return false;
        }
        let Some((guide, points)) = self.fitted(top) else {
            return false;
        };
        let n_star = guide.n_star();
        if guide.hidden_demand_s <= 0.0 || (top as f64) < 1.5 * n_star {
            return false;
        }
        let past: Vec<&Point> = points.iter().filter(|p| p.users as f64 > n_star).collect();
        past.len() >= 2
            && past.iter().all(|p| {
                (p.throughput_rps / guide.throughput(p.users) - 1.0).abs() <= self.config.tolerance
            })
    }

    /// In the model's search: the model fitted to the levels so far needs a
    /// station the agents do not see, and its `N*` lies below `users` — a
    /// lock or pool saturated before the CPUs reached `ρ_min`, more surely
    /// than the stall test sees it (throughput 100× for 162× the users
    /// passes that test, though the knee was at 101).
    fn model_past_knee(&self, users: u32) -> bool {
        self.hidden_n_star(users).is_some_and(|n| n < users as f64)
    }

    /// In the model's search, `N*` of the fitted model when it found a
    /// station the agents do not see.
    fn hidden_n_star(&self, top: u32) -> Option<f64> {
        if self.config.strategy != Strategy::Model {
            return None;
        }
        let (guide, _) = self.fitted(top)?;
        (guide.hidden_demand_s > 0.0).then(|| guide.n_star())
    }

    /// Some level at most 3/4 of `top` already reached, within the
    /// tolerance, the throughput measured at `top`.
    fn flat_below(&self, top: u32) -> bool {
        let x_top = self.throughput(top);
        self.by_users
            .range(..=top * 3 / 4)
            .any(|(_, &i)| self.runs[i].0.throughput_rps >= (1.0 - self.config.tolerance) * x_top)
    }

    pub fn summary(&self) -> SearchSummary {
        let valid = || {
            self.runs
                .iter()
                .map(|(o, _)| o)
                .filter(|o| !o.client_bottleneck)
        };
        let best = valid().fold(None, |best: Option<&LevelOutcome>, o| match best {
            Some(b) if b.throughput_rps >= o.throughput_rps => Some(b),
            _ => Some(o),
        });
        let max_x = best.map_or(0.0, |o| o.throughput_rps);
        let saturation_users = if self.stop == Some(StopReason::ClientBottleneck) {
            None
        } else {
            valid()
                .filter(|o| {
                    max_x > 0.0 && o.throughput_rps >= self.config.saturation_fraction * max_x
                })
                .map(|o| o.users)
                .min()
        };
        let bottleneck = self.best_measured().and_then(|o| {
            let st = range::stations(&o.demands);
            range::bottleneck(&st).map(|b| Bottleneck {
                tier: b.tier.clone(),
                process: b.top_process.clone(),
            })
        });
        SearchSummary {
            n_min: self.n_min,
            n_star: self.n_star_estimate(),
            max_throughput_rps: max_x,
            max_throughput_users: best.map(|o| o.users),
            saturation_users,
            bottleneck,
            stop_reason: self.stop,
            first_client_bottleneck: self.first_client_bottleneck,
            levels: self
                .runs
                .iter()
                .map(|(o, reason)| LevelChosen {
                    users: o.users,
                    reason: reason.clone(),
                })
                .collect(),
        }
    }
}

/// The model's answer for a range.
enum Guidance {
    Run(Proposal),
    Satisfied,
    /// No CPU demands to build a model from: bisect instead.
    NoModel,
}

/// The `N_min` estimate aims a level at `ρ_min` from a 1-user level's
/// demand, so it lands within that demand's noise of it: 0.096 for 0.1 in
/// two of three testbed runs, which doubled the level for nothing. A level
/// at 80% of `ρ_min` loads the bottleneck as the paper intends (demands
/// measured well above the tick's resolution).
const RHO_MIN_SLACK: f64 = 0.8;

/// Bottleneck utilisation (by a level's own demands) above which its
/// demands are taken as inflated by overload.
const OVERLOADED_UTILISATION: f64 = 1.05;

/// Users for a real-valued estimate: rounded up, at least 1, saturating.
fn ceil_users(n: f64) -> u32 {
    if n.is_finite() && n > 0.0 {
        n.ceil().min(u32::MAX as f64) as u32
    } else {
        1
    }
}

/// The piecewise-linear test of the bisection:
/// `|Λ(mid) − line(mid)| ≤ tolerance × max(Λ(lo), Λ(hi))`, the line through
/// the two ends (the paper's `(Λ(lo) + Λ(hi))/2` when `mid` is the exact
/// midpoint; integer midpoints are not always exact).
pub fn is_linear(
    lo: u32,
    x_lo: f64,
    mid: u32,
    x_mid: f64,
    hi: u32,
    x_hi: f64,
    tolerance: f64,
) -> bool {
    let frac = if hi > lo {
        (mid - lo) as f64 / (hi - lo) as f64
    } else {
        0.5
    };
    let line = x_lo + (x_hi - x_lo) * frac;
    (x_mid - line).abs() <= tolerance * x_lo.max(x_hi)
}

/// The levels past the top: `top × (1 + step·k)` for `k = 1..=count`,
/// rounded, strictly increasing, within the user cap.
pub fn beyond_levels(top: u32, count: u32, step: f64, max_users: u32) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for k in 1..=count {
        let users = ceil_users((top as f64 * (1.0 + step * k as f64)).round());
        let users = users.max(out.last().copied().unwrap_or(top) + 1);
        if users > max_users {
            break;
        }
        out.push(users);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's bisection, whose level sequences these tests spell out.
    fn paper() -> SearchConfig {
        SearchConfig {
            strategy: Strategy::Bisection,
            ..SearchConfig::default()
        }
    }

    fn web(demand_s: f64) -> Vec<TierDemand> {
        vec![TierDemand {
            tier: "web".into(),
            process: "tb-web".into(),
            demand_s,
            cores: 1,
        }]
    }

    fn level(users: u32, x: f64, r: f64, demands: Vec<TierDemand>) -> LevelOutcome {
        LevelOutcome {
            users,
            throughput_rps: x,
            response_time_s: r,
            think_time_s: 0.5,
            demands,
            load_too_low: false,
            client_bottleneck: false,
            requests: 0,
        }
    }

    fn run_to_end(s: &mut LevelSearch, curve: impl Fn(u32) -> LevelOutcome) -> Vec<u32> {
        for _ in 0..100 {
            match s.next() {
                Decision::Run { users, .. } => s.record(curve(users)),
                Decision::Done { .. } => break,
            }
        }
        s.outcomes().map(|o| o.users).collect()
    }

    #[test]
    fn minimum_level_from_the_utilisation_law_at_least_doubles() {
        let s = LevelSearch::new(SearchConfig::default());
        // 1 user, 4 ms at the bottleneck: N_min = 0.505/0.004 × 0.1 = 12.6.
        let o = level(1, 1.98, 0.005, web(0.004));
        assert!(s.too_low(&o));
        assert_eq!(s.next_min_level(&o).0, 13);
        // An estimate below double the level: double.
        let o = level(10, 19.8, 0.005, web(0.02));
        assert_eq!(s.next_min_level(&o).0, 20);
        // Timed out at zero CPU: eq. 2's demand, min(S_low/n, R).
        let mut o = level(1, 2.0, 0.002, web(0.005 / 60.0));
        o.load_too_low = true;
        assert!(s.too_low(&o));
        assert_eq!(s.next_min_level(&o).0, 603);
        // Without demands: utilisation unknown, not too low.
        assert!(!s.too_low(&level(1, 2.0, 0.002, vec![])));
    }

    #[test]
    fn minimum_search_is_capped_by_n_star_and_by_users() {
        // The paper's search: the model would read 900/s at 500 users as a
        // knee passed (the CPUs allow 1,000/s), which is not the point here.
        let config = SearchConfig {
            max_users: 500,
            ..paper()
        };
        let mut s = LevelSearch::new(config);
        assert_eq!(s.next(), s.next(), "asking twice gives the same level");
        // Measured demand of 0.1 ms: N* = 5001, N_min = 501 → the user cap.
        s.record(level(1, 1.98, 0.0002, web(0.0001)));
        let Decision::Run { users, reason } = s.next() else {
            panic!()
        };
        assert_eq!(users, 500, "{reason}");
        // 700/s × 0.1 ms: 7% busy, under ρ_min even with its slack.
        s.record(level(500, 700.0, 0.05, web(0.0001)));
        assert_eq!(
            s.next(),
            Decision::Done {
                stop_reason: StopReason::MaxUsers
            }
        );
    }

    #[test]
    fn the_range_starts_at_n_star_and_bisects_left_first_without_repeats() {
        // A sharp knee: 2 req/s per user up to 40 users, flat after; the CPU
        // demand puts N* at 64 and N_min at 7.
        let tau = 0.5 / 63.0;
        let knee = |u: u32| level(u, 2.0 * u.min(40) as f64, 0.0, web(tau));
        let mut s = LevelSearch::new(paper());
        let levels = run_to_end(&mut s, knee);
        // 35 is off the line from 7 to 64: [7, 35] first (21 is on its
        // line), then [35, 64] narrows the knee down, left halves first;
        // then, the curve being flat below the top, K_ovld levels past it
        // (10%, 20%, 30%) for the overload check — which a flat curve clears.
        assert_eq!(levels, [1, 7, 64, 35, 21, 49, 42, 38, 45, 56, 70, 77, 83]);
        assert_eq!(s.summary().stop_reason, Some(StopReason::Completed));
        assert_eq!(s.summary().saturation_users, Some(38));
        assert_eq!(s.summary().n_min, Some(7));

        // With no tolerance the knee is narrowed down to adjacent integers,
        // and still no level runs twice.
        let config = SearchConfig {
            tolerance: 0.0,
            ..paper()
        };
        let mut s = LevelSearch::new(config);
        let levels = run_to_end(&mut s, knee);
        for u in [39, 40, 41] {
            assert!(levels.contains(&u), "{u} in {levels:?}");
        }
        let mut sorted = levels.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), levels.len(), "no level twice: {levels:?}");
        assert!(levels.len() < 25, "{levels:?}");
    }

    #[test]
    fn a_grown_n_star_extends_the_range() {
        // Demand estimates halve past 50 users (caches warm up): N* moves
        // from 64 to 127 and the range [64, 127] is bisected in turn.
        let curve = |u: u32| {
            let tau = if u > 50 { 0.5 / 126.0 } else { 0.5 / 63.0 };
            level(u, u as f64 / 0.5, 0.0, web(tau))
        };
        let mut s = LevelSearch::new(paper());
        let levels = run_to_end(&mut s, curve);
        let at = |u: u32| levels.iter().position(|&l| l == u);
        assert!(at(64).unwrap() < at(127).unwrap(), "{levels:?}");
        let reason = &s.summary().levels[at(127).unwrap()].reason;
        assert!(reason.contains("extend"), "{reason}");
        assert_eq!(levels, [1, 7, 64, 35, 127, 95, 140, 152]);
    }

    #[test]
    fn without_demands_the_range_doubles_while_throughput_grows() {
        let curve = |u: u32| level(u, 2.0 * u.min(100) as f64, 0.01, vec![]);
        let mut s = LevelSearch::new(SearchConfig::default());
        let levels = run_to_end(&mut s, curve);
        for u in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            assert!(levels.contains(&u), "{u} in {levels:?}");
        }
        assert!(!levels.contains(&512), "{levels:?}");
        assert_eq!(s.summary().stop_reason, Some(StopReason::Completed));
    }

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

    #[test]
    fn the_linearity_test_and_the_levels_beyond() {
        assert!(is_linear(10, 100.0, 20, 200.0, 30, 300.0, 0.05));
        assert!(is_linear(10, 100.0, 20, 214.0, 30, 300.0, 0.05));
        assert!(!is_linear(10, 100.0, 20, 216.0, 30, 300.0, 0.05));
        // An inexact integer midpoint is judged against the line, not the mean.
        assert!(is_linear(10, 10.0, 15, 15.0, 21, 21.0, 0.01));
        assert_eq!(beyond_levels(127, 2, 0.1, 10_000), vec![140, 152]);
        assert_eq!(beyond_levels(5, 3, 0.1, 10_000), vec![6, 7, 8]);
        assert_eq!(beyond_levels(127, 2, 0.1, 145), vec![140]);
        assert_eq!(
            StopReason::ClientBottleneck.to_string(),
            "client_bottleneck"
        );
    }
}
