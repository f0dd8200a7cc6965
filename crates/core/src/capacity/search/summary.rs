//! What the search has found: Kleinrock's `N*` from the best measured
//! level, the bottleneck tier, and the `analysis` summary of the run.

use super::{LevelOutcome, LevelSearch, StopReason};
use crate::capacity::range;

/// A level in the order it was run, with why it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LevelChosen {
    pub users: u32,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bottleneck {
    pub tier: String,
    pub process: String,
}

/// What limits a curve where no CPU saturates: the single-server station
/// the model fitted to the measured levels (`guided.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HiddenStation {
    /// Its fitted demand per request: its throughput bound is `1/D`.
    pub demand_s: f64,
    /// Kleinrock's `N*` of the network with it.
    pub n_star: f64,
    /// `N*` of the CPUs alone, which it supersedes.
    pub cpu_n_star: Option<f64>,
    /// The busiest CPU station at the best measured level, and its
    /// utilisation there: the evidence that no CPU is the limit.
    pub busiest_tier: String,
    pub busiest_utilisation: f64,
    pub at_users: u32,
}

/// The `analysis` of a capacity run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchSummary {
    pub n_min: Option<u32>,
    /// Kleinrock's `N*`: of the CPU demands measured last, or of the
    /// network with the hidden station when one limits the curve.
    pub n_star: Option<f64>,
    /// The station the agents do not see that limits the curve, if one
    /// does (then `bottleneck` is only the busiest CPU).
    pub hidden: Option<HiddenStation>,
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

impl LevelSearch {
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
    pub(crate) fn n_star_estimate(&self) -> Option<f64> {
        self.best_measured()
            .and_then(|o| range::n_star(o.think_time_s, &o.demands))
    }

    pub(super) fn best_measured(&self) -> Option<&LevelOutcome> {
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

    pub(crate) fn summary(&self) -> SearchSummary {
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
        let hidden = self.hidden_station();
        SearchSummary {
            n_min: self.n_min,
            n_star: hidden
                .as_ref()
                .map(|h| h.n_star)
                .or_else(|| self.n_star_estimate()),
            hidden,
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

/// Bottleneck utilisation (by a level's own demands) above which its
/// demands are taken as inflated by overload.
const OVERLOADED_UTILISATION: f64 = 1.05;
