//! How precise a level's figures are: 95% confidence intervals by batch
//! means (Law & Kelton, *Simulation Modeling and Analysis*, §9.5.3).
//!
//! The measured window's seconds are grouped into `k` consecutive batches
//! of equal length; each batch gives its own throughput, mean response
//! time and percentiles, and the spread of the `k` batch figures says how
//! far the level's figure may be from the long-run one:
//!
//! ```text
//!   half-width = t(0.975, k − 1) · s / √k      s: the batch figures' deviation
//! ```
//!
//! Why batches, not the requests one by one: the requests of a closed
//! workload are correlated (a slow second slows every user's next
//! request), so the variance of one request's response time says nothing
//! of the mean's. Batches of a second or more are nearly independent when
//! the users' cycles are shorter than the batch (think time plus response,
//! a second or so here). Why not the users' cycles (the regenerative
//! method): a closed system with many users has no state it returns to.
//!
//! The throughput of a closed workload is the exception, because of how
//! its users think: each draws its think times from a low-discrepancy
//! stream (`engine::think`), so a user who thought long in one second
//! thinks short soon after, and its completions over a level vary far
//! less than second-by-second counts suggest. Batches cannot see that
//! (over a 20 s level at 40 users they overstate the error about twice,
//! at 120 s 3.6 times, in simulation). So the throughput's variance is
//! taken in two parts:
//!
//! ```text
//!   Var(X) = N·s_n²/T²  +  max(0, B(A + B′) − B(A − B′))
//! ```
//!
//! The first, the users' own: `s_n²` the variance of the users'
//! completions `n_u` over the window (the renewal view: each user's
//! cycles are its own), which holds whatever their think times. It misses
//! what moves every user at once (the server's slow seconds), so the
//! second part adds that: the shards deal their users in turn to two
//! halves `A` and `B′`, and batch means of the halves' sum's and
//! difference's per-batch throughputs differ by 4·Cov(A, B′), what the
//! halves share — each user's own irregularity, and batch means'
//! overstatement of it, cancel — scaled from the halves' shares to all
//! users. The t quantile takes Welch–Satterthwaite's degrees of freedom
//! (`N − 1` for the first part, `k − 1` for the second). Checked by
//! simulation of a closed network (think 0.5–1 s, 40–200 users, an FCFS
//! server up to saturation), with levels stopped as the capacity analysis
//! stops them (the first of three precise ticks in a row under 3%): 97–99%
//! of the 95% intervals cover the long-run throughput, but deep in
//! saturation with exponential service times (82%; batch means alone:
//! 92%), where the halves' shares trade off against each other. A window
//! of fewer than [`MIN_USERS`] users, one whose users changed (a ramp's
//! stages), halves further apart than 1:3, or requests no user tallied (open workloads),
//! falls back to batch means.
//!
//! Memory stays bounded for a level of hours: at most [`MAX_BATCHES`]
//! batches are kept, and when they fill, neighbours merge pairwise and the
//! batch length doubles. Percentiles come from each batch's own histogram
//! (batching applied to quantiles: each batch's p99 is a slightly biased
//! estimate for short batches with few requests, which widens the
//! interval, never narrows it).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::{round3, IntervalStats, RequestStats, UserTally};

/// Batches kept at most; past it, pairs merge and batches double in length.
pub const MAX_BATCHES: usize = 32;

/// Fewer batches than this give no interval: the t quantile of so few
/// degrees of freedom makes it too wide to use, and the deviation of fewer
/// is itself noise.
pub const MIN_BATCHES: usize = 5;

/// A tick shorter than this (s) never completes a batch: whole ticks are
/// a second, only a level's last one is cut.
const SHORT_TICK_S: f64 = 0.95;

/// Fewer users than this give no variance of their completions worth the
/// name: the throughput's interval then comes from batches alone.
pub const MIN_USERS: u32 = 5;

/// 95% half-widths of a level's figures, beside them in run.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ci95 {
    /// Batches the measured window was cut into.
    pub batches: u32,
    /// Seconds per batch.
    pub batch_s: f64,
    /// ± req/s around `throughput_rps`.
    pub throughput_rps: f64,
    /// How the throughput's half-width was found: `users` (the users'
    /// completions, with what moves them all), or `batches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_from: Option<String>,
    /// ± ms around each of `response_time_ms`'s figures; absent when
    /// fewer than [`MIN_BATCHES`] batches had a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_time_ms: Option<LatencyHalfWidths>,
}

impl Ci95 {
    /// The throughput's half-width relative to the throughput (0.03: ±3%).
    pub fn relative_throughput(&self, throughput_rps: f64) -> Option<f64> {
        (throughput_rps > 0.0).then(|| self.throughput_rps / throughput_rps)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LatencyHalfWidths {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

/// One batch: its length, its requests and their response times.
#[derive(Debug, Clone)]
struct Batch {
    seconds: f64,
    requests: u64,
    /// Completions of the first half of the users (`UserTally`).
    first_half: u64,
    response: Histogram<u64>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            seconds: 0.0,
            requests: 0,
            first_half: 0,
            response: RequestStats::default().response_time,
        }
    }

    fn add(&mut self, seconds: f64, stats: &RequestStats, users: &UserTally) {
        self.seconds += seconds;
        self.requests += stats.requests;
        self.first_half += users.first_half;
        self.response
            .add(&stats.response_time)
            .expect("auto-resizing histograms always add");
    }

    fn merge(&mut self, other: &Batch) {
        self.seconds += other.seconds;
        self.requests += other.requests;
        self.first_half += other.first_half;
        self.response
            .add(&other.response)
            .expect("auto-resizing histograms always add");
    }
}

/// The measured window's seconds, batched as they come.
#[derive(Debug, Clone)]
pub struct Batches {
    /// Ticks per batch: doubles when the batches fill.
    ticks_per_batch: u32,
    full: Vec<Batch>,
    filling: Batch,
    filled_ticks: u32,
    /// The whole window's: seconds, requests, and the users' tally.
    seconds: f64,
    requests: u64,
    users: UserTally,
    /// The most and the fewest users active in a tick.
    most_users: u32,
    fewest_users: u32,
}

impl Default for Batches {
    fn default() -> Self {
        Batches {
            ticks_per_batch: 1,
            full: Vec::new(),
            filling: Batch::new(),
            filled_ticks: 0,
            seconds: 0.0,
            requests: 0,
            users: UserTally::default(),
            most_users: 0,
            fewest_users: u32::MAX,
        }
    }
}

impl Batches {
    /// Adds one tick of the measured window: `seconds` long (a last tick
    /// may be shorter), the users active in it, and the requests that
    /// completed in it.
    pub fn add(&mut self, seconds: f64, active_users: u32, stats: &IntervalStats) {
        let total = stats.total();
        self.seconds += seconds;
        self.requests += total.requests;
        self.users.merge(&stats.users);
        self.most_users = self.most_users.max(active_users);
        self.fewest_users = self.fewest_users.min(active_users);
        self.filling.add(seconds, &total, &stats.users);
        // A level ended between ticks (its controller stopped it) ends on
        // a sliver of a tick: as a batch of its own its few requests over
        // a few milliseconds would be a wild rate. It stays in the filling
        // batch, which is left out like any partial one.
        if seconds < SHORT_TICK_S {
            return;
        }
        self.filled_ticks += 1;
        if self.filled_ticks < self.ticks_per_batch {
            return;
        }
        self.full
            .push(std::mem::replace(&mut self.filling, Batch::new()));
        self.filled_ticks = 0;
        if self.full.len() == MAX_BATCHES {
            let pairs: Vec<Batch> = self
                .full
                .chunks(2)
                .map(|pair| {
                    let mut b = pair[0].clone();
                    if let Some(second) = pair.get(1) {
                        b.merge(second);
                    }
                    b
                })
                .collect();
            self.full = pairs;
            self.ticks_per_batch *= 2;
        }
    }

    /// The 95% half-widths over the full batches (a last, partial batch is
    /// left out: it would weigh as much as a whole one); `None` with fewer
    /// than [`MIN_BATCHES`].
    pub fn ci95(&self) -> Option<Ci95> {
        let k = self.full.len();
        if k < MIN_BATCHES {
            return None;
        }
        let throughput: Vec<f64> = self
            .full
            .iter()
            .map(|b| b.requests as f64 / b.seconds.max(1e-9))
            .collect();
        // A batch without a response has no response time to spread.
        let answered: Vec<&Histogram<u64>> = self
            .full
            .iter()
            .map(|b| &b.response)
            .filter(|h| !h.is_empty())
            .collect();
        let latency = |f: &dyn Fn(&Histogram<u64>) -> f64| {
            let values: Vec<f64> = answered.iter().map(|h| f(h) / 1e6).collect();
            round3(half_width(&values))
        };
        let quantile = |q: f64| move |h: &Histogram<u64>| h.value_at_quantile(q) as f64;
        let (throughput_rps, from) = match self.users_half_width() {
            Some(h) => (h, "users"),
            None => (half_width(&throughput), "batches"),
        };
        Some(Ci95 {
            batches: k as u32,
            batch_s: round3(self.full.iter().map(|b| b.seconds).sum::<f64>() / k as f64),
            throughput_rps: round3(throughput_rps),
            throughput_from: Some(from.into()),
            response_time_ms: (answered.len() >= MIN_BATCHES).then(|| LatencyHalfWidths {
                mean: latency(&|h| h.mean()),
                p50: latency(&quantile(0.50)),
                p90: latency(&quantile(0.90)),
                p95: latency(&quantile(0.95)),
                p99: latency(&quantile(0.99)),
            }),
        })
    }
}

impl Batches {
    /// How precise the window's figure is so far, as a fraction: the
    /// throughput's 95% half-width relative to the throughput — or, with
    /// fewer than [`MIN_USERS`] users, whose throughput says little of the
    /// system (one user's is its cycle's inverse), the mean cycle's
    /// (`R + think_s`), which is what the analysis takes from such a level
    /// (`N_min`, the response-time floor). `None` before there are
    /// [`MIN_BATCHES`] batches, and where the users' tally cannot give the
    /// throughput's interval (batch means overstate it, so a precision
    /// asked of them would hold nearly every level to its longest).
    pub fn precision(&self, think_s: f64) -> Option<f64> {
        let ci = self.ci95()?;
        if self.most_users >= MIN_USERS {
            ci.throughput_from.as_deref().filter(|f| *f == "users")?;
            return ci.relative_throughput(self.requests as f64 / self.seconds.max(1e-9));
        }
        let mean_ms = self.mean_response_ms()?;
        let half = ci.response_time_ms?.mean;
        Some(half / (mean_ms + think_s * 1e3).max(1e-9))
    }

    /// The throughput's 95% half-width relative to it, however found.
    pub fn throughput_precision(&self) -> Option<f64> {
        self.ci95()?
            .relative_throughput(self.requests as f64 / self.seconds.max(1e-9))
    }

    /// Full batches so far.
    pub fn full_batches(&self) -> usize {
        self.full.len()
    }

    /// The mean response time over the full batches (ms).
    fn mean_response_ms(&self) -> Option<f64> {
        let (sum, n) = self.full.iter().fold((0.0, 0u64), |(sum, n), b| {
            (
                sum + b.response.mean() * b.response.len() as f64,
                n + b.response.len(),
            )
        });
        (n > 0).then(|| sum / n as f64 / 1e6)
    }

    /// The throughput's 95% half-width from the users' completions and
    /// what moves them all (the module's head); `None` unless the users
    /// tallied every request of the window and there are enough of them.
    fn users_half_width(&self) -> Option<f64> {
        let users = f64::from(self.most_users);
        let t = self.seconds;
        // The first half's share of the completions: about half, as the
        // shards deal users to the halves in turn.
        let first = self.users.first_half as f64 / self.requests.max(1) as f64;
        // Users added or stopped in the window (a ramp's stages) make the
        // users' completions differ by design, not by chance.
        if self.most_users < MIN_USERS
            || self.fewest_users != self.most_users
            || self.users.completions != self.requests
            || self.requests == 0
            || !(0.25..=0.75).contains(&first)
            || t <= 0.0
        {
            return None;
        }
        // Σ n_u and Σ n_u² over the users, those who made none included.
        let (sum, squares) = (self.users.completions as f64, self.users.squares as f64);
        let spread = ((squares - sum * sum / users) / (users - 1.0)).max(0.0);
        let own = users * spread / (t * t);
        // What the halves share, by batch means of their sum and difference.
        let rate = |b: &Batch, n: f64| n / b.seconds.max(1e-9);
        let sum_rates: Vec<f64> = self
            .full
            .iter()
            .map(|b| rate(b, b.requests as f64))
            .collect();
        let differences: Vec<f64> = self
            .full
            .iter()
            .map(|b| rate(b, 2.0 * b.first_half as f64 - b.requests as f64))
            .collect();
        let k = self.full.len() as f64;
        // 4·Cov(A, B) = 4·N_A·N_B·c: scaled to the whole N²·c.
        let shared = (variance(&sum_rates) - variance(&differences)).max(0.0)
            / k
            / (4.0 * first * (1.0 - first));
        // Welch–Satterthwaite: each part has its own degrees of freedom
        // (N − 1 users, k − 1 batches), and a few users' spread is known
        // as loosely as a few batches' is.
        let total = own + shared;
        let df = match own * own / (users - 1.0) + shared * shared / (k - 1.0) {
            d if d > 0.0 => (total * total / d).floor() as usize,
            _ => self.full.len() - 1,
        };
        Some(t_975(df) * total.sqrt())
    }
}

/// The 95% half-width of the mean of `values`, batch figures:
/// `t(0.975, n − 1) · s / √n`.
fn half_width(values: &[f64]) -> f64 {
    let n = values.len();
    t_975(n.saturating_sub(1)) * std_dev(values) / (n.max(1) as f64).sqrt()
}

/// The sample standard deviation (n − 1).
fn std_dev(values: &[f64]) -> f64 {
    variance(values).sqrt()
}

/// The sample variance (n − 1).
fn variance(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
}

/// Student's t quantile 0.975 with `df` degrees of freedom.
fn t_975(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df.max(1) as f64)
        .map(|t| t.inverse_cdf(0.975))
        .unwrap_or(1.96)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second of `requests`, each taking `response_ms`, no user tallied.
    fn second(requests: u64, response_ms: u64) -> IntervalStats {
        let mut s = IntervalStats::new(1);
        let r = &mut s.per_request[0];
        r.requests = requests;
        for _ in 0..requests {
            r.response_time.record(response_ms * 1_000_000).unwrap();
        }
        s
    }

    /// A second whose requests the users tallied: `first` of them by the
    /// first half, and `squares` their Σ(2n + 1).
    fn tallied(requests: u64, first: u64, squares: u64) -> IntervalStats {
        let mut s = second(requests, 5);
        s.users = UserTally {
            counting: true,
            completions: requests,
            squares,
            first_half: first,
        };
        s
    }

    #[test]
    fn t_quantiles_are_students() {
        assert!((t_975(4) - 2.776).abs() < 1e-3);
        assert!((t_975(19) - 2.093).abs() < 1e-3);
        assert!((t_975(1000) - 1.962).abs() < 1e-3);
    }

    #[test]
    fn a_steady_level_has_a_narrow_interval_and_a_noisy_one_a_wide_one() {
        let mut steady = Batches::default();
        let mut noisy = Batches::default();
        for i in 0..20u64 {
            steady.add(1.0, 100, &second(100 + i % 2, 10));
            noisy.add(
                1.0,
                100,
                &second(if i % 2 == 0 { 60 } else { 140 }, 5 + 10 * (i % 2)),
            );
        }
        let (a, b) = (steady.ci95().unwrap(), noisy.ci95().unwrap());
        assert_eq!((a.batches, a.batch_s), (20, 1.0));
        // 100 and 101 alternating: s = 0.513, t = 2.093, half = 0.240.
        assert!((a.throughput_rps - 0.240).abs() < 1e-3, "{a:?}");
        assert_eq!(a.response_time_ms.unwrap().mean, 0.0);
        // 60 and 140: s = 41.04, half = 19.21.
        assert!((b.throughput_rps - 19.21).abs() < 0.01, "{b:?}");
        let r = b.response_time_ms.unwrap();
        assert!(r.mean > 1.0 && r.p99 > 1.0, "{b:?}");
        assert!((a.relative_throughput(100.5).unwrap() - 0.00239).abs() < 1e-4);
    }

    #[test]
    fn users_who_complete_evenly_give_a_narrow_interval_though_their_seconds_alternate() {
        // 40 users, 20 s, each making exactly 20 requests (Σn² = 40·400):
        // the seconds alternate 30 and 50, the halves 10/30 and 20/20, so
        // nothing moves both halves at once.
        let (mut users, mut seconds) = (Batches::default(), Batches::default());
        for i in 0..20u64 {
            let (n, first) = if i % 2 == 0 { (30, 10) } else { (50, 30) };
            users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
            seconds.add(1.0, 40, &second(n, 5));
        }
        let (u, s) = (users.ci95().unwrap(), seconds.ci95().unwrap());
        assert_eq!(u.throughput_from.as_deref(), Some("users"));
        assert_eq!(s.throughput_from.as_deref(), Some("batches"));
        assert!(u.throughput_rps < 1e-9, "{u:?}");
        // 30 and 50: s = 10.26, t = 2.093, half = 4.80.
        assert!((s.throughput_rps - 4.80).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn what_moves_every_user_at_once_widens_the_users_interval_as_batches_would() {
        // The same alternation, shared by both halves (15/25 each): it is
        // the server's, not the users', and counts in full.
        let (mut users, mut seconds) = (Batches::default(), Batches::default());
        for i in 0..20u64 {
            let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
            users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
            seconds.add(1.0, 40, &second(n, 5));
        }
        let (u, s) = (users.ci95().unwrap(), seconds.ci95().unwrap());
        assert!(
            (u.throughput_rps - s.throughput_rps).abs() < 1e-9,
            "{u:?} {s:?}"
        );
        // And the users' own spread adds to it: 20 users made 10, 20 made
        // 30 (Σn = 800, Σn² = 20·100 + 20·900 = 20,000): s_n² = 102.6,
        // N·s_n²/T² = 10.26 (req/s)², so the half-width grows.
        let mut spread = Batches::default();
        for i in 0..20u64 {
            let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
            spread.add(1.0, 40, &tallied(n, first, 20_000 / 20));
        }
        let w = spread.ci95().unwrap();
        // Welch–Satterthwaite: (10.26 + 5.26)² / (10.26²/39 + 5.26²/19) =
        // 58 degrees of freedom, t = 2.002.
        let shared = (s.throughput_rps / 2.093).powi(2);
        let expected = t_975(58) * (10.256 + shared).sqrt();
        assert!(
            (w.throughput_rps - expected).abs() < 0.01,
            "{w:?} {expected}"
        );
    }

    #[test]
    fn too_few_users_or_untallied_requests_fall_back_to_batches() {
        let mut few = Batches::default();
        let mut open = Batches::default();
        let mut ramp = Batches::default();
        let mut lopsided = Batches::default();
        for i in 0..10u64 {
            few.add(1.0, 4, &tallied(40 + i % 2, 20, 100));
            let mut s = tallied(40 + i % 2, 20, 100);
            s.users.completions -= 1;
            open.add(1.0, 40, &s);
            // A stage of the ramp adds users in the window.
            ramp.add(1.0, 40 + 2 * i as u32, &tallied(40 + i % 2, 20, 100));
            lopsided.add(1.0, 40, &tallied(40 + i % 2, 8, 100));
        }
        for b in [few, open, ramp, lopsided] {
            assert_eq!(
                b.ci95().unwrap().throughput_from.as_deref(),
                Some("batches")
            );
        }
    }

    #[test]
    fn a_precision_is_asked_only_of_what_the_users_tallied_or_a_few_users_cycle() {
        let mut users = Batches::default();
        let mut open = Batches::default();
        let mut one = Batches::default();
        for i in 0..20u64 {
            let (n, first) = if i % 2 == 0 { (30, 15) } else { (50, 25) };
            users.add(1.0, 40, &tallied(n, first, 40 * 400 / 20));
            open.add(1.0, 40, &second(n, 5));
            one.add(1.0, 1, &second(2, 5));
        }
        // ±4.80 req/s around 40: 12%.
        assert!((users.precision(1.0).unwrap() - 0.120).abs() < 1e-3);
        assert_eq!(open.precision(1.0), None);
        // One user, 5 ms answers always: its cycle (1.005 s) is exact.
        assert_eq!(one.precision(1.0), Some(0.0));
        assert_eq!(open.full_batches(), 20);
    }

    #[test]
    fn a_sliver_of_a_last_tick_is_no_batch_of_its_own() {
        let mut b = Batches::default();
        for i in 0..10u64 {
            b.add(1.0, 100, &second(100 + i % 2, 10));
        }
        let before = b.ci95().unwrap();
        // 3 requests in the 10 ms before the level was stopped: 300/s.
        b.add(0.01, 100, &second(3, 10));
        let after = b.ci95().unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn too_few_batches_give_no_interval() {
        let mut b = Batches::default();
        for _ in 0..MIN_BATCHES - 1 {
            b.add(1.0, 100, &second(10, 1));
        }
        assert!(b.ci95().is_none());
        b.add(1.0, 100, &second(10, 1));
        assert_eq!(b.ci95().unwrap().batches, MIN_BATCHES as u32);
        // Seconds without a response (a stalled server) spread no
        // response time: its interval is not claimed.
        let mut stalled = Batches::default();
        for i in 0..10 {
            stalled.add(1.0, 100, &second(if i < 3 { 10 } else { 0 }, 1));
        }
        let ci = stalled.ci95().unwrap();
        assert!(
            ci.response_time_ms.is_none() && ci.throughput_rps > 0.0,
            "{ci:?}"
        );
    }

    #[test]
    fn a_long_level_keeps_few_batches_of_doubling_length() {
        let mut b = Batches::default();
        for i in 0..1000u64 {
            b.add(1.0, 100, &second(100 + i % 3, 2));
        }
        let ci = b.ci95().unwrap();
        assert!(ci.batches as usize >= MAX_BATCHES / 2 && (ci.batches as usize) < MAX_BATCHES);
        // 1000 s in batches of 32 s (every full batch; the rest is partial).
        assert_eq!(ci.batch_s, 32.0);
        assert_eq!(ci.batches, 31);
        // Batches of 32 s average the 100/101/102 cycle out almost wholly.
        assert!(ci.throughput_rps < 0.1, "{ci:?}");
    }
}
