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
pub(crate) const MAX_BATCHES: usize = 32;

/// Fewer batches than this give no interval: the t quantile of so few
/// degrees of freedom makes it too wide to use, and the deviation of fewer
/// is itself noise.
pub(crate) const MIN_BATCHES: usize = 5;

/// A tick shorter than this (s) never completes a batch: whole ticks are
/// a second, only a level's last one is cut.
const SHORT_TICK_S: f64 = 0.95;

/// Fewer users than this give no variance of their completions worth the
/// name: the throughput's interval then comes from batches alone.
pub(crate) const MIN_USERS: u32 = 5;

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
    pub(crate) fn ci95(&self) -> Option<Ci95> {
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
    pub(crate) fn full_batches(&self) -> usize {
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
pub(crate) fn t_975(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df.max(1) as f64)
        .map(|t| t.inverse_cdf(0.975))
        .unwrap_or(1.96)
}

#[cfg(test)]
mod tests;
