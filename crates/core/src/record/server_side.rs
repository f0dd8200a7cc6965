//! What a level read of the servers' side besides the agents: a PromQL
//! threshold's query and a Kafka consumer group's lag over its measured
//! window (the level object's `promql` and `lag`, `lag_series.csv`).

use serde::{Deserialize, Serialize};

/// What a PromQL threshold's query came to over a level's measured
/// window: its lowest and highest point over every series, and how many
/// points there were.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PromqlFigure {
    pub min: f64,
    pub max: f64,
    pub points: u32,
}

/// A consumer group's lag over a level's measured window, read from the
/// brokers each second: Theodolite's figure of whether the application
/// keeps up.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LagFigure {
    /// The least-squares slope of the lag over the window, records per
    /// second: above zero, the application falls behind.
    pub trend_rps: f64,
    /// The 95% interval's half-width of the trend (records/s), with
    /// residuals that follow each other (the sawtooth of the group's
    /// commits) allowed for; none with fewer than `MIN_TREND_READINGS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend_ci95_rps: Option<f64>,
    /// The lag at the last reading, and at its highest, in records.
    pub last: u64,
    pub max: u64,
    /// Readings the figure is made of, and readings that failed.
    pub readings: u32,
    #[serde(default)]
    pub unread: u32,
}

/// One reading of a consumer group's lag in a level's measured window
/// (seconds into it): a row of `lag_series.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct LagReading {
    pub window_s: f64,
    pub level: u32,
    pub group: String,
    pub lag_records: u64,
}
