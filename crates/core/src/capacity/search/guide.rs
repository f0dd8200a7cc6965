//! The model-guided search's questions to the model fitted to the levels
//! so far (`guided.rs`): which level next inside a range, whether a station
//! the agents do not see caps the curve, and whether the plateau past the
//! top is shown.

use super::{LevelSearch, Strategy};
use crate::capacity::guided::{Guide, Point, Proposal};

impl LevelSearch {
    /// Asks the model, fitted to every level so far that the client did not
    /// limit, for the next level in `[lo, hi]`.
    pub(super) fn guide(&self, lo: u32, hi: u32) -> Guidance {
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
                precision: o.precision,
            })
            .collect();
        let guide = Guide::fit(&points, &best.demands, best.think_time_s, up_to)?;
        Some((guide, points))
    }

    /// In the model's search: the model fitted to the levels so far needs a
    /// station the agents do not see, and its `N*` lies below `users` — a
    /// lock or pool saturated before the CPUs reached `ρ_min`, more surely
    /// than the stall test sees it (throughput 100× for 162× the users
    /// passes that test, though the knee was at 101).
    pub(super) fn model_past_knee(&self, users: u32) -> bool {
        self.hidden_n_star(users).is_some_and(|n| n < users as f64)
    }

    /// In the model's search, `N*` of the fitted model when it found a
    /// station the agents do not see.
    pub(super) fn hidden_n_star(&self, top: u32) -> Option<f64> {
        if self.config.strategy != Strategy::Model {
            return None;
        }
        let (guide, _) = self.fitted(top)?;
        (guide.hidden_demand_s > 0.0).then(|| guide.n_star())
    }

    /// The level `last`, past the top, measured what the model predicts
    /// there (within the tolerance), and the model says the next planned
    /// level, `next`, would measure the same again: the plateau is shown.
    pub(super) fn plateau_confirmed(&self, last: u32, next: u32) -> bool {
        let (Some(measured), Some((guide, _))) = (self.outcome(last), self.fitted(next)) else {
            return false;
        };
        let tolerance = self.config.tolerance;
        let (at_last, at_next) = (guide.throughput(last), guide.throughput(next));
        (measured.throughput_rps / at_last - 1.0).abs() <= tolerance
            && (at_next / at_last - 1.0).abs() <= tolerance
    }

    /// The station the agents do not see, when the model fitted to every
    /// level the client did not limit needs one to follow the measured
    /// curve (a lock, a pool, a connection limit): whatever the search
    /// strategy, the summary names it.
    pub(super) fn hidden_station(&self) -> Option<super::summary::HiddenStation> {
        let top = self.outcomes().map(|o| o.users).max()?;
        let (guide, points) = self.fitted(top)?;
        if guide.hidden_demand_s <= 0.0 {
            return None;
        }
        // The bend is measured, not only fitted: two levels past it.
        let past = points
            .iter()
            .filter(|p| p.users as f64 > guide.n_star())
            .count();
        if past < 2 {
            return None;
        }
        // The evidence: how busy the busiest CPU was at the level whose
        // demands the model took (as `fitted` chooses it).
        let best = self.best_measured().or_else(|| {
            self.outcomes()
                .filter(|o| !o.demands.is_empty())
                .max_by_key(|o| o.users)
        })?;
        let stations = crate::capacity::range::stations(&best.demands);
        let busiest = crate::capacity::range::bottleneck(&stations)?;
        let utilisation = best.throughput_rps * busiest.demand_s / busiest.cores.max(1) as f64;
        // A CPU that busy is the limit, whatever the fit says of a few
        // disturbed levels. On a host shared with others it is the CPU time
        // the tier wanted that tells: busy 69% of its core and ready to run
        // a third of the time more (a neighbour had the core), it was as
        // CPU-bound as one busy 100% alone. A tier in front of a lock wants
        // little, however long it waits for it.
        let waited = best
            .demands
            .iter()
            .filter(|d| busiest.tier.split('+').any(|t| t == d.tier))
            .map(|d| d.cpu_wait_share)
            .fold(0.0, f64::max)
            .clamp(0.0, MAX_WAIT_SHARE);
        let wanted = utilisation / (1.0 - waited);
        if wanted >= CPU_BOUND_UTILISATION {
            return None;
        }
        Some(super::summary::HiddenStation {
            demand_s: guide.hidden_demand_s,
            n_star: guide.n_star(),
            cpu_n_star: self.n_star_estimate(),
            busiest_tier: busiest.tier.clone(),
            busiest_utilisation: utilisation,
            at_users: best.users,
        })
    }

    /// In the model's search, with a hidden queue fitted: the range already
    /// holds levels well past the model's `N*` (the top at least 1.5 `N*`,
    /// and at least two above `N*`), all on the model's plateau within the
    /// tolerance. Levels past the top would show the plateau again: on the
    /// testbed's lock, 289 to 368 users after 112 and 263 had shown it.
    pub(super) fn plateau_inside(&self, top: u32) -> bool {
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
}

/// A busiest CPU at least this busy at the best level is the bottleneck:
/// no hidden station is named then.
const CPU_BOUND_UTILISATION: f64 = 0.7;

/// A wait share this close to 1 says the process barely ran: what it
/// wanted is not measurable past it.
const MAX_WAIT_SHARE: f64 = 0.9;

/// The model's answer for a range.
pub(super) enum Guidance {
    Run(Proposal),
    Satisfied,
    /// No CPU demands to build a model from: bisect instead.
    NoModel,
}
