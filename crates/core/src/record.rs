//! The run record: the JSON shapes of a level object (`levels.jsonl`) and of
//! `run.json`, as DESIGN.md specifies them. Versioned data, and the only
//! input reports need, so a results directory can be re-rendered later.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::engine::LevelRun;
use crate::measure::RequestStats;
use crate::scenario::{Scenario, ThinkTime};

/// Bumped when a key changes meaning; keys are only ever added.
pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Latency {
    pub fn of(stats: &RequestStats) -> Latency {
        Latency {
            mean: round3(stats.mean_ms()),
            p50: round3(stats.quantile_ms(0.50)),
            p90: round3(stats.quantile_ms(0.90)),
            p95: round3(stats.quantile_ms(0.95)),
            p99: round3(stats.quantile_ms(0.99)),
            max: round3(stats.max_ms()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThinkRecord {
    /// Mean of the configured distribution.
    pub configured: f64,
    /// Little's law estimate `N/X − R` (AutoPerf section 2.1.3).
    pub achieved: f64,
    /// Mean of the pauses the users actually took, as timed by the users.
    pub measured: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientRecord {
    /// CPU the generator process used, in busy cores.
    pub cpu_util_cores: f64,
    pub cores: u32,
    /// How late think timers fired past their intended time.
    pub timer_lateness_ms: TimerLateness,
    /// Mean TCP connect time and how many connections were opened.
    pub connect_ms: f64,
    pub connects: u64,
    /// Open workloads: how late arrivals started past their intended time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_lateness_ms: Option<TimerLateness>,
}

/// What became of an open level's arrivals.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArrivalsRecord {
    /// Arrivals due in the measured window.
    pub due: u64,
    /// Found every in-flight slot taken and waited (their latency counts
    /// from the intended start, so the wait shows).
    pub queued: u64,
    /// Could not start before the level ended: counted, never dropped
    /// silently.
    pub unstarted: u64,
    pub max_in_flight: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimerLateness {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PerRequestRecord {
    pub requests: u64,
    pub errors: u64,
    pub throughput_rps: f64,
    pub response_time_ms: Latency,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
}

/// Little's law as measured: `users` against `throughput × (R + Z)` with
/// the think time the users actually took.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LittleCheck {
    pub users: f64,
    pub x_r_plus_z: f64,
    /// |1 − x_r_plus_z / users|
    pub relative_gap: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelRecord {
    pub level: u32,
    pub users: Option<u32>,
    pub rate_rps: Option<f64>,
    /// Measured window, after warm-up.
    pub duration_s: f64,
    pub warmup_s: f64,
    pub started_at: String,
    pub requests: u64,
    pub errors: u64,
    #[serde(default)]
    pub errors_by_kind: BTreeMap<String, u64>,
    pub sessions: u64,
    pub throughput_rps: f64,
    pub response_time_ms: Latency,
    pub think_time_s: ThinkRecord,
    pub client_bottleneck: bool,
    pub steady_state: bool,
    pub interrupted: bool,
    pub little: LittleCheck,
    pub client: ClientRecord,
    /// Open workloads: arrivals started per second in the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate_rps: Option<f64>,
    /// Open workloads: response time from the actual send, without the
    /// queueing before it (`response_time_ms` counts from the intended start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time_ms: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalsRecord>,
    pub per_request: BTreeMap<String, PerRequestRecord>,
    /// Per tier figures from the profiler agents (empty without agents).
    #[serde(default)]
    pub servers: BTreeMap<String, crate::profile::TierUsage>,
    /// What the capacity analysis made of this level (capacity runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityLevel>,
}

/// A capacity level's own figures: why it was run and the demands the
/// search used, kept so an interrupted analysis can be resumed exactly.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CapacityLevel {
    pub reason: String,
    /// Seconds from the level's start to the steady-state verdict (none
    /// when it gave up at the maximum duration).
    pub steady_after_s: Option<f64>,
    /// CPU ms per request per process, as `tier/process`.
    pub demand_ms: BTreeMap<String, f64>,
    pub demands_converged: bool,
    pub load_too_low: bool,
    /// The saturation estimate after this level.
    pub n_star: Option<f64>,
    /// Bottleneck utilisation (busy fraction of its cores) at this level.
    pub bottleneck_utilisation: Option<f64>,
}

/// Think-time excess below which no client bottleneck is called: timers
/// fire on a 1 ms wheel, so a few ms of lateness on a tiny think time is
/// resolution, not a generator falling behind.
const TIMER_RESOLUTION_S: f64 = 0.002;

/// Relative change of throughput between the two halves of the measured
/// window above which a fixed-length level is not called steady.
const STEADY_HALVES_GAP: f64 = 0.10;

impl LevelRecord {
    pub fn from_run(run: &LevelRun, scenario: &Scenario) -> LevelRecord {
        let t = &run.totals;
        let secs = t.measured.as_secs_f64().max(1e-9);
        let total = t.stats.total();
        let users = run.plan.users as f64;
        let throughput = total.requests as f64 / secs;
        let r_s = total.mean_ms() / 1e3;
        let configured = scenario.think_time.mean().as_secs_f64();
        let achieved = if throughput > 0.0 {
            users / throughput - r_s
        } else {
            0.0
        };
        let measured = t.stats.think.mean().map_or(0.0, |d| d.as_secs_f64());
        let x_r_plus_z = throughput * (r_s + measured);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let per_request = scenario
            .requests
            .iter()
            .zip(t.stats.per_request.iter())
            .map(|(req, s)| {
                (
                    req.name.clone(),
                    PerRequestRecord {
                        requests: s.requests,
                        errors: s.errors.total(),
                        throughput_rps: round3(s.requests as f64 / secs),
                        response_time_ms: Latency::of(s),
                        errors_by_kind: owned(s.errors.by_name()),
                    },
                )
            })
            .collect();
        let lateness = &t.stats.timer_lateness;
        let ms = |ns: u64| round3(ns as f64 / 1e6);
        LevelRecord {
            level: run.plan.index,
            users: Some(run.plan.users),
            rate_rps: None,
            duration_s: round3(secs),
            warmup_s: round3(run.plan.warmup.as_secs_f64()),
            started_at: humantime::format_rfc3339_seconds(run.started_at).to_string(),
            requests: total.requests,
            errors: total.errors.total(),
            errors_by_kind: owned(total.errors.by_name()),
            sessions: t.stats.sessions,
            throughput_rps: round3(throughput),
            response_time_ms: Latency::of(&total),
            think_time_s: ThinkRecord {
                configured: round6(configured),
                achieved: round6(achieved),
                measured: round6(measured),
            },
            client_bottleneck: client_bottleneck(&ClientEvidence {
                think: &scenario.think_time,
                gap: scenario.capacity.think_gap,
                achieved_s: achieved,
                measured_s: measured,
                response_s: r_s,
                window_s: secs,
                lateness_p99_s: lateness.value_at_quantile(0.99) as f64 / 1e9,
                thinks: t.stats.think.count,
                requests: total.requests,
            }),
            steady_state: steady(&t.throughput_series),
            interrupted: t.interrupted,
            little: LittleCheck {
                users,
                x_r_plus_z: round3(x_r_plus_z),
                relative_gap: round6(if users > 0.0 {
                    (1.0 - x_r_plus_z / users).abs()
                } else {
                    0.0
                }),
            },
            client: ClientRecord {
                cpu_util_cores: round3(t.client_cpu.as_secs_f64() / secs),
                cores,
                timer_lateness_ms: TimerLateness {
                    p50: ms(lateness.value_at_quantile(0.5)),
                    p99: ms(lateness.value_at_quantile(0.99)),
                    max: ms(lateness.max()),
                },
                connect_ms: round3(t.stats.connect.mean().map_or(0.0, ms_of)),
                connects: t.stats.connect.count,
                arrival_lateness_ms: None,
            },
            achieved_rate_rps: None,
            service_time_ms: None,
            arrivals: None,
            per_request,
            servers: BTreeMap::new(),
            capacity: None,
        }
        .with_open(run)
    }

    /// An open level: the target and achieved rates, the uncorrected
    /// service time, the arrivals that waited or never started; the
    /// generator was the bottleneck when arrivals could not start, or
    /// started late.
    fn with_open(mut self, run: &LevelRun) -> LevelRecord {
        let Some(open) = &run.open else {
            return self;
        };
        let t = &run.totals;
        let secs = t.measured.as_secs_f64().max(1e-9);
        let lateness = &t.stats.arrival_lateness;
        let ms = |ns: u64| round3(ns as f64 / 1e6);
        let late = TimerLateness {
            p50: ms(lateness.value_at_quantile(0.5)),
            p99: ms(lateness.value_at_quantile(0.99)),
            max: ms(lateness.max()),
        };
        self.users = None;
        self.rate_rps = Some(round3(open.target_rate()));
        // `arrivals` counts every arrival that fell due, including those
        // still waiting for a slot when the level ended (`unstarted`): the
        // achieved rate is of arrivals that actually started.
        let started = t.stats.arrivals.saturating_sub(t.stats.arrivals_unstarted);
        self.achieved_rate_rps = Some(round3(started as f64 / secs));
        let service = RequestStats {
            response_time: t.stats.service_time.clone(),
            ..RequestStats::default()
        };
        self.service_time_ms = Some(Latency::of(&service));
        self.arrivals = Some(ArrivalsRecord {
            due: t.stats.arrivals,
            queued: t.stats.arrivals_queued,
            unstarted: t.stats.arrivals_unstarted,
            max_in_flight: open.max_in_flight,
        });
        self.client_bottleneck =
            t.stats.arrivals_unstarted > 0 || late.p99 / 1e3 > LATENESS_FLOOR_S;
        self.client.arrival_lateness_ms = Some(late);
        // Little's law with a think time does not describe an open level.
        self.little = LittleCheck {
            users: 0.0,
            x_r_plus_z: 0.0,
            relative_gap: 0.0,
        };
        self
    }
}

/// What a level tells about its own generator.
pub struct ClientEvidence<'a> {
    pub think: &'a ThinkTime,
    /// The relative think-time excess that counts (`capacity.think_gap`).
    pub gap: f64,
    /// Little's law: `N/X − R`.
    pub achieved_s: f64,
    /// The mean pause the users actually took.
    pub measured_s: f64,
    pub response_s: f64,
    pub window_s: f64,
    pub lateness_p99_s: f64,
    /// Pauses taken and requests completed in the window: a mean of a few
    /// random think times is itself noisy.
    pub thinks: u64,
    pub requests: u64,
}

/// The generator was the bottleneck when it could not keep the configured
/// think time (AutoPerf 2.1.3). Three witnesses, any one suffices:
/// - Little's law: `N/X − R` exceeds the configured think time — only when
///   the window holds enough cycles (`MIN_CYCLES`): with responses as long
///   as the window, requests still outstanding at its end leave `R` short
///   and `N/X − R` inflated, though nothing is wrong with the generator;
/// - the pauses the users actually took were longer than asked;
/// - think timers fired late (p99) by more than the gap allows.
///
/// Excesses below the 1 ms timer wheel's resolution never count.
pub fn client_bottleneck(e: &ClientEvidence) -> bool {
    let z = e.think.mean().as_secs_f64();
    let cycles = e.window_s / (e.response_s + z).max(1e-6);
    // A mean of n draws with coefficient of variation cv strays by cv/√n;
    // three of those are noise, not a generator falling behind.
    let noise = |n: u64| NOISE_SIGMAS * e.think.cv() / (n.max(1) as f64).sqrt();
    let excess = |achieved: f64, n: u64| {
        think_gap(e.think, achieved, e.response_s) > e.gap + noise(n)
            && achieved - z > TIMER_RESOLUTION_S
    };
    let late = e.lateness_p99_s > TIMER_RESOLUTION_S.max(e.gap * z).max(LATENESS_FLOOR_S);
    (cycles >= MIN_CYCLES && excess(e.achieved_s, e.requests))
        || excess(e.measured_s, e.thinks)
        || late
}

/// Standard errors of a mean think time that count as sampling noise.
const NOISE_SIGMAS: f64 = 3.0;

/// Cycles (`R + Z`) a window must hold for Little's law to be trusted.
const MIN_CYCLES: f64 = 5.0;

/// Timer lateness that is scheduling noise on a shared machine, not a
/// generator falling behind.
const LATENESS_FLOOR_S: f64 = 0.010;

/// The relative excess of achieved over configured think time. With no
/// think time configured, the excess is taken relative to the response
/// time instead, so a generator that cannot keep up still shows.
pub fn think_gap(configured: &ThinkTime, achieved_s: f64, response_s: f64) -> f64 {
    let z = configured.mean().as_secs_f64();
    let base = if z > 0.0 { z } else { response_s.max(1e-3) };
    (achieved_s - z) / base
}

/// A fixed-length level is steady when the throughput of its two halves
/// agree within `STEADY_HALVES_GAP`.
fn steady(series: &[f64]) -> bool {
    if series.len() < 2 {
        return false;
    }
    let mid = series.len() / 2;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let (a, b) = (mean(&series[..mid]), mean(&series[mid..]));
    let m = (a + b) / 2.0;
    m > 0.0 && ((a - b).abs() / m) <= STEADY_HALVES_GAP
}

fn owned(m: BTreeMap<&'static str, u64>) -> BTreeMap<String, u64> {
    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn ms_of(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl Default for ToolInfo {
    fn default() -> Self {
        ToolInfo {
            name: "autoperf".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioInfo {
    pub name: String,
    pub file: String,
    pub text: String,
    pub target: String,
}

impl ScenarioInfo {
    pub fn of(scenario: &Scenario) -> ScenarioInfo {
        ScenarioInfo {
            name: scenario.name.clone(),
            file: scenario.source.display().to_string(),
            text: scenario.text.clone(),
            target: scenario.target.endpoint.to_string(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    pub hostname: String,
    pub cores: u32,
    pub os: String,
}

impl HostInfo {
    pub fn current() -> HostInfo {
        HostInfo {
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            os: std::env::consts::OS.into(),
        }
    }
}

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub record_version: u32,
    pub tool: ToolInfo,
    /// "run", "capacity", "profile" or "demo".
    pub mode: String,
    pub scenario: ScenarioInfo,
    pub host: HostInfo,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub levels: Vec<LevelRecord>,
    pub analysis: serde_json::Map<String, serde_json::Value>,
    pub warnings: Vec<String>,
}

impl RunRecord {
    pub fn new(mode: &str, scenario: &Scenario) -> RunRecord {
        RunRecord {
            record_version: RECORD_VERSION,
            tool: ToolInfo::default(),
            mode: mode.into(),
            scenario: ScenarioInfo::of(scenario),
            host: HostInfo::current(),
            started_at: now_rfc3339(),
            finished_at: None,
            levels: Vec::new(),
            analysis: serde_json::Map::new(),
            warnings: Vec::new(),
        }
    }
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_gap_relative_to_configured_or_response() {
        let z = ThinkTime::Constant(Duration::from_secs(1));
        assert!((think_gap(&z, 1.2, 0.01) - 0.2).abs() < 1e-9);
        let zero = ThinkTime::Constant(Duration::ZERO);
        assert!((think_gap(&zero, 0.002, 0.010) - 0.2).abs() < 1e-9);
    }

    #[test]
    fn client_bottleneck_needs_a_witness_it_can_trust() {
        let z = ThinkTime::Constant(Duration::from_millis(500));
        let base = ClientEvidence {
            think: &z,
            gap: 0.1,
            achieved_s: 0.5,
            measured_s: 0.5,
            response_s: 0.01,
            window_s: 30.0,
            lateness_p99_s: 0.001,
            thinks: 1000,
            requests: 1000,
        };
        assert!(!client_bottleneck(&base));
        assert!(client_bottleneck(&ClientEvidence {
            achieved_s: 0.7,
            ..base
        }));
        // Responses as long as the window: Little's law is not trusted.
        assert!(!client_bottleneck(&ClientEvidence {
            achieved_s: 3.0,
            response_s: 13.0,
            window_s: 8.0,
            ..base
        }));
        assert!(client_bottleneck(&ClientEvidence {
            measured_s: 0.8,
            ..base
        }));
        assert!(client_bottleneck(&ClientEvidence {
            lateness_p99_s: 0.2,
            ..base
        }));
        // 40 exponential pauses averaging 15% long: sampling noise.
        let exp = ThinkTime::Exponential {
            mean: Duration::from_millis(500),
        };
        let few = ClientEvidence {
            think: &exp,
            measured_s: 0.575,
            thinks: 40,
            requests: 40,
            ..base
        };
        assert!(!client_bottleneck(&few));
        assert!(client_bottleneck(&ClientEvidence {
            thinks: 10_000,
            requests: 10_000,
            ..few
        }));
    }

    #[test]
    fn steady_needs_agreeing_halves() {
        assert!(steady(&[100.0, 101.0, 99.0, 100.0]));
        assert!(!steady(&[50.0, 60.0, 100.0, 110.0]));
        assert!(!steady(&[100.0]));
    }
}
