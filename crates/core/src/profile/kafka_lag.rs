//! The scenario's consumer-lag thresholds (`lag_trend(my-app) < 100/s`,
//! `lag(my-app) < 10000`): Theodolite's question, whether the stream
//! processor under test keeps up with its input. Each group they name is
//! read once before the first level (a group without committed offsets
//! stops the run), then twice a second at random moments (`PERIOD`) on a
//! thread of its own while the run lasts; each level gets, per group, its
//! lag's trend by least squares over the measured window (records/s, as
//! Theodolite judges it) with its 95% interval, its last and highest value.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::agents::AgentError;
use super::latest_lag::LatestLag;
use crate::protocol::kafka::lag::{read_lag, LagError};
use crate::protocol::kafka::{self as kafka_protocol, Config};
use crate::record::{LagFigure, LagReading};
use crate::scenario::{Endpoint, Metric, Scenario};

/// Each group's lag is read once in every slot this long, at a moment drawn
/// at random within it.
///
/// Why at random: a group commits its offsets on a clock of its own (tb-con
/// and Java's auto-commit every second or so, plus the batch in hand), so
/// the committed lag is a sawtooth as high as a second's records. Read on a
/// fixed beat, the sawtooth's phase drifts slowly against the readings and
/// a 10 s level sees a piece of a slow wave: a trend of tens of records/s
/// that is not there, which no interval can tell from a real one. Read at
/// random moments, each reading meets the sawtooth at a phase of its own:
/// the error is noise the trend's interval measures. Twice a second, so a
/// short level still has readings enough for an interval.
const PERIOD: Duration = Duration::from_millis(500);

/// One reading of one group.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    group: usize,
    lag: Result<u64, LagError>,
}

/// The groups the thresholds name, read twice a second while the run lasts.
pub(crate) struct LagWatch {
    groups: Vec<String>,
    bootstrap: String,
    config: Arc<Config>,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// The last reading of each group, for the live view.
    latest: LatestLag,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LagWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LagWatch")
            .field("groups", &self.groups)
            .field("bootstrap", &self.bootstrap)
            .finish()
    }
}

impl LagWatch {
    /// The groups named by the scenario's lag thresholds, or `None` when
    /// it has none. (The decoder refuses lag thresholds on a target that
    /// is not Kafka.)
    pub(crate) fn from_scenario(scenario: &Scenario) -> Result<Option<LagWatch>, AgentError> {
        let mut groups: Vec<String> = Vec::new();
        for group in scenario.thresholds.iter().filter_map(|t| t.group.as_ref()) {
            if !groups.contains(group) {
                groups.push(group.clone());
            }
        }
        let Endpoint::Kafka(target) = &scenario.target.endpoint else {
            return Ok(None);
        };
        if groups.is_empty() {
            return Ok(None);
        }
        let config = kafka_protocol::config(target, scenario.target.timeout).map_err(|e| {
            AgentError::KafkaLag {
                group: groups[0].clone(),
                bootstrap: target.bootstrap.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(Some(LagWatch {
            latest: LatestLag::new(groups.clone()),
            groups,
            bootstrap: target.bootstrap.clone(),
            config,
            samples: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        }))
    }

    /// Reads every group once, now: one without committed offsets, or
    /// whose lag cannot be read, stops the run before it starts.
    pub(crate) fn check(&self) -> Result<(), AgentError> {
        let runtime = runtime().map_err(|e| self.error(&self.groups[0], e.to_string()))?;
        for group in &self.groups {
            runtime
                .block_on(read(&self.config, group))
                .map_err(|e| self.error(group, e.to_string()))?;
        }
        Ok(())
    }

    fn error(&self, group: &str, reason: String) -> AgentError {
        AgentError::KafkaLag {
            group: group.to_string(),
            bootstrap: self.bootstrap.clone(),
            reason,
        }
    }

    /// The last reading of each group, as the reader's thread updates it.
    pub(crate) fn latest(&self) -> LatestLag {
        self.latest.clone()
    }

    /// Starts reading every group twice a second (`PERIOD`), until dropped.
    pub(crate) fn start(&mut self) {
        let (config, groups) = (self.config.clone(), self.groups.clone());
        let (samples, stop) = (self.samples.clone(), self.stop.clone());
        let latest = self.latest.clone();
        self.thread = std::thread::Builder::new()
            .name("kafka-lag".into())
            .spawn(move || {
                let Ok(runtime) = runtime() else { return };
                let mut rng = fastrand::Rng::new();
                // The first reading at once: the run checks the groups
                // before its first level.
                let mut slot = Instant::now();
                let mut next = slot;
                while !stop.load(Ordering::Relaxed) {
                    // Short sleeps, so that dropping the watch is quick.
                    while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50).min(next - Instant::now()));
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    for (i, group) in groups.iter().enumerate() {
                        let lag = runtime.block_on(read(&config, group));
                        latest.set(i, lag.as_ref().ok().map(|l| l.records));
                        let sample = Sample {
                            at: Instant::now(),
                            group: i,
                            lag: lag.map(|l| l.records),
                        };
                        samples
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(sample);
                    }
                    // A reading slower than a slot starts the next slot now,
                    // without catching up on the ones it missed.
                    slot = (slot + PERIOD).max(Instant::now());
                    next = slot + PERIOD.mul_f64(rng.f64());
                }
            })
            .ok();
    }

    /// Each group's lag over level `level`'s window `[from, to]`: its
    /// figure and readings. A group with fewer than two readings there is
    /// left out of the figures (its thresholds then fail as not measured)
    /// and named in the warnings, with why.
    pub(crate) fn over(&self, level: u32, from: Instant, to: Instant) -> LagOver {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let mut figures = BTreeMap::new();
        let mut readings = Vec::new();
        let mut warnings = Vec::new();
        for (i, group) in self.groups.iter().enumerate() {
            let window: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.group == i && s.at >= from && s.at <= to)
                .collect();
            let points = points(&window, from);
            let unread = window.len() - points.len();
            readings.extend(points.iter().map(|&(t, lag)| LagReading {
                window_s: (t * 1000.0).round() / 1000.0,
                level,
                group: group.clone(),
                lag_records: lag as u64,
            }));
            match figure(&points, unread) {
                Some(f) => {
                    figures.insert(group.clone(), f);
                }
                None => {
                    let why = window
                        .iter()
                        .rev()
                        .find_map(|s| s.lag.as_ref().err())
                        .map_or("it was not read in the level".to_string(), |e| {
                            e.to_string()
                        });
                    warnings.push(format!(
                        "consumer group `{group}` (Kafka at {}): fewer than 2 lag readings in the level: {why}; its lag thresholds fail as not measured",
                        self.bootstrap
                    ));
                }
            }
            if unread > 0 && points.len() >= 2 {
                warnings.push(format!(
                    "consumer group `{group}`: {unread} of {} lag readings in the level failed",
                    window.len()
                ));
            }
        }
        LagOver {
            figures,
            readings,
            warnings,
        }
    }
}

impl LagWatch {
    /// The first lag trend SLO of `scenario` still undecided over the
    /// window `[from, to]` — its trend's 95% interval holds values on both
    /// sides of its bound — as its source and the trend with its interval.
    /// A level the controller would end keeps going while there is one
    /// (up to its longest), rather than judge a noise-sized difference.
    pub(crate) fn undecided(
        &self,
        scenario: &Scenario,
        from: Instant,
        to: Instant,
    ) -> Option<String> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        scenario.thresholds.iter().find_map(|t| {
            if t.metric != Metric::LagTrend {
                return None;
            }
            let group = self
                .groups
                .iter()
                .position(|g| Some(g) == t.group.as_ref())?;
            let window: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.group == group && s.at >= from && s.at <= to)
                .collect();
            let f = figure(&points(&window, from), 0)?;
            let ci = f.trend_ci95_rps?;
            let (low, high) = (f.trend_rps - ci, f.trend_rps + ci);
            (t.op.holds(low, t.bound) != t.op.holds(high, t.bound))
                .then(|| format!("{}: trend {} ± {} records/s", t.source, f.trend_rps, ci))
        })
    }
}

/// What a level's window holds of the groups' lag.
#[derive(Debug, Default)]
pub(crate) struct LagOver {
    pub figures: BTreeMap<String, LagFigure>,
    /// For `lag_series.csv`.
    pub readings: Vec<LagReading>,
    pub warnings: Vec<String>,
}

impl Drop for LagWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// One reading, bounded by the target's timeout.
async fn read(config: &Config, group: &str) -> Result<kafka_protocol::lag::GroupLag, LagError> {
    match tokio::time::timeout(config.timeout, read_lag(config, group)).await {
        Ok(read) => read,
        Err(_) => Err(LagError::Unreadable(format!(
            "no answer within {:?}",
            config.timeout
        ))),
    }
}

/// The figure of a level's readings `(seconds into the window, lag)`:
/// the least-squares slope (records/s) and its 95% interval, the last and
/// highest lag; `None` with fewer than two readings, which make no trend.
pub(crate) fn figure(points: &[(f64, f64)], unread: usize) -> Option<LagFigure> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_y)).sum();
    let trend = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    Some(LagFigure {
        last: points.last().map_or(0, |p| p.1 as u64),
        max: points.iter().map(|p| p.1 as u64).max().unwrap_or(0),
        trend_rps: (trend * 1000.0).round() / 1000.0,
        trend_ci95_rps: trend_ci95(points, mean_t, mean_y, sxx, trend)
            .map(|ci| (ci * 1000.0).round() / 1000.0),
        readings: points.len() as u32,
        unread: unread as u32,
    })
}

/// The readings that succeeded, as `(seconds since from, lag)`.
fn points(window: &[&Sample], from: Instant) -> Vec<(f64, f64)> {
    window
        .iter()
        .filter_map(|s| {
            let lag = *s.lag.as_ref().ok()?;
            Some((
                s.at.saturating_duration_since(from).as_secs_f64(),
                lag as f64,
            ))
        })
        .collect()
}

/// Readings a trend's interval needs: with fewer, the residuals' own
/// spread is too uncertain to say anything.
pub(crate) const MIN_TREND_READINGS: usize = 6;

/// The half-width of the slope's 95% interval, by Newey and West's
/// estimator (1987): a group commits its offsets every second or so, and
/// readings half a second apart often fall between the same two commits,
/// so neighbouring residuals are alike and the textbook interval
/// (independent residuals) would be too narrow. The
/// residuals' products are summed up to `L = ⌊4 (n/100)^(2/9)⌋ + 1` lags
/// apart, with Bartlett's weights; the t quantile has `n − 2` degrees of
/// freedom.
fn trend_ci95(
    points: &[(f64, f64)],
    mean_t: f64,
    mean_y: f64,
    sxx: f64,
    trend: f64,
) -> Option<f64> {
    let n = points.len();
    if n < MIN_TREND_READINGS || sxx <= 0.0 {
        return None;
    }
    // Each reading's score: its time from the mean times its residual.
    let scores: Vec<f64> = points
        .iter()
        .map(|&(t, y)| {
            let residual = y - mean_y - trend * (t - mean_t);
            (t - mean_t) * residual
        })
        .collect();
    let lags = (4.0 * (n as f64 / 100.0).powf(2.0 / 9.0)).floor() as usize + 1;
    let mut s = scores.iter().map(|u| u * u).sum::<f64>();
    for l in 1..=lags.min(n - 1) {
        let weight = 1.0 - l as f64 / (lags + 1) as f64;
        let products: f64 = scores.iter().zip(&scores[l..]).map(|(a, b)| a * b).sum();
        s += 2.0 * weight * products;
    }
    // Small samples: the residuals lost two degrees of freedom to the fit.
    let variance = s.max(0.0) / (sxx * sxx) * n as f64 / (n - 2) as f64;
    Some(crate::measure::precision::t_975(n - 2) * variance.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trend_is_the_least_squares_slope() {
        // 100 records/s of growth, with noise that cancels.
        let points: Vec<(f64, f64)> = (0..10)
            .map(|t| {
                (
                    t as f64,
                    1000.0 + 100.0 * t as f64 + if t % 2 == 0 { 30.0 } else { -30.0 },
                )
            })
            .collect();
        let f = figure(&points, 1).unwrap();
        assert!((f.trend_rps - 100.0).abs() < 7.0, "{f:?}");
        assert_eq!(f.last, 1870);
        assert_eq!(f.max, 1870);
        assert_eq!((f.readings, f.unread), (10, 1));
        // A lag that stays put has no trend; one reading makes none.
        let flat: Vec<(f64, f64)> = (0..5).map(|t| (t as f64, 42.0)).collect();
        assert_eq!(figure(&flat, 0).unwrap().trend_rps, 0.0);
        assert!(figure(&flat[..1], 0).is_none());
        // No interval from a handful of readings; none wider than nothing
        // for a lag that is a straight line.
        assert_eq!(figure(&flat[..5], 0).unwrap().trend_ci95_rps, None);
        let line: Vec<(f64, f64)> = (0..10).map(|t| (t as f64, 50.0 * t as f64)).collect();
        assert_eq!(figure(&line, 0).unwrap().trend_ci95_rps, Some(0.0));
    }

    /// How often the trend's 95% interval covers the true trend over 10 s
    /// windows, and its mean half-width (records/s): a stream processor
    /// reading 500 records/s, committing `period` s (plus up to `jitter` s
    /// for the batch in hand) after its last commit, its lag read once in
    /// every half-second slot, at random or on the slot's start.
    fn coverage(period: f64, jitter: f64, at_random: bool) -> (f64, f64) {
        let mut rng = fastrand::Rng::with_seed(7);
        let (consumed, windows) = (500.0, 1000);
        let (mut covered, mut widths) = (0, 0.0);
        for _ in 0..windows {
            let produced = 400.0 + 200.0 * rng.f64(); // the trend: -100..+100/s
            let mut commits = vec![-1.0 - rng.f64()];
            while *commits.last().unwrap() < 10.0 {
                commits.push(commits.last().unwrap() + period + jitter * rng.f64());
            }
            let points: Vec<(f64, f64)> = (0..20)
                .map(|k| {
                    let t = 0.5 * (k as f64 + if at_random { rng.f64() } else { 0.0 });
                    let last = commits.iter().rev().find(|&&c| c <= t).unwrap();
                    (t, produced * t - consumed * last + 5_000.0)
                })
                .collect();
            let f = figure(&points, 0).unwrap();
            let ci = f.trend_ci95_rps.unwrap();
            covered += usize::from((f.trend_rps - (produced - consumed)).abs() <= ci);
            widths += ci;
        }
        (covered as f64 / windows as f64, widths / windows as f64)
    }

    /// tb-con's way: a commit once a second has passed and the batch in
    /// hand is done (every 1–1.2 s). The trend strays by tens of
    /// records/s over 10 s; its interval covers the truth 9 times in 10
    /// (0.904: Newey–West's is a little narrow over 20 readings) and is not
    /// so wide as to say nothing (±18 records/s).
    #[test]
    fn the_trend_interval_covers_the_truth_under_a_commit_sawtooth() {
        let (share, width) = coverage(1.0, 0.2, true);
        assert!((0.87..=0.99).contains(&share), "covered in {share:.3}");
        assert!(width < 40.0, "±{width:.1} records/s on average");
    }

    /// A committer on a steady one-second beat of its own (Java's
    /// auto-commit with quick polls: every 1–1.02 s). Read on a fixed beat
    /// too, the readings meet the sawtooth at nearly the same phase, just
    /// before a commit or just after, and a 10 s window sees a trend that
    /// is not there: in simulation the interval covers the truth in about
    /// half the windows. Read at random moments, each reading meets a phase
    /// of its own (0.84). (Why the watch reads at random.)
    #[test]
    fn readings_at_random_moments_do_not_alias_a_steady_committer() {
        let (random, _) = coverage(1.0, 0.02, true);
        let (beat, _) = coverage(1.0, 0.02, false);
        assert!(random >= 0.8, "at random: covered in {random:.3}");
        assert!(
            beat < random - 0.2,
            "on a beat: {beat:.3}, at random {random:.3}"
        );
    }
}
