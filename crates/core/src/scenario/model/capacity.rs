//! `capacity:`, the tunables of the automatic capacity analysis with the
//! paper's defaults, and `servers:`, the process groups it profiles.

use std::time::Duration;

use super::BaseUrl;

/// A server process group that may be the bottleneck (used by the agent and
/// capacity work).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub tier: String,
    /// Base URL of the profiler agent on that host.
    pub agent: String,
    /// Process names forming the group; with `by: Cgroup`, its one cgroup
    /// glob (the name its figures go by, as a process's would).
    pub processes: Vec<String>,
    /// How `processes` selects what the agent measures.
    pub by: Selector,
    /// Cores available to the tier; `None` means "ask the agent".
    pub cores: Option<u32>,
    /// The bearer token the agent wants (`token_file:`), if any.
    pub token: Option<String>,
    /// With `by: Prometheus`, the queries its figures are read through
    /// (`agent` is then the Prometheus URL, `processes` the tier's name).
    pub prometheus: Option<PrometheusQueries>,
}

/// A tier measured through Prometheus (`servers[].prometheus`): the
/// counter of its CPU seconds and the gauge of its memory, as PromQL.
#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusQueries {
    pub url: BaseUrl,
    /// A counter of CPU seconds, its series summed
    /// (`sum(rate(...))` would not do: it is read at instants and
    /// differenced, like the agents' counters).
    pub cpu: String,
    /// A gauge of resident bytes, its series summed.
    pub memory: Option<String>,
    /// The `Authorization` header's value: `Bearer …` (`token`,
    /// `token_file`) or `Basic …` (`username`, `password`).
    pub authorization: Option<String>,
}

/// How a `servers` entry selects what its agent measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Selector {
    /// Processes by name (`processes:`).
    #[default]
    Processes,
    /// Cgroups by a glob over the hierarchy (`cgroup:`).
    Cgroup,
    /// Whatever a PromQL query selects (`prometheus:`).
    Prometheus,
}

/// Tunables of the automatic capacity analysis (AutoPerf section 2.1), with
/// the paper's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySettings {
    /// Relative change (fraction) between consecutive time-averaged
    /// throughputs below which a level is at steady state.
    pub epsilon: f64,
    /// Minimum bottleneck utilisation of the lowest level tested.
    pub rho_min: f64,
    /// Relative tolerance of the piecewise-linear fit in the bisection.
    pub tolerance: f64,
    /// Consecutive overloaded levels that confirm overload.
    pub k_ovld: u32,
    /// Gap between achieved and configured think time (fraction) that marks
    /// a client bottleneck.
    pub think_gap: f64,
    pub min_duration: Duration,
    pub max_duration: Duration,
    /// Width of the time-averaging window for steady-state detection.
    pub window: Duration,
    /// Convergence threshold (percent) of the service-demand checks.
    pub demand_epsilon: f64,
    /// Profiler readings after which a near-zero process is ignored
    /// (`p_max` in the paper).
    pub p_max: u32,
    /// Assumed CPU time when every process still reads zero after `p_max`
    /// readings (`S_low`).
    pub s_low: Duration,
    /// Levels tested past the saturation estimate `N*`.
    pub levels_beyond: u32,
    /// How the levels inside the range are chosen.
    pub search: SearchStrategy,
    /// The open search: a rate passes only when at least this fraction of
    /// it is delivered (Theodolite's rule, 95%).
    pub min_achieved: f64,
    /// The open search ends when the first failing rate is within this
    /// fraction above the highest passing one.
    pub rate_precision: f64,
    /// The open search's ramp: each passing rate times this, until one fails.
    pub rate_factor: f64,
    /// A level with more failed requests than this fraction is invalid:
    /// marked so, never a curve point; it ends a capacity analysis.
    pub max_error_rate: f64,
    /// A closed capacity level runs on (up to `max_duration`) until its
    /// throughput's 95% half-width is at most this fraction of it (with
    /// fewer than 5 users, its cycle time's); `None`: steady state and
    /// the demands end it.
    pub precision: Option<f64>,
}

/// How the levels between `N_min` and the top are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchStrategy {
    /// The queueing model of the measured demands picks the levels
    /// (`capacity/guided.rs`); bisection where it has no demands to go on.
    #[default]
    Model,
    /// The paper's recursive bisection (2.1.2).
    Bisection,
}

impl SearchStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchStrategy::Model => "model",
            SearchStrategy::Bisection => "bisection",
        }
    }

    pub fn parse(text: &str) -> Option<SearchStrategy> {
        match text {
            "model" => Some(SearchStrategy::Model),
            "bisection" => Some(SearchStrategy::Bisection),
            _ => None,
        }
    }
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings {
            epsilon: 0.05,
            rho_min: 0.1,
            tolerance: 0.05,
            k_ovld: 3,
            think_gap: 0.10,
            min_duration: Duration::from_secs(10),
            max_duration: Duration::from_secs(120),
            window: Duration::from_secs(5),
            demand_epsilon: 5.0,
            p_max: 15,
            s_low: Duration::from_millis(5),
            levels_beyond: 2,
            search: SearchStrategy::Model,
            min_achieved: 0.95,
            rate_precision: 0.02,
            rate_factor: 2.0,
            max_error_rate: 0.5,
            precision: Some(0.03),
        }
    }
}
