//! The run wing: everything that drives load levels. `run_levels` runs the
//! levels a `LevelController` chooses against a scenario's target, samples
//! the profiler agents, and keeps the results directory current as it goes.
//!
//! - `fixed`: a given list of levels (`run`, the manual override), and the
//!   plan of `autoperf run`'s one level.
//! - `capacity`: the capacity analysis (AutoPerf 2.1) as a controller.
//! - `profile`: the profiling mode (2.1.4) as a controller.
//! - `open_capacity`: the open-workload search for the highest arrival rate
//!   that meets the SLOs, optionally per resource value (`--vary`).
//!
//! - `vary`: `--vary`, one open search per resource value.
//! - `validity`: levels whose data cannot be trusted (failed requests).
//! - `completions`: when requests completed, to divide the agents' figures.
//!
//! The pure algorithms these lean on live below this wing, in `capacity/`
//! and `profile/`; nothing there imports from here.

pub mod capacity;
mod completions;
pub mod fixed;
pub mod open_capacity;
pub mod profile;
pub mod validity;
pub mod vary;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{self, EngineError, Level, StopSignal};
use crate::measure::{LevelInfo, Tick, TickSink};
use crate::profile::{tier_usage, AgentError, AgentSet, Sampler};
use crate::record::{now_rfc3339, Analysis, LevelRecord, Mode, RunRecord, StopReason};
use crate::results::{self, ResultsDir, ResultsError};
use crate::scenario::Scenario;
use completions::Completions;

/// How often the agents are read (AutoPerf's profilers report every second).
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// Hears about a run as it goes (the live view, tests).
pub trait RunObserver: TickSink {
    fn level_started(&mut self, _level: &Level) {}
    fn level_finished(&mut self, _level: &LevelRecord) {}
    fn warning(&mut self, _message: &str) {}
    /// A warning no one may miss (every request failed): shown even when
    /// the observer is otherwise quiet.
    fn alarm(&mut self, message: &str) {
        self.warning(message)
    }
    /// A controller's note on what it does next and why.
    fn note(&mut self, _message: &str) {}
}

/// An observer that ignores everything.
pub struct Quiet;

impl TickSink for Quiet {
    fn on_tick(&mut self, _: &LevelInfo, _: &Tick) {}
}
impl RunObserver for Quiet {}

/// What a controller wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Run(Level),
    /// No more levels; the reason goes to `analysis.stop_reason`.
    Finish(StopReason),
}

/// Chooses the levels of a run and may end a level early.
pub trait LevelController {
    /// The next level, given every level finished so far.
    fn next(&mut self, finished: &[LevelRecord]) -> Next;

    /// Every tick of the running level; returning true ends the level now
    /// (steady state reached, demands converged). `sampler` reads the
    /// agents, when there are any.
    fn on_tick(&mut self, _level: &LevelInfo, _tick: &Tick, _sampler: Option<&Sampler>) -> bool {
        false
    }

    /// A finished level before it is written: the controller may add to it.
    fn finish_level(&mut self, _level: &mut LevelRecord, _sampler: Option<&Sampler>) {}

    /// `run.json`'s `analysis` so far, refreshed after every level; the
    /// runner sets its `stop_reason`.
    fn analysis(&self) -> Analysis {
        Analysis::default()
    }

    /// Why the controller chose what it is running now, for the live view.
    fn reason(&self) -> Option<String> {
        None
    }

    /// Idle time before the level `next` chose: an overloaded level leaves
    /// a backlog the server works off before the next one is measured.
    fn pause(&mut self) -> Duration {
        Duration::ZERO
    }

    /// `level` cannot stand (the generator limited it and more workers
    /// will carry the next one, or it lost a worker and the others are
    /// left): the level to run instead (the same load, a new index; `why`
    /// is added to its reason), or `None` to take the finished level as
    /// it is.
    fn rerun(&mut self, _level: &Level, _why: &str) -> Option<Level> {
        None
    }

    /// Whether `rerun` may give a level (asked before waiting for workers
    /// to come back for one).
    fn reruns(&self) -> bool {
        false
    }
}

/// Why a finished level is run again instead of kept.
const MORE_WORKERS: &str = "again on more workers (the generator was the bottleneck)";
const WORKERS_LEFT: &str = "again after a worker was lost mid-level";

/// When `level` showed the generator as the bottleneck, the pool can add
/// workers and the controller wants the level again: (workers before,
/// after, the level to run).
fn scale_out(
    record: &LevelRecord,
    level: &Level,
    invalid: bool,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
) -> Option<(usize, usize, Level)> {
    if !record.client_bottleneck || record.interrupted || invalid || record.incomplete.is_some() {
        return None;
    }
    let pool = plan.sources.workers.as_ref()?;
    if !pool.can_scale_out() {
        return None;
    }
    // The pool first: should its workers have gone meanwhile, the level
    // stands as measured; more workers for the next level do no harm.
    let (before, after) = pool.scale_out()?;
    let rerun = controller.rerun(level, MORE_WORKERS)?;
    Some((before, after, rerun))
}

/// How long a level that lost a worker waits for the pool to answer in
/// full again before it runs on the workers left: a crashed pod's
/// container restarts in seconds, an evicted one is rescheduled in tens.
const REPLACE_WAIT: Duration = Duration::from_secs(30);

/// When a worker was lost mid-level (the level is `incomplete`: it ran
/// under-loaded), the controller may want the level again on the workers
/// that answer: as many as it ran on when they come back within
/// `REPLACE_WAIT` (an idle worker of the pool, or the lost one restarted
/// under its address, a StatefulSet's pod), else those left, never fewer
/// than `--min-workers`. Once per level, so a pool whose workers keep
/// dying still ends the analysis (`invalid_level`). `None` when the
/// level stands as measured; `Some(Err(why))` when it could not run again.
fn replace_lost(
    record: &LevelRecord,
    level: &Level,
    tried: bool,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
    observer: &mut dyn RunObserver,
    stop: &StopSignal,
) -> Option<Result<Level, String>> {
    if record.incomplete.is_none() || record.interrupted || tried || !controller.reruns() {
        return None;
    }
    let pool = plan.sources.workers.as_ref()?;
    let want = record.workers.len().max(pool.min()).max(1);
    let give_up = Instant::now() + REPLACE_WAIT;
    let mut answering = pool.answering(want);
    if answering < want {
        observer.note(&format!(
            "level {}: waiting up to {} s for {want} workers to answer before running it again",
            record.level,
            REPLACE_WAIT.as_secs()
        ));
    }
    while answering < want && Instant::now() < give_up {
        if stop.wait(Duration::from_secs(1)) {
            return None;
        }
        answering = pool.answering(want);
    }
    if answering == 0 || answering < pool.min() {
        return Some(Err(format!(
            "level {}: not run again: {answering} worker{} answered within {} s, --min-workers asks for {} (start more, or lower --min-workers to go on with fewer)",
            record.level,
            if answering == 1 { "" } else { "s" },
            REPLACE_WAIT.as_secs(),
            pool.min()
        )));
    }
    controller.rerun(level, WORKERS_LEFT).map(Ok)
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

pub struct RunPlan {
    pub mode: Mode,
    pub out: PathBuf,
    /// Sample the profiler agents named under `servers:` (when there are any).
    pub use_agents: bool,
    /// Levels already measured (resuming): they are not run again.
    pub resumed: Vec<LevelRecord>,
    /// Where each level's load comes from: this host's processes and
    /// source addresses, or workers on other hosts.
    pub sources: engine::LoadSources,
    /// What was asked, kept in run.json's `plan` for `--resume`.
    pub asked: Option<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// Feeds ticks to the controller and stops the level when it says so.
struct ControllerSink<'a> {
    controller: &'a mut dyn LevelController,
    sampler: Option<&'a Sampler>,
    level_stop: StopSignal,
}

impl TickSink for ControllerSink<'_> {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        if self.controller.on_tick(level, tick, self.sampler) {
            self.level_stop.stop();
        }
    }
}

pub fn run_levels(
    scenario: &Arc<Scenario>,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
    observer: &mut dyn RunObserver,
    stop: &StopSignal,
) -> Result<RunRecord, RunError> {
    // Where the results go is checked first: no request is sent when they
    // could not be kept.
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
    agents.check_all()?;
    let sampler = (!agents.is_empty()).then(|| Sampler::start(agents.clone(), SAMPLE_PERIOD));
    let names = scenario.requests.iter().map(|r| r.name.clone()).collect();
    let mut dir = if plan.resumed.is_empty() {
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
    dir.write_run(&record)?;
    // A level to run again on other workers, instead of the controller's next.
    let mut again: Option<Level> = None;
    // The running level replaces one that lost a worker.
    let mut replacing_lost = false;
    let reason = loop {
        if stop.is_stopped() {
            break StopReason::Interrupted;
        }
        let next = match again.take() {
            Some(level) => Next::Run(level),
            None => controller.next(&record.levels),
        };
        let level = match next {
            Next::Run(level) => level,
            Next::Finish(reason) => break reason,
        };
        if let Some(why) = controller.reason() {
            observer.note(&why);
        }
        let pause = controller.pause();
        if !pause.is_zero() {
            observer.note(&format!(
                "pausing {:.0} s: the last level left a backlog the target works off first",
                pause.as_secs_f64().ceil()
            ));
            if stop.wait(pause) {
                break StopReason::Interrupted;
            }
        }
        match &plan.sources.workers {
            Some(pool) if pool.active() != usize::MAX => observer.note(&format!(
                "level {}: on {} worker{} of the pool",
                level.index(),
                pool.active(),
                if pool.active() == 1 { "" } else { "s" }
            )),
            Some(_) => {}
            None => {
                let placement =
                    engine::fleet::place(scenario, level.connections(), &plan.sources.here)?;
                if let Some(note) = placement.note() {
                    observer.note(&format!("level {}: {note}", level.index()));
                }
            }
        }
        observer.level_started(&level);
        let level_stop = stop.child();
        let mut completions = Completions::new(sampler.is_some());
        let run = {
            let mut watcher = ControllerSink {
                controller: &mut *controller,
                sampler: sampler.as_ref(),
                level_stop: level_stop.clone(),
            };
            let mut sinks: [&mut dyn TickSink; 4] =
                [&mut dir, &mut *observer, &mut watcher, &mut completions];
            engine::run_level(scenario, &level, &plan.sources, &mut sinks, &level_stop)?
        };
        let mut level_record = LevelRecord::from_run(&run, scenario);
        for w in &run.warnings {
            let w = format!("level {}: {w}", level_record.level);
            observer.warning(&w);
            record.warnings.push(w);
        }
        // A level the controller ended is complete; one Ctrl-C ended is
        // kept, marked, and never taken as a finished level when resuming.
        level_record.interrupted = stop.is_stopped() && run.totals.interrupted;
        if let Some(sampler) = &sampler {
            let t = &run.totals;
            // A reading just past the window's end still describes it.
            let readings =
                sampler.readings_between(t.measure_start, t.measure_end + SAMPLE_PERIOD / 2);
            let (servers, notes) =
                tier_usage(&scenario.servers, &agents, &readings, &|from, to| {
                    completions.between(from, to)
                });
            level_record.servers = servers;
            for w in sampler.take_warnings().into_iter().chain(notes) {
                let w = format!("level {}: {w}", level_record.level);
                observer.warning(&w);
                record.warnings.push(w);
            }
        }
        if let Some(w) = unanswered(&level_record, scenario) {
            observer.warning(&w);
            record.warnings.push(w);
        }
        if let Some(w) = data_exhausted(&level_record, scenario) {
            observer.warning(&w);
            record.warnings.push(w);
        }
        if let Some(w) = all_failed(&level_record, plan.mode) {
            observer.alarm(&w);
            record.warnings.push(w);
        }
        let invalid = validity::judge(&level_record, scenario.capacity.max_error_rate)
            .filter(|_| !level_record.interrupted);
        level_record.invalid = invalid.as_ref().map(|i| i.reason.clone());
        // The generator was the bottleneck and the pool has more workers:
        // the level runs again on more of them, instead of ending the
        // search (AutoPerf's future work: a bank of load generators). Or
        // a worker was lost: the level runs again on those left.
        let load = level_record.users.map_or_else(
            || format!("{} arrivals/s", level_record.rate_rps.unwrap_or(0.0)),
            |u| format!("{u} users"),
        );
        let redo = match scale_out(&level_record, &level, invalid.is_some(), plan, controller) {
            Some((before, after, rerun)) => Some((
                format!(
                    "the generator was the bottleneck on {before} worker{}{}; running it again on {after}",
                    if before == 1 { "" } else { "s" },
                    late_workers(&level_record),
                ),
                rerun,
            )),
            None => match replace_lost(
                &level_record,
                &level,
                replacing_lost,
                plan,
                controller,
                observer,
                stop,
            ) {
                Some(Ok(rerun)) => {
                    let lost = level_record.incomplete.as_deref().unwrap_or_default();
                    Some((format!("{lost}; running it again"), rerun))
                }
                Some(Err(why)) => {
                    observer.warning(&why);
                    record.warnings.push(why);
                    None
                }
                None => None,
            },
        };
        if let Some((what, rerun)) = redo {
            let w = format!(
                "level {} ({load}): {what} as level {}",
                level_record.level,
                rerun.index()
            );
            observer.note(&w);
            record.warnings.push(w);
            if let Some(sampler) = &sampler {
                sampler.prune_before(run.totals.measure_end);
            }
            replacing_lost = level_record.incomplete.is_some();
            record.superseded.push(level_record);
            dir.write_run(&record)?;
            again = Some(rerun);
            continue;
        }
        replacing_lost = false;
        if let Some(i) = &invalid {
            let w = format!(
                "level {}: NOT TRUSTWORTHY — {}",
                level_record.level, i.reason
            );
            observer.alarm(&w);
            record.warnings.push(w);
        }
        controller.finish_level(&mut level_record, sampler.as_ref());
        if let Some(sampler) = &sampler {
            sampler.prune_before(run.totals.measure_end);
        }
        dir.append_level(&level_record)?;
        let open = matches!(level, Level::Open(_));
        if level_record.client_bottleneck && open {
            let w = format!(
                "level {} ({} arrivals/s): client bottleneck — arrivals started late (p99 {:.1} ms{}) or not at all; the generator, not the server, may limit throughput here",
                level_record.level,
                level_record.rate_rps.unwrap_or(0.0),
                level_record
                    .client
                    .arrival_lateness_ms
                    .as_ref()
                    .map_or(0.0, |l| l.p99),
                late_workers(&level_record)
            );
            observer.warning(&w);
            record.warnings.push(w);
        } else if level_record.client_bottleneck {
            let w = format!(
                "level {} ({} users): client bottleneck — achieved think time {:.3}s against {:.3}s configured{}; the generator, not the server, may limit throughput here",
                level_record.level,
                level.users().unwrap_or(0),
                level_record.think_time_s.achieved,
                level_record.think_time_s.configured,
                late_workers(&level_record)
            );
            observer.warning(&w);
            record.warnings.push(w);
        }
        observer.level_finished(&level_record);
        record.levels.push(level_record);
        record.analysis = controller.analysis();
        dir.write_run(&record)?;
        // A dead target is not measured level after level: what was
        // measured before it went is kept.
        if invalid.is_some_and(|i| i.target_down) {
            break StopReason::TargetDown;
        }
    };
    record.analysis = controller.analysis();
    record.analysis.stop_reason = reason;
    record.finished_at = Some(now_rfc3339());
    dir.write_run(&record)?;
    Ok(record)
}

/// Names the workers whose timers fired later than scheduling noise
/// explains, latest first — the level's lateness merges every worker's, so
/// one starved worker in a pool would otherwise go unnamed:
/// `", timers late on w1 (p99 85.7 ms)"`. Empty when none was.
fn late_workers(level: &LevelRecord) -> String {
    let floor_ms = crate::capacity::client::LATENESS_FLOOR_S * 1e3;
    let mut late: Vec<(f64, &str)> = level
        .workers
        .iter()
        .filter_map(|w| Some((w.lateness_p99_ms()?, w.name.as_str())))
        .filter(|&(p99, _)| p99 > floor_ms)
        .collect();
    if late.is_empty() {
        return String::new();
    }
    late.sort_by(|a, b| b.0.total_cmp(&a.0));
    let named: Vec<String> = late
        .iter()
        .map(|(p99, name)| format!("{name} (p99 {p99:.1} ms)"))
        .collect();
    format!(", timers late on {}", named.join(", "))
}

/// Says so when every request of a level failed: its response times, if
/// any, are those of errors, and nothing it measured describes a working
/// system, whatever the thresholds say.
fn all_failed(level: &LevelRecord, mode: Mode) -> Option<String> {
    if level.requests == 0 || level.errors < level.requests {
        return None;
    }
    let kinds: Vec<String> = level
        .errors_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    // Profiling sends one request type alone: a page behind a login has
    // no cookie unless the login is a prerequisite.
    let hint = match mode {
        Mode::Profile => "; a request that needs earlier steps (a login, a cookie, an extracted value) needs them listed in the scenario's `prerequisites:`",
        _ => "",
    };
    Some(format!(
        "level {}: EVERY request failed ({} of {}: {}); nothing here measures a working system{hint}",
        level.level,
        level.errors,
        level.requests,
        kinds.join(", ")
    ))
}

/// A `unique` data feeder ran out of rows during the level: say which, how
/// many requests found none, and the fix.
fn data_exhausted(level: &LevelRecord, scenario: &Scenario) -> Option<String> {
    let count = *level.errors_by_kind.get("data_exhausted")?;
    let unique: Vec<String> = scenario
        .feeders
        .iter()
        .filter(|f| f.mode == crate::scenario::FeederMode::Unique)
        .map(|f| format!("`{}`, {} rows", f.name, f.rows.len()))
        .collect();
    Some(format!(
        "level {}: {count} request{} found no row left in a unique data feeder ({}) and {} not sent, their users stopped; give it more rows, or `mode: sequential` to go round again",
        level.level,
        if count == 1 { "" } else { "s" },
        unique.join("; "),
        if count == 1 { "was" } else { "were" }
    ))
}

/// Says so when requests got no answer at all (refused, reset, timed out,
/// no broker): unlike error statuses, those mean the target itself is down,
/// gone mid-run or overwhelmed. A stray timeout in a million is not news:
/// it takes one request in a thousand.
fn unanswered(level: &LevelRecord, scenario: &Scenario) -> Option<String> {
    let (kinds, count) = level
        .errors_by_kind
        .iter()
        .filter(|(kind, _)| !kind.starts_with("http_"))
        .fold((Vec::new(), 0u64), |(mut kinds, count), (kind, n)| {
            kinds.push(format!("{kind} {n}"));
            (kinds, count + n)
        });
    if count == 0 || count * 1000 < level.requests {
        return None;
    }
    Some(format!(
        "level {}: {count} of {} requests got no answer from {} ({}): is it still up, and not overloaded?",
        level.level,
        level.requests,
        scenario.target.endpoint,
        kinds.join(", ")
    ))
}
