//! Profiling mode (AutoPerf section 2.1.4): one level per request type,
//! loading that type alone (after its prerequisites, run in the warm-up so
//! their cost is not counted) until the CPU demand of every server process
//! has converged (section 2.1.1); then the per-request demand table —
//! request × tier: CPU ms per process, network and disk bytes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{LevelController, Next};
use crate::capacity::demand::DemandConfig;
use crate::engine::{Level, LevelPlan, Workload};
use crate::measure::{round_to, LevelInfo, Tick};
use crate::profile::{DemandWatch, Sampler, WatchedProcess};
use crate::record::{Analysis, LevelRecord, ProfileAnalysis, StopReason, TierDemands};
use crate::scenario::{RequestId, Scenario};

pub struct ProfileController {
    scenario: Arc<Scenario>,
    queue: VecDeque<RequestId>,
    users: u32,
    warmup: Duration,
    max_duration: Duration,
    /// Profiling goes on at least this long, however soon demands converge.
    min_measured: Duration,
    procs: Vec<WatchedProcess>,
    config: DemandConfig,
    current: Option<Current>,
    levels: u32,
    demands: BTreeMap<String, BTreeMap<String, TierDemands>>,
}

/// The level being profiled.
struct Current {
    request: RequestId,
    watch: DemandWatch,
    measured_since: Option<Instant>,
}

impl ProfileController {
    /// `requests`: the types to profile, in order; `procs`: the processes to
    /// measure (see `watched_processes`).
    pub fn new(
        scenario: Arc<Scenario>,
        requests: Vec<RequestId>,
        users: u32,
        warmup: Duration,
        procs: Vec<WatchedProcess>,
    ) -> ProfileController {
        let settings = &scenario.capacity;
        ProfileController {
            config: DemandConfig::from_settings(settings),
            max_duration: settings.max_duration,
            min_measured: settings.min_duration.min(Duration::from_secs(5)),
            queue: requests.into(),
            users,
            warmup,
            procs,
            current: None,
            levels: 0,
            demands: BTreeMap::new(),
            scenario,
        }
    }

    pub fn demands(&self) -> &BTreeMap<String, BTreeMap<String, TierDemands>> {
        &self.demands
    }

    /// Each workload class's CPU ms per request at each tier, over the
    /// request types profiled so far (those a class never sends aside).
    pub fn class_demands(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut out = BTreeMap::new();
        for (c, class) in self.scenario.classes.iter().enumerate() {
            let visits = self.scenario.expected_sent_visits_of(c);
            let mut per_tier: BTreeMap<String, f64> = BTreeMap::new();
            let mut total = 0.0;
            for (name, tiers) in &self.demands {
                let Some(v) = self.scenario.request_id(name).map(|id| visits[id.index()]) else {
                    continue;
                };
                if !(v > 0.0 && v.is_finite()) {
                    continue;
                }
                total += v;
                for (tier, d) in tiers {
                    *per_tier.entry(tier.clone()).or_insert(0.0) += v * d.cpu_ms;
                }
            }
            if total > 0.0 {
                per_tier
                    .values_mut()
                    .for_each(|ms| *ms = round_to(*ms / total, 4));
                out.insert(class.name.clone(), per_tier);
            }
        }
        out
    }
}

impl LevelController for ProfileController {
    fn next(&mut self, _finished: &[LevelRecord]) -> Next {
        let Some(request) = self.queue.pop_front() else {
            return Next::Finish(StopReason::Completed);
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
            watch: DemandWatch::new(
                self.procs.clone(),
                self.config.clone(),
                self.users,
                // Profiled users belong to no class: they think the
                // scenario's own think time.
                self.scenario.think_time.mean().as_secs_f64(),
                Some(request),
            ),
            measured_since: None,
        });
        Next::Run(Level::Closed(LevelPlan {
            index: self.levels,
            users: self.users,
            ramp: None,
            warmup: self.warmup,
            duration: self.max_duration,
            workload: Workload::Profile {
                request,
                prerequisites,
            },
        }))
    }

    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick, sampler: Option<&Sampler>) -> bool {
        let Some(cur) = self.current.as_mut() else {
            return false;
        };
        cur.watch.on_tick(tick, sampler, !tick.warmup);
        if tick.warmup {
            return false;
        }
        let since = *cur.measured_since.get_or_insert(tick.end - tick.length);
        tick.end - since >= self.min_measured && cur.watch.finished()
    }

    fn finish_level(&mut self, level: &mut LevelRecord, _sampler: Option<&Sampler>) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let name = self.scenario.request(cur.request).name.clone();
        let status = cur.watch.status();
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
            let ms = round_to(ms, 4);
            entry.cpu_ms += ms;
            entry.cpu_ms_per_process.insert(p.name.clone(), ms);
            match state {
                Some(s) if s.ignored => entry.ignored.push(p.name.clone()),
                Some(s) if s.converged => {}
                _ => entry.converged = false,
            }
        }
        for t in tiers.values_mut() {
            t.cpu_ms = round_to(t.cpu_ms, 4);
        }
        self.demands.insert(name, tiers);
    }

    fn analysis(&self) -> Analysis {
        Analysis {
            profile: Some(ProfileAnalysis {
                demands: self.demands.clone(),
                profile_users: self.users,
                class_demands: self.class_demands(),
            }),
            ..Analysis::default()
        }
    }

    fn reason(&self) -> Option<String> {
        let cur = self.current.as_ref()?;
        Some(format!(
            "profiling `{}` alone until every server process's CPU demand converges",
            self.scenario.request(cur.request).name
        ))
    }
}
