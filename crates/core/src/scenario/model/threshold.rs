//! `thresholds:`: the SLOs a run is judged by, as parsed by
//! `scenario/threshold.rs`.

use super::super::ids::RequestId;
use super::BaseUrl;

/// An SLO such as `p99 < 250ms` or `login.error_rate < 1%`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The expression as written, for messages and reports.
    pub source: String,
    /// `None` for the whole run, or one request.
    pub request: Option<RequestId>,
    /// Or one workload class (`classes:`): its users' requests.
    pub class: Option<String>,
    /// The tier (`servers:`) a server-side metric is of: `web.cpu_ms`.
    pub tier: Option<String>,
    pub metric: Metric,
    pub op: Comparison,
    /// In the metric's unit: milliseconds for times and `cpu_ms`, a
    /// fraction (0.01 for 1%) for `error_rate`, `checks` and `util`,
    /// requests per second for `throughput`, bytes for `memory`; for
    /// `promql`, whatever its query returns.
    pub bound: f64,
    /// With `Metric::Promql`, the query and the Prometheus it asks.
    pub promql: Option<PromqlQuery>,
    /// With `Metric::Lag` and `Metric::LagTrend`, the Kafka consumer
    /// group whose lag it judges.
    pub group: Option<String>,
}

/// A PromQL SLO's query (`thresholds: [{promql: {query, below}}]`).
#[derive(Debug, Clone, PartialEq)]
pub struct PromqlQuery {
    pub query: String,
    /// As written (or the one `servers:` reads), for messages.
    pub url_text: String,
    pub url: BaseUrl,
    /// The `Authorization` header of the `servers:` entry that reads the
    /// same Prometheus, if any.
    pub authorization: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Mean,
    Max,
    /// A percentile, in per-mille to keep it exact: p99 is 990, p99.9 is 999.
    Percentile(u16),
    ErrorRate,
    /// The share of `check:`s that passed.
    Checks,
    Throughput,
    /// A tier's CPU per request, its processes together, in ms (the
    /// service demand the agents measure).
    CpuMs,
    /// A tier's utilisation: its busy cores over the cores it may use.
    Util,
    /// A tier's resident memory, its processes together, at its highest
    /// in the level, in bytes.
    Memory,
    /// A PromQL query's worst point over the level (its highest against
    /// `below`, its lowest against `above`).
    Promql,
    /// A consumer group's lag at the level's last reading, in records:
    /// `lag(my-app) < 10000`.
    Lag,
    /// A consumer group's lag trend over the level, records per second
    /// (Theodolite's criterion): `lag_trend(my-app) < 100/s`.
    LagTrend,
}

impl Metric {
    /// Whether the metric is a tier's (`servers:`), not the client's.
    pub(crate) fn of_tier(self) -> bool {
        matches!(self, Metric::CpuMs | Metric::Util | Metric::Memory)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Comparison {
    pub(crate) fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Comparison::Less => value < bound,
            Comparison::LessOrEqual => value <= bound,
            Comparison::Greater => value > bound,
            Comparison::GreaterOrEqual => value >= bound,
        }
    }
}
