//! Filling in a range `[lo, hi]`: the work item the chosen strategy puts
//! on the stack, and the bisection's midpoint test that splits a range in
//! two or leaves it done.

use super::formulas::is_linear;
use super::{LevelSearch, Strategy, Work};

impl LevelSearch {
    /// The work that fills in the range `[lo, hi]` by the chosen strategy.
    pub(super) fn refine(&self, lo: u32, hi: u32) -> Work {
        match self.config.strategy {
            Strategy::Model => Work::Guided { lo, hi },
            Strategy::Bisection => Work::Bisect { lo, hi },
        }
    }

    /// The midpoint test (2.1.2): if `Λ(mid)` lies within `tolerance` × the
    /// larger end of the straight line between the ends, the range is done;
    /// otherwise both halves wait, the left one on top.
    pub(super) fn split(&mut self, lo: u32, mid: u32, hi: u32) {
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
}

#[cfg(test)]
mod tests {
    use crate::capacity::search::fixtures::{level, paper, run_to_end, web};
    use crate::capacity::search::{LevelSearch, SearchConfig, StopReason};

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
}
