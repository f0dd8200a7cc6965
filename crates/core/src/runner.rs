//! Runs a planned series of load levels against a scenario's target and
//! keeps the results directory current as it goes: the shared path of
//! `run`, `demo` and the manual capacity override.

use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::{self, EngineError, LevelPlan, StopSignal};
use crate::measure::{LevelInfo, Tick, TickSink};
use crate::profile::{tier_usage, AgentError, AgentSet, Sampler};
use crate::record::{now_rfc3339, LevelRecord, RunRecord};
use crate::results::{ResultsDir, ResultsError};
use crate::scenario::Scenario;

/// Hears about a run as it goes (the live view, tests).
pub trait RunObserver: TickSink {
    fn level_started(&mut self, _plan: &LevelPlan) {}
    fn level_finished(&mut self, _level: &LevelRecord) {}
    fn warning(&mut self, _message: &str) {}
}

/// An observer that ignores everything.
pub struct Quiet;

impl TickSink for Quiet {
    fn on_tick(&mut self, _: &LevelInfo, _: &Tick) {}
}
impl RunObserver for Quiet {}

pub struct RunPlan {
    /// "run", "demo", "capacity"…
    pub mode: String,
    pub levels: Vec<LevelPlan>,
    pub out: PathBuf,
    /// Sample the profiler agents named under `servers:` (when there are any).
    pub use_agents: bool,
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

/// How often the agents are read (AutoPerf's profilers report every second).
const SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Why a run ended.
pub const STOP_COMPLETED: &str = "completed";
pub const STOP_INTERRUPTED: &str = "interrupted";

pub fn run_levels(
    scenario: &Arc<Scenario>,
    plan: &RunPlan,
    observer: &mut dyn RunObserver,
    stop: &StopSignal,
) -> Result<RunRecord, RunError> {
    engine::probe_target(scenario)?;
    let agents = if plan.use_agents {
        AgentSet::from_scenario(scenario)?
    } else {
        AgentSet::default()
    };
    agents.check_all()?;
    let sampler = (!agents.is_empty()).then(|| Sampler::start(agents.clone(), SAMPLE_PERIOD));
    let mut dir = ResultsDir::create(&plan.out)?;
    let mut record = RunRecord::new(&plan.mode, scenario);
    record.analysis.insert(
        "stop_reason".into(),
        serde_json::Value::String("running".into()),
    );
    dir.write_run(&record)?;
    for level in &plan.levels {
        if stop.is_stopped() {
            break;
        }
        observer.level_started(level);
        let run = {
            let mut sinks: [&mut dyn TickSink; 2] = [&mut dir, &mut *observer];
            engine::run_level(scenario, level, &mut sinks, stop)?
        };
        let mut level_record = LevelRecord::from_run(&run, scenario);
        if let Some(sampler) = &sampler {
            let t = &run.totals;
            // A reading just past the window's end still describes it.
            let readings =
                sampler.readings_between(t.measure_start, t.measure_end + SAMPLE_PERIOD / 2);
            let (servers, notes) = tier_usage(
                &scenario.servers,
                &agents,
                &readings,
                level_record.throughput_rps,
            );
            level_record.servers = servers;
            sampler.prune_before(t.measure_end);
            for w in sampler.take_warnings().into_iter().chain(notes) {
                let w = format!("level {}: {w}", level_record.level);
                observer.warning(&w);
                record.warnings.push(w);
            }
        }
        dir.append_level(&level_record)?;
        if level_record.client_bottleneck {
            let w = format!(
                "level {} ({} users): client bottleneck — achieved think time {:.3}s against {:.3}s configured; the generator, not the server, may limit throughput here",
                level_record.level,
                level.users,
                level_record.think_time_s.achieved,
                level_record.think_time_s.configured
            );
            observer.warning(&w);
            record.warnings.push(w);
        }
        observer.level_finished(&level_record);
        record.levels.push(level_record);
        dir.write_run(&record)?;
    }
    let reason = if stop.is_stopped() {
        STOP_INTERRUPTED
    } else {
        STOP_COMPLETED
    };
    record.analysis.insert(
        "stop_reason".into(),
        serde_json::Value::String(reason.into()),
    );
    record.finished_at = Some(now_rfc3339());
    dir.write_run(&record)?;
    Ok(record)
}
