//! The session: a Customer Behavior Model Graph (CBMG), a Markov chain over
//! the scenario's requests. After each request a user moves to the next one
//! with the given probabilities; whatever probability is left over
//! (`1 - Σ p`) ends the session, and the user starts a new one at `start`:
//! one request, or several with the probability of each (the CBMG's entry
//! state, as a log of real sessions gives it).
//!
//! A transition may hold only under a condition (`when:`). Those that do
//! not hold are left out and the rest renormalised, the exit counting as
//! one that always holds: `{add: {p: 0.7, when: …}, checkout: 0.2}` goes
//! to checkout with 0.2 / 0.3 and ends with 0.1 / 0.3 when `add` is out —
//! what the user would have done otherwise, in the same proportions. A
//! condition known at load time is applied then, to the probabilities
//! themselves, so the expected visits follow it; the others are taken to
//! hold there.

use super::condition::Condition;
use super::ids::RequestId;

#[derive(Debug, Clone, PartialEq)]
pub struct Cbmg {
    /// Where sessions begin, with probabilities summing to 1.
    start: Vec<(RequestId, f64)>,
    /// Indexed by `RequestId`: the successors and their probabilities.
    transitions: Vec<Vec<(RequestId, f64)>>,
    /// Indexed by `RequestId`, aligned with `transitions`: each one's
    /// condition, if it has one. Empty for a request without any.
    when: Vec<Vec<Option<Condition>>>,
}

impl Cbmg {
    #[cfg(test)]
    /// `transitions[i]` lists the successors of request `i`; the decoder
    /// guarantees probabilities in [0, 1] summing to at most 1.
    pub(crate) fn new(start: RequestId, transitions: Vec<Vec<(RequestId, f64)>>) -> Cbmg {
        Cbmg::with_entries(vec![(start, 1.0)], transitions)
    }

    /// Sessions begin at each of `start` with its probability; the decoder
    /// guarantees a non-empty list summing to 1.
    pub(crate) fn with_entries(
        start: Vec<(RequestId, f64)>,
        transitions: Vec<Vec<(RequestId, f64)>>,
    ) -> Cbmg {
        Cbmg {
            start,
            transitions,
            when: Vec::new(),
        }
    }

    /// The same chain whose transitions hold under `when` (indexed and
    /// aligned as `transitions`).
    pub(crate) fn with_conditions(mut self, when: Vec<Vec<Option<Condition>>>) -> Cbmg {
        self.when = when;
        self
    }

    /// The condition of the `i`-th transition from `from`, if it has one.
    pub(crate) fn condition(&self, from: RequestId, i: usize) -> Option<&Condition> {
        self.when.get(from.index())?.get(i)?.as_ref()
    }

    /// Whether any transition from `from` has a condition.
    pub(crate) fn is_conditional(&self, from: RequestId) -> bool {
        self.when
            .get(from.index())
            .is_some_and(|w| w.iter().any(Option::is_some))
    }

    /// A session of exactly one visit to `request`, then the end (profiling
    /// mode loads one request type at a time).
    pub(crate) fn single(request: RequestId, n: usize) -> Cbmg {
        Cbmg {
            start: vec![(request, 1.0)],
            transitions: vec![Vec::new(); n],
            when: Vec::new(),
        }
    }

    /// The one request every session begins with, if there is only one.
    pub(crate) fn only_start(&self) -> Option<RequestId> {
        match self.start.as_slice() {
            [(r, _)] => Some(*r),
            _ => None,
        }
    }

    /// Where sessions begin, and how often.
    pub fn entries(&self) -> &[(RequestId, f64)] {
        &self.start
    }

    /// The first request of a session, for `u` uniform in [0, 1).
    pub(crate) fn first(&self, u: f64) -> RequestId {
        let mut cumulative = 0.0;
        for &(r, p) in &self.start {
            cumulative += p;
            if u < cumulative {
                return r;
            }
        }
        // Rounding left the sum a hair below 1.
        self.start.last().expect("a session has a start").0
    }

    pub fn transitions(&self, from: RequestId) -> &[(RequestId, f64)] {
        &self.transitions[from.index()]
    }

    /// The request after `from`, for `u` uniform in [0, 1); `None` ends the
    /// session.
    pub(crate) fn next(&self, from: RequestId, u: f64) -> Option<RequestId> {
        let mut cumulative = 0.0;
        for &(to, p) in &self.transitions[from.index()] {
            cumulative += p;
            if u < cumulative {
                return Some(to);
            }
        }
        None
    }

    /// The request after `from` among the transitions whose condition
    /// `holds` (each asked once), renormalised with the exit; `None` ends
    /// the session.
    pub(crate) fn next_when(
        &self,
        from: RequestId,
        u: f64,
        mut holds: impl FnMut(&Condition) -> bool,
    ) -> Option<RequestId> {
        if !self.is_conditional(from) {
            return self.next(from, u);
        }
        let edges = &self.transitions[from.index()];
        let open: Vec<bool> = self.when[from.index()]
            .iter()
            .map(|c| c.as_ref().is_none_or(&mut holds))
            .collect();
        let kept: f64 = edges
            .iter()
            .zip(&open)
            .filter(|(_, &o)| o)
            .map(|(&(_, p), _)| p)
            .sum::<f64>()
            + self.exit_probability(from);
        let mut cumulative = 0.0;
        for (&(to, p), _) in edges.iter().zip(&open).filter(|(_, &o)| o) {
            cumulative += p;
            if u * kept < cumulative {
                return Some(to);
            }
        }
        None
    }

    pub fn exit_probability(&self, from: RequestId) -> f64 {
        let sum: f64 = self.transitions[from.index()].iter().map(|&(_, p)| p).sum();
        (1.0 - sum).max(0.0)
    }

    /// Mean number of visits per session to each request, indexed by
    /// `RequestId`: the solution of `V = e_start + Pᵀ V` (the visit-ratio
    /// equations of an open Markov chain; Menascé & Almeida's CBMG). When
    /// some loop can never be left the system has no solution and every
    /// entry is `f64::INFINITY`; the decoder rejects such sessions.
    pub fn expected_visits(&self) -> Vec<f64> {
        let n = self.transitions.len();
        // Rows of (I - Pᵀ) | e_start, augmented.
        let mut a = vec![vec![0.0f64; n + 1]; n];
        for (i, row) in a.iter_mut().enumerate() {
            row[i] = 1.0;
        }
        for (from, edges) in self.transitions.iter().enumerate() {
            for &(to, p) in edges {
                a[to.index()][from] -= p;
            }
        }
        for &(r, p) in &self.start {
            a[r.index()][n] += p;
        }

        // Gaussian elimination with partial pivoting.
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
                .unwrap_or(col);
            if a[pivot][col].abs() < 1e-12 {
                return vec![f64::INFINITY; n];
            }
            a.swap(col, pivot);
            let pivot_row = a[col].clone();
            for (r, row) in a.iter_mut().enumerate() {
                let factor = row[col] / pivot_row[col];
                if r != col && factor != 0.0 {
                    for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                        *x -= factor * p;
                    }
                }
            }
        }
        (0..n).map(|i| (a[i][n] / a[i][i]).max(0.0)).collect()
    }

    /// Requests reachable from `start` through transitions of positive
    /// probability (including the starts themselves).
    pub(crate) fn reachable(&self) -> Vec<bool> {
        let mut seen = vec![false; self.transitions.len()];
        let mut stack: Vec<RequestId> = self
            .start
            .iter()
            .filter(|&&(_, p)| p > 0.0)
            .map(|&(r, _)| r)
            .collect();
        while let Some(r) = stack.pop() {
            if std::mem::replace(&mut seen[r.index()], true) {
                continue;
            }
            for &(to, p) in &self.transitions[r.index()] {
                if p > 0.0 && !seen[to.index()] {
                    stack.push(to);
                }
            }
        }
        seen
    }

    /// Requests from which the session can still end (some path of positive
    /// probability leads to a request with an exit probability, or whose
    /// every transition has a condition: when none holds, the session
    /// ends).
    pub(crate) fn can_end(&self) -> Vec<bool> {
        let n = self.transitions.len();
        let mut ends: Vec<bool> = (0..n)
            .map(|i| {
                let all_conditional = self.when.get(i).is_some_and(|w| {
                    !w.is_empty()
                        && w.len() == self.transitions[i].len()
                        && w.iter().all(Option::is_some)
                });
                all_conditional || self.exit_probability(RequestId(i as u32)) > 1e-9
            })
            .collect();
        loop {
            let mut changed = false;
            for i in 0..n {
                if !ends[i]
                    && self.transitions[i]
                        .iter()
                        .any(|&(to, p)| p > 0.0 && ends[to.index()])
                {
                    ends[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return ends;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(i: u32) -> RequestId {
        RequestId(i)
    }

    /// The example session of docs/design.md: login → {search 0.7, purchase 0.2},
    /// search → {search 0.3, purchase 0.3}, purchase → {}.
    fn shop() -> Cbmg {
        Cbmg::new(
            r(0),
            vec![
                vec![(r(1), 0.7), (r(2), 0.2)],
                vec![(r(1), 0.3), (r(2), 0.3)],
                vec![],
            ],
        )
    }

    #[test]
    fn expected_visits_hand_solved() {
        // V0 = 1; V1 = 0.7 V0 + 0.3 V1 → V1 = 1; V2 = 0.2 V0 + 0.3 V1 = 0.5.
        let v = shop().expected_visits();
        let want = [1.0, 1.0, 0.5];
        for (got, want) in v.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{v:?}");
        }
    }

    #[test]
    fn next_follows_the_probabilities() {
        let cbmg = shop();
        assert_eq!(cbmg.next(r(0), 0.0), Some(r(1)));
        assert_eq!(cbmg.next(r(0), 0.69), Some(r(1)));
        assert_eq!(cbmg.next(r(0), 0.71), Some(r(2)));
        assert_eq!(cbmg.next(r(0), 0.95), None);
        assert_eq!(cbmg.next(r(2), 0.0), None);
        assert!((cbmg.exit_probability(r(0)) - 0.1).abs() < 1e-12);
        assert_eq!(cbmg.exit_probability(r(2)), 1.0);
    }

    #[test]
    fn walk_statistics_match_expected_visits() {
        let cbmg = shop();
        let mut rng = fastrand::Rng::with_seed(7);
        let sessions = 100_000;
        let mut visits = [0u64; 3];
        for _ in 0..sessions {
            let mut at = Some(cbmg.first(rng.f64()));
            while let Some(r) = at {
                visits[r.index()] += 1;
                at = cbmg.next(r, rng.f64());
            }
        }
        for (count, want) in visits.iter().zip(cbmg.expected_visits()) {
            let got = *count as f64 / sessions as f64;
            assert!((got - want).abs() / want < 0.02, "{got} vs {want}");
        }
    }

    #[test]
    fn transitions_whose_condition_fails_are_left_out_and_the_rest_renormalised_with_the_exit() {
        use crate::scenario::template::Names;
        let names = Names {
            feeders: Vec::new(),
            variables: &[],
        };
        let when = Condition::parse("status == 200", &names).unwrap();
        // login → {search 0.7 when status == 200, purchase 0.2}, exit 0.1.
        let cbmg = shop().with_conditions(vec![vec![Some(when), None], vec![], vec![]]);
        assert!(cbmg.is_conditional(r(0)) && !cbmg.is_conditional(r(1)));
        // Held: the written probabilities.
        assert_eq!(cbmg.next_when(r(0), 0.69, |_| true), Some(r(1)));
        assert_eq!(cbmg.next_when(r(0), 0.71, |_| true), Some(r(2)));
        assert_eq!(cbmg.next_when(r(0), 0.91, |_| true), None);
        // Not held: purchase 0.2 / 0.3, the end 0.1 / 0.3.
        assert_eq!(cbmg.next_when(r(0), 0.0, |_| false), Some(r(2)));
        assert_eq!(cbmg.next_when(r(0), 0.66, |_| false), Some(r(2)));
        assert_eq!(cbmg.next_when(r(0), 0.67, |_| false), None);
        // Unconditional rows are `next`.
        assert_eq!(cbmg.next_when(r(1), 0.1, |_| false), Some(r(1)));
    }

    #[test]
    fn single_visit() {
        let cbmg = Cbmg::single(r(2), 3);
        assert_eq!(cbmg.only_start(), Some(r(2)));
        assert_eq!(cbmg.next(r(2), 0.0), None);
        assert_eq!(cbmg.expected_visits(), vec![0.0, 0.0, 1.0]);
    }

    #[test]
    fn several_entries_weight_the_visits_and_are_drawn_by_probability() {
        let cbmg = Cbmg::with_entries(
            vec![(r(0), 0.25), (r(1), 0.75)],
            vec![vec![(r(1), 0.5)], vec![], vec![]],
        );
        assert_eq!(cbmg.only_start(), None);
        assert_eq!(cbmg.first(0.1), r(0));
        assert_eq!(cbmg.first(0.3), r(1));
        assert_eq!(cbmg.first(0.999_999_9), r(1));
        // V0 = 0.25; V1 = 0.75 + 0.5 V0.
        let v = cbmg.expected_visits();
        assert!(
            (v[0] - 0.25).abs() < 1e-12 && (v[1] - 0.875).abs() < 1e-12,
            "{v:?}"
        );
        assert_eq!(cbmg.reachable(), vec![true, true, false]);
    }

    #[test]
    fn reachability_and_endless_loops() {
        let cbmg = Cbmg::new(
            r(0),
            vec![
                vec![(r(1), 0.5)],
                vec![(r(1), 1.0)],
                vec![],
                vec![(r(2), 0.0)],
            ],
        );
        assert_eq!(cbmg.reachable(), vec![true, true, false, false]);
        assert_eq!(cbmg.can_end(), vec![true, false, true, true]);
        assert!(cbmg.expected_visits()[1].is_infinite());
    }
}
