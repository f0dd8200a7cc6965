//! Running a plan: the live view and metrics outputs fed, Ctrl-C turned
//! into a clean stop, and the run's failures mapped to exit codes.

use std::sync::Arc;

use autoperf_core::engine::{EngineError, StopSignal};
use autoperf_core::record::RunRecord;
use autoperf_core::run::{run_levels, LevelController, RunError, RunPlan};
use autoperf_core::scenario::Scenario;

use crate::cli::OutputArgs;
use crate::outputs::LiveOutputs;
use crate::progress::LiveView;
use crate::{exit, Failure};

/// Runs a plan with the live view and Ctrl-C handling; maps failures to
/// exit codes.
pub(super) fn execute_plan(
    scenario: &Arc<Scenario>,
    plan: RunPlan,
    controller: &mut dyn LevelController,
    expected_levels: usize,
    output: &OutputArgs,
) -> Result<RunRecord, Failure> {
    let quiet = output.quiet || output.json;
    let stop = StopSignal::default();
    stop_on_ctrl_c(stop.clone(), quiet);
    let outputs = LiveOutputs::start(scenario, &plan.out, output, quiet)?;
    // One line per finished level, except for a single-level `run`, whose
    // summary table follows at once.
    let mut view =
        LiveView::new(expected_levels, quiet).think_time(scenario.mean_think_time().as_secs_f64());
    if expected_levels != 1 {
        view = view.echo_levels();
    }
    if let Some(shared) = outputs.metrics() {
        view = view.metrics(shared.clone());
    }
    let mut record =
        run_levels(scenario, &plan, controller, &mut view, &stop).map_err(|e| match e {
            RunError::Engine(EngineError::Target(t)) => Failure::cannot_proceed(t.to_string()),
            RunError::Engine(EngineError::Interrupted(why)) => Failure {
                code: exit::INTERRUPTED,
                message: why,
            },
            RunError::Engine(e) => Failure::cannot_proceed(e.to_string()),
            RunError::Results(e) => Failure::cannot_proceed(e.to_string()),
            RunError::Agent(e) => Failure::cannot_proceed(e.to_string()),
        })?;
    outputs.finish(&mut record);
    Ok(record)
}

/// The first Ctrl-C stops the run cleanly (results written); a second one
/// exits at once.
fn stop_on_ctrl_c(stop: StopSignal, quiet: bool) {
    let spawned = std::thread::Builder::new()
        .name("autoperf-signals".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                if !quiet {
                    eprintln!("\ninterrupted: finishing the current level's records (Ctrl-C again to quit at once)");
                }
                stop.stop();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(exit::INTERRUPTED.into());
                }
            });
        });
    if spawned.is_err() && !quiet {
        eprintln!("warning: Ctrl-C will end the run without writing its results");
    }
}
