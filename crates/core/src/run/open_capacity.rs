//! The open-workload capacity analysis as a `LevelController`: the rate
//! search (`capacity::rate`) chooses arrival rates, each level runs to
//! steady state, and every finished level is judged against the SLOs — the
//! scenario's thresholds and "at least 95% of the rate delivered"
//! (Theodolite's rule; of the arrivals due, when the generator kept its
//! schedule). A level that failed while the generator could not
//! keep the rate says nothing about the system: it ends the search with
//! `client_bottleneck`, never a system limit.
//!
//! With `--vary NAME=v1,v2,…` the search runs once per value; between
//! series a `Reconfigure` hook (the user's `--apply` command and the
//! `--ready` wait) changes the system under test. The result is
//! Theodolite's scalability benchmark: the highest passing rate per
//! resource value, and the resource each load needs.
//!
//! - `generator`: why the generator, not the system, may have limited a
//!   level, and which failed SLOs that can explain.
//! - `tests`: the judging rules, on level records.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{LevelController, Next};
use crate::capacity::rate::{
    RateDecision, RateOutcome, RateSearch, RateSearchConfig, RateStop, RateVerdict,
};
use crate::capacity::steady::{SteadyConfig, SteadyState, SteadyVerdict};
use crate::engine::{default_warmup, Level, OpenPlan, DEFAULT_MAX_IN_FLIGHT};
use crate::load::Spacing;
use crate::measure::{round3, round_to, LevelInfo, Tick};
use crate::profile::Sampler;
use crate::record::{
    Analysis, DemandPoint, LevelRecord, RateAnalysis, RateChoice, RateFound, RateLevel,
    SeriesResult, SloVerdict, StopReason, ThresholdResult, Unit,
};
use crate::scenario::{ArrivalSpacing, Scenario};
use crate::thresholds;

mod generator;
pub(crate) use generator::generator_bound;

/// The start rate when neither `--rate` nor `arrivals:` gives one.
pub(crate) const DEFAULT_START_RPS: f64 = 10.0;

/// The longest pause between levels for a backlog to drain.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Changes the system under test to one `--vary` value and waits until it
/// is ready; an error ends the analysis (`apply_failed`).
pub type Reconfigure = Box<dyn FnMut(&str) -> Result<(), String>>;

/// `--vary NAME=v1,v2,…`: the values still to run and the hook that
/// applies them. The first value is applied before the analysis starts.
pub struct Vary {
    pub name: String,
    pub values: Vec<String>,
    pub apply: Reconfigure,
}

pub struct OpenCapacityController {
    scenario: Arc<Scenario>,
    config: RateSearchConfig,
    search: RateSearch,
    min_achieved: f64,
    /// Requests per session (the CBMG's expected visits): delivered
    /// sessions per second are successful requests per second over this.
    visits: f64,
    steady_config: SteadyConfig,
    warmup: Duration,
    spacing: Spacing,
    max_in_flight: u32,
    index: u32,
    current: Option<Current>,
    pause: Duration,
    vary: Option<Vary>,
    /// Index into `vary.values` of the series running now.
    series_at: usize,
    /// Finished series (with `--vary`).
    series: Vec<SeriesResult>,
    /// This series' levels: (level, rate, reason, verdict, first failed SLO).
    levels: Vec<(u32, f64, String, SloVerdict, Option<ThresholdResult>)>,
}

struct Current {
    rate: f64,
    reason: String,
    steady: SteadyState,
    /// Measured time so far (after the warm-up).
    measured: Duration,
}

impl OpenCapacityController {
    pub fn new(scenario: Arc<Scenario>, start_rps: Option<f64>) -> OpenCapacityController {
        let settings = &scenario.capacity;
        let arrivals = scenario.arrivals.as_ref();
        let start = start_rps
            .or_else(|| {
                arrivals.and_then(|a| a.stages.iter().map(|s| s.rate_per_s).reduce(f64::max))
            })
            .filter(|r| *r > 0.0)
            .unwrap_or(DEFAULT_START_RPS);
        let config = RateSearchConfig {
            start_rps: start,
            factor: settings.rate_factor,
            precision: settings.rate_precision,
            ..RateSearchConfig::default()
        };
        let visits: f64 = scenario.expected_sent_visits().iter().sum();
        OpenCapacityController {
            search: RateSearch::new(config.clone()),
            config,
            min_achieved: settings.min_achieved,
            visits: if visits.is_finite() && visits >= 1.0 {
                visits
            } else {
                1.0
            },
            steady_config: SteadyConfig::from_settings(settings),
            warmup: default_warmup(&scenario).min(settings.min_duration),
            spacing: match arrivals.map(|a| a.spacing) {
                Some(ArrivalSpacing::Even) => Spacing::Even,
                _ => Spacing::Poisson { seed: 0 },
            },
            max_in_flight: arrivals
                .and_then(|a| a.max_in_flight)
                .unwrap_or(DEFAULT_MAX_IN_FLIGHT)
                .max(1),
            index: 0,
            current: None,
            pause: Duration::ZERO,
            vary: None,
            series_at: 0,
            series: Vec::new(),
            levels: Vec::new(),
            scenario,
        }
    }

    /// Runs the search once per value; the first is applied already.
    pub fn vary(mut self, vary: Vary) -> OpenCapacityController {
        self.vary = Some(vary);
        self
    }

    /// Continues an interrupted search (one series): the finished levels
    /// (Ctrl-C's cut-short one left out) are replayed into it.
    pub fn resume(mut self, finished: &[LevelRecord]) -> OpenCapacityController {
        for level in finished {
            let (Some(rate), Some(judged)) = (level.rate_rps, &level.rate_search) else {
                continue;
            };
            self.index = self.index.max(level.level);
            let verdict = outcome_verdict(judged);
            self.levels.push((
                level.level,
                rate,
                judged.reason.clone(),
                judged.verdict,
                judged.slos.iter().find(|r| !r.passed).cloned(),
            ));
            self.search.record(RateOutcome {
                rate_rps: rate,
                verdict,
            });
        }
        self
    }

    /// The value of `--vary` running now, as the level records keep it.
    fn series_key(&self) -> BTreeMap<String, String> {
        self.vary
            .as_ref()
            .and_then(|v| Some((v.name.clone(), v.values.get(self.series_at)?.clone())))
            .into_iter()
            .collect()
    }

    /// Judges a finished level against every SLO.
    fn judge(&self, level: &LevelRecord) -> (RateVerdict, RateLevel) {
        let rate = level.rate_rps.unwrap_or(0.0);
        let ok = level.requests.saturating_sub(level.errors) as f64;
        let delivered = ok / level.duration_s.max(1e-9) / self.visits;
        let generator = generator_bound(level);
        let offered = match generator {
            None => offered_rps(level, rate),
            // A generator behind its schedule counts arrivals when it gets
            // to them, and those it never reached not at all: its count of
            // arrivals due is what it managed, not what was offered.
            Some(_) => rate,
        };
        let achieved = ThresholdResult {
            source: format!(
                "achieved >= {}% of the rate",
                (self.min_achieved * 1e3).round() / 10.0
            ),
            passed: offered > 0.0 && delivered >= self.min_achieved * offered,
            actual: Some(if offered > 0.0 {
                round_to(delivered / offered, 4)
            } else {
                0.0
            }),
            bound: self.min_achieved,
            unit: Unit::Fraction,
            note: None,
        };
        let mut slos = thresholds::evaluate(&self.scenario, level);
        slos.push(achieved);
        // Nothing delivered measures no capacity: the target is down or
        // every request failed.
        let saturated = delivered > 0.0 && delivered < self.min_achieved * offered;
        let failed = slos.iter().find(|r| !r.passed);
        let generator = generator
            .filter(|limit| {
                slos.iter()
                    .filter(|r| !r.passed)
                    .all(|slo| limit.explains(slo, offered, delivered, level.duration_s))
            })
            .map(|limit| limit.why());
        let (verdict, outcome) = match (failed, &generator) {
            (None, _) => (RateVerdict::Pass, SloVerdict::Pass),
            (Some(_), Some(why)) => (
                RateVerdict::GeneratorBound { why: why.clone() },
                SloVerdict::GeneratorBound,
            ),
            (Some(slo), None) => (
                RateVerdict::Fail {
                    slo: slo.source.clone(),
                    saturated_rps: saturated.then_some(delivered),
                },
                SloVerdict::Fail,
            ),
        };
        let record = RateLevel {
            reason: String::new(),
            verdict: outcome,
            slos,
            delivered_rps: round3(delivered),
            saturated,
            generator_bound: generator,
            series: self.series_key(),
        };
        (verdict, record)
    }

    /// What the search running now found.
    fn found(&self) -> RateFound {
        let s = self.search.summary();
        RateFound {
            max_passing_rate_rps: s.max_passing_rate_rps,
            first_failing_rate_rps: s.first_failing_rate_rps,
            failed_slo: self.failed_slo(),
            capacity_rps: s.capacity_rps.map(round3),
            generator_limit_rps: s.generator_limit_rps,
        }
    }

    /// The figures of the series running now.
    fn series_result(&self, stop_reason: StopReason, error: Option<String>) -> SeriesResult {
        let vary = self.vary.as_ref();
        SeriesResult {
            name: vary.map(|v| v.name.clone()).unwrap_or_default(),
            value: vary
                .and_then(|v| v.values.get(self.series_at).cloned())
                .unwrap_or_default(),
            found: self.found(),
            stop_reason,
            levels: self.levels.iter().map(|l| l.0).collect(),
            error,
        }
    }

    /// The SLO the first failing rate failed, as measured there.
    fn failed_slo(&self) -> Option<ThresholdResult> {
        let fail = self.search.summary().first_failing_rate_rps?;
        self.levels
            .iter()
            .rev()
            .find(|l| (l.1 - fail).abs() < 1e-9 && l.4.is_some())
            .and_then(|l| l.4.clone())
    }

    /// Ends the series running now; with `--vary`, applies the next value
    /// and starts its search. `None` when there is no next series.
    fn next_series(&mut self, stop: RateStop) -> Option<Result<(), String>> {
        let vary = self.vary.as_ref()?;
        let result = self.series_result(stop.into(), None);
        self.series.push(result);
        self.series_at += 1;
        let value = vary.values.get(self.series_at)?.clone();
        let applied = (self.vary.as_mut()?.apply)(&value);
        if let Err(e) = &applied {
            let failed = self.series_result(StopReason::ApplyFailed, Some(e.clone()));
            self.levels.clear();
            self.series.push(SeriesResult {
                levels: Vec::new(),
                found: RateFound::default(),
                ..failed
            });
            return Some(applied);
        }
        self.search = RateSearch::new(self.config.clone());
        self.levels.clear();
        self.pause = Duration::ZERO;
        Some(Ok(()))
    }

    /// Theodolite's demand: for each series' highest passing rate (the
    /// loads), the first resource value, in the order given, that passes it.
    fn demand(&self) -> Vec<DemandPoint> {
        let mut loads: Vec<f64> = self
            .series
            .iter()
            .filter_map(|s| s.found.max_passing_rate_rps)
            .collect();
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        loads
            .into_iter()
            .map(|load| DemandPoint {
                load_rps: load,
                resource: self
                    .series
                    .iter()
                    .find(|s| s.found.max_passing_rate_rps.is_some_and(|p| p >= load))
                    .map(|s| s.value.clone()),
            })
            .collect()
    }
}

/// The verdict a recorded level gave, for a resumed search.
fn outcome_verdict(judged: &RateLevel) -> RateVerdict {
    match judged.verdict {
        SloVerdict::Pass => RateVerdict::Pass,
        SloVerdict::GeneratorBound => RateVerdict::GeneratorBound {
            why: judged.generator_bound.clone().unwrap_or_default(),
        },
        SloVerdict::Fail => RateVerdict::Fail {
            slo: judged
                .slos
                .iter()
                .find(|r| !r.passed)
                .map_or_else(|| "an SLO".into(), |r| r.source.clone()),
            saturated_rps: judged.saturated.then_some(judged.delivered_rps),
        },
    }
}

/// The rate `level` offered: its arrivals due in the measured window, per
/// second, or the nominal `rate` when it counted none. Poisson arrivals
/// offer the rate give or take √n (±2.2% at 200/s over 10 s): judged
/// against the nominal rate, a level whose system served every arrival
/// (1,896 of 1,897 due, 200/s asked) failed "achieved ≥ 95%". Only for a
/// generator that kept its schedule (`judge`).
fn offered_rps(level: &LevelRecord, rate: f64) -> f64 {
    match &level.arrivals {
        Some(a) if a.due > 0 && level.duration_s > 0.0 => a.due as f64 / level.duration_s,
        _ => rate,
    }
}

impl LevelController for OpenCapacityController {
    fn next(&mut self, _finished: &[LevelRecord]) -> Next {
        loop {
            match self.search.next() {
                RateDecision::Run { rate_rps, reason } => {
                    self.index += 1;
                    self.current = Some(Current {
                        rate: rate_rps,
                        reason,
                        steady: SteadyState::new(self.steady_config.clone()),
                        measured: Duration::ZERO,
                    });
                    let mut plan = OpenPlan::constant(
                        self.index,
                        rate_rps,
                        self.warmup,
                        self.scenario.capacity.max_duration,
                    );
                    plan.spacing = self.spacing;
                    plan.max_in_flight = self.max_in_flight;
                    return Next::Run(Level::Open(plan));
                }
                RateDecision::Done { stop_reason } => match self.next_series(stop_reason) {
                    Some(Ok(())) => continue,
                    Some(Err(_)) => return Next::Finish(StopReason::ApplyFailed),
                    None => return Next::Finish(stop_reason.into()),
                },
            }
        }
    }

    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick, _sampler: Option<&Sampler>) -> bool {
        let Some(cur) = self.current.as_mut() else {
            return false;
        };
        let total = tick.stats.total();
        let x = total.requests as f64 / tick.length.as_secs_f64().max(1e-3);
        // Steady state is judged on the whole level (the detector finds
        // where the warm-up really ends), but the SLOs are judged on the
        // measured window: it lasts at least `min_duration`.
        let verdict = cur.steady.push(x);
        if !tick.warmup {
            cur.measured += tick.length;
        }
        match verdict {
            SteadyVerdict::GaveUp { .. } => true,
            SteadyVerdict::Steady { .. } => cur.measured >= self.scenario.capacity.min_duration,
            SteadyVerdict::NotYet => false,
        }
    }

    fn reruns(&self) -> bool {
        true
    }

    fn rerun(&mut self, level: &Level, why: &str) -> Option<Level> {
        let Level::Open(plan) = level else {
            return None;
        };
        let cur = self.current.as_mut()?;
        // The same rate from scratch, on other workers.
        cur.reason = format!("{}, {why}", cur.reason);
        cur.steady = SteadyState::new(self.steady_config.clone());
        cur.measured = Duration::ZERO;
        self.index += 1;
        Some(Level::Open(OpenPlan {
            index: self.index,
            ..plan.clone()
        }))
    }

    fn finish_level(&mut self, level: &mut LevelRecord, _sampler: Option<&Sampler>) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let (verdict, mut judged) = self.judge(level);
        judged.reason = cur.reason.clone();
        // A level Ctrl-C cut short measured a fraction of a level: kept on
        // disk, marked, never judged.
        if !level.interrupted {
            if let RateVerdict::Fail {
                saturated_rps: Some(delivered),
                ..
            } = &verdict
            {
                // The sessions that arrived over what was delivered are
                // still queued at the server: let it work them off.
                let backlog = (cur.rate - delivered).max(0.0) * (level.duration_s + level.warmup_s);
                self.pause = Duration::from_secs_f64(backlog / delivered.max(1e-3)).min(MAX_PAUSE);
            } else {
                self.pause = Duration::ZERO;
            }
            self.levels.push((
                level.level,
                cur.rate,
                cur.reason,
                judged.verdict,
                judged.slos.iter().find(|r| !r.passed).cloned(),
            ));
            self.search.record(RateOutcome {
                rate_rps: cur.rate,
                verdict,
            });
        }
        level.rate_search = Some(judged);
    }

    fn pause(&mut self) -> Duration {
        std::mem::take(&mut self.pause)
    }

    fn analysis(&self) -> Analysis {
        let mut series = self.series.clone();
        let running = self
            .vary
            .as_ref()
            .is_some_and(|v| self.series_at < v.values.len())
            && self.series.len() <= self.series_at;
        if running {
            series.push(self.series_result(StopReason::Running, None));
        }
        Analysis {
            rates: Some(RateAnalysis {
                found: self.found(),
                min_achieved: self.min_achieved,
                rate_precision: self.config.precision,
                rates_chosen: self
                    .levels
                    .iter()
                    .map(|l| RateChoice {
                        rate_rps: l.1,
                        reason: l.2.clone(),
                        verdict: l.3,
                    })
                    .collect(),
                series,
                demand: self.demand(),
            }),
            ..Analysis::default()
        }
    }

    fn reason(&self) -> Option<String> {
        let cur = self.current.as_ref()?;
        let (pass, fail) = self.search.bracket();
        let mark = |r: Option<f64>, m: &str| r.map_or("?".to_string(), |r| format!("{r}/s {m}"));
        let series = self
            .series_key()
            .into_iter()
            .map(|(k, v)| format!(" [{k}={v}]"))
            .collect::<String>();
        Some(format!(
            "level {}{series}: {}/s — {}; bracket {} … {}",
            self.index,
            cur.rate,
            cur.reason,
            mark(pass, "✓"),
            mark(fail, "✗")
        ))
    }
}

#[cfg(test)]
mod tests;
