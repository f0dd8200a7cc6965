//! The scenario's consumer-lag thresholds (`lag_trend(my-app) < 100/s`,
//! `lag(my-app) < 10000`): Theodolite's question, whether the stream
//! processor under test keeps up with its input. Each group they name is
//! read once before the first level (a group without committed offsets
//! stops the run), then every second on a thread of its own while the run
//! lasts; each level gets, per group, its lag's trend by least squares over
//! the measured window (records/s, as Theodolite judges it), its last and
//! highest value.

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
use crate::scenario::{Endpoint, Scenario};

/// How often each group's lag is read.
const PERIOD: Duration = Duration::from_secs(1);

/// One reading of one group.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    group: usize,
    lag: Result<u64, LagError>,
}

/// The groups the thresholds name, read every second while the run lasts.
pub struct LagWatch {
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
    pub fn from_scenario(scenario: &Scenario) -> Result<Option<LagWatch>, AgentError> {
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
    pub fn check(&self) -> Result<(), AgentError> {
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
    pub fn latest(&self) -> LatestLag {
        self.latest.clone()
    }

    /// Starts reading every group each second, until dropped.
    pub fn start(&mut self) {
        let (config, groups) = (self.config.clone(), self.groups.clone());
        let (samples, stop) = (self.samples.clone(), self.stop.clone());
        let latest = self.latest.clone();
        self.thread = std::thread::Builder::new()
            .name("kafka-lag".into())
            .spawn(move || {
                let Ok(runtime) = runtime() else { return };
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
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
                    next += PERIOD;
                    // Short sleeps, so that dropping the watch is quick.
                    while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50).min(next - Instant::now()));
                    }
                    // A reading slower than the period starts the next at
                    // once, without catching up on the ones it missed.
                    if let Some(late) = Instant::now().checked_sub(PERIOD) {
                        next = next.max(late);
                    }
                }
            })
            .ok();
    }

    /// Each group's lag over level `level`'s window `[from, to]`: its
    /// figure and readings. A group with fewer than two readings there is
    /// left out of the figures (its thresholds then fail as not measured)
    /// and named in the warnings, with why.
    pub fn over(&self, level: u32, from: Instant, to: Instant) -> LagOver {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let mut figures = BTreeMap::new();
        let mut readings = Vec::new();
        let mut warnings = Vec::new();
        for (i, group) in self.groups.iter().enumerate() {
            let window: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.group == i && s.at >= from && s.at <= to)
                .collect();
            let points: Vec<(f64, f64)> = window
                .iter()
                .filter_map(|s| {
                    let lag = *s.lag.as_ref().ok()?;
                    Some((
                        s.at.saturating_duration_since(from).as_secs_f64(),
                        lag as f64,
                    ))
                })
                .collect();
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

/// What a level's window holds of the groups' lag.
#[derive(Debug, Default)]
pub struct LagOver {
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
/// the least-squares slope (records/s), the last and highest lag; `None`
/// with fewer than two readings, which make no trend.
fn figure(points: &[(f64, f64)], unread: usize) -> Option<LagFigure> {
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
        readings: points.len() as u32,
        unread: unread as u32,
    })
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
    }
}
