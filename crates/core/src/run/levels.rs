//! `run_levels`: the levels a controller chooses, run one after another
//! against the scenario's target — checked before the first request,
//! measured, run again when they cannot stand (see `redo`), and kept on
//! disk as each ends, so an interruption loses nothing measured.

use std::sync::Arc;

use super::completions::Completions;
use super::redo::{remeasure_short_of_cpu, replace_lost, scale_out};
use super::validity::{self, Invalid};
use super::warnings::{
    all_failed, answered_wrong, body_too_large, client_bottleneck, data_exhausted,
    generator_throttled, late_workers, servers_short_of_cpu, unanswered,
};
use super::{LevelController, Next, RunError, RunObserver, RunPlan, SAMPLE_PERIOD};
use crate::engine::{self, Level, LevelRun, StopSignal};
use crate::measure::{LevelInfo, Tick, TickSink};
use crate::profile::promql::PromqlSlos;
use crate::profile::{tier_usage, AgentSet, Sampler};
use crate::record::{now_rfc3339, LevelRecord, RunRecord, StopReason};
use crate::results::{self, ResultsDir};
use crate::scenario::Scenario;

/// Runs the levels `controller` chooses until it finishes, `stop` is
/// given, or the target dies; returns the run's record, which is on disk
/// too (`plan.out`).
pub fn run_levels(
    scenario: &Arc<Scenario>,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
    observer: &mut dyn RunObserver,
    stop: &StopSignal,
) -> Result<RunRecord, RunError> {
    let mut run = Session::open(scenario, plan, controller, observer, stop)?;
    // A level to run again on other workers, instead of the controller's next.
    let mut again: Option<Level> = None;
    // The running level replaces one that lost a worker, or one whose
    // servers were short of CPU: either is run again once.
    let mut replacing_lost = false;
    let mut remeasuring = false;
    let reason = loop {
        if stop.is_stopped() {
            break StopReason::Interrupted;
        }
        let next = match again.take() {
            Some(level) => Next::Run(level),
            None => controller.next(&run.record.levels),
        };
        let level = match next {
            Next::Run(level) => level,
            Next::Finish(reason) => break reason,
        };
        if !run.announce(&level, controller)? {
            break StopReason::Interrupted;
        }
        let measured = run.measure(&level, controller)?;
        if let Some(rerun) =
            run.redo(&measured, &level, (replacing_lost, remeasuring), controller)?
        {
            replacing_lost = measured.record.incomplete.is_some();
            remeasuring =
                !replacing_lost && crate::record::short_of_cpu(&measured.record.servers).is_some();
            again = Some(rerun);
            continue;
        }
        replacing_lost = false;
        remeasuring = false;
        let target_down = measured.invalid.as_ref().is_some_and(|i| i.target_down);
        run.keep(measured, &level, controller)?;
        // A dead target is not measured level after level: what was
        // measured before it went is kept.
        if target_down {
            break StopReason::TargetDown;
        }
    };
    run.finish(controller, reason)
}

/// A run in progress: what its levels share.
struct Session<'a> {
    scenario: &'a Arc<Scenario>,
    plan: &'a RunPlan,
    observer: &'a mut dyn RunObserver,
    stop: &'a StopSignal,
    agents: AgentSet,
    sampler: Option<Sampler>,
    /// The PromQL thresholds' queries, read over each level.
    promql: PromqlSlos,
    /// The lag thresholds' consumer groups, read twice a second.
    #[cfg(feature = "kafka")]
    lag: Option<crate::profile::kafka_lag::LagWatch>,
    dir: ResultsDir,
    record: RunRecord,
}

/// A level as measured, before it is kept or run again.
struct Measured {
    run: LevelRun,
    record: LevelRecord,
    /// Why its figures cannot be trusted, if they cannot.
    invalid: Option<Invalid>,
}

impl<'a> Session<'a> {
    /// Before the first level: the results can be kept, the target (or
    /// every worker) answers, the agents answer; the results directory
    /// made (or reopened, resuming) and run.json written.
    fn open(
        scenario: &'a Arc<Scenario>,
        plan: &'a RunPlan,
        controller: &mut dyn LevelController,
        observer: &'a mut dyn RunObserver,
        stop: &'a StopSignal,
    ) -> Result<Session<'a>, RunError> {
        // Where the results go is checked first: no request is sent when
        // they could not be kept.
        results::check_room(&plan.out)?;
        // With workers, they load the target: each must reach it.
        match &plan.sources.workers {
            Some(pool) => observer.note(&pool.wait_ready(scenario, stop)?),
            None => engine::probe_target(scenario)?,
        }
        let agents = if plan.use_agents {
            AgentSet::from_scenario(scenario)?
        } else {
            AgentSet::default()
        };
        let first = agents.check_all()?;
        let promql = PromqlSlos::from_scenario(scenario)?;
        promql.check()?;
        #[cfg(feature = "kafka")]
        let lag = match crate::profile::kafka_lag::LagWatch::from_scenario(scenario)? {
            Some(mut lag) => {
                lag.check()?;
                lag.start();
                observer.watching_lag(lag.latest());
                Some(lag)
            }
            None => None,
        };
        let sampler = (!agents.is_empty()).then(|| Sampler::start(agents.clone(), SAMPLE_PERIOD));
        let names = scenario.requests.iter().map(|r| r.name.clone()).collect();
        let dir = if plan.resumed.is_empty() {
            ResultsDir::create(&plan.out, names)?
        } else {
            let kept: Vec<u32> = plan.resumed.iter().map(|l| l.level).collect();
            ResultsDir::reopen(&plan.out, names, &kept)?
        };
        let mut record = RunRecord::new(plan.mode, scenario);
        record.plan = plan.asked.clone();
        record.levels = plan.resumed.clone();
        if !plan.resumed.is_empty() {
            record.superseded = superseded_in(&plan.out);
            // Resumed on as many workers as it had scaled out to.
            let had = record.levels.iter().chain(&record.superseded);
            if let (Some(pool), Some(n)) = (
                plan.sources.workers.as_ref(),
                had.map(|l| l.workers.len()).max(),
            ) {
                pool.use_at_least(n);
            }
        }
        record.analysis = controller.analysis();
        // What the hosts cannot measure is said once, before the first
        // level; the rest is measured.
        for w in agents.missing_controllers(&first) {
            observer.warning(&w);
            record.warnings.push(w);
        }
        dir.write_run(&record)?;
        Ok(Session {
            scenario,
            plan,
            observer,
            stop,
            agents,
            sampler,
            promql,
            #[cfg(feature = "kafka")]
            lag,
            dir,
            record,
        })
    }

    /// Says what runs next, and why; waits out the controller's pause.
    /// False when interrupted meanwhile.
    fn announce(
        &mut self,
        level: &Level,
        controller: &mut dyn LevelController,
    ) -> Result<bool, RunError> {
        if let Some(why) = controller.reason() {
            self.observer.note(&why);
        }
        let pause = controller.pause();
        if !pause.is_zero() {
            self.observer.note(&format!(
                "pausing {:.0} s: the last level left a backlog the target works off first",
                pause.as_secs_f64().ceil()
            ));
            if self.stop.wait(pause) {
                return Ok(false);
            }
        }
        match &self.plan.sources.workers {
            Some(pool) if pool.active() != usize::MAX => self.observer.note(&format!(
                "level {}: on {} worker{} of the pool",
                level.index(),
                pool.active(),
                if pool.active() == 1 { "" } else { "s" }
            )),
            Some(_) => {}
            None => {
                let placement = engine::fleet::place(
                    self.scenario,
                    level.connections(),
                    &self.plan.sources.here,
                )?;
                if let Some(note) = placement.note() {
                    self.observer
                        .note(&format!("level {}: {note}", level.index()));
                }
            }
        }
        self.observer.level_started(level);
        Ok(true)
    }

    /// Runs `level` and makes its record: what the agents measured over
    /// it, what it says beyond its figures, whether it can be trusted.
    fn measure(
        &mut self,
        level: &Level,
        controller: &mut dyn LevelController,
    ) -> Result<Measured, RunError> {
        let scenario = self.scenario;
        let level_stop = self.stop.child();
        let mut completions = Completions::new(self.sampler.is_some());
        let (run, undecided) = {
            let mut watcher = ControllerSink {
                controller: &mut *controller,
                sampler: self.sampler.as_ref(),
                level_stop: level_stop.clone(),
                scenario,
                #[cfg(feature = "kafka")]
                lag: self.lag.as_ref(),
                measure_start: None,
                held: None,
                next_look: None,
            };
            let mut sinks: [&mut dyn TickSink; 4] = [
                &mut self.dir,
                &mut *self.observer,
                &mut watcher,
                &mut completions,
            ];
            let run =
                engine::run_level(scenario, level, &self.plan.sources, &mut sinks, &level_stop)?;
            (run, watcher.held)
        };
        let mut record = LevelRecord::from_run(&run, scenario);
        for w in &run.warnings {
            self.warn(format!("level {}: {w}", record.level));
        }
        // Held to its end: said so when the whole window, not only the last
        // look, leaves the SLO undecided.
        #[cfg(feature = "kafka")]
        let undecided = match (undecided, &self.lag) {
            (Some(_), Some(lag)) => {
                lag.undecided(scenario, run.totals.measure_start, run.totals.measure_end)
            }
            _ => None,
        };
        if let Some(why) = undecided.filter(|_| !self.stop.is_stopped()) {
            self.warn(format!(
                "level {}: still undecided at the level's longest ({why}): judged on the trend alone; a longer capacity.max_duration would decide it",
                record.level
            ));
        }
        // A level the controller ended is complete; one Ctrl-C ended is
        // kept, marked, and never taken as a finished level when resuming.
        record.interrupted = self.stop.is_stopped() && run.totals.interrupted;
        if let Some(sampler) = &self.sampler {
            let t = &run.totals;
            // A reading just past the window's end still describes it.
            let readings =
                sampler.readings_between(t.measure_start, t.measure_end + SAMPLE_PERIOD / 2);
            let figures = tier_usage(
                &scenario.servers,
                &self.agents,
                &readings,
                &|from, to| completions.between(from, to),
                record.level,
            );
            record.servers = figures.usage;
            self.dir.append_server_seconds(&figures.seconds)?;
            let warnings: Vec<String> = sampler
                .take_warnings()
                .into_iter()
                .chain(figures.warnings)
                .collect();
            for w in warnings {
                self.warn(format!("level {}: {w}", record.level));
            }
        }
        if !self.promql.is_empty() {
            let t = &run.totals;
            let (figures, warnings) = self.promql.over(t.measure_start, t.measure_end);
            record.promql = figures;
            for w in warnings {
                self.warn(format!("level {}: {w}", record.level));
            }
        }
        #[cfg(feature = "kafka")]
        if let Some(lag) = &self.lag {
            let t = &run.totals;
            let over = lag.over(record.level, t.measure_start, t.measure_end);
            record.kafka_lag = over.figures;
            self.dir.append_lag_readings(&over.readings)?;
            for w in over.warnings {
                self.warn(format!("level {}: {w}", record.level));
            }
        }
        if let Some(w) = unanswered(&record, scenario) {
            self.warn(w);
        }
        if let Some(w) = servers_short_of_cpu(&record) {
            self.warn(w);
        }
        if let Some(w) = generator_throttled(&record) {
            self.warn(w);
        }
        if let Some(w) = answered_wrong(&record) {
            self.warn(w);
        }
        if let Some(w) = body_too_large(&record, scenario) {
            self.warn(w);
        }
        if let Some(w) = data_exhausted(&record, scenario) {
            self.warn(w);
        }
        if let Some(w) = all_failed(&record, self.plan.mode) {
            self.observer.alarm(&w);
            self.record.warnings.push(w);
        }
        let invalid = validity::judge(&record, scenario.capacity.max_error_rate)
            .filter(|_| !record.interrupted);
        record.invalid = invalid.as_ref().map(|i| i.reason.clone());
        Ok(Measured {
            run,
            record,
            invalid,
        })
    }

    /// The level to run instead of keeping `measured`, if it cannot
    /// stand: the generator was the bottleneck and the pool has more
    /// workers, a worker was lost and the others are left, or the servers
    /// were short of CPU. `tried`: the level is itself a re-run after a
    /// lost worker, after a shortage of CPU. The level measured is kept in
    /// run.json's `superseded`.
    fn redo(
        &mut self,
        measured: &Measured,
        level: &Level,
        tried: (bool, bool),
        controller: &mut dyn LevelController,
    ) -> Result<Option<Level>, RunError> {
        let (replacing_lost, remeasuring) = tried;
        let record = &measured.record;
        let invalid = measured.invalid.is_some();
        let redo = match scale_out(record, level, invalid, self.plan, controller) {
            Some((before, after, rerun)) => Some((
                format!(
                    "the generator was the bottleneck on {before} worker{}{}; running it again on {after}",
                    if before == 1 { "" } else { "s" },
                    late_workers(record),
                ),
                rerun,
            )),
            None => match replace_lost(
                record,
                level,
                replacing_lost,
                self.plan,
                controller,
                &mut *self.observer,
                self.stop,
            ) {
                Some(Ok(rerun)) => {
                    let lost = record.incomplete.as_deref().unwrap_or_default();
                    Some((format!("{lost}; running it again"), rerun))
                }
                Some(Err(why)) => {
                    self.warn(why);
                    None
                }
                None => remeasure_short_of_cpu(record, level, invalid, remeasuring, controller),
            },
        };
        let Some((what, rerun)) = redo else {
            return Ok(None);
        };
        let load = record.users.map_or_else(
            || format!("{} arrivals/s", record.rate_rps.unwrap_or(0.0)),
            |u| format!("{u} users"),
        );
        let w = format!(
            "level {} ({load}): {what} as level {}",
            record.level,
            rerun.index()
        );
        self.observer.note(&w);
        self.record.warnings.push(w);
        if let Some(sampler) = &self.sampler {
            sampler.prune_before(measured.run.totals.measure_end);
        }
        self.record.superseded.push(record.clone());
        self.dir.write_run(&self.record)?;
        Ok(Some(rerun))
    }

    /// Keeps a measured level: the controller adds its part, and the
    /// level goes to disk and into run.json.
    fn keep(
        &mut self,
        measured: Measured,
        level: &Level,
        controller: &mut dyn LevelController,
    ) -> Result<(), RunError> {
        let Measured {
            run,
            mut record,
            invalid,
        } = measured;
        if let Some(i) = &invalid {
            let w = format!("level {}: NOT TRUSTWORTHY — {}", record.level, i.reason);
            self.observer.alarm(&w);
            self.record.warnings.push(w);
        }
        controller.finish_level(&mut record, self.sampler.as_ref());
        if let Some(sampler) = &self.sampler {
            sampler.prune_before(run.totals.measure_end);
        }
        self.dir.append_level(&record)?;
        if let Some(w) = client_bottleneck(&record, level) {
            self.warn(w);
        }
        self.observer.level_finished(&record);
        self.record.levels.push(record);
        self.record.analysis = controller.analysis();
        self.dir.write_run(&self.record)?;
        Ok(())
    }

    /// The run's end: why it ended, when, and the record on disk.
    fn finish(
        mut self,
        controller: &mut dyn LevelController,
        reason: StopReason,
    ) -> Result<RunRecord, RunError> {
        self.record.analysis = controller.analysis();
        self.record.analysis.stop_reason = reason;
        self.record.finished_at = Some(now_rfc3339());
        self.dir.write_run(&self.record)?;
        Ok(self.record)
    }

    /// A warning for the live view and for run.json.
    fn warn(&mut self, w: String) {
        self.observer.warning(&w);
        self.record.warnings.push(w);
    }
}

/// Feeds ticks to the controller and stops the level when it says so,
/// unless a lag trend SLO is still undecided (`LagWatch::undecided`): the
/// level then goes on, up to its longest, and looks again when its
/// measured window has doubled. Few planned looks, not one every second:
/// an interval looked at until it happens to clear the bound would be
/// wrong far more often than one time in twenty.
struct ControllerSink<'a> {
    controller: &'a mut dyn LevelController,
    sampler: Option<&'a Sampler>,
    level_stop: StopSignal,
    scenario: &'a Scenario,
    #[cfg(feature = "kafka")]
    lag: Option<&'a crate::profile::kafka_lag::LagWatch>,
    /// When the measured window began (the first tick past warm-up).
    measure_start: Option<std::time::Instant>,
    /// The SLO that kept the level going past the controller's stop.
    held: Option<String>,
    /// The measured window at which to look at it again.
    next_look: Option<std::time::Duration>,
}

impl ControllerSink<'_> {
    /// The lag trend SLO still undecided over the measured window so far.
    fn undecided(&self, now: std::time::Instant) -> Option<String> {
        #[cfg(feature = "kafka")]
        if let (Some(lag), Some(from)) = (self.lag, self.measure_start) {
            return lag.undecided(self.scenario, from, now);
        }
        let _ = (now, self.scenario);
        None
    }
}

impl TickSink for ControllerSink<'_> {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        if !tick.warmup && self.measure_start.is_none() {
            self.measure_start = Some(tick.end - tick.length);
        }
        if !self.controller.on_tick(level, tick, self.sampler) {
            // The next look stays planned: a controller that flickers must
            // not bring back a look every tick.
            self.held = None;
            return;
        }
        let measured = self
            .measure_start
            .map_or(std::time::Duration::ZERO, |start| tick.end - start);
        if self.next_look.is_some_and(|at| measured < at) {
            return;
        }
        self.held = self.undecided(tick.end);
        match self.held {
            None => self.level_stop.stop(),
            Some(_) => self.next_look = Some(measured * 2),
        }
    }
}

/// The levels an earlier run in `out` measured and ran again on more
/// workers (they live in run.json only): a resumed run keeps them.
fn superseded_in(out: &std::path::Path) -> Vec<LevelRecord> {
    std::fs::read(out.join("run.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|run| serde_json::from_value(run.get("superseded")?.clone()).ok())
        .unwrap_or_default()
}
