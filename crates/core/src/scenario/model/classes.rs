//! Workload classes (`classes:`): kinds of users in one test — browsers
//! and buyers, say — each with its own session graph, think time and share
//! of the users (or of the arrivals). Requests are the scenario's, shared.
//!
//! Users are dealt to classes by their index in the whole level, so the
//! mix holds at every user count however the level is split over shards,
//! processes and workers: user `i` joins the class furthest behind its
//! share of the first `i + 1` users. At every count each class stays
//! within about one user of its share (with two classes, its share
//! rounded up or down: exactly its share when that is whole).

use super::super::session::Cbmg;
use super::ThinkTime;

/// Classes a scenario may have (a user's class is a byte).
pub const MAX_CLASSES: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct UserClass {
    pub name: String,
    /// Its share of the users (closed) or of the sessions' arrivals
    /// (open); the classes' shares sum to 1.
    pub share: f64,
    pub session: Cbmg,
    /// Its users' think time when a request has none of its own.
    pub think_time: ThinkTime,
}

/// Which class each user index belongs to; see the module's comment.
pub(crate) fn deal(shares: &[f64], users: usize) -> Vec<u8> {
    let mut counts = vec![0u64; shares.len()];
    (0..users)
        .map(|i| {
            let n = (i + 1) as f64;
            let c = (0..shares.len())
                .max_by(|&a, &b| {
                    let behind = |c: usize| shares[c] * n - counts[c] as f64;
                    // Ties go to the first class.
                    behind(a).total_cmp(&behind(b)).then(b.cmp(&a))
                })
                .unwrap_or(0);
            counts[c] += 1;
            c as u8
        })
        .collect()
}

/// How many of `users` each class gets (`deal`'s counts).
pub fn users_per_class(shares: &[f64], users: u32) -> Vec<u32> {
    let mut counts = vec![0u32; shares.len()];
    for c in deal(shares, users as usize) {
        counts[c as usize] += 1;
    }
    counts
}

/// The class of an arrival, for `u` uniform in [0, 1).
pub(crate) fn pick(shares: &[f64], u: f64) -> usize {
    let mut cumulative = 0.0;
    for (c, s) in shares.iter().enumerate() {
        cumulative += s;
        if u < cumulative {
            return c;
        }
    }
    shares.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_count_holds_the_shares_rounded_and_whole_shares_exactly() {
        let shares = [0.7, 0.3];
        let dealt = deal(&shares, 200);
        for n in 1..=200 {
            let buyers = dealt[..n].iter().filter(|&&c| c == 1).count() as f64;
            assert!((buyers - 0.3 * n as f64).abs() < 1.0, "{n}: {buyers}");
        }
        assert_eq!(users_per_class(&shares, 20), vec![14, 6]);
        assert_eq!(users_per_class(&shares, 10), vec![7, 3]);
        // Buyers doubled: 70 : 60 of 26 users.
        assert_eq!(
            users_per_class(&[70.0 / 130.0, 60.0 / 130.0], 26),
            vec![14, 12]
        );
        assert_eq!(users_per_class(&[0.5, 0.25, 0.25], 8), vec![4, 2, 2]);
    }

    #[test]
    fn classes_decode_with_their_own_sessions_and_think_times() {
        let text = r#"
target: {base_url: "http://127.0.0.1:8080"}
think_time: 1s
requests:
  home: {path: /}
  search: {path: /search}
  order: {path: /order, think_time: 3s}
classes:
  a: {share: 33.33%, session: {start: home}}
  b: {share: 33.33%, think_time: 200ms, session: {start: search, transitions: {search: {order: 0.5}}}}
  c: {share: 33.33%, session: {start: order}}
"#;
        let s = crate::scenario::parse(text, std::path::Path::new("c.yaml")).unwrap();
        // Three thirds written as 33.33% are thirds.
        assert!(s.classes.iter().all(|c| (c.share - 1.0 / 3.0).abs() < 1e-9));
        assert_eq!(s.class_shares().iter().sum::<f64>(), 1.0);
        // Each class walks its own graph; the scenario's is the first's.
        assert_eq!(s.expected_sent_visits_of(1), vec![0.0, 1.0, 0.5]);
        assert_eq!(s.session, s.classes[0].session);
        // b thinks 200 ms after a search and 3 s (the request's own)
        // after an order: (0.2 + 0.5 · 3) / 1.5 per request.
        let b = s.mean_think_time_of(1).as_secs_f64();
        assert!((b - 1.7 / 1.5).abs() < 1e-9, "{b}");
        // Closed users of each class send one request per Z_c: the mean
        // over requests is the shares' harmonic mean of the Z_c.
        let z = [1.0, 1.7 / 1.5, 3.0];
        let want = 1.0 / (z.iter().map(|z| 1.0 / z).sum::<f64>() / 3.0);
        let closed = s.closed_mean_think_time().as_secs_f64();
        assert!((closed - want).abs() < 1e-6, "{closed} {want}");
        // The mix over the classes' sessions, in their shares.
        let v = s.expected_sent_visits();
        assert!(
            (v[0] - 1.0 / 3.0).abs() < 1e-9 && (v[2] - 0.5).abs() < 1e-9,
            "{v:?}"
        );
    }

    #[test]
    fn arrivals_pick_by_share() {
        assert_eq!(pick(&[0.7, 0.3], 0.69), 0);
        assert_eq!(pick(&[0.7, 0.3], 0.71), 1);
        assert_eq!(pick(&[0.7, 0.3], 0.999_999_999), 1);
    }
}
