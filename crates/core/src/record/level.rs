//! A level object (`levels.jsonl`, `run.json`'s `levels`), as docs/design.md
//! (4.3) specifies it, and how one is made from a finished level's totals.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::server_side::{LagFigure, PromqlFigure};
use super::servers::TierUsage;
use crate::capacity::{client, steady};
use crate::engine::{Level, LevelRun};
use crate::measure::{Ci95, RequestStats};
use crate::scenario::Scenario;

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
    pub(crate) fn of(stats: &RequestStats) -> Latency {
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
    /// CPU the generator used, in busy cores: this process and its
    /// generator processes, or every worker.
    pub cpu_util_cores: f64,
    /// Cores the generator had: this host's, or all the workers'.
    pub cores: u32,
    /// How late think timers fired past their intended time.
    pub timer_lateness_ms: TimerLateness,
    /// Mean TCP connect time and how many connections were opened.
    pub connect_ms: f64,
    pub connects: u64,
    /// Open workloads: how late arrivals started past their intended time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_lateness_ms: Option<TimerLateness>,
    /// `https://` targets: mean TLS handshake time after the TCP connect,
    /// handshakes done, and how many resumed an earlier session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshakes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed: Option<u64>,
    /// Of the connections opened, those that speak HTTP/2 (`target.http`
    /// 2, or `auto` and the server agreed): absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_connections: Option<u64>,
    /// Under a cgroup CPU quota (a container's CPU limit): the quota, and
    /// how often it held the generator back in the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<CpuQuotaRecord>,
}

/// A generator's CPU quota and its throttling over a measured window. A
/// throttled generator holds responses unread and timers unfired until
/// the next period: up to `period_ms` more on a latency.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuQuotaRecord {
    /// The quota in cores (a 500m limit is 0.5).
    pub cores: f64,
    /// The period it is granted in.
    pub period_ms: f64,
    /// Periods in the window, and those in which the quota ran out.
    pub periods: u64,
    pub throttled_periods: u64,
    /// Time held back (cgroup v1 adds up each CPU's).
    pub throttled_ms: f64,
}

impl CpuQuotaRecord {
    pub(crate) fn of(quota: &crate::measure::QuotaUse) -> CpuQuotaRecord {
        let t = &quota.throttling;
        CpuQuotaRecord {
            cores: round6(quota.limit.cores),
            period_ms: round3(ms_of(quota.limit.period)),
            periods: t.periods,
            throttled_periods: t.throttled_periods,
            throttled_ms: round3(ms_of(t.throttled)),
        }
    }

    /// Whether it held the generator back often enough to be its
    /// bottleneck (a tenth of the periods).
    pub(crate) fn holds_back(&self) -> bool {
        crate::measure::cgroup::holds_back(self.periods, self.throttled_periods)
    }
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

pub use crate::measure::round3;

pub use crate::measure::round6;

pub use crate::measure::TimerLateness;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PerRequestRecord {
    pub requests: u64,
    pub errors: u64,
    pub throughput_rps: f64,
    pub response_time_ms: Latency,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The request's `check:`s by name: how often each passed and failed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks: BTreeMap<String, CheckRecord>,
    /// Redirects followed (their time is in the response time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirects: u64,
    /// Times its `skip_if:` held and nothing was sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// Why the scenario's script failed it, reason → count (design §3.15).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub script_failures: BTreeMap<String, u64>,
    /// Kafka: record sends retried after a retriable refusal (a leader
    /// moving, a topic being made); not errors, which count only records
    /// that were never written.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u64,
    /// Bytes of the final responses' bodies as received, and decoded (the
    /// same unless `target.compression` got compressed answers). Always
    /// written, zero included, so the record's keys do not depend on what
    /// a level happened to send.
    #[serde(default)]
    pub body_bytes: u64,
    #[serde(default)]
    pub decoded_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckRecord {
    pub passed: u64,
    pub failed: u64,
}

/// Little's law as measured: `users` against `throughput × (R + Z)` with
/// the think time the users actually took.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LittleCheck {
    pub users: f64,
    pub x_r_plus_z: f64,
    /// |1 − x_r_plus_z / users|
    pub relative_gap: f64,
    /// Cycles (`R + Z`) the measured window held. Little's law holds for a
    /// window of many cycles; over a few, the users whose cycle straddles
    /// an end make the gap large though nothing is wrong (0: not known, or
    /// an open level).
    #[serde(default)]
    pub cycles: f64,
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
    /// 95% half-widths of `throughput_rps` and `response_time_ms` by batch
    /// means over the measured window (`measure::precision`); absent when
    /// it held fewer than 5 batches of a second (and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<Ci95>,
    pub think_time_s: ThinkRecord,
    pub client_bottleneck: bool,
    pub steady_state: bool,
    pub interrupted: bool,
    /// Why the level is not trustworthy (every request failed, or more
    /// than `capacity.max_error_rate`); null when it is.
    #[serde(default)]
    pub invalid: Option<String>,
    /// Load went missing mid-level (a worker or generator process died or
    /// went silent): what was lost, by name. Such a level ran under-loaded
    /// and is never a curve point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The workers that ran the level and their shares (empty: this host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<crate::engine::WorkerShare>,
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
    /// Each workload class's figures (`classes:`; absent without).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_class: BTreeMap<String, super::ClassRecord>,
    /// Per tier figures from the profiler agents (empty without agents).
    #[serde(default)]
    pub servers: BTreeMap<String, TierUsage>,
    /// The PromQL thresholds' queries over the measured window, by query.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub promql: BTreeMap<String, PromqlFigure>,
    /// The lag thresholds' consumer groups over the measured window, by
    /// group.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kafka_lag: BTreeMap<String, LagFigure>,
    /// What the capacity analysis made of this level (capacity runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityLevel>,
    /// What the open-workload capacity search made of this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_search: Option<RateLevel>,
}

/// An open capacity level's verdict: every SLO it was held to and how it
/// fared, kept so the search can be resumed and the report can say why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RateLevel {
    /// Why this rate was run.
    pub reason: String,
    pub verdict: SloVerdict,
    /// The scenario's thresholds, then the achieved-rate rule.
    pub slos: Vec<super::ThresholdResult>,
    /// Sessions delivered per second: successful requests per second over
    /// the requests a session makes on average.
    pub delivered_rps: f64,
    /// The delivered rate fell short of the rate: it is what the system
    /// can do (its capacity), measured.
    pub saturated: bool,
    /// Why the generator, not the system, limited this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_bound: Option<String>,
    /// `--vary`: the resource value this level ran under.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, String>,
}

impl RateLevel {
    /// Why the level did not pass, in words (empty when it passed): the
    /// generator's limit when it explains the failure, else the first SLO
    /// that failed.
    pub fn why(&self) -> String {
        match (&self.generator_bound, self.slos.iter().find(|r| !r.passed)) {
            (Some(g), _) if self.verdict != SloVerdict::Pass => g.clone(),
            (_, Some(slo)) => slo.failure_text(),
            _ => String::new(),
        }
    }
}

/// An open capacity level's verdict, as `rate_search.verdict` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloVerdict {
    /// Every SLO held.
    Pass,
    /// An SLO failed: the system cannot serve this rate.
    Fail,
    /// An SLO failed, but the generator could not keep the rate: this
    /// machine's limit, not the system's.
    GeneratorBound,
}

impl SloVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            SloVerdict::Pass => "pass",
            SloVerdict::Fail => "fail",
            SloVerdict::GeneratorBound => "generator_bound",
        }
    }
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

impl LevelRecord {
    pub fn from_run(run: &LevelRun, scenario: &Scenario) -> LevelRecord {
        let t = &run.totals;
        let secs = t.measured.as_secs_f64().max(1e-9);
        let total = t.stats.total();
        // A ramp's users vary: Little's law holds for their mean.
        let users = match run.level.ramp() {
            Some(_) => t.mean_active_users,
            None => run.level.users().unwrap_or(0) as f64,
        };
        let throughput = total.requests as f64 / secs;
        let r_s = total.mean_ms() / 1e3;
        // A user's cycle holds every attempt, also those that ended without
        // a response (a timeout is 30 s the user spent waiting on the
        // server): Little's law needs their time too, or a level of
        // timeouts shows as think time inflated by the generator.
        let cycle_r_s = if total.requests > 0 {
            let answered = total.response_time.len() as f64;
            (r_s * answered + total.failed_ns as f64 / 1e9) / total.requests as f64
        } else {
            r_s
        };
        let per_class = super::classes::per_class(
            scenario,
            &t.stats,
            run.level
                .ramp()
                .is_none()
                .then(|| run.level.users())
                .flatten(),
            secs,
        );
        let by_class = super::classes::configured_think_s(scenario, &t.stats);
        // With classes, a level that counted none was profiled: its users
        // thought the scenario's own think time.
        let think = match by_class {
            Some(z) => scenario.judged_think_time(Some(Duration::from_secs_f64(z))),
            None if scenario.classes.is_empty() => scenario.think_time,
            None if t.stats.per_class.is_empty() => scenario.think_time,
            None => scenario.judged_think_time(None),
        };
        let configured = match (by_class, scenario.classes.is_empty()) {
            (Some(z), _) => z,
            (None, true) => scenario.mean_think_time().as_secs_f64(),
            (None, false) => think.mean().as_secs_f64(),
        };
        let achieved = if throughput > 0.0 {
            users / throughput - cycle_r_s
        } else {
            0.0
        };
        let measured = t.stats.think.mean().map_or(0.0, |d| d.as_secs_f64());
        let x_r_plus_z = throughput * (cycle_r_s + measured);
        // The generator's cores: this host's, or every worker's (whose CPU
        // the collector counts too).
        let cores = match run.workers.is_empty() {
            true => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            false => run.workers.iter().map(|w| w.cores as u32).sum(),
        };
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
                        checks: req
                            .checks
                            .iter()
                            .zip(&s.checks)
                            .map(|(check, count)| {
                                let record = CheckRecord {
                                    passed: count.passed,
                                    failed: count.failed,
                                };
                                (check.name.clone(), record)
                            })
                            .collect(),
                        redirects: s.redirects,
                        skipped: s.skipped,
                        script_failures: s.script_failures.iter().cloned().collect(),
                        retries: s.retries,
                        body_bytes: s.body_bytes,
                        decoded_bytes: s.decoded_bytes,
                    },
                )
            })
            .collect();
        let lateness = &t.stats.timer_lateness;
        LevelRecord {
            level: run.level.index(),
            users: run.level.users(),
            rate_rps: None,
            duration_s: round3(secs),
            warmup_s: round3(run.level.warmup().as_secs_f64()),
            started_at: humantime::format_rfc3339_seconds(run.started_at).to_string(),
            requests: total.requests,
            errors: total.errors.total(),
            errors_by_kind: owned(total.errors.by_name()),
            sessions: t.stats.sessions,
            throughput_rps: round3(throughput),
            response_time_ms: Latency::of(&total),
            ci95: t.batches.ci95(),
            think_time_s: ThinkRecord {
                configured: round6(configured),
                achieved: round6(achieved),
                measured: round6(measured),
            },
            client_bottleneck: client::client_bottleneck(&client::ClientEvidence {
                think: &think,
                gap: scenario.capacity.think_gap,
                achieved_s: achieved,
                measured_s: measured,
                response_s: cycle_r_s,
                window_s: secs,
                lateness_p99_s: lateness.value_at_quantile(0.99) as f64 / 1e9,
                lateness_samples: lateness.len(),
                thinks: t.stats.think.count,
                requests: total.requests,
            }),
            steady_state: steady::halves_agree(&t.throughput_series),
            interrupted: t.interrupted,
            invalid: None,
            incomplete: (!run.lost.is_empty()).then(|| run.lost.join("; ")),
            workers: run.workers.clone(),
            little: LittleCheck {
                users,
                x_r_plus_z: round3(x_r_plus_z),
                relative_gap: round6(if users > 0.0 {
                    (1.0 - x_r_plus_z / users).abs()
                } else {
                    0.0
                }),
                cycles: round3(secs / (cycle_r_s + measured.max(configured)).max(1e-6)),
            },
            client: ClientRecord {
                cpu_util_cores: round3(t.client_cpu.as_secs_f64() / secs),
                cores,
                timer_lateness_ms: TimerLateness::of(lateness),
                connect_ms: round3(t.stats.connect.mean().map_or(0.0, ms_of)),
                connects: t.stats.connect.count,
                arrival_lateness_ms: None,
                tls_handshake_ms: t.stats.tls.mean().map(|d| round3(ms_of(d))),
                tls_handshakes: (t.stats.tls.count > 0).then_some(t.stats.tls.count),
                tls_resumed: (t.stats.tls.count > 0).then_some(t.stats.tls_resumed),
                http2_connections: (t.stats.http2_connections > 0)
                    .then_some(t.stats.http2_connections),
                // A quota here holds back only this process: workers
                // generate elsewhere, under their own.
                cpu_quota: run
                    .workers
                    .is_empty()
                    .then_some(t.client_quota.as_ref())
                    .flatten()
                    .map(CpuQuotaRecord::of),
            },
            achieved_rate_rps: None,
            service_time_ms: None,
            arrivals: None,
            per_request,
            per_class,
            servers: BTreeMap::new(),
            promql: BTreeMap::new(),
            kafka_lag: BTreeMap::new(),
            capacity: None,
            rate_search: None,
        }
        .with_open(run)
        .with_quota()
    }

    /// A generator its CPU quota held back in a tenth or more of the
    /// periods was a bottleneck, whatever else shows: a response it was
    /// not allowed to read counts in the response time, not in the think
    /// time or the arrivals' lateness the other witnesses watch.
    fn with_quota(mut self) -> LevelRecord {
        if self
            .client
            .cpu_quota
            .as_ref()
            .is_some_and(|q| q.holds_back())
        {
            self.client_bottleneck = true;
        }
        self
    }

    /// An open level: the target and achieved rates, the uncorrected
    /// service time, the arrivals that waited or never started; the
    /// generator was the bottleneck when arrivals could not start, or
    /// started late.
    fn with_open(mut self, run: &LevelRun) -> LevelRecord {
        let Level::Open(open) = &run.level else {
            return self;
        };
        let t = &run.totals;
        let secs = t.measured.as_secs_f64().max(1e-9);
        let late = TimerLateness::of(&t.stats.arrival_lateness);
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
        self.client_bottleneck = client::arrivals_bottleneck(
            t.stats.arrivals_unstarted,
            t.stats.arrivals,
            late.p99 / 1e3,
        );
        self.client.arrival_lateness_ms = Some(late);
        // Little's law with a think time does not describe an open level.
        self.little = LittleCheck {
            users: 0.0,
            x_r_plus_z: 0.0,
            relative_gap: 0.0,
            cycles: 0.0,
        };
        self
    }
}

pub(super) fn owned(m: BTreeMap<&'static str, u64>) -> BTreeMap<String, u64> {
    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn ms_of(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
