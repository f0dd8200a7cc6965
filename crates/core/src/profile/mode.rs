//! Profiling mode (AutoPerf section 2.1.4): one level per request type,
//! loading that type alone (after its prerequisites, run in the warm-up so
//! their cost is not counted) until the CPU demand of every server process
//! has converged (section 2.1.1); then the per-request demand table —
//! request × tier: CPU ms per process, network and disk bytes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::sampler::{Reading, Sampler};
use crate::capacity::demand::{
    expected_throughput_rps, DemandConfig, DemandReading, DemandStatus, DemandTracker,
};
use crate::engine::{LevelPlan, Workload};
use crate::measure::{LevelInfo, Tick};
use crate::record::LevelRecord;
use crate::runner::{LevelController, Next, STOP_COMPLETED};
use crate::scenario::{RequestId, Scenario};

/// One request's demands at one tier, as `analysis.demands[request][tier]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TierDemands {
    /// The tier's processes together.
    pub cpu_ms: f64,
    pub cpu_ms_per_process: BTreeMap<String, f64>,
    pub net_rx_bytes: f64,
    pub net_tx_bytes: f64,
    pub disk_read_bytes: f64,
    pub disk_write_bytes: f64,
    /// Every process of the tier converged (or was ignored as idle).
    pub converged: bool,
    /// Processes that stayed near zero and were not waited for.
    pub ignored: Vec<String>,
}

/// A process of a tier, flattened from `servers:`.
#[derive(Debug, Clone)]
struct Proc {
    tier: String,
    name: String,
    agent: usize,
}

pub struct ProfileController {
    scenario: Arc<Scenario>,
    queue: VecDeque<RequestId>,
    users: u32,
    warmup: Duration,
    max_duration: Duration,
    /// Profiling goes on at least this long, however soon demands converge.
    min_measured: Duration,
    procs: Vec<Proc>,
    cores: Vec<u32>,
    config: DemandConfig,
    current: Option<Current>,
    levels: u32,
    demands: BTreeMap<String, BTreeMap<String, TierDemands>>,
}

/// The level being profiled.
struct Current {
    request: RequestId,
    tracker: DemandTracker,
    status: Option<DemandStatus>,
    /// Cumulative completions of the profiled request since the level
    /// began, at each tick's end.
    counts: Vec<(Instant, u64)>,
    completed: u64,
    /// Sum of response times (s) of the profiled request after warm-up.
    response_sum_s: f64,
    responses: u64,
    measure_from: Option<Instant>,
    baseline: Option<Reading>,
    consumed_until: Option<Instant>,
}

impl ProfileController {
    /// `requests`: the types to profile, in order (all by default).
    pub fn new(
        scenario: Arc<Scenario>,
        requests: Vec<RequestId>,
        users: u32,
        warmup: Duration,
        agent_of: impl Fn(&str) -> Option<usize>,
        cores_of: impl Fn(&str) -> u32,
    ) -> ProfileController {
        let procs: Vec<Proc> = scenario
            .servers
            .iter()
            .flat_map(|s| {
                s.processes.iter().map(|p| Proc {
                    tier: s.tier.clone(),
                    name: p.clone(),
                    agent: agent_of(&s.tier).unwrap_or(0),
                })
            })
            .collect();
        let cores = procs.iter().map(|p| cores_of(&p.tier)).collect();
        let settings = &scenario.capacity;
        ProfileController {
            config: DemandConfig::from_settings(settings),
            max_duration: settings.max_duration,
            min_measured: settings.min_duration.min(Duration::from_secs(5)),
            queue: requests.into(),
            users,
            warmup,
            procs,
            cores,
            current: None,
            levels: 0,
            demands: BTreeMap::new(),
            scenario,
        }
    }

    pub fn demands(&self) -> &BTreeMap<String, BTreeMap<String, TierDemands>> {
        &self.demands
    }

    /// Cumulative completions at `at`, interpolated between tick ends.
    fn completions_at(counts: &[(Instant, u64)], at: Instant) -> Option<f64> {
        let i = counts.iter().position(|&(t, _)| t >= at)?;
        let (t1, c1) = counts[i];
        if i == 0 {
            return Some(c1 as f64);
        }
        let (t0, c0) = counts[i - 1];
        let span = (t1 - t0).as_secs_f64();
        let f = if span > 0.0 {
            (at - t0).as_secs_f64() / span
        } else {
            1.0
        };
        Some(c0 as f64 + f * (c1 - c0) as f64)
    }

    /// Feeds every reading the ticks so far can be lined up with.
    fn consume(&mut self, sampler: &Sampler, last_tick_end: Instant) {
        let users = self.users;
        let think_s = self.scenario.think_time.mean().as_secs_f64();
        let Some(cur) = self.current.as_mut() else {
            return;
        };
        let Some(from) = cur.measure_from else {
            return;
        };
        for reading in sampler.readings_between(from, last_tick_end) {
            if cur.consumed_until.is_some_and(|t| reading.at <= t) {
                continue;
            }
            cur.consumed_until = Some(reading.at);
            let Some(base) = &cur.baseline else {
                cur.baseline = Some(reading);
                continue;
            };
            let (Some(n0), Some(n1)) = (
                Self::completions_at(&cur.counts, base.at),
                Self::completions_at(&cur.counts, reading.at),
            ) else {
                continue;
            };
            let cpu_s: Vec<f64> = self
                .procs
                .iter()
                .map(|p| {
                    let get = |r: &Reading| {
                        r.counters
                            .get(p.agent)
                            .and_then(Option::as_ref)
                            .and_then(|c| c.processes.get(&p.name))
                            .map(|g| g.cpu_s)
                    };
                    match (get(base), get(&reading)) {
                        (Some(a), Some(b)) => (b - a).max(0.0),
                        _ => 0.0,
                    }
                })
                .collect();
            let response_time_s = if cur.responses > 0 {
                cur.response_sum_s / cur.responses as f64
            } else {
                0.0
            };
            let status = cur.tracker.push(&DemandReading {
                elapsed_s: (reading.at - base.at).as_secs_f64(),
                completed: (n1 - n0).round().max(0.0) as u64,
                cpu_s,
                expected_rps: expected_throughput_rps(users, think_s, response_time_s),
                response_time_s,
            });
            cur.status = Some(status);
        }
    }
}

impl LevelController for ProfileController {
    fn next(&mut self, _finished: &[LevelRecord]) -> Next {
        let Some(request) = self.queue.pop_front() else {
            return Next::Finish(STOP_COMPLETED.into());
        };
        self.levels += 1;
        let prerequisites = self
            .scenario
            .prerequisites
            .iter()
            .copied()
            .filter(|&p| p != request)
            .collect();
        self.current = Some(Current {
            request,
            tracker: DemandTracker::new(self.config.clone(), &self.cores),
            status: None,
            counts: Vec::new(),
            completed: 0,
            response_sum_s: 0.0,
            responses: 0,
            measure_from: None,
            baseline: None,
            consumed_until: None,
        });
        Next::Run(LevelPlan {
            index: self.levels,
            users: self.users,
            warmup: self.warmup,
            duration: self.max_duration,
            workload: Workload::Profile {
                request,
                prerequisites,
            },
        })
    }

    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick, sampler: Option<&Sampler>) -> bool {
        let Some(cur) = self.current.as_mut() else {
            return false;
        };
        let stats = &tick.stats.per_request[cur.request.index()];
        cur.completed += stats.requests;
        cur.counts.push((tick.end, cur.completed));
        if tick.warmup {
            return false;
        }
        if cur.measure_from.is_none() {
            cur.measure_from = Some(tick.end - tick.length);
        }
        cur.response_sum_s += stats.mean_ms() / 1e3 * stats.response_time.len() as f64;
        cur.responses += stats.response_time.len();
        let measured_for = tick.end - cur.measure_from.expect("set above");
        let Some(sampler) = sampler else {
            return false;
        };
        self.consume(sampler, tick.end);
        let cur = self.current.as_ref().expect("still profiling");
        measured_for >= self.min_measured && cur.status.as_ref().is_some_and(|s| s.finished())
    }

    fn finish_level(&mut self, level: &mut LevelRecord, _sampler: Option<&Sampler>) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let name = self.scenario.request(cur.request).name.clone();
        let status = cur.status.unwrap_or_else(|| cur.tracker.status());
        let mut tiers: BTreeMap<String, TierDemands> = BTreeMap::new();
        for (i, p) in self.procs.iter().enumerate() {
            let usage = level.servers.get(&p.tier);
            let entry = tiers.entry(p.tier.clone()).or_insert_with(|| TierDemands {
                cpu_ms: 0.0,
                cpu_ms_per_process: BTreeMap::new(),
                net_rx_bytes: usage.map_or(0.0, |u| u.net_bytes_per_request.rx),
                net_tx_bytes: usage.map_or(0.0, |u| u.net_bytes_per_request.tx),
                disk_read_bytes: usage.map_or(0.0, |u| u.disk_bytes_per_request.read),
                disk_write_bytes: usage.map_or(0.0, |u| u.disk_bytes_per_request.write),
                converged: true,
                ignored: Vec::new(),
            });
            let state = status.processes.get(i);
            // The tracker's S/n over the whole profiled span; failing that
            // (no readings), the level's utilisation-law figure.
            let ms = state
                .and_then(|s| s.demand_s)
                .map(|d| d * 1e3)
                .or_else(|| usage.and_then(|u| u.cpu_ms_per_request.get(&p.name).copied()))
                .unwrap_or(0.0);
            let ms = (ms * 1e4).round() / 1e4;
            entry.cpu_ms += ms;
            entry.cpu_ms_per_process.insert(p.name.clone(), ms);
            match state {
                Some(s) if s.ignored => entry.ignored.push(p.name.clone()),
                Some(s) if s.converged => {}
                _ => entry.converged = false,
            }
        }
        for t in tiers.values_mut() {
            t.cpu_ms = (t.cpu_ms * 1e4).round() / 1e4;
        }
        self.demands.insert(name, tiers);
    }

    fn analysis(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert(
            "demands".into(),
            serde_json::to_value(&self.demands).unwrap_or_default(),
        );
        m.insert("profile_users".into(), self.users.into());
        m
    }

    fn reason(&self) -> Option<String> {
        let cur = self.current.as_ref()?;
        Some(format!(
            "profiling `{}` alone until every server process's CPU demand converges",
            self.scenario.request(cur.request).name
        ))
    }
}
