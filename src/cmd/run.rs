//! `autoperf run`: one level, its thresholds checked, and against
//! `--baseline` when given.

use std::io::Write;
use std::sync::Arc;

use autoperf_core::load::Spacing;
use autoperf_core::record::{Mode, StopReason};
use autoperf_core::report::text;
use autoperf_core::run::fixed::{single_level, FixedLevels, SingleLevel};
use autoperf_core::run::RunPlan;
use autoperf_core::thresholds;

use super::execute::execute_plan;
use super::report::finish;
use super::sources::load_sources;
use super::{load, out_dir, Outcome};
use crate::cli::{ArrivalSpacing, RunArgs};
use crate::compare::Baseline;
use crate::{exit, Failure};

pub fn run(args: RunArgs) -> Outcome {
    if args.trace {
        return trace(&args);
    }
    let baseline = Baseline::read(&args.baseline)?;
    let scenario = Arc::new(load(&args.scenario, &args.set.overrides)?);
    let ask = SingleLevel {
        users: args.users,
        rate: args.rate,
        spacing: args.arrivals.map(spacing),
        max_in_flight: args.max_in_flight,
        duration: args.duration,
        warmup: args.warmup,
    };
    let level = single_level(&scenario, &ask)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", args.scenario.display())))?;
    let mut controller = FixedLevels::new(vec![level]);
    let out = out_dir(&args.output.out, &scenario);
    let plan = RunPlan {
        mode: Mode::Run,
        out: out.clone(),
        use_agents: !args.no_agents,
        resumed: Vec::new(),
        sources: load_sources(Some(&args.generators), &scenario, false)?,
        asked: None,
    };
    let mut record = execute_plan(&scenario, plan, &mut controller, 1, &args.output)?;
    let passed = thresholds::check_run(&scenario, &mut record);
    let summary = match record.levels.first() {
        Some(level) => {
            let mut t = text::untrustworthy(&record);
            t.push_str(&text::level_table(level));
            for c in record.analysis.thresholds.iter().flatten() {
                t.push_str(&format!("{c}\n"));
            }
            t
        }
        None => String::new(),
    };
    finish(&out, &record, &args.output, &summary)?;
    let code = if record.analysis.stop_reason == StopReason::Interrupted {
        exit::INTERRUPTED
    } else if record.levels.iter().any(|l| l.invalid.is_some()) {
        exit::UNTRUSTWORTHY
    } else if passed {
        exit::OK
    } else {
        exit::THRESHOLD_FAILED
    };
    baseline.judge(code, &out, args.output.json)
}

/// `run --trace`: a few users' exchanges on stdout, then what they came to.
fn trace(args: &RunArgs) -> Outcome {
    let scenario = Arc::new(load(&args.scenario, &args.set.overrides)?);
    let users = args.users.unwrap_or(1).max(1);
    let sessions = args.sessions.unwrap_or(1);
    let summary =
        autoperf_core::engine::trace(scenario, users, sessions, Box::new(std::io::stdout()))
            .map_err(|e| Failure::cannot_proceed(format!("{}: {e}", args.scenario.display())))?;
    // A closed pipe (`| head`) is not an error of the trace's.
    let _ = writeln!(
        std::io::stdout(),
        "\ntraced {users} user(s) × {sessions} session(s): {} exchanges, {} failed, {} skipped",
        summary.exchanges,
        summary.failed,
        summary.skipped
    );
    Ok(if summary.failed == 0 {
        exit::OK
    } else {
        exit::THRESHOLD_FAILED
    })
}

/// `--arrivals` as the engine takes it.
fn spacing(a: ArrivalSpacing) -> Spacing {
    match a {
        ArrivalSpacing::Even => Spacing::Even,
        ArrivalSpacing::Poisson => Spacing::Poisson { seed: 0 },
    }
}
