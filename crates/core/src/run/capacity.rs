//! The capacity analysis as a `LevelController`: the level search chooses
//! the users, each level runs until its throughput is steady, every server
//! process's CPU demand has converged (section 2.1) and its figure is as
//! precise as `capacity.precision` asks (`measure::precision`), and the
//! finished level goes back to the search. With `--levels` the same
//! measurement runs exactly the levels given.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{LevelController, Next};
use crate::capacity::demand::DemandConfig;
use crate::capacity::range::{self, TierDemand};
use crate::capacity::search::{Decision, LevelOutcome, LevelSearch, SearchConfig};
use crate::capacity::steady::{halves_agree, SteadyConfig, SteadyState, SteadyVerdict};
use crate::engine::{default_warmup, Level, LevelPlan, Workload};
use crate::measure::precision::MIN_BATCHES;
use crate::measure::{round3, round_to, Batches, LevelInfo, Tick};
use crate::profile::{DemandWatch, Sampler, WatchedProcess};
use crate::record::{
    Analysis, BottleneckRecord, BusiestCpu, CapacityAnalysis, CapacityLevel,
    HiddenBottleneckRecord, LevelChoice, LevelRecord, StopReason,
};
use crate::scenario::Scenario;

/// Cycles (`R + Z`) a level runs at least before it may end.
const MIN_CYCLES: f64 = 3.0;

/// Ticks in a row the level's figure must be precise before it may end:
/// its interval is itself an estimate, and stopping at the first tick it
/// dips under the bound would pick the ticks it is too narrow in (in
/// simulation: 2–3 points of coverage).
const PRECISE_TICKS: u32 = 3;

/// The two capacity analyses: closed (users per level, this module's
/// controller) or open (the highest arrival rate, `open_capacity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnalysisKind {
    Closed,
    Open,
}

impl AnalysisKind {
    /// The analysis `scenario` gets: the one `asked` for (`None`: the
    /// command did not say); open, whatever was asked, when the levels it
    /// resumes were a rate search's; else open when the scenario gives
    /// `arrivals:`, closed when it gives users only.
    pub fn of(
        scenario: &Scenario,
        asked: Option<AnalysisKind>,
        resumed: &[LevelRecord],
    ) -> AnalysisKind {
        let open = asked == Some(AnalysisKind::Open)
            || resumed.iter().any(|l| l.rate_search.is_some())
            || (asked.is_none() && scenario.arrivals.is_some());
        match open {
            true => AnalysisKind::Open,
            false => AnalysisKind::Closed,
        }
    }
}

pub struct CapacityController {
    scenario: Arc<Scenario>,
    search: LevelSearch,
    /// The manual override: exactly these levels, each this long.
    manual: Option<(VecDeque<u32>, Duration)>,
    procs: Vec<WatchedProcess>,
    demand_config: DemandConfig,
    steady_config: SteadyConfig,
    warmup: Duration,
    /// Levels run so far, resumed ones included.
    index: u32,
    current: Option<Current>,
    /// A level was invalid: the analysis ends (`invalid_level`).
    invalid: bool,
}

struct Current {
    users: u32,
    reason: String,
    /// Response-time sum (s) and count over the level, for its cycle time.
    response_sum_s: f64,
    responses: u64,
    elapsed_s: f64,
    steady: SteadyState,
    steady_at: Option<(Instant, f64)>,
    /// Throughput of each second after warm-up: the record's
    /// `throughput_series`, whose halves must agree before the level ends.
    measured: Vec<f64>,
    /// The measured window in batches, as the record's `ci95` has them:
    /// how precise the level's figure is so far.
    batches: Batches,
    /// Consecutive ticks it has been precise enough.
    precise_ticks: u32,
    watch: DemandWatch,
}

impl CapacityController {
    /// `procs`: the server processes the agents report (empty without
    /// agents: then levels end at steady state and `N*` is unknown).
    pub fn new(scenario: Arc<Scenario>, procs: Vec<WatchedProcess>) -> CapacityController {
        let settings = &scenario.capacity;
        CapacityController {
            search: LevelSearch::new(SearchConfig::from_settings(settings)),
            manual: None,
            demand_config: DemandConfig::from_settings(settings),
            steady_config: SteadyConfig::from_settings(settings),
            warmup: default_warmup(&scenario).min(settings.min_duration),
            index: 0,
            current: None,
            invalid: false,
            procs,
            scenario,
        }
    }

    /// The manual override: run exactly `levels` for `duration` each.
    pub fn manual(mut self, levels: Vec<u32>, duration: Duration) -> CapacityController {
        self.manual = Some((levels.into(), duration));
        self
    }

    /// Continues an interrupted analysis: the finished levels are replayed
    /// into the search, which then picks up where it stopped.
    pub fn resume(mut self, finished: &[LevelRecord]) -> CapacityController {
        let outcomes: Vec<LevelOutcome> = finished.iter().map(|l| self.outcome(l)).collect();
        self.index = finished.iter().map(|l| l.level).max().unwrap_or(0);
        if let Some((queue, _)) = &mut self.manual {
            queue.retain(|u| !finished.iter().any(|l| l.users == Some(*u)));
            for o in outcomes {
                self.search.record(o);
            }
        } else {
            self.search = LevelSearch::replay(
                SearchConfig::from_settings(&self.scenario.capacity),
                &outcomes,
            );
        }
        self
    }

    /// The search's view of a finished level.
    fn outcome(&self, level: &LevelRecord) -> LevelOutcome {
        let cap = level.capacity.as_ref();
        let demands = cap
            .map(|c| {
                c.demand_ms
                    .iter()
                    .filter_map(|(key, ms)| {
                        let (tier, process) = key.split_once('/')?;
                        let watched = self
                            .procs
                            .iter()
                            .find(|p| p.tier == tier && p.name == process);
                        Some(TierDemand {
                            tier: tier.into(),
                            process: process.into(),
                            demand_s: ms / 1e3,
                            cores: watched.map_or(1, |p| p.cores),
                            host: watched.map_or_else(String::new, |p| p.host.clone()),
                            host_cores: watched.map_or(0, |p| p.host_cores),
                            cpu_wait_share: level
                                .servers
                                .get(tier)
                                .and_then(|t| t.cpu_wait_share_per_process.get(process))
                                .copied()
                                .unwrap_or(0.0),
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        // In `servers:` order, as the model names stations (`web+db`).
        let mut demands = demands;
        demands.sort_by_key(|d| {
            self.procs
                .iter()
                .position(|p| p.tier == d.tier && p.name == d.process)
                .unwrap_or(usize::MAX)
        });
        LevelOutcome {
            users: level.users.unwrap_or(0),
            throughput_rps: level.throughput_rps,
            response_time_s: level.response_time_ms.mean / 1e3,
            think_time_s: level.think_time_s.configured,
            demands,
            load_too_low: cap.is_some_and(|c| c.load_too_low),
            client_bottleneck: level.client_bottleneck,
            requests: level.requests,
            precision: level
                .ci95
                .as_ref()
                .and_then(|c| c.relative_throughput(level.throughput_rps)),
        }
    }

    fn start_level(&mut self, users: u32, reason: String, duration: Duration) -> Next {
        self.index += 1;
        self.current = Some(Current {
            users,
            reason,
            response_sum_s: 0.0,
            responses: 0,
            elapsed_s: 0.0,
            steady: SteadyState::new(self.steady_config.clone()),
            steady_at: None,
            measured: Vec::new(),
            batches: Batches::default(),
            precise_ticks: 0,
            watch: DemandWatch::new(
                self.procs.clone(),
                self.demand_config.clone(),
                users,
                self.scenario.judged_think_time(None).mean().as_secs_f64(),
                None,
            ),
        });
        Next::Run(Level::Closed(LevelPlan {
            index: self.index,
            users,
            ramp: None,
            warmup: self.warmup,
            duration,
            workload: Workload::Session,
        }))
    }
}

impl LevelController for CapacityController {
    fn next(&mut self, _finished: &[LevelRecord]) -> Next {
        if self.invalid {
            return Next::Finish(StopReason::InvalidLevel);
        }
        if let Some((queue, duration)) = &mut self.manual {
            let duration = *duration;
            return match queue.pop_front() {
                Some(users) => self.start_level(users, "manual level (--levels)".into(), duration),
                None => Next::Finish(StopReason::Completed),
            };
        }
        match self.search.next() {
            Decision::Run { users, reason } => {
                // The longest a level may run; steady state and demand
                // convergence usually end it sooner.
                let duration = self.scenario.capacity.max_duration;
                self.start_level(users, reason, duration)
            }
            Decision::Done { stop_reason } => Next::Finish(stop_reason.into()),
        }
    }

    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick, sampler: Option<&Sampler>) -> bool {
        let manual = self.manual.is_some();
        let Some(cur) = self.current.as_mut() else {
            return false;
        };
        // Steady state is judged on the whole level, ramp included: the
        // detector finds where the warm-up really ends (2.1).
        let total = tick.stats.total();
        let x = total.requests as f64 / tick.length.as_secs_f64().max(1e-3);
        let verdict = cur.steady.push(x);
        cur.measured.extend(tick.measured_throughput());
        if !tick.warmup {
            cur.batches
                .add(tick.length.as_secs_f64(), tick.active_users, &tick.stats);
        }
        let n = total.response_time.len();
        cur.response_sum_s += total.mean_ms() / 1e3 * n as f64;
        cur.responses += n;
        cur.elapsed_s += tick.length.as_secs_f64();
        // A level shorter than a few cycles (R + Z) measures the users that
        // happened to finish, not the system: past saturation R can exceed
        // the steady-state window.
        let cycle_s = self.scenario.judged_think_time(None).mean().as_secs_f64()
            + cur.response_sum_s / cur.responses.max(1) as f64;
        let enough_cycles = cur.elapsed_s >= MIN_CYCLES * cycle_s;
        if cur.steady_at.is_none() {
            if let SteadyVerdict::Steady { .. } = verdict {
                cur.steady_at = Some((tick.end, cur.steady.elapsed_s() as f64));
            }
        }
        // Demands are counted from steady state on, as the paper does.
        let measuring = !tick.warmup && cur.steady_at.is_some();
        cur.watch.on_tick(tick, sampler, measuring);
        if manual {
            return false;
        }
        let think_s = self.scenario.closed_mean_think_time().as_secs_f64();
        let precise_now = match (
            self.scenario.capacity.precision,
            cur.batches.precision(think_s),
        ) {
            (None, _) => true,
            (Some(wanted), Some(p)) => p <= wanted,
            // Nothing the rule can judge (no users' tally, no throughput):
            // steady state and the demands end the level, as without it.
            (Some(_), None) => cur.batches.full_batches() >= MIN_BATCHES,
        };
        cur.precise_ticks = if precise_now {
            cur.precise_ticks + 1
        } else {
            0
        };
        let precise =
            self.scenario.capacity.precision.is_none() || cur.precise_ticks >= PRECISE_TICKS;
        match verdict {
            SteadyVerdict::GaveUp { .. } => true,
            // The detector found where the throughput settled, but the
            // measured window starts at the fixed warm-up's end: a level
            // whose transient outlasted the warm-up (a jump past
            // saturation builds its queue for seconds) or whose machine
            // was disturbed runs on until the window's two halves agree,
            // so what it reports is steady (`steady_state`), not a mix of
            // two regimes.
            SteadyVerdict::Steady { .. } => {
                enough_cycles
                    && precise
                    && halves_agree(&cur.measured)
                    && (sampler.is_none() || self.procs.is_empty() || cur.watch.finished())
            }
            SteadyVerdict::NotYet => false,
        }
    }

    fn reruns(&self) -> bool {
        true
    }

    fn rerun(&mut self, level: &Level, why: &str) -> Option<Level> {
        let users = level.users()?;
        // The superseded level's measurements are dropped with its state.
        let cur = self.current.take()?;
        let reason = format!("{}, {why}", cur.reason);
        match self.start_level(users, reason, level.duration()) {
            Next::Run(level) => Some(level),
            Next::Finish(_) => None,
        }
    }

    fn finish_level(&mut self, level: &mut LevelRecord, _sampler: Option<&Sampler>) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let status = cur.watch.status();
        let mut demand_ms = BTreeMap::new();
        for (i, p) in self.procs.iter().enumerate() {
            // The converged estimate; failing that, the utilisation law over
            // the level's window.
            let ms = status
                .processes
                .get(i)
                .and_then(|s| s.demand_s)
                .map(|d| d * 1e3)
                .or_else(|| {
                    level
                        .servers
                        .get(&p.tier)
                        .and_then(|u| u.cpu_ms_per_request.get(&p.name).copied())
                });
            if let Some(ms) = ms {
                demand_ms.insert(format!("{}/{}", p.tier, p.name), round_to(ms, 4));
            }
        }
        level.capacity = Some(CapacityLevel {
            reason: cur.reason,
            steady_after_s: cur.steady_at.map(|(_, s)| s),
            demand_ms,
            demands_converged: status.all_converged,
            load_too_low: status.load_too_low,
            n_star: None,
            bottleneck_utilisation: None,
        });
        let outcome = self.outcome(level);
        let utilisation = range::bottleneck_utilisation(outcome.throughput_rps, &outcome.demands);
        debug_assert_eq!(outcome.users, cur.users);
        // A level Ctrl-C cut short is kept on disk, marked, but it measured
        // a fraction of a level: the analysis (saturation, maximum
        // throughput, N*) and a resumed search never count it.
        if level.invalid.is_some() {
            // Its throughput is of errors: no curve point, and the search
            // would only ask for it again.
            self.invalid = true;
        } else if !level.interrupted {
            self.search.record(outcome);
        }
        if let Some(cap) = &mut level.capacity {
            cap.n_star = self.search.n_star_estimate().map(|n| round_to(n, 1));
            cap.bottleneck_utilisation = utilisation.map(|u| round_to(u, 4));
        }
    }

    fn analysis(&self) -> Analysis {
        let s = self.search.summary();
        Analysis {
            capacity: Some(CapacityAnalysis {
                bottleneck: s.bottleneck.map(|b| BottleneckRecord {
                    tier: b.tier,
                    process: b.process,
                }),
                first_client_bottleneck_users: s.first_client_bottleneck,
                levels_chosen: s
                    .levels
                    .into_iter()
                    .map(|l| LevelChoice {
                        users: l.users,
                        reason: l.reason,
                    })
                    .collect(),
                manual: self.manual.is_some(),
                max_throughput_rps: round3(s.max_throughput_rps),
                max_throughput_users: s.max_throughput_users,
                n_min: s.n_min,
                n_star: s.n_star.map(|n| round_to(n, 1)),
                saturation_users: s.saturation_users,
                search: self
                    .manual
                    .is_none()
                    .then(|| self.scenario.capacity.search.as_str().to_string()),
                hidden_bottleneck: s.hidden.map(|h| HiddenBottleneckRecord {
                    demand_ms: round_to(h.demand_s * 1e3, 3),
                    max_throughput_rps: round_to(1.0 / h.demand_s, 1),
                    n_star: round_to(h.n_star, 1),
                    cpu_n_star: h.cpu_n_star.map(|n| round_to(n, 1)),
                    busiest_cpu: BusiestCpu {
                        tier: h.busiest_tier,
                        utilisation: round_to(h.busiest_utilisation, 4),
                        users: h.at_users,
                    },
                }),
            }),
            ..Analysis::default()
        }
    }

    fn reason(&self) -> Option<String> {
        let cur = self.current.as_ref()?;
        let n_star = self
            .search
            .n_star_estimate()
            .map_or("unknown yet".to_string(), |n| format!("{n:.0}"));
        Some(format!(
            "level {}: {} users — {}; N* ≈ {}",
            self.index, cur.users, cur.reason, n_star
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(load: &str) -> Scenario {
        let text = format!(
            "name: s\ntarget: {{base_url: \"http://127.0.0.1:1\"}}\nrequests: {{a: {{path: /}}}}\n{load}"
        );
        crate::scenario::parse(&text, std::path::Path::new("s.yaml")).expect("a scenario")
    }

    #[test]
    fn arrivals_make_an_open_analysis_unless_the_command_asks_for_a_closed_one() {
        use AnalysisKind::{Closed, Open};
        let users = scenario("users: 5\n");
        let arrivals = scenario("arrivals: {rate: 5/s}\n");
        assert_eq!(AnalysisKind::of(&users, None, &[]), Closed);
        assert_eq!(AnalysisKind::of(&arrivals, None, &[]), Open);
        assert_eq!(AnalysisKind::of(&arrivals, Some(Closed), &[]), Closed);
        assert_eq!(AnalysisKind::of(&users, Some(Open), &[]), Open);
    }

    /// One measured second of 40 users completing 40 requests of 5 ms:
    /// `squares` their Σ(2n + 1), half of them by the first half.
    fn tick(seq: u64, squares: u64) -> Tick {
        let mut stats = crate::measure::IntervalStats::new(1);
        for _ in 0..40 {
            stats.per_request[0].record_response(Duration::from_millis(5));
        }
        stats.users = crate::measure::UserTally {
            counting: true,
            completions: 40,
            squares,
            first_half: 20,
        };
        Tick {
            seq,
            length: Duration::from_secs(1),
            end: Instant::now(),
            warmup: false,
            stats,
            active_users: 40,
        }
    }

    /// The tick at which a level of 40 users ends (None: not in 60), its
    /// users completing as `squares(t)` (Σ(2n + 1) of second `t`) says.
    fn ends_at(precision: &str, squares: impl Fn(u64) -> u64) -> Option<u64> {
        let s = scenario(&format!(
            "think_time: 1s\ncapacity: {{min_duration: 2s, window: 1s, max_duration: 60s, precision: {precision}}}\n"
        ));
        // A search's level (no agents): not a manual one, which runs its
        // whole duration.
        let mut c = CapacityController::new(Arc::new(s), Vec::new());
        c.start_level(40, "test".into(), Duration::from_secs(60));
        let info = LevelInfo {
            index: 1,
            users: 40,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(60),
            rate: None,
        };
        (0..60).find(|&t| c.on_tick(&info, &tick(t, squares(t)), None))
    }

    #[test]
    fn a_level_runs_until_its_throughput_is_precise_three_ticks_in_a_row() {
        // Every user completes one request a second: Σn² grows by
        // 40·(2t + 1), the users' counts never differ, and every second
        // is alike: precise from the first interval on (5 batches), so
        // the level ends at its third precise tick.
        let even = |t: u64| 40 * (2 * t + 1);
        assert_eq!(ends_at("3%", even), Some(6));
        // Half the users complete two a second, half none: the users'
        // completions spread ±16% of the throughput, whatever the length.
        let uneven = |t: u64| 20 * (4 * t + 1) + 20 * (4 * t + 3);
        assert_eq!(ends_at("3%", uneven), None);
        // Without the rule, steady state ends it as before.
        assert!(ends_at("off", uneven).is_some_and(|t| t < 10));
    }
}
