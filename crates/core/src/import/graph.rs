//! The CBMG estimated from session counts: each transition's probability
//! is the maximum-likelihood estimate of a Markov chain, the steps from
//! `a` to `b` over every step out of `a` (the session's end included),
//! kept with its count so the evidence behind each edge shows.

use serde::Serialize;

use super::sessions::SessionCounts;

#[derive(Debug, Clone, Serialize)]
pub struct Edge {
    pub to: usize,
    pub probability: f64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Graph {
    /// Where sessions begin.
    pub entries: Vec<Edge>,
    /// `edges[a]`: the steps out of `a`, most likely first.
    pub edges: Vec<Vec<Edge>>,
    /// `exits[a]`: the probability and count of a session ending at `a`.
    pub exits: Vec<(f64, u64)>,
    /// `out[a]`: every step out of `a`, the ends included.
    pub out: Vec<u64>,
    pub sessions: u64,
    /// Sessions per second in each hour of the day (UTC), over the hours
    /// the log covers; `None` for hours it does not.
    pub arrivals_by_hour: Vec<Option<f64>>,
}

impl Graph {
    pub(crate) fn estimate(c: &SessionCounts) -> Graph {
        let n = c.classes;
        let sessions = c.sessions.max(1) as f64;
        let mut entries: Vec<Edge> = (0..n)
            .filter(|&i| c.starts[i] > 0)
            .map(|i| Edge {
                to: i,
                probability: c.starts[i] as f64 / sessions,
                count: c.starts[i],
            })
            .collect();
        entries.sort_by(|a, b| b.count.cmp(&a.count).then(a.to.cmp(&b.to)));
        let mut rows: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
        for (&(a, b), &count) in &c.steps {
            rows[a].push((b, count));
        }
        let mut edges = Vec::with_capacity(n);
        let mut exits = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        for (a, steps) in rows.into_iter().enumerate() {
            let total: u64 = steps.iter().map(|s| s.1).sum::<u64>() + c.exits[a];
            let denom = total.max(1) as f64;
            let mut row: Vec<Edge> = steps
                .into_iter()
                .map(|(b, count)| Edge {
                    to: b,
                    probability: count as f64 / denom,
                    count,
                })
                .collect();
            row.sort_by(|x, y| y.count.cmp(&x.count).then(x.to.cmp(&y.to)));
            edges.push(row);
            exits.push((c.exits[a] as f64 / denom, c.exits[a]));
            out.push(total);
        }
        let seconds = c.seconds_observed();
        let arrivals_by_hour = (0..24)
            .map(|h| (seconds[h] > 0.0).then(|| c.starts_by_hour[h] as f64 / seconds[h]))
            .collect();
        Graph {
            entries,
            edges,
            exits,
            out,
            sessions: c.sessions,
            arrivals_by_hour,
        }
    }

    /// Mean visits per session to each class (`V = e + PᵀV`): the share
    /// of requests each class should get.
    pub(crate) fn visits(&self) -> Vec<f64> {
        self.visits_in_order()
            .unwrap_or_else(|| self.visits_iterated())
    }

    /// The visits of a graph without cycles (a HAR's journey, a log
    /// whose sessions never go back), each class's from those of the
    /// classes before it, in one pass; `None` for a graph with a cycle.
    ///
    /// Iterating takes a sweep per step of the longest path: a journey
    /// of 100,000 steps made 10,000 sweeps of all of them, the cap, and
    /// was still short. Each class's sum adds the same terms in the same
    /// order as a sweep does, so the figures are those iterating
    /// converges to, to the bit.
    fn visits_in_order(&self) -> Option<Vec<f64>> {
        let n = self.edges.len();
        let mut start = vec![0.0; n];
        for e in &self.entries {
            start[e.to] += e.probability;
        }
        // Into each class: where from, and how likely.
        let mut incoming: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
        for (a, row) in self.edges.iter().enumerate() {
            for e in row {
                incoming[e.to].push((a, e.probability));
            }
        }
        // Kahn's order: a class once all those leading into it are done.
        let mut waiting: Vec<usize> = incoming.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..n).filter(|&b| waiting[b] == 0).collect();
        let mut v = vec![0.0; n];
        let mut done = 0;
        while let Some(b) = ready.pop() {
            v[b] = incoming[b]
                .iter()
                .fold(start[b], |sum, &(a, p)| sum + v[a] * p);
            done += 1;
            for e in &self.edges[b] {
                waiting[e.to] -= 1;
                if waiting[e.to] == 0 {
                    ready.push(e.to);
                }
            }
        }
        (done == n).then_some(v)
    }

    /// The visits by iterating the chain, for a graph with cycles.
    fn visits_iterated(&self) -> Vec<f64> {
        let n = self.edges.len();
        let mut v = vec![0.0; n];
        for e in &self.entries {
            v[e.to] = e.probability;
        }
        for _ in 0..10_000 {
            let mut next = vec![0.0; n];
            for e in &self.entries {
                next[e.to] += e.probability;
            }
            for (a, row) in self.edges.iter().enumerate() {
                for e in row {
                    next[e.to] += v[a] * e.probability;
                }
            }
            let delta: f64 = next.iter().zip(&v).map(|(x, y)| (x - y).abs()).sum();
            v = next;
            if delta < 1e-12 {
                break;
            }
        }
        v
    }

    /// The busiest hour (UTC) and its rate of new sessions per second.
    pub(crate) fn peak_arrivals(&self) -> Option<(usize, f64)> {
        self.arrivals_by_hour
            .iter()
            .enumerate()
            .filter_map(|(h, r)| r.map(|r| (h, r)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions::{client_key, Sessionizer};
    use super::*;

    #[test]
    fn probabilities_are_shares_of_the_steps_out() {
        let mut s = Sessionizer::new(2, 100.0);
        // Sessions: 0 1 | 0 0 1 | 1
        let k = |i: u32| client_key(&[&i.to_string()]);
        for (key, t, c) in [
            (1, 0.0, 0),
            (1, 1.0, 1),
            (2, 0.0, 0),
            (2, 1.0, 0),
            (2, 2.0, 1),
            (3, 0.0, 1),
        ] {
            s.add(k(key), t, c);
        }
        let g = Graph::estimate(&s.finish());
        assert_eq!(g.sessions, 3);
        assert_eq!(g.entries[0].to, 0);
        assert!((g.entries[0].probability - 2.0 / 3.0).abs() < 1e-12);
        // Out of 0: 0→1 twice, 0→0 once, never an end.
        assert_eq!(g.out[0], 3);
        assert!((g.edges[0][0].probability - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(g.exits[0], (0.0, 0));
        assert_eq!(g.exits[1], (1.0, 3));
        let v = g.visits();
        // 6 requests in 3 sessions: 3 of class 0, 3 of class 1.
        assert!(
            (v[0] - 1.0).abs() < 1e-9 && (v[1] - 1.0).abs() < 1e-9,
            "{v:?}"
        );
    }

    fn edge(to: usize, probability: f64) -> Edge {
        Edge {
            to,
            probability,
            count: 1,
        }
    }

    fn graph(entries: Vec<Edge>, edges: Vec<Vec<Edge>>) -> Graph {
        let n = edges.len();
        Graph {
            entries,
            edges,
            exits: vec![(0.0, 0); n],
            out: vec![0; n],
            sessions: 1,
            arrivals_by_hour: Vec::new(),
        }
    }

    #[test]
    fn without_cycles_visits_are_those_iterating_converges_to() {
        // 0 → 1, 2; 1 → 2, 3; 2 → 3; sessions start at 0 and 2.
        let g = graph(
            vec![edge(0, 0.7), edge(2, 0.3)],
            vec![
                vec![edge(1, 0.6), edge(2, 0.3)],
                vec![edge(2, 0.55), edge(3, 0.35)],
                vec![edge(3, 0.9)],
                Vec::new(),
            ],
        );
        let v = g.visits_in_order().expect("no cycle");
        assert_eq!(v, g.visits_iterated());
        assert!((v[2] - (0.3 + 0.7 * 0.3 + 0.7 * 0.6 * 0.55)).abs() < 1e-12);
        // A loop is a cycle: the chain is iterated.
        let looped = graph(vec![edge(0, 1.0)], vec![vec![edge(0, 0.5)]]);
        assert!(looped.visits_in_order().is_none());
        assert!((looped.visits()[0] - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_journey_longer_than_the_iterations_visits_each_step_once() {
        // Iterating moves a session one step a sweep, and stops at 10,000.
        let n = 20_000;
        let g = graph(
            vec![edge(0, 1.0)],
            (0..n)
                .map(|i| {
                    if i + 1 < n {
                        vec![edge(i + 1, 1.0)]
                    } else {
                        Vec::new()
                    }
                })
                .collect(),
        );
        assert!(g.visits().iter().all(|&v| v == 1.0));
    }
}
