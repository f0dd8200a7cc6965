//! What happens when the stack of work is empty: the range starts at
//! `n_min`, grows while `N*` does, and is followed by the levels past its
//! top, until the search is complete.

use super::formulas::{beyond_levels, ceil_users};
use super::{LevelSearch, Phase, StopReason, Strategy, Work};

impl LevelSearch {
    /// The stack is empty: extend the range, go past it, or finish.
    pub(super) fn advance_phase(&mut self) {
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

    /// The range `[n_min, ⌈N*⌉]`: run the top, then bisect.
    pub(super) fn start_range(&mut self, lo: u32) {
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

    /// Some level at most 3/4 of `top` already reached, within the
    /// tolerance, the throughput measured at `top`.
    fn flat_below(&self, top: u32) -> bool {
        let x_top = self.throughput(top);
        self.by_users
            .range(..=top * 3 / 4)
            .any(|(_, &i)| self.runs[i].0.throughput_rps >= (1.0 - self.config.tolerance) * x_top)
    }
}

#[cfg(test)]
mod tests {
    use crate::capacity::search::fixtures::{level, paper, run_to_end, web};
    use crate::capacity::search::{LevelSearch, SearchConfig, StopReason};

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
}
