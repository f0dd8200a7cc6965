//! `autoperf demo`: starts the testbed and a profiler agent in this
//! process's care, then runs an automatic capacity analysis against them
//! with the bundled scenario.

use std::sync::Arc;

use autoperf_core::profile::{watched_processes, AgentSet};
use autoperf_core::record::Mode;
use autoperf_core::report::text;
use autoperf_core::results::ResultsDir;
use autoperf_core::run::capacity::CapacityController;
use autoperf_core::run::RunPlan;
use autoperf_core::scenario::{BaseUrl, Endpoint};

use super::capacity::capacity_exit;
use super::execute::execute_plan;
use super::predict::capacity_prediction;
use super::report::finish;
use super::sources::load_sources;
use super::{load, Outcome};
use crate::cli::DemoArgs;
use crate::Failure;

/// The bundled demo scenario and its data, written next to the results so
/// the run can be repeated with `autoperf run`.
const DEMO_SCENARIO: &str = include_str!("../../examples/testbed.yaml");
const DEMO_ACTORS: &str = include_str!("../../examples/data/actors.csv");

pub fn demo(args: DemoArgs) -> Outcome {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::cannot_proceed(format!("cannot find the autoperf binary: {e}")))?;
    // One web worker: the web tier saturates within a few hundred users, so
    // the whole curve fits in the demo's few minutes.
    let options = autoperf_testbed::TestbedOptions {
        web_workers: 1,
        ..Default::default()
    };
    let mut testbed = autoperf_testbed::Testbed::spawn(&exe, &options)
        .map_err(|e| Failure::cannot_proceed(format!("cannot start the testbed: {e:#}")))?;
    let out = args
        .output
        .out
        .clone()
        .unwrap_or_else(|| ResultsDir::default_path("demo"));
    let scenario_path = out.join("scenario").join("testbed.yaml");
    let data_dir = out.join("scenario").join("data");
    std::fs::create_dir_all(&data_dir)
        .and_then(|_| std::fs::write(&scenario_path, DEMO_SCENARIO))
        .and_then(|_| std::fs::write(data_dir.join("actors.csv"), DEMO_ACTORS))
        .map_err(|e| {
            Failure::cannot_proceed(format!("cannot write {}: {e}", scenario_path.display()))
        })?;
    let agent = autoperf_agent::BackgroundAgent::start(([127, 0, 0, 1], 0).into())
        .map_err(|e| Failure::cannot_proceed(format!("cannot start the profiler agent: {e:#}")))?;
    let mut scenario = load(&scenario_path, &[])?;
    for server in &mut scenario.servers {
        server.agent = agent.url();
    }
    scenario.target.endpoint = Endpoint::Http(BaseUrl {
        tls: false,
        host: testbed.web_addr.ip().to_string(),
        port: testbed.web_addr.port(),
        path_prefix: String::new(),
    });
    let scenario = Arc::new(scenario);
    if !args.output.quiet {
        eprintln!(
            "demo: testbed up at {} (tb-web pid {}, tb-db pid {}), agent at {}; automatic capacity analysis of `{}`",
            testbed.web_url,
            testbed.web_pid,
            testbed.db_pid,
            agent.url(),
            scenario.name,
        );
    }
    let agents =
        AgentSet::from_scenario(&scenario).map_err(|e| Failure::bad_input(e.to_string()))?;
    let first = agents
        .check_all()
        .map_err(|e| Failure::cannot_proceed(e.to_string()))?;
    let mut controller = CapacityController::new(
        scenario.clone(),
        watched_processes(&scenario, &agents, &first),
    );
    let plan = RunPlan {
        mode: Mode::Demo,
        out: out.clone(),
        use_agents: true,
        resumed: Vec::new(),
        sources: load_sources(None, &scenario, false)?,
        asked: None,
    };
    let result = execute_plan(&scenario, plan, &mut controller, 0, &args.output);
    testbed.shutdown();
    let record = result?;
    let model = capacity_prediction(&out, &record, &scenario, false)?;
    let summary = format!(
        "\n{}scenario {} against the testbed:\n{}\n{}{}",
        text::untrustworthy(&record),
        scenario.name,
        text::levels_table(&record.levels),
        text::capacity_summary(&record),
        model.unwrap_or_default()
    );
    finish(&out, &record, &args.output, &summary)?;
    Ok(capacity_exit(&record))
}
