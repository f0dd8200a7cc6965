//! Watches the CPU demand of every server process while a level runs: lines
//! up the agents' cumulative CPU readings with the requests completed by
//! then, and feeds the convergence check of AutoPerf section 2.1.1
//! (`capacity::demand`). Used by the profiling mode and the capacity search.

use std::time::Instant;

use super::agents::{AgentSet, Counters};
use super::sampler::{Reading, Sampler};
use crate::capacity::demand::{
    expected_throughput_rps, DemandConfig, DemandReading, DemandStatus, DemandTracker,
};
use crate::measure::Tick;
use crate::scenario::{RequestId, Scenario};

/// A server process named under `servers:`, with where to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchedProcess {
    pub tier: String,
    pub name: String,
    /// Index of its agent in the `AgentSet`.
    pub agent: usize,
    /// Cores of its tier: the scenario's `cores`, else its host's.
    pub cores: u32,
    /// Its host, by its agent's URL ("" through Prometheus: each such
    /// tier is its own), and that host's cores: tiers on one host whose
    /// cores add up to more take turns on its CPUs.
    pub host: String,
    pub host_cores: u32,
}

/// Every process of the scenario's tiers, in `servers:` order. `first`
/// holds one reading per agent (from `AgentSet::check_all`), for the cores
/// of tiers that do not say.
pub fn watched_processes(
    scenario: &Scenario,
    agents: &AgentSet,
    first: &[Counters],
) -> Vec<WatchedProcess> {
    scenario
        .servers
        .iter()
        .flat_map(|s| {
            let agent = agents.agent_of(&s.tier).unwrap_or(0);
            let host_cores = first.get(agent).map(|c| c.host.cores);
            let cores = s.cores.or(host_cores).unwrap_or(1);
            let host = match agents.agents.get(agent) {
                Some(a) if !a.is_prometheus() => a.url.clone(),
                _ => String::new(),
            };
            s.processes.iter().map(move |p| WatchedProcess {
                tier: s.tier.clone(),
                name: p.clone(),
                agent,
                cores,
                host: host.clone(),
                host_cores: host_cores.unwrap_or(0),
            })
        })
        .collect()
}

pub(crate) struct DemandWatch {
    procs: Vec<WatchedProcess>,
    tracker: DemandTracker,
    status: Option<DemandStatus>,
    /// Only this request counts as a completion (profiling); all when None.
    only: Option<RequestId>,
    users: u32,
    think_s: f64,
    /// Cumulative completions since the level began, at each tick's end.
    counts: Vec<(Instant, u64)>,
    completed: u64,
    response_sum_s: f64,
    responses: u64,
    measure_from: Option<Instant>,
    baseline: Option<Reading>,
    consumed_until: Option<Instant>,
}

impl DemandWatch {
    pub(crate) fn new(
        procs: Vec<WatchedProcess>,
        config: DemandConfig,
        users: u32,
        think_s: f64,
        only: Option<RequestId>,
    ) -> DemandWatch {
        let cores: Vec<u32> = procs.iter().map(|p| p.cores).collect();
        DemandWatch {
            tracker: DemandTracker::new(config, &cores),
            procs,
            status: None,
            only,
            users,
            think_s,
            counts: Vec::new(),
            completed: 0,
            response_sum_s: 0.0,
            responses: 0,
            measure_from: None,
            baseline: None,
            consumed_until: None,
        }
    }

    /// Every tick of the level; `measuring` says the demand count has begun
    /// (after the warm-up, or after steady state).
    pub(crate) fn on_tick(&mut self, tick: &Tick, sampler: Option<&Sampler>, measuring: bool) {
        let stats = match self.only {
            Some(r) => tick.stats.per_request[r.index()].clone(),
            None => tick.stats.total(),
        };
        self.completed += stats.requests;
        self.counts.push((tick.end, self.completed));
        if !measuring {
            return;
        }
        if self.measure_from.is_none() {
            self.measure_from = Some(tick.end);
            return;
        }
        let n = stats.response_time.len();
        self.response_sum_s += stats.mean_ms() / 1e3 * n as f64;
        self.responses += n;
        if let Some(sampler) = sampler {
            self.consume(sampler, tick.end);
        }
    }

    /// Where the convergence check stands (nothing read yet: not finished).
    pub(crate) fn status(&self) -> DemandStatus {
        self.status.clone().unwrap_or_else(|| self.tracker.status())
    }

    pub(crate) fn finished(&self) -> bool {
        self.status.as_ref().is_some_and(DemandStatus::finished)
    }

    /// Cumulative completions at `at`, interpolated between tick ends.
    fn completions_at(&self, at: Instant) -> Option<f64> {
        let i = self.counts.iter().position(|&(t, _)| t >= at)?;
        let (t1, c1) = self.counts[i];
        if i == 0 {
            return Some(c1 as f64);
        }
        let (t0, c0) = self.counts[i - 1];
        let span = (t1 - t0).as_secs_f64();
        let f = if span > 0.0 {
            (at - t0).as_secs_f64() / span
        } else {
            1.0
        };
        Some(c0 as f64 + f * (c1 - c0) as f64)
    }

    /// Feeds every reading that the ticks so far can be lined up with.
    fn consume(&mut self, sampler: &Sampler, until: Instant) {
        let Some(from) = self.measure_from else {
            return;
        };
        for reading in sampler.readings_between(from, until) {
            if self.consumed_until.is_some_and(|t| reading.at <= t) {
                continue;
            }
            self.consumed_until = Some(reading.at);
            let Some(base) = &self.baseline else {
                self.baseline = Some(reading);
                continue;
            };
            let (Some(n0), Some(n1)) = (
                self.completions_at(base.at),
                self.completions_at(reading.at),
            ) else {
                continue;
            };
            let cpu_s = self
                .procs
                .iter()
                .map(|p| match (cpu_of(base, p), cpu_of(&reading, p)) {
                    (Some(a), Some(b)) => (b - a).max(0.0),
                    _ => 0.0,
                })
                .collect();
            let response_time_s = if self.responses > 0 {
                self.response_sum_s / self.responses as f64
            } else {
                0.0
            };
            let status = self.tracker.push(&DemandReading {
                elapsed_s: (reading.at - base.at).as_secs_f64(),
                completed: (n1 - n0).round().max(0.0) as u64,
                cpu_s,
                expected_rps: expected_throughput_rps(self.users, self.think_s, response_time_s),
                response_time_s,
            });
            self.status = Some(status);
        }
    }
}

fn cpu_of(reading: &Reading, p: &WatchedProcess) -> Option<f64> {
    reading
        .counters
        .get(p.agent)
        .and_then(Option::as_ref)
        .and_then(|c| c.processes.get(&p.name))
        .map(|g| g.cpu_s)
}
