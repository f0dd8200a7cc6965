//! Model-guided level selection (beyond the paper). The paper's bisection
//! runs the midpoint of a range to learn whether the curve between its ends
//! is straight. A queueing model of the measured demands already knows the
//! shape of the curve, so the guide runs the level where the model says
//! straight-line interpolation between measured levels is worst — the bend —
//! and stops where the model says it is good enough.
//!
//! **The model.** Exact single-class MVA (`mva::exact`) of the CPU
//! stations the agents measured (one per tier, its cores as servers), the
//! think time as a delay, and — when the measured throughputs fall short of
//! what the CPUs allow — something *hidden* fitted to them (weighted least
//! squares of `ln X − ln X_model`): either a delay per request (the
//! network, the generator's own overhead: the curve lower by the same share
//! everywhere) or a single-server station of demand `D_h` (a global lock, a
//! one-connection pool, a disk the agents do not see: `D_h ≈ 1/X_max`, so
//! the model bends where a lock-bound curve bends). The queue is believed
//! only when it fits clearly better than the delay.
//!
//! **Trust, gap by gap.** At each measured level the ratio
//! `r = X_measured / X_model` says how far the model is off there, less what
//! the level's own noise (two standard errors, `2/√requests`) explains.
//! Between two adjacent measured levels `a < b` the guide predicts
//! `P(N) = X_model(N) × r(N)`, `r` interpolated linearly between `r_a` and
//! `r_b`, so the prediction passes through both ends. Then:
//!
//! - *shape*: `max |P(N) − line(N)| / P(N)` over the gap, the line drawn
//!   between `P(a)` and `P(b)` (the paper's linearity test, asked of the
//!   model instead of a run). Above half the tolerance (the model's own
//!   shape is good to a few percent near a knee), the guide runs the level
//!   that leaves the two halves closest to straight: near the bend.
//! - *doubt*: `|r_b − r_a| / 2`. When the model is off by different amounts
//!   at the two ends, its shape between them is not to be trusted: above the
//!   tolerance the guide falls back to the paper's midpoint.
//!
//! The gap with the largest excess goes first; the range is done when no
//! gap exceeds the tolerance. Every level proposed lies strictly inside a
//! gap of measured levels, so the guide never repeats a level and ends.
//! A gap narrower than the tolerance allows (see [`gap_resolved`]) is never
//! split: one disturbed level otherwise drew the guide into every integer
//! beside it (86, 88, 89, 90 … 99 users on a machine whose neighbour took
//! the CPU for a minute).

use super::mva;
use super::range::{self, TierDemand};

/// A finished level as the guide needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    pub users: u32,
    pub throughput_rps: f64,
    /// Requests measured (0: unknown). Without `precision`, a level of `n`
    /// requests is taken to know its throughput to about `1/√n` (Poisson
    /// counting): a 1-user level of 30 requests to ±18%, so the model is
    /// not called wrong where the measurement is vague.
    pub requests: u64,
    /// The throughput's 95% half-width relative to it (`ci95`), when the
    /// level measured one: what it really knows, which for a closed
    /// workload's users is often far better than counting suggests.
    pub precision: Option<f64>,
}

impl Point {
    /// The throughput's relative standard error (0 when unknown).
    fn standard_error(&self) -> f64 {
        match self.precision {
            Some(p) if p > 0.0 => p / 1.96,
            _ if self.requests > 0 => 1.0 / (self.requests as f64).sqrt(),
            _ => 0.0,
        }
    }

    /// Two standard errors of the throughput, relative (0 when unknown).
    fn noise(&self) -> f64 {
        2.0 * self.standard_error()
    }

    /// Weight in the fit: the inverse variance of `ln X` (`n` by counting).
    fn weight(&self) -> f64 {
        match self.standard_error() {
            e if e > 0.0 => e.powi(-2),
            _ => 1.0,
        }
    }
}

/// Whether no level strictly inside `[a, b]` can be off the straight line
/// between the ends by more than `tolerance`, whatever the curve: in any
/// closed system throughput does not fall as users are added, nor does
/// throughput per user rise, so `X(a) ≤ X(N) ≤ X(a)·b/a` for every `N`
/// between, and the line lies in the same band. Both are within
/// `(b − a)/a` of `X(a)` of each other: a gap no wider than `tolerance × a`
/// is as straight as the tolerance asks, measured or not.
pub(crate) fn gap_resolved(a: u32, b: u32, tolerance: f64) -> bool {
    b <= a + 1 || f64::from(b - a) <= tolerance * f64::from(a)
}

/// The share of the tolerance a straight line may be off the model's curve.
const SHAPE_MARGIN: f64 = 0.75;

/// Gaps are scanned at most at this many evenly spaced levels.
const SCAN_STEPS: u32 = 100;

/// The fitted model: throughput for every population `1..=curve.len()`.
#[derive(Debug, Clone)]
pub(crate) struct Guide {
    curve: Vec<f64>,
    /// Fitted demand of the station the agents do not see, seconds.
    pub hidden_demand_s: f64,
    /// Kleinrock's saturation number of the fitted network.
    n_star: f64,
}

/// Why the guide wants a level.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Proposal {
    pub users: u32,
    pub reason: String,
}

impl Guide {
    /// Fits the model to `points` (levels not limited by the client) and
    /// solves it up to `up_to` users or the highest point. `None` without a
    /// CPU demand to build it from.
    pub(crate) fn fit(
        points: &[Point],
        demands: &[TierDemand],
        think_s: f64,
        up_to: u32,
    ) -> Option<Guide> {
        let stations: Vec<mva::Station> = range::stations(demands)
            .iter()
            .filter(|s| s.demand_s > 0.0)
            .map(|s| mva::Station::queue(&s.tier, s.cores, s.demand_s))
            .collect();
        let points: Vec<Point> = points
            .iter()
            .copied()
            .filter(|p| p.users > 0 && p.throughput_rps > 0.0)
            .collect();
        let up_to = points.iter().map(|p| p.users).max()?.max(up_to);
        if stations.is_empty() {
            return None;
        }
        let think_s = think_s.max(0.0);
        // N* = (Z + Σ D) / max(D_k / c_k), the hidden station included.
        let n_star = |hidden_s: f64| {
            let total: f64 = stations.iter().map(|s| s.demand_s).sum::<f64>() + hidden_s;
            let bottleneck = stations
                .iter()
                .map(|s| s.demand_s / s.servers.max(1) as f64)
                .fold(hidden_s, f64::max);
            (think_s + total) / bottleneck
        };
        // The network with a hidden queue of demand `queue_s` and a hidden
        // delay of `delay_s` per request.
        let solve = |queue_s: f64, delay_s: f64| -> Vec<f64> {
            let mut all = stations.clone();
            if queue_s > 0.0 {
                all.push(mva::Station::queue("hidden", 1, queue_s));
            }
            if delay_s > 0.0 {
                all.push(mva::Station::queue("hidden delay", 0, delay_s));
            }
            mva::exact(&all, think_s, up_to)
                .into_iter()
                .map(|s| s.throughput)
                .collect()
        };
        let misfit = |curve: &[f64]| -> f64 {
            points
                .iter()
                .map(|p| {
                    p.weight()
                        * (p.throughput_rps / curve[p.users as usize - 1])
                            .ln()
                            .powi(2)
                })
                .sum()
        };
        let cpu_only = solve(0.0, 0.0);
        let x_max = points.iter().map(|p| p.throughput_rps).fold(0.0, f64::max);
        let cpu_guide = |curve| Guide {
            curve,
            hidden_demand_s: 0.0,
            n_star: n_star(0.0),
        };
        // Something hidden can only lower the curve: worth a search only
        // where the CPUs promise more than some level delivered.
        let overshoots = points
            .iter()
            .any(|p| p.throughput_rps < cpu_only[p.users as usize - 1] * (1.0 - 0.02 - p.noise()));
        if !overshoots || x_max <= 0.0 {
            return Some(cpu_guide(cpu_only));
        }
        // Two rival explanations, one parameter each. A queue (a lock, a
        // pool) caps throughput at 1/D_h, so D_h up to 1.5/X_max; a delay
        // (the network, the generator's own overhead) lowers the curve by
        // the same share at every level and caps nothing, up to the longest
        // measured cycle N/X. A queue is a knee the search must measure; a
        // delay is not, so the queue must fit clearly better (half the
        // misfit) to be believed.
        let (queue_s, queue_misfit) = golden_min(1.5 / x_max, |q| misfit(&solve(q, 0.0)));
        let longest_cycle = points
            .iter()
            .map(|p| p.users as f64 / p.throughput_rps)
            .fold(0.0, f64::max);
        let (delay_s, delay_misfit) = golden_min(longest_cycle, |d| misfit(&solve(0.0, d)));
        let cpu_misfit = misfit(&cpu_only);
        if queue_misfit < cpu_misfit && queue_misfit < 0.5 * delay_misfit {
            Some(Guide {
                curve: solve(queue_s, 0.0),
                hidden_demand_s: queue_s,
                n_star: n_star(queue_s),
            })
        } else if delay_misfit < cpu_misfit {
            Some(cpu_guide(solve(0.0, delay_s)))
        } else {
            Some(cpu_guide(cpu_only))
        }
    }

    /// Kleinrock's `N*` of the fitted network: where its asymptotes cross.
    pub(crate) fn n_star(&self) -> f64 {
        self.n_star
    }

    /// The model's throughput at `users` (held flat past the fitted range).
    pub(crate) fn throughput(&self, users: u32) -> f64 {
        let i = (users.max(1) as usize).min(self.curve.len()) - 1;
        self.curve[i]
    }

    /// The next level to run inside `[lo, hi]`, or `None` when, by the
    /// model, straight lines between the measured levels there are within
    /// `tolerance` of the curve.
    pub(crate) fn next_level(
        &self,
        points: &[Point],
        lo: u32,
        hi: u32,
        tolerance: f64,
    ) -> Option<Proposal> {
        let mut inside: Vec<Point> = points
            .iter()
            .copied()
            .filter(|p| p.users >= lo && p.users <= hi)
            .collect();
        inside.sort_by_key(|p| p.users);
        inside.dedup_by_key(|p| p.users);
        let mut best: Option<(f64, Proposal)> = None;
        for pair in inside.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let Some((excess, proposal)) = self.judge_gap(a, b, tolerance) else {
                continue;
            };
            if best.as_ref().is_none_or(|(e, _)| excess > *e) {
                best = Some((excess, proposal));
            }
        }
        best.map(|(_, p)| p)
    }

    /// How far the gap between adjacent measured levels `a` and `b` exceeds
    /// the tolerance, and the level that would settle it.
    fn judge_gap(&self, a: Point, b: Point, tolerance: f64) -> Option<(f64, Proposal)> {
        if gap_resolved(a.users, b.users, tolerance) {
            return None;
        }
        // How far the model is off at a level, less what the level's own
        // noise explains.
        let ratio = |p: Point| {
            let off = p.throughput_rps / self.throughput(p.users).max(f64::MIN_POSITIVE) - 1.0;
            1.0 + off.signum() * (off.abs() - p.noise()).max(0.0)
        };
        let (r_a, r_b) = (ratio(a), ratio(b));
        let width = (b.users - a.users) as f64;
        let predicted = |n: u32| {
            let f = (n - a.users) as f64 / width;
            self.throughput(n) * (r_a + (r_b - r_a) * f)
        };
        // The line between the predictions at the ends: with exact
        // measurements they are the measurements; with noisy ones, the noise
        // at an end is no bend a level in between could settle.
        let (p_a, p_b) = (predicted(a.users), predicted(b.users));
        let worst = chord_error(&predicted, a.users, p_a, b.users, p_b);
        let doubt = (r_b - r_a).abs() / 2.0;
        let (a_u, b_u) = (a.users, b.users);
        // The model's own shape is good to a few percent near a knee (MVA
        // assumes exponential service; the testbed's sharper knee sat 4%
        // above it at 90 users): straight lines must be within half the
        // tolerance of it.
        let allowed = tolerance * SHAPE_MARGIN;
        if worst > allowed && worst >= doubt {
            // The level whose measurement leaves the smaller worst error in
            // the two halves it makes: on a knee, close to where it bends.
            let step = ((b_u - a_u) / SCAN_STEPS).max(1);
            let at = (a_u + 1..b_u)
                .step_by(step as usize)
                .map(|n| {
                    let x = predicted(n);
                    let left = chord_error(&predicted, a_u, p_a, n, x);
                    let right = chord_error(&predicted, n, x, b_u, p_b);
                    (left.max(right), n)
                })
                .min_by(|p, q| p.0.total_cmp(&q.0))
                .map_or(a_u + (b_u - a_u) / 2, |(_, n)| n);
            Some((
                worst - allowed,
                Proposal {
                    users: at,
                    reason: format!(
                        "model: a straight line {a_u}..{b_u} is {:.1}% off the curve, which bends near {at}",
                        worst * 100.0
                    ),
                },
            ))
        } else if doubt > tolerance {
            let mid = a_u + (b_u - a_u) / 2;
            Some((
                doubt - tolerance,
                Proposal {
                    users: mid,
                    reason: format!(
                        "model off by {:+.1}% at {a_u} and {:+.1}% at {b_u}: midpoint of {a_u}..{b_u}",
                        (r_a - 1.0) * 100.0,
                        (r_b - 1.0) * 100.0
                    ),
                },
            ))
        } else {
            None
        }
    }
}

/// The largest relative distance between `predicted` and the straight line
/// from `(lo, x_lo)` to `(hi, x_hi)`, over the levels strictly between
/// (at most `SCAN_STEPS` of them, evenly spaced).
fn chord_error(predicted: &impl Fn(u32) -> f64, lo: u32, x_lo: f64, hi: u32, x_hi: f64) -> f64 {
    if hi <= lo + 1 {
        return 0.0;
    }
    let step = ((hi - lo) / SCAN_STEPS).max(1);
    (lo + 1..hi)
        .step_by(step as usize)
        .map(|n| {
            let p = predicted(n);
            let line = x_lo + (x_hi - x_lo) * (n - lo) as f64 / (hi - lo) as f64;
            (p - line).abs() / p.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max)
}

/// Golden-section search for the minimum of `f` on `[0, hi]`: the argument
/// and the value there.
fn golden_min(hi: f64, f: impl Fn(f64) -> f64) -> (f64, f64) {
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (0.0, hi.max(0.0));
    let mut c = hi - phi * (hi - lo);
    let mut d = lo + phi * (hi - lo);
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..40 {
        if fc <= fd {
            hi = d;
            d = c;
            fd = fc;
            c = hi - phi * (hi - lo);
            fc = f(c);
        } else {
            lo = c;
            c = d;
            fc = fd;
            d = lo + phi * (hi - lo);
            fd = f(d);
        }
    }
    let x = (lo + hi) / 2.0;
    (x, f(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web(demand_s: f64, cores: u32) -> Vec<TierDemand> {
        vec![TierDemand {
            tier: "web".into(),
            process: "tb-web".into(),
            demand_s,
            cores,
            ..Default::default()
        }]
    }

    fn points(users: &[u32], x: impl Fn(u32) -> f64) -> Vec<Point> {
        users
            .iter()
            .map(|&u| Point {
                users: u,
                throughput_rps: x(u),
                requests: 0,
                precision: None,
            })
            .collect()
    }

    #[test]
    fn a_cpu_bound_curve_needs_no_hidden_station_and_is_probed_at_its_bend() {
        // The model's own curve: 4 ms on one core, 0.5 s think time.
        let d = web(0.004, 1);
        let exact: Vec<f64> = mva::exact(&[mva::Station::queue("web", 1, 0.004)], 0.5, 200)
            .iter()
            .map(|s| s.throughput)
            .collect();
        let x = |u: u32| exact[u as usize - 1];
        let pts = points(&[1, 13, 126], x);
        let g = Guide::fit(&pts, &d, 0.5, 0).unwrap();
        assert_eq!(g.hidden_demand_s, 0.0);
        // The chord from 13 to 126 users is at most 4.9% off the curve: a
        // tolerance of 7% allows 5.25% of it, nothing to run; one of 5%
        // allows 3.75%: run the level that leaves the two halves closest
        // to straight, near the bend.
        assert_eq!(g.next_level(&pts, 13, 126, 0.07), None);
        let p = g.next_level(&pts, 13, 126, 0.05).unwrap();
        assert_eq!(p.users, 94, "{p:?}");
        assert!(p.reason.contains("bends near 94"), "{}", p.reason);
        let mut more = pts.clone();
        more.extend(points(&[p.users], x));
        let next = g.next_level(&more, 13, 126, 0.05);
        assert!(next.is_none(), "{next:?}");
    }

    #[test]
    fn a_lock_the_agents_cannot_see_is_fitted_as_a_hidden_station() {
        // 0.3 ms of CPU on two cores, but a 5 ms lock: X ≤ 200/s.
        let lock = [
            mva::Station::queue("web", 2, 0.0003),
            mva::Station::queue("lock", 1, 0.005),
        ];
        let exact: Vec<f64> = mva::exact(&lock, 0.5, 400)
            .iter()
            .map(|s| s.throughput)
            .collect();
        let x = |u: u32| exact[u as usize - 1];
        let pts = points(&[1, 168], x);
        let g = Guide::fit(&pts, &web(0.0003, 2), 0.5, 0).unwrap();
        assert!(
            (g.hidden_demand_s - 0.005).abs() < 0.0005,
            "{}",
            g.hidden_demand_s
        );
        // N* with the lock: (0.5 + 0.0053)/0.005 ≈ 101, not the CPUs' 3,000.
        assert!((g.n_star() - 101.0).abs() < 10.0, "{}", g.n_star());
        // The fitted model bends where the lock does (N* ≈ 101).
        let p = g.next_level(&pts, 1, 168, 0.05).unwrap();
        assert!(p.users > 60 && p.users < 140, "{p:?}");
    }

    #[test]
    fn a_model_off_by_different_amounts_at_the_ends_falls_back_to_the_midpoint() {
        // The model is right at 10 users and 30% low at 100.
        let d = web(0.001, 1);
        let pts = vec![
            Point {
                users: 10,
                throughput_rps: 19.9,
                requests: 0,
                precision: None,
            },
            Point {
                users: 100,
                throughput_rps: 260.0,
                requests: 0,
                precision: None,
            },
        ];
        let g = Guide::fit(&pts, &d, 0.5, 0).unwrap();
        let p = g.next_level(&pts, 10, 100, 0.05).unwrap();
        assert_eq!(p.users, 55, "{p:?}");
        assert!(p.reason.contains("midpoint"), "{}", p.reason);
    }

    #[test]
    fn a_vague_measurement_is_not_taken_for_a_model_error() {
        // 15% above the model at 1 user, but from 30 requests (±37% at two
        // standard errors): no reason to doubt the model between 1 and 12.
        let d = web(0.001, 1);
        let at = |users: u32, throughput_rps: f64, requests: u64| Point {
            users,
            throughput_rps,
            requests,
            precision: None,
        };
        let x12 = 12.0 / 0.5012;
        let vague = [at(1, 1.15 * 1.0 / 0.501, 30), at(12, x12, 600)];
        let g = Guide::fit(&vague, &d, 0.5, 0).unwrap();
        assert_eq!(g.next_level(&vague, 1, 12, 0.05), None);
        // The same error measured on 30,000 requests is one.
        let sure = [at(1, 1.15 * 1.0 / 0.501, 30_000), at(12, x12, 600)];
        let g = Guide::fit(&sure, &d, 0.5, 0).unwrap();
        assert!(g.next_level(&sure, 1, 12, 0.05).is_some());
        // And so is one measured on 30 requests whose interval says ±3%
        // (the users' completions knew better than counting): what the
        // level measured wins over what its count of requests suggests.
        let known = [
            Point {
                precision: Some(0.03),
                ..at(1, 1.15 * 1.0 / 0.501, 30)
            },
            at(12, x12, 600),
        ];
        let g = Guide::fit(&known, &d, 0.5, 0).unwrap();
        assert!(g.next_level(&known, 1, 12, 0.05).is_some());
        // While a wide interval keeps a many-request level vague.
        let wide = [
            Point {
                precision: Some(0.40),
                ..at(1, 1.15 * 1.0 / 0.501, 30_000)
            },
            at(12, x12, 600),
        ];
        let g = Guide::fit(&wide, &d, 0.5, 0).unwrap();
        assert_eq!(g.next_level(&wide, 1, 12, 0.05), None);
    }

    #[test]
    fn adjacent_levels_and_no_demands_propose_nothing() {
        let pts = points(&[10, 11], |u| u as f64);
        assert!(Guide::fit(&pts, &[], 0.5, 0).is_none());
        let g = Guide::fit(&pts, &web(0.001, 1), 0.5, 0).unwrap();
        assert!(g.next_level(&pts, 10, 11, 0.0).is_none());
    }

    #[test]
    fn one_disturbed_level_does_not_draw_the_guide_into_every_level_beside_it() {
        // The testbed's CPU-bound curve (4 ms, Z = 0.5 s), with the level at
        // 91 users measured 30% low (a neighbour took the CPU for a while):
        // the guide took 86, 88, 89, 90 and 93 to 100 users one by one.
        let d = web(0.004, 1);
        let truth = |u: u32| (u as f64 / 0.505).min(248.0);
        let at = |u: u32| Point {
            users: u,
            throughput_rps: if u == 91 { 0.7 * truth(u) } else { truth(u) },
            requests: 2_000,
            precision: None,
        };
        let mut measured = vec![1, 13, 52, 71, 81, 86, 91, 127];
        let mut proposed = 0;
        while let Some(p) = {
            let pts: Vec<Point> = measured.iter().map(|&u| at(u)).collect();
            Guide::fit(&pts, &d, 0.5, 127)
                .unwrap()
                .next_level(&pts, 13, 127, 0.05)
        } {
            // Only ever inside a gap wider than 5% of its lower end.
            let lo = measured
                .iter()
                .copied()
                .filter(|&u| u < p.users)
                .max()
                .unwrap();
            let hi = measured
                .iter()
                .copied()
                .filter(|&u| u > p.users)
                .min()
                .unwrap();
            assert!(!gap_resolved(lo, hi, 0.05), "{} in {lo}..{hi}", p.users);
            measured.push(p.users);
            proposed += 1;
            assert!(proposed <= 8, "{measured:?}");
        }
    }

    #[test]
    fn a_gap_within_the_tolerance_of_its_lower_end_is_resolved() {
        assert!(gap_resolved(10, 11, 0.0));
        assert!(gap_resolved(86, 90, 0.05));
        assert!(!gap_resolved(86, 91, 0.05));
        assert!(!gap_resolved(13, 52, 0.05));
    }
}
