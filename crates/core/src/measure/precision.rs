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
//! Memory stays bounded for a level of hours: at most [`MAX_BATCHES`]
//! batches are kept, and when they fill, neighbours merge pairwise and the
//! batch length doubles. Percentiles come from each batch's own histogram
//! (batching applied to quantiles: each batch's p99 is a slightly biased
//! estimate for short batches with few requests, which widens the
//! interval, never narrows it).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::{round3, RequestStats};

/// Batches kept at most; past it, pairs merge and batches double in length.
pub const MAX_BATCHES: usize = 32;

/// Fewer batches than this give no interval: the t quantile of so few
/// degrees of freedom makes it too wide to use, and the deviation of fewer
/// is itself noise.
pub const MIN_BATCHES: usize = 5;

/// 95% half-widths of a level's figures, beside them in run.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ci95 {
    /// Batches the measured window was cut into.
    pub batches: u32,
    /// Seconds per batch.
    pub batch_s: f64,
    /// ± req/s around `throughput_rps`.
    pub throughput_rps: f64,
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
    response: Histogram<u64>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            seconds: 0.0,
            requests: 0,
            response: RequestStats::default().response_time,
        }
    }

    fn add(&mut self, seconds: f64, stats: &RequestStats) {
        self.seconds += seconds;
        self.requests += stats.requests;
        self.response
            .add(&stats.response_time)
            .expect("auto-resizing histograms always add");
    }

    fn merge(&mut self, other: &Batch) {
        self.seconds += other.seconds;
        self.requests += other.requests;
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
}

impl Default for Batches {
    fn default() -> Self {
        Batches {
            ticks_per_batch: 1,
            full: Vec::new(),
            filling: Batch::new(),
            filled_ticks: 0,
        }
    }
}

impl Batches {
    /// Adds one tick of the measured window: `seconds` long (a last tick
    /// may be shorter), with the requests that completed in it.
    pub fn add(&mut self, seconds: f64, stats: &RequestStats) {
        self.filling.add(seconds, stats);
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
        Some(Ci95 {
            batches: k as u32,
            batch_s: round3(self.full.iter().map(|b| b.seconds).sum::<f64>() / k as f64),
            throughput_rps: round3(half_width(&throughput)),
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

/// The 95% half-width of the mean of `values`, batch figures:
/// `t(0.975, n − 1) · s / √n`.
fn half_width(values: &[f64]) -> f64 {
    let n = values.len();
    t_975(n.saturating_sub(1)) * std_dev(values) / (n.max(1) as f64).sqrt()
}

/// The sample standard deviation (n − 1).
fn std_dev(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
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

    fn second(requests: u64, response_ms: u64) -> RequestStats {
        let mut s = RequestStats {
            requests,
            ..RequestStats::default()
        };
        for _ in 0..requests {
            s.response_time.record(response_ms * 1_000_000).unwrap();
        }
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
            steady.add(1.0, &second(100 + i % 2, 10));
            noisy.add(
                1.0,
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
    fn too_few_batches_give_no_interval() {
        let mut b = Batches::default();
        for _ in 0..MIN_BATCHES - 1 {
            b.add(1.0, &second(10, 1));
        }
        assert!(b.ci95().is_none());
        b.add(1.0, &second(10, 1));
        assert_eq!(b.ci95().unwrap().batches, MIN_BATCHES as u32);
        // Seconds without a response (a stalled server) spread no
        // response time: its interval is not claimed.
        let mut stalled = Batches::default();
        for i in 0..10 {
            stalled.add(1.0, &second(if i < 3 { 10 } else { 0 }, 1));
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
            b.add(1.0, &second(100 + i % 3, 2));
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
