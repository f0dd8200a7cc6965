//! Rows of the scenario's data feeders, as the users of one process take
//! them: `sequential` from one cursor all share, round and round (each
//! process starting at its own offset); `random` drawn per use; `unique`
//! each row once in the whole level — every process of a fleet owns its
//! own slice of the rows, so no two hand out the same one — and then none.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::scenario::{FeederId, FeederMode, RequestId, Scenario};

/// The feeders' cursors of one process, and which `unique` feeders each
/// request reads (their rows are taken before the request is rendered, so
/// a request is never sent without its row).
pub(crate) struct Feeds {
    cursors: Vec<Cursor>,
    unique_reads: Vec<Vec<FeederId>>,
}

struct Cursor {
    next: AtomicUsize,
    /// `unique`: one past this process's last row.
    end: usize,
    mode: FeederMode,
    rows: usize,
}

impl Feeds {
    /// For the process holding shards `first..first + count` of `total`.
    pub(crate) fn new(scenario: &Scenario, first: usize, count: usize, total: usize) -> Feeds {
        let total = total.max(1);
        let cursors = scenario
            .feeders
            .iter()
            .map(|f| {
                let rows = f.rows.len();
                Cursor {
                    next: AtomicUsize::new(first * rows / total),
                    end: ((first + count) * rows / total).min(rows),
                    mode: f.mode,
                    rows,
                }
            })
            .collect();
        let unique_reads = scenario
            .requests
            .iter()
            .map(|r| {
                r.feeders()
                    .into_iter()
                    .filter(|f| scenario.feeders[f.index()].mode == FeederMode::Unique)
                    .collect()
            })
            .collect();
        Feeds {
            cursors,
            unique_reads,
        }
    }

    /// A row of `feeder` for one use; `None` when a `unique` one has none left.
    pub(crate) fn take(&self, feeder: FeederId, rng: &mut fastrand::Rng) -> Option<usize> {
        let c = &self.cursors[feeder.index()];
        match c.mode {
            FeederMode::Sequential => Some(c.next.fetch_add(1, Ordering::Relaxed) % c.rows.max(1)),
            FeederMode::Random => Some(rng.usize(..c.rows.max(1))),
            FeederMode::Unique => {
                let row = c.next.fetch_add(1, Ordering::Relaxed);
                (row < c.end).then_some(row)
            }
        }
    }

    /// The `unique` feeders `request` reads.
    pub(crate) fn unique_reads(&self, request: RequestId) -> &[FeederId] {
        &self.unique_reads[request.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn scenario(mode: &str) -> Scenario {
        let dir = std::env::temp_dir().join(format!("autoperf-feed-{}-{mode}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "target: {{base_url: 'http://h'}}\ndata: {{ids: {{range: [1, 10], mode: {mode}}}}}\nrequests:\n  a: {{path: '/a?id=${{ids.n}}'}}\n  b: {{path: /b}}\nsession: {{start: a, transitions: {{a: {{b: 0.5}}}}}}\n"
        );
        let s = parse(&text, &dir.join("s.yaml")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        s
    }

    #[test]
    fn sequential_goes_round_and_random_stays_in_range() {
        let s = scenario("sequential");
        let feeds = Feeds::new(&s, 0, 1, 1);
        let mut rng = fastrand::Rng::with_seed(1);
        let rows: Vec<usize> = (0..12)
            .filter_map(|_| feeds.take(FeederId(0), &mut rng))
            .collect();
        assert_eq!(rows, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        assert!(feeds.unique_reads(RequestId(0)).is_empty());
        let s = scenario("random");
        let feeds = Feeds::new(&s, 0, 1, 1);
        let rows: Vec<usize> = (0..200)
            .filter_map(|_| feeds.take(FeederId(0), &mut rng))
            .collect();
        assert!(rows.iter().all(|&r| r < 10));
        assert!((0..10).all(|r| rows.contains(&r)), "every row drawn in 200");
    }

    #[test]
    fn unique_rows_are_split_between_processes_and_run_out() {
        let s = scenario("unique");
        // Two processes of two shards each.
        let (p0, p1) = (Feeds::new(&s, 0, 2, 4), Feeds::new(&s, 2, 2, 4));
        assert_eq!(p0.unique_reads(RequestId(0)), [FeederId(0)]);
        assert!(p0.unique_reads(RequestId(1)).is_empty());
        let mut rng = fastrand::Rng::with_seed(1);
        let mut take_all = |f: &Feeds| -> Vec<usize> {
            std::iter::from_fn(|| f.take(FeederId(0), &mut rng)).collect()
        };
        let (a, b) = (take_all(&p0), take_all(&p1));
        assert_eq!(a, [0, 1, 2, 3, 4]);
        assert_eq!(b, [5, 6, 7, 8, 9]);
        assert_eq!(p0.take(FeederId(0), &mut rng), None, "still none");
    }
}
