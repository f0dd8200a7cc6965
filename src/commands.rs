//! One function per subcommand: load inputs, call the core, print, choose
//! the exit code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use autoperf_core::engine::workers::{worker_main, WorkerOptions, WorkerSpec};
use autoperf_core::engine::{fleet, EngineError, Generators, LoadSources, StopSignal, WorkerPool};
use autoperf_core::load::Spacing;
use autoperf_core::model::predict::{self, Ask};
use autoperf_core::model::{Model, Prediction};
use autoperf_core::profile::{watched_processes, AgentSet};
use autoperf_core::record::{LevelRecord, Mode, RunRecord, StopReason};
use autoperf_core::report::{self, text};
use autoperf_core::results::{read_levels, read_run, write_run_file, ResultsDir};
use autoperf_core::run::capacity::CapacityController;
use autoperf_core::run::fixed::{single_level, FixedLevels, SingleLevel};
use autoperf_core::run::open_capacity::{OpenCapacityController, Reconfigure, Vary};
use autoperf_core::run::profile::ProfileController;
use autoperf_core::run::vary;
use autoperf_core::run::{run_levels, LevelController, RunError, RunPlan};
use autoperf_core::scenario::{self, BaseUrl, Endpoint, Override, RequestId, Scenario};
use autoperf_core::thresholds;

use crate::cli::{
    AgentArgs, ArrivalSpacing, CapacityArgs, DemoArgs, GeneratorArgs, OutputArgs, PredictArgs,
    ProfileArgs, RunArgs, TestbedArgs, TierArgs, WorkerArgs,
};
use crate::compare::Baseline;
use crate::outputs::LiveOutputs;
use crate::progress::LiveView;
use crate::resume::CapacityPlan;
use crate::{exit, print_out, Failure};

type Outcome = Result<u8, Failure>;

pub fn check(path: &Path, overrides: &[Override]) -> Outcome {
    let scenario = load(path, overrides)?;
    print_out(&format!(
        "{}: ok — scenario `{}`, {} requests, target {}\n",
        path.display(),
        scenario.name,
        scenario.requests.len(),
        scenario.target.endpoint
    ));
    Ok(exit::OK)
}

pub fn run(args: RunArgs) -> Outcome {
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

/// `--arrivals` as the engine takes it.
fn spacing(a: ArrivalSpacing) -> Spacing {
    match a {
        ArrivalSpacing::Even => Spacing::Even,
        ArrivalSpacing::Poisson => Spacing::Poisson { seed: 0 },
    }
}

/// After a run: rewrites run.json (with what the CLI added), writes
/// levels.csv and report.html, and prints the summary or run.json.
fn finish(
    out: &Path,
    record: &RunRecord,
    output: &OutputArgs,
    summary: &str,
) -> Result<(), Failure> {
    let failed = |e: String| Failure::cannot_proceed(e);
    write_run_file(out, record).map_err(|e| failed(e.to_string()))?;
    report::csv::write_levels_csv(out, &record.levels)
        .map_err(|e| failed(format!("cannot write levels.csv in {}: {e}", out.display())))?;
    let html = report::html::write_report(out).map_err(|e| failed(e.to_string()))?;
    if output.json {
        let text = serde_json::to_string_pretty(record).unwrap_or_default();
        print_out(&format!("{text}\n"));
    } else {
        print_out(&format!(
            "{summary}results: {}\nreport: {}\n",
            out.display(),
            html.display()
        ));
    }
    Ok(())
}

pub fn report(dir: &Path) -> Outcome {
    let record = read_run(dir).map_err(|e| Failure::bad_input(e.to_string()))?;
    report::csv::write_levels_csv(dir, &record.levels)
        .map_err(|e| Failure::cannot_proceed(format!("cannot write levels.csv: {e}")))?;
    let html =
        report::html::write_report(dir).map_err(|e| Failure::cannot_proceed(e.to_string()))?;
    print_out(&format!("report: {}\n", html.display()));
    Ok(exit::OK)
}

/// The bundled demo scenario and its data, written next to the results so
/// the run can be repeated with `autoperf run`.
const DEMO_SCENARIO: &str = include_str!("../examples/testbed.yaml");
const DEMO_ACTORS: &str = include_str!("../examples/data/actors.csv");

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

/// Generator processes run this binary; flags may ask for more of them,
/// for source addresses, or for workers on other hosts (`--workers`, else
/// the scenario's `workers:`). `scale_out`: a capacity analysis, which
/// starts on one worker and adds more when the generator limits a level.
fn load_sources(
    args: Option<&GeneratorArgs>,
    scenario: &Scenario,
    scale_out: bool,
) -> Result<LoadSources, Failure> {
    let given = args.filter(|a| !a.workers.is_empty());
    let settings = scenario.workers.as_ref();
    let specs = match (given, settings) {
        (Some(a), _) => a
            .workers
            .iter()
            .map(|w| WorkerSpec::parse(w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::bad_input(format!("--workers {e}")))?,
        (None, Some(s)) => s.addresses.clone(),
        (None, None) => Vec::new(),
    };
    let workers = if specs.is_empty() {
        let stray = args.and_then(|a| {
            [
                (a.worker_token_file.is_some(), "--worker-token-file"),
                (a.worker_ca_file.is_some(), "--worker-ca-file"),
                (a.min_workers.is_some(), "--min-workers"),
                (a.start_workers.is_some(), "--start-workers"),
            ]
            .into_iter()
            .find_map(|(given, flag)| given.then_some(flag))
        });
        if let Some(flag) = stray {
            return Err(Failure::bad_input(format!(
                "{flag} is about workers, but none are named: give them with --workers host:port,… or `workers:` in the scenario"
            )));
        }
        None
    } else {
        let (flag, file) = match (args.and_then(|a| a.worker_token_file.as_ref()), settings) {
            (Some(path), _) => ("--worker-token-file", Some(path)),
            (None, Some(s)) => ("workers.token_file", s.token_file.as_ref()),
            (None, None) => ("", None),
        };
        let token = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Failure::bad_input(format!("{flag}: cannot read {}: {e}", path.display()))
                })?;
                Some(
                    autoperf_agent::options::token_from_text(&text, path)
                        .map_err(|e| Failure::bad_input(format!("{flag}: {e}")))?,
                )
            }
            None => None,
        };
        let min = args
            .and_then(|a| a.min_workers)
            .or(settings.and_then(|s| s.min))
            .map(|n| n as usize);
        let start = args
            .and_then(|a| a.start_workers)
            .or(settings.and_then(|s| s.start))
            .map(|n| n as usize)
            .or(scale_out.then_some(1));
        if let Some(a) = args.filter(|a| !a.local_addresses.is_empty() || a.generators.is_some()) {
            let flag = if a.generators.is_some() {
                "--generators"
            } else {
                "--local-addresses"
            };
            return Err(Failure::bad_input(format!(
                "{flag} is about this host's generator processes, but the levels run on workers: give each worker its own (`autoperf worker --local-addresses …`; workers start the processes they need by themselves)"
            )));
        }
        let pool = WorkerPool::new(specs, token, min, start).map_err(Failure::bad_input)?;
        let ca_file = match (args.and_then(|a| a.worker_ca_file.as_ref()), settings) {
            (Some(path), _) => Some(("--worker-ca-file", path)),
            (None, Some(s)) => s.ca_file.as_ref().map(|p| ("workers.ca_file", p)),
            (None, None) => None,
        };
        Some(match ca_file {
            None => pool,
            Some((flag, path)) => {
                let pem = std::fs::read(path).map_err(|e| {
                    Failure::bad_input(format!("{flag}: cannot read {}: {e}", path.display()))
                })?;
                let file = autoperf_core::scenario::PemFile {
                    path: path.clone(),
                    pem,
                };
                pool.with_tls(file)
                    .map_err(|e| Failure::bad_input(format!("{flag}: {e}")))?
            }
        })
    };
    Ok(LoadSources {
        here: Generators {
            processes: args.and_then(|a| a.generators),
            local_addresses: args.map(|a| a.local_addresses.clone()).unwrap_or_default(),
            program: std::env::current_exe().ok(),
            coalesce: args.and_then(|a| a.coalesce),
        },
        workers,
    })
}

/// `autoperf worker`: serves controllers until stopped.
pub fn worker(args: WorkerArgs) -> Outcome {
    stop_on_termination();
    let options = WorkerOptions {
        listen: args.listen,
        token_file: args.token_file,
        name: args.name,
        local_addresses: args.local_addresses,
        program: std::env::current_exe().ok(),
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
    };
    worker_main(options, |addr| {
        // One line on stdout: scripts and tests read the address from it.
        println!(
            "autoperf worker listening on {addr} (worker protocol {}, {} cores, open-file limit {})",
            autoperf_core::engine::workers::protocol::VERSION,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            fleet::open_file_limit()
        );
    })
    .map_err(Failure::cannot_proceed)?;
    Ok(exit::OK)
}

/// SIGTERM (Kubernetes stopping a pod) and SIGINT end a worker at once: a
/// container's first process has no default action for them. Its
/// generator processes see their input close and stop; a controller
/// hears the connection end and marks the level incomplete.
fn stop_on_termination() {
    extern "C" fn exit_now(_: libc::c_int) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: installs a handler that only calls an async-signal-safe
    // function.
    unsafe {
        let handler = exit_now as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

/// `autoperf generator`: one generator process of a spread level.
pub fn generator() -> Outcome {
    let input = std::io::BufReader::new(std::io::stdin());
    let output = std::io::BufWriter::new(std::io::stdout().lock());
    fleet::serve(input, output).map_err(Failure::cannot_proceed)?;
    Ok(exit::OK)
}

pub fn testbed(args: TestbedArgs) -> Outcome {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::cannot_proceed(format!("cannot find the autoperf binary: {e}")))?;
    let options = autoperf_testbed::TestbedOptions {
        listen: args.listen,
        web_workers: args.web_workers,
        db_workers: args.db_workers,
        schema_registry: args.schema_registry,
        name_tag: args.name_tag,
    };
    autoperf_testbed::testbed_main(&exe, options)
        .map(|_| exit::OK)
        .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}

pub fn tier(args: TierArgs) -> Outcome {
    let tier = match args.tier.as_str() {
        "web" => autoperf_testbed::Tier::Web,
        "db" => autoperf_testbed::Tier::Db,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown tier `{other}`: expected web or db"
            )))
        }
    };
    autoperf_testbed::tier_main(autoperf_testbed::TierArgs {
        tier,
        listen: args.listen,
        workers: args.workers,
        db: args.db,
        name_tag: args.name_tag,
    })
    .map(|_| exit::OK)
    .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}

pub fn agent(args: AgentArgs) -> Outcome {
    autoperf_agent::agent_main(autoperf_agent::AgentOptions {
        listen: args.listen,
        token_file: args.token_file,
        allow_cmdline: args.allow_cmdline,
    })
    .map(|_| exit::OK)
    .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}

fn load(path: &Path, overrides: &[Override]) -> Result<Scenario, Failure> {
    scenario::load_with(path, overrides)
        .map_err(|diagnostics| Failure::bad_input(format!("{diagnostics}")))
}

fn out_dir(out: &Option<PathBuf>, scenario: &Scenario) -> PathBuf {
    out.clone()
        .unwrap_or_else(|| ResultsDir::default_path(&scenario.name))
}

/// Runs a plan with the live view and Ctrl-C handling; maps failures to
/// exit codes.
fn execute_plan(
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
    let mut view = LiveView::new(expected_levels, quiet);
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
                    std::process::exit(130);
                }
            });
        });
    if spawned.is_err() && !quiet {
        eprintln!("warning: Ctrl-C will end the run without writing its results");
    }
}

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
    if record.analysis.stop_reason == StopReason::Interrupted {
        summary.push_str("(interrupted: the table holds the request types measured so far)\n");
    }
    finish(&out, &record, &args.output, &summary)?;
    Ok(capacity_exit(&record))
}

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
            let plan: CapacityPlan = serde_json::from_value(plan)
                .map_err(|e| bad(format!("run.json's `plan` is not one autoperf wrote ({e})")))?;
            plan.continue_with(&mut args).map_err(bad)?;
        }
    }
    let mut scenario = load(&args.scenario, &args.set.overrides)?;
    if let Some(search) = args.search {
        scenario.capacity.search = search;
    }
    let scenario = Arc::new(scenario);
    let (out, resumed) = capacity_out(&args, &scenario)?;
    let open = args.open
        || args.rate.is_some()
        || args.vary.is_some()
        || resumed.iter().any(|l| l.rate_search.is_some())
        || (scenario.arrivals.is_some() && args.levels.is_empty() && args.search.is_none());
    if open {
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

/// 4 when the analysis stopped on a level that measured errors, not the
/// system; 3 when `--apply` could not reconfigure it; 130 on Ctrl-C; else 0.
fn capacity_exit(record: &RunRecord) -> u8 {
    match record.analysis.stop_reason {
        StopReason::Interrupted => exit::INTERRUPTED,
        r if r.untrustworthy() => exit::UNTRUSTWORTHY,
        StopReason::ApplyFailed => exit::CANNOT_PROCEED,
        _ => exit::OK,
    }
}

pub fn predict(args: PredictArgs) -> Outcome {
    let record = read_run(&args.results).map_err(|e| Failure::bad_input(e.to_string()))?;
    let scenario = match &args.scenario {
        Some(path) => load(path, &[])?,
        None => {
            let path = PathBuf::from(&record.scenario.file);
            // The --set the run was given, applied again.
            let overrides: Vec<Override> = record
                .scenario
                .overrides
                .iter()
                .filter_map(|s| Override::parse(s).ok())
                .collect();
            scenario::parse_with(&record.scenario.text, &path, &overrides).map_err(|d| {
                Failure::bad_input(format!(
                    "{}: the scenario these results were measured with does not load here ({d}); name it with --scenario FILE",
                    args.results.display()
                ))
            })?
        }
    };
    let bad = |e: autoperf_core::model::ModelError| {
        Failure::bad_input(format!("{}: {e}", args.results.display()))
    };
    let mut model = Model::from_record(&record, &scenario).map_err(bad)?;
    let what_if = !args.mix.is_empty()
        || !args.cores.is_empty()
        || !args.speedup.is_empty()
        || args.think.is_some();
    if !args.mix.is_empty() {
        model = model.with_mix(&args.mix).map_err(bad)?;
    }
    for (tier, cores) in &args.cores {
        model = model.with_cores(tier, *cores).map_err(bad)?;
    }
    for (tier, factor) in &args.speedup {
        model = model.with_speedup(tier, *factor).map_err(bad)?;
    }
    if let Some(think) = args.think {
        model.think_s = think.as_secs_f64();
    }
    let measured: Vec<LevelRecord> = match &args.measured {
        Some(dir) => read_run(dir)
            .map_err(|e| Failure::bad_input(format!("--measured: {e}")))?
            .levels
            .into_iter()
            .filter(|l| l.users.is_some())
            .collect(),
        None if what_if || record.analysis.capacity.is_none() => Vec::new(),
        None => record.levels.clone(),
    };
    let ask = if !args.rate.is_empty() {
        Ask::Rates(args.rate.clone())
    } else {
        let users = args.users.clone().map(|u| u.0);
        Ask::Users(users.unwrap_or_else(|| default_users(&model, &measured)))
    };
    let prediction = predict::predict(&model, &ask, &measured);
    let out = args.out.clone().unwrap_or_else(|| args.results.clone());
    let path = write_prediction(&out, &prediction)?;
    // The results' own report gains the model's section.
    let report = match out.join("run.json").exists() {
        true => Some(
            report::html::write_report(&out).map_err(|e| Failure::cannot_proceed(e.to_string()))?,
        ),
        false => None,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&prediction).unwrap_or_default();
        print_out(&format!("{text}\n"));
    } else {
        let report = report.map_or(String::new(), |r| format!("report: {}\n", r.display()));
        print_out(&format!(
            "{}\nprediction: {}\n{report}",
            text::prediction_table(&prediction, 20),
            path.display()
        ));
    }
    Ok(exit::OK)
}

/// Users to predict for when not told: 1 to twice N* (at least the largest
/// measured level, and 10), in at most 200 steps, and every measured level.
fn default_users(model: &Model, measured: &[LevelRecord]) -> Vec<u32> {
    let n_star = predict::bounds(model).n_star;
    let top = measured
        .iter()
        .filter_map(|l| l.users)
        .max()
        .unwrap_or(0)
        .max((2.0 * n_star).ceil().min(100_000.0) as u32)
        .max(10);
    let mut users = predict::user_steps(1, top, 200);
    users.extend(measured.iter().filter_map(|l| l.users));
    users.sort_unstable();
    users.dedup();
    users
}

fn write_prediction(out: &Path, prediction: &Prediction) -> Result<PathBuf, Failure> {
    let path = out.join("prediction.json");
    let text = serde_json::to_string_pretty(prediction).unwrap_or_default();
    std::fs::create_dir_all(out)
        .and_then(|_| std::fs::write(&path, format!("{text}\n")))
        .map_err(|e| Failure::cannot_proceed(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// `capacity --predict`: the queueing model of the measured demands, set
/// against the measured levels, into `prediction.json` (and so the
/// report); a line for the summary. `None` when no demands were measured
/// (no agents), unless `required`.
fn capacity_prediction(
    out: &Path,
    record: &RunRecord,
    scenario: &Scenario,
    required: bool,
) -> Result<Option<String>, Failure> {
    let model = match Model::from_record(record, scenario) {
        Ok(model) => model,
        Err(e) if required => {
            return Err(Failure::bad_input(format!(
                "--predict: {e} (the model needs the agents' demands: `servers:` in the scenario, without --no-agents)"
            )))
        }
        Err(_) => return Ok(None),
    };
    let measured: Vec<LevelRecord> = record
        .levels
        .iter()
        .filter(|l| l.users.is_some() && !l.interrupted)
        .cloned()
        .collect();
    let ask = Ask::Users(default_users(&model, &measured));
    let prediction = predict::predict(&model, &ask, &measured);
    let path = write_prediction(out, &prediction)?;
    Ok(Some(text::model_summary(&prediction, &path)))
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
                    None => wait_target(&target, timeout)?,
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

/// Waits until the scenario's target accepts connections again (after
/// `--apply` restarted it); how long that took.
fn wait_target(
    scenario: &Scenario,
    timeout: std::time::Duration,
) -> Result<std::time::Duration, String> {
    let start = std::time::Instant::now();
    loop {
        match autoperf_core::engine::probe_target(scenario) {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) if start.elapsed() >= timeout => {
                return Err(format!(
                    "the target did not come back within {:.0} s after --apply: {e}",
                    timeout.as_secs_f64()
                ))
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
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
            asked: serde_json::to_value(CapacityPlan::of(args)).ok(),
        },
        controller,
        args.levels.len(),
        &args.output,
    )
}
