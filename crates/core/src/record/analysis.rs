//! `run.json`'s `analysis`: why the run ended and what the mode concluded —
//! the capacity verdict, the profile's demand table, the thresholds. Typed
//! here so the reports read fields, not string keys; serde keeps the keys
//! docs/design.md (4.4) names (flattened, in the order the untyped map had them:
//! alphabetical), so the record version stays 1.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::servers::TierDemands;
use crate::capacity::{rate, search};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Analysis {
    #[serde(flatten)]
    pub capacity: Option<CapacityAnalysis>,
    #[serde(flatten)]
    pub profile: Option<ProfileAnalysis>,
    /// The open-workload capacity search (`capacity` with `arrivals:`).
    #[serde(flatten)]
    pub rates: Option<RateAnalysis>,
    pub stop_reason: StopReason,
    /// The scenario's SLOs checked against the level (`run` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Vec<ThresholdResult>>,
}

/// Why a run ended (`running` while it goes on).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    #[default]
    Running,
    /// Every planned level ran, or the search found its answer.
    Completed,
    /// Ctrl-C.
    Interrupted,
    /// The power state machine confirmed overload (AutoPerf 2.1.2).
    Overload,
    /// The generator, not the server, limited throughput.
    ClientBottleneck,
    MaxLevels,
    MaxUsers,
    /// The open search: every rate up to the generator's ceiling passed.
    MaxRate,
    /// The open search: even a small fraction of the start rate failed.
    NoPassingRate,
    /// `--vary`: the command that reconfigures the system failed, or the
    /// system did not become ready after it.
    ApplyFailed,
    /// A level's errors said no server answered: the target is down.
    TargetDown,
    /// A level failed past `capacity.max_error_rate`: what is measured
    /// from there on is errors, not the system.
    InvalidLevel,
}

impl StopReason {
    /// The run stopped because what it measured is not trustworthy.
    pub fn untrustworthy(self) -> bool {
        matches!(self, StopReason::TargetDown | StopReason::InvalidLevel)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StopReason::Running => "running",
            StopReason::Completed => "completed",
            StopReason::Interrupted => "interrupted",
            StopReason::Overload => "overload",
            StopReason::ClientBottleneck => "client_bottleneck",
            StopReason::MaxLevels => "max_levels",
            StopReason::MaxUsers => "max_users",
            StopReason::MaxRate => "max_rate",
            StopReason::NoPassingRate => "no_passing_rate",
            StopReason::ApplyFailed => "apply_failed",
            StopReason::TargetDown => "target_down",
            StopReason::InvalidLevel => "invalid_level",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<search::StopReason> for StopReason {
    fn from(r: search::StopReason) -> StopReason {
        match r {
            search::StopReason::Completed => StopReason::Completed,
            search::StopReason::Overload => StopReason::Overload,
            search::StopReason::ClientBottleneck => StopReason::ClientBottleneck,
            search::StopReason::MaxLevels => StopReason::MaxLevels,
            search::StopReason::MaxUsers => StopReason::MaxUsers,
        }
    }
}

impl From<rate::RateStop> for StopReason {
    fn from(r: rate::RateStop) -> StopReason {
        match r {
            rate::RateStop::Completed => StopReason::Completed,
            rate::RateStop::ClientBottleneck => StopReason::ClientBottleneck,
            rate::RateStop::MaxLevels => StopReason::MaxLevels,
            rate::RateStop::MaxRate => StopReason::MaxRate,
            rate::RateStop::NoPassingRate => StopReason::NoPassingRate,
        }
    }
}

/// The open-workload search's verdict (docs/design.md 4.4: `max_passing_rate_rps`,
/// `first_failing_rate_rps`, `failed_slo`, `stop_reason`). With `--vary`,
/// the top-level figures are the last series'; `series` holds each one and
/// `demand` Theodolite's resource demand per load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RateAnalysis {
    #[serde(flatten)]
    pub found: RateFound,
    /// The achieved-rate rule: this fraction of the rate must be delivered.
    pub min_achieved: f64,
    /// The search ends when the bracket is this narrow (a fraction).
    pub rate_precision: f64,
    /// The levels' rates in the order they ran, with why (this series).
    pub rates_chosen: Vec<RateChoice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub demand: Vec<DemandPoint>,
}

/// What one search found: the bracket, why its top failed, and the limits
/// measured on the way.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RateFound {
    /// Sessions (arrivals) per second: the highest rate that met every SLO.
    pub max_passing_rate_rps: Option<f64>,
    /// The lowest rate that failed one (above the highest passing).
    pub first_failing_rate_rps: Option<f64>,
    /// The SLO that rate failed first, with the measured value.
    pub failed_slo: Option<ThresholdResult>,
    /// What the system delivered at a saturated level: its capacity.
    pub capacity_rps: Option<f64>,
    /// The lowest rate the generator could not keep while an SLO failed:
    /// autoperf's limit on this machine, not the system's.
    #[serde(default)]
    pub generator_limit_rps: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RateChoice {
    pub rate_rps: f64,
    pub reason: String,
    pub verdict: super::SloVerdict,
}

/// One value of `--vary` and what the search found under it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesResult {
    pub name: String,
    pub value: String,
    #[serde(flatten)]
    pub found: RateFound,
    pub stop_reason: StopReason,
    /// The levels (`level` numbers) of this series.
    pub levels: Vec<u32>,
    /// Why the series could not run (the command failed, not ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Theodolite's demand metric: the least resource value whose highest
/// passing rate covers this load (none when no value does).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DemandPoint {
    pub load_rps: f64,
    pub resource: Option<String>,
}

/// The capacity analysis's verdict (docs/design.md 4.4: `n_min`, `n_star`,
/// `max_throughput_rps`, `saturation_users`, `bottleneck`, `stop_reason`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CapacityAnalysis {
    pub bottleneck: Option<BottleneckRecord>,
    /// The first level at which the generator limited throughput.
    pub first_client_bottleneck_users: Option<u32>,
    pub levels_chosen: Vec<LevelChoice>,
    /// The levels were given (`--levels`), not searched.
    pub manual: bool,
    pub max_throughput_rps: f64,
    pub max_throughput_users: Option<u32>,
    pub n_min: Option<u32>,
    /// Kleinrock's saturation number from the measured demands.
    pub n_star: Option<f64>,
    pub saturation_users: Option<u32>,
    /// How levels inside the range were chosen: `model` or `bisection`;
    /// null for manual levels (and absent in results written before it).
    #[serde(default)]
    pub search: Option<String>,
    /// When the curve bends where no CPU saturates: the station the
    /// agents do not see (a lock, a pool, a connection limit), fitted to
    /// the measured levels. `n_star` is then its network's, and
    /// `bottleneck` only the busiest CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_bottleneck: Option<HiddenBottleneckRecord>,
}

/// `analysis.hidden_bottleneck`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HiddenBottleneckRecord {
    /// Its fitted demand per request.
    pub demand_ms: f64,
    /// The throughput it allows, `1/D`.
    pub max_throughput_rps: f64,
    /// `N*` with it in the network.
    pub n_star: f64,
    /// `N*` of the CPU demands alone, which it supersedes.
    pub cpu_n_star: Option<f64>,
    /// The evidence: the busiest CPU at the best level, and how busy.
    pub busiest_cpu: BusiestCpu,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BusiestCpu {
    pub tier: String,
    pub utilisation: f64,
    pub users: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BottleneckRecord {
    pub tier: String,
    pub process: String,
}

/// A level the search chose, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelChoice {
    pub users: u32,
    pub reason: String,
}

/// The profile's demand table: `demands[request][tier]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfileAnalysis {
    pub demands: BTreeMap<String, BTreeMap<String, TierDemands>>,
    pub profile_users: u32,
    /// Each workload class's CPU ms per request of its own mix, per tier
    /// (`classes:`): the requests' demands weighted by the class's visits
    /// to the profiled ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub class_demands: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The outcome of one threshold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdResult {
    /// The expression as written in the scenario.
    pub source: String,
    pub passed: bool,
    /// The measured value in `unit`; `None` when the record does not hold it.
    pub actual: Option<f64>,
    pub bound: f64,
    pub unit: Unit,
    /// Why it could not be evaluated, when `actual` is `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ThresholdResult {
    /// Whether it holds a tier's figure (`web.util < 60%`, `web.cpu_ms <
    /// 5`, `web.memory < 1GiB`): what the servers spent, not what the
    /// client saw. The grammar gives such metrics to tiers only.
    pub(crate) fn of_tier(&self) -> bool {
        let left = self.source.split(['<', '>']).next().unwrap_or("").trim();
        [".cpu_ms", ".util", ".memory"]
            .iter()
            .any(|metric| left.ends_with(metric))
    }

    /// Whether the threshold judges a Kafka consumer group's lag
    /// (`lag(app) < 10000`, `lag_trend(app) < 100/s`): the application's.
    pub(crate) fn of_consumer_group(&self) -> bool {
        self.source.starts_with("lag(") || self.source.starts_with("lag_trend(")
    }

    /// `p99 < 100ms failed: 412.000 ms (4.1× the bound)`.
    pub(crate) fn failure_text(&self) -> String {
        match self.actual {
            Some(v) if self.bound > 0.0 => format!(
                "{} failed: {} ({:.2}× the bound)",
                self.source,
                self.unit.format(v),
                v / self.bound
            ),
            Some(v) => format!("{} failed: {}", self.source, self.unit.format(v)),
            None => format!(
                "{} failed: {}",
                self.source,
                self.note.as_deref().unwrap_or("not measured")
            ),
        }
    }
}

/// The unit of a threshold's figure.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Unit {
    #[serde(rename = "ms")]
    Ms,
    /// An error rate, 0 to 1.
    #[serde(rename = "fraction")]
    Fraction,
    #[serde(rename = "req/s")]
    PerSecond,
    #[serde(rename = "bytes")]
    Bytes,
    /// Whatever a PromQL query returns.
    #[serde(rename = "value")]
    Value,
    /// Kafka records: a consumer group's lag.
    #[serde(rename = "records")]
    Records,
    /// Kafka records a second: a consumer group's lag trend.
    #[serde(rename = "records/s")]
    RecordsPerSecond,
}

impl Unit {
    /// Formats a value in this unit: `12.345 ms`, `0.50%`, `97.3 req/s`.
    pub(crate) fn format(self, v: f64) -> String {
        match self {
            Unit::Fraction => format!("{:.2}%", v * 100.0),
            Unit::PerSecond => format!("{v:.1} req/s"),
            Unit::Ms => format!("{v:.3} ms"),
            Unit::Bytes => crate::scenario::files::human_bytes(v as u64),
            Unit::Value => format!("{}", crate::measure::round_to(v, 4)),
            Unit::Records => format!("{v:.0} records"),
            Unit::RecordsPerSecond => format!("{v:.1} records/s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of a capacity analysis as the untyped map wrote them.
    #[test]
    fn a_capacity_analysis_keeps_its_keys_and_their_order() {
        let a = Analysis {
            capacity: Some(CapacityAnalysis {
                bottleneck: Some(BottleneckRecord {
                    tier: "web".into(),
                    process: "tb-web".into(),
                }),
                first_client_bottleneck_users: None,
                levels_chosen: vec![LevelChoice {
                    users: 1,
                    reason: "start".into(),
                }],
                manual: false,
                max_throughput_rps: 250.0,
                max_throughput_users: Some(140),
                n_min: Some(1),
                n_star: Some(126.3),
                saturation_users: Some(130),
                search: Some("model".into()),
                hidden_bottleneck: None,
            }),
            profile: None,
            rates: None,
            stop_reason: StopReason::Overload,
            thresholds: None,
        };
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(
            text,
            r#"{"bottleneck":{"tier":"web","process":"tb-web"},"first_client_bottleneck_users":null,"levels_chosen":[{"users":1,"reason":"start"}],"manual":false,"max_throughput_rps":250.0,"max_throughput_users":140,"n_min":1,"n_star":126.3,"saturation_users":130,"search":"model","stop_reason":"overload"}"#
        );
        let back: Analysis = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
        // A run's analysis: no capacity, no profile.
        let run: Analysis = serde_json::from_str(r#"{"stop_reason":"completed"}"#).unwrap();
        assert_eq!(run.capacity, None);
        assert_eq!(run.profile, None);
    }

    #[test]
    fn an_open_search_keeps_its_keys_and_reads_back() {
        let found = RateFound {
            max_passing_rate_rps: Some(252.9),
            first_failing_rate_rps: Some(258.0),
            failed_slo: None,
            capacity_rps: Some(250.4),
            generator_limit_rps: None,
        };
        let a = Analysis {
            rates: Some(RateAnalysis {
                found: found.clone(),
                min_achieved: 0.95,
                rate_precision: 0.02,
                rates_chosen: Vec::new(),
                series: vec![SeriesResult {
                    name: "web_workers".into(),
                    value: "1".into(),
                    found,
                    stop_reason: StopReason::Completed,
                    levels: vec![1, 2],
                    error: None,
                }],
                demand: Vec::new(),
            }),
            stop_reason: StopReason::Completed,
            ..Analysis::default()
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(
            text.starts_with(
                r#"{"max_passing_rate_rps":252.9,"first_failing_rate_rps":258.0,"failed_slo":null,"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#""series":[{"name":"web_workers","value":"1","max_passing_rate_rps":252.9,"#
            ),
            "{text}"
        );
        let back: Analysis = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.capacity, None);
    }

    #[test]
    fn threshold_units_keep_their_names() {
        let t = ThresholdResult {
            source: "throughput > 1/s".into(),
            passed: true,
            actual: Some(2.0),
            bound: 1.0,
            unit: Unit::PerSecond,
            note: None,
        };
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["unit"], "req/s");
        assert_eq!(Unit::Fraction.format(0.005), "0.50%");
    }
}
