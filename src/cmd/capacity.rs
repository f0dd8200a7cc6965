//! `autoperf capacity`: the closed analysis (users per level, automatic
//! or `--levels`) or the open one (the highest arrival rate, once or per
//! `--vary` value), resumed with `--resume`; and the exit code every
//! analysis ends with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use autoperf_core::profile::{watched_processes, AgentSet};
use autoperf_core::record::{CapacityPlan, LevelRecord, Mode, RunRecord, StopReason};
use autoperf_core::report::text;
use autoperf_core::results::{read_levels, read_run};
use autoperf_core::run::capacity::{AnalysisKind, CapacityController};
use autoperf_core::run::open_capacity::{OpenCapacityController, Reconfigure, Vary};
use autoperf_core::run::vary;
use autoperf_core::run::{LevelController, RunPlan};
use autoperf_core::scenario::Scenario;

use super::execute::execute_plan;
use super::predict::capacity_prediction;
use super::report::finish;
use super::sources::load_sources;
use super::{load, out_dir, Outcome};
use crate::cli::CapacityArgs;
use crate::compare::Baseline;
use crate::resume;
use crate::{exit, Failure};

pub fn capacity(args: CapacityArgs) -> Outcome {
    let baseline = Baseline::read(&args.baseline)?;
    let json = args.output.json;
    let (code, out) = capacity_analysis(args)?;
    baseline.judge(code, &out, json)
}

/// The analysis, its exit code and its results directory.
fn capacity_analysis(mut args: CapacityArgs) -> Result<(u8, PathBuf), Failure> {
    if let Some(dir) = args.resume.clone() {
        let bad = |e: String| Failure::bad_input(format!("--resume {}: {e}", dir.display()));
        let saved = read_run(&dir).map_err(|e| bad(e.to_string()))?;
        // Results written before plans were kept have none: the flags given
        // are the plan then.
        if let Some(plan) = saved.plan {
            let plan = CapacityPlan::from_value(plan).map_err(bad)?;
            resume::continue_with(&plan, &mut args).map_err(bad)?;
        }
    }
    let mut scenario = load(&args.scenario, &args.set.overrides)?;
    if let Some(search) = args.search {
        scenario.capacity.search = search;
    }
    let scenario = Arc::new(scenario);
    let (out, resumed) = capacity_out(&args, &scenario)?;
    if AnalysisKind::of(&scenario, asked_kind(&args), &resumed) == AnalysisKind::Open {
        return capacity_open(args, scenario, out, resumed);
    }
    let (agents, first) = if args.no_agents {
        (AgentSet::default(), Vec::new())
    } else {
        let agents =
            AgentSet::from_scenario(&scenario).map_err(|e| Failure::bad_input(e.to_string()))?;
        let first = agents
            .check_all()
            .map_err(|e| Failure::cannot_proceed(e.to_string()))?;
        (agents, first)
    };
    let procs = watched_processes(&scenario, &agents, &first);
    let mut controller = CapacityController::new(scenario.clone(), procs);
    if !args.levels.is_empty() {
        if args.levels.contains(&0) {
            return Err(Failure::bad_input(
                "--levels: every level needs at least 1 user",
            ));
        }
        let duration = args
            .duration
            .expect("clap requires --duration with --levels");
        controller = controller.manual(args.levels.clone(), duration);
    }
    if !resumed.is_empty() {
        controller = controller.resume(&resumed);
    }
    let record = run_capacity(&scenario, &args, &mut controller, &out, resumed)?;
    let model = match args.no_predict {
        true => None,
        false => capacity_prediction(&out, &record, &scenario, args.predict)?,
    };
    let summary = format!(
        "\n{}{}\n{}{}",
        text::untrustworthy(&record),
        text::levels_table(&record.levels),
        text::capacity_summary(&record),
        model.unwrap_or_default()
    );
    finish(&out, &record, &args.output, &summary)?;
    Ok((capacity_exit(&record), out))
}

/// The analysis the flags ask for: open with --open, --rate or --vary;
/// closed with --levels or --search; else the scenario says.
fn asked_kind(args: &CapacityArgs) -> Option<AnalysisKind> {
    if args.open || args.rate.is_some() || args.vary.is_some() {
        Some(AnalysisKind::Open)
    } else if !args.levels.is_empty() || args.search.is_some() {
        Some(AnalysisKind::Closed)
    } else {
        None
    }
}

/// 4 when the analysis stopped on a level that measured errors, not the
/// system; 3 when `--apply` could not reconfigure it; 130 on Ctrl-C; else 0.
pub(super) fn capacity_exit(record: &RunRecord) -> u8 {
    match record.analysis.stop_reason {
        StopReason::Interrupted => exit::INTERRUPTED,
        r if r.untrustworthy() => exit::UNTRUSTWORTHY,
        StopReason::ApplyFailed => exit::CANNOT_PROCEED,
        _ => exit::OK,
    }
}

/// `autoperf capacity` on an open workload: the highest arrival rate that
/// meets the SLOs, once, or per `--vary` value.
fn capacity_open(
    args: CapacityArgs,
    scenario: Arc<Scenario>,
    out: PathBuf,
    resumed: Vec<LevelRecord>,
) -> Result<(u8, PathBuf), Failure> {
    let quiet = args.output.quiet || args.output.json;
    let mut controller = OpenCapacityController::new(scenario.clone(), args.rate);
    if let Some(text) = &args.vary {
        let (name, values) = vary::parse_vary(text).map_err(Failure::bad_input)?;
        let command = args
            .apply
            .clone()
            .expect("clap requires --apply with --vary");
        let ready = args.ready.clone();
        let timeout = args.ready_timeout;
        let target = scenario.clone();
        let reconfigure = {
            let name = name.clone();
            move |value: &str| -> Result<(), String> {
                if !quiet {
                    eprintln!("--vary {name}={value}: {command}");
                }
                vary::apply(&command, &name, value, quiet)?;
                let took = match &ready {
                    Some(url) => vary::wait_ready(url, timeout)?,
                    None => vary::wait_target(&target, timeout)?,
                };
                if !quiet {
                    eprintln!(
                        "--vary {name}={value}: ready after {:.1} s",
                        took.as_secs_f64()
                    );
                }
                Ok(())
            }
        };
        let mut apply: Reconfigure = Box::new(reconfigure);
        // The first value before anything runs: the target is probed then.
        apply(&values[0]).map_err(Failure::cannot_proceed)?;
        controller = controller.vary(Vary {
            name,
            values,
            apply,
        });
    }
    if !resumed.is_empty() {
        controller = controller.resume(&resumed);
    }
    let record = run_capacity(&scenario, &args, &mut controller, &out, resumed)?;
    let summary = format!(
        "\n{}{}\n{}",
        text::untrustworthy(&record),
        text::rate_levels_table(&record.levels),
        text::rate_summary(&record)
    );
    finish(&out, &record, &args.output, &summary)?;
    Ok((capacity_exit(&record), out))
}

/// Where a capacity analysis writes: `--resume DIR` and the levels it
/// finished there (a level Ctrl-C cut short, or one that measured errors
/// and not the system, is run again), or a new directory.
fn capacity_out(
    args: &CapacityArgs,
    scenario: &Scenario,
) -> Result<(PathBuf, Vec<LevelRecord>), Failure> {
    match &args.resume {
        Some(dir) => {
            let finished: Vec<LevelRecord> = read_levels(dir)
                .map_err(|e| Failure::bad_input(format!("--resume: {e}")))?
                .into_iter()
                .filter(|l| !l.interrupted && l.invalid.is_none())
                .collect();
            Ok((dir.clone(), finished))
        }
        None => Ok((out_dir(&args.output.out, scenario), Vec::new())),
    }
}

/// Runs a capacity controller (closed or open) into `out`, after the
/// `resumed` levels it was given.
fn run_capacity(
    scenario: &Arc<Scenario>,
    args: &CapacityArgs,
    controller: &mut dyn LevelController,
    out: &Path,
    resumed: Vec<LevelRecord>,
) -> Result<RunRecord, Failure> {
    if !resumed.is_empty() && !args.output.quiet && !args.output.json {
        eprintln!(
            "resuming {}: {} levels already measured",
            out.display(),
            resumed.len()
        );
    }
    execute_plan(
        scenario,
        RunPlan {
            mode: Mode::Capacity,
            out: out.to_path_buf(),
            use_agents: !args.no_agents,
            resumed,
            sources: load_sources(Some(&args.generators), scenario, true)?,
            asked: resume::plan_of(args).to_value(),
        },
        controller,
        args.levels.len(),
        &args.output,
    )
}
