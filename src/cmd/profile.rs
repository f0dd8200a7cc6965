//! `autoperf profile`: each request type alone, its service demand on
//! every server measured by the agents until it converges.

use std::sync::Arc;

use autoperf_core::profile::{watched_processes, AgentSet};
use autoperf_core::record::{Mode, StopReason};
use autoperf_core::report::text;
use autoperf_core::run::profile::ProfileController;
use autoperf_core::run::RunPlan;
use autoperf_core::scenario::RequestId;

use super::capacity::capacity_exit;
use super::execute::execute_plan;
use super::report::finish;
use super::sources::load_sources;
use super::{load, out_dir, Outcome};
use crate::cli::ProfileArgs;
use crate::Failure;

pub fn profile(args: ProfileArgs) -> Outcome {
    let scenario = Arc::new(load(&args.scenario, &args.set.overrides)?);
    if scenario.servers.is_empty() {
        return Err(Failure::bad_input(format!(
            "{}: profiling measures server processes, but the scenario has no `servers:` (name each tier's processes and its agent)",
            args.scenario.display()
        )));
    }
    let mut requests = Vec::new();
    for name in &args.requests {
        match scenario.request_id(name) {
            Some(id) => requests.push(id),
            None => {
                let known: Vec<&str> = scenario.requests.iter().map(|r| r.name.as_str()).collect();
                return Err(Failure::bad_input(format!(
                    "--requests: no request `{name}` in the scenario (it has: {})",
                    known.join(", ")
                )));
            }
        }
    }
    if requests.is_empty() {
        requests = (0..scenario.requests.len() as u32).map(RequestId).collect();
    }
    if args.users == 0 {
        return Err(Failure::bad_input("--users must be at least 1"));
    }
    let agents =
        AgentSet::from_scenario(&scenario).map_err(|e| Failure::bad_input(e.to_string()))?;
    let first = agents
        .check_all()
        .map_err(|e| Failure::cannot_proceed(e.to_string()))?;
    let mut controller = ProfileController::new(
        scenario.clone(),
        requests.clone(),
        args.users,
        args.warmup,
        watched_processes(&scenario, &agents, &first),
    );
    let out = out_dir(&args.output.out, &scenario);
    let plan = RunPlan {
        mode: Mode::Profile,
        out: out.clone(),
        use_agents: true,
        resumed: Vec::new(),
        sources: load_sources(Some(&args.generators), &scenario, false)?,
        asked: None,
    };
    let record = execute_plan(
        &scenario,
        plan,
        &mut controller,
        requests.len(),
        &args.output,
    )?;
    let mut summary = text::demand_table(controller.demands());
    for (class, tiers) in controller.class_demands() {
        let each: Vec<String> = tiers.iter().map(|(t, ms)| format!("{t} {ms:.3}")).collect();
        summary.push_str(&format!(
            "class {class}: cpu ms per request of its mix {}\n",
            each.join(", ")
        ));
    }
    if record.analysis.stop_reason == StopReason::Interrupted {
        summary.push_str("(interrupted: the table holds the request types measured so far)\n");
    }
    finish(&out, &record, &args.output, &summary)?;
    Ok(capacity_exit(&record))
}
