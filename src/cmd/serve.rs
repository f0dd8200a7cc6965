//! The roles this binary plays for others, each serving until stopped:
//! `worker` (levels for a remote controller), `generator` (one process of
//! a spread level), `testbed` and `tier` (the system to measure), and
//! `agent` (the profiler on a measured host).

use autoperf_core::engine::fleet;
use autoperf_core::engine::workers::{worker_main, WorkerError, WorkerOptions};

use super::Outcome;
use crate::cli::{AgentArgs, TestbedArgs, TierArgs, WorkerArgs};
use crate::{exit, Failure};

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
    .map_err(|e| match e {
        WorkerError::BadInput(e) => Failure::bad_input(e),
        WorkerError::CannotStart(e) => Failure::cannot_proceed(e),
    })?;
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
        session_memory: args.session_memory as usize,
        consumer: args.consume.map(|topic| autoperf_testbed::ConsumerOptions {
            bootstrap: args.kafka,
            topic,
            group: args.consumer_group,
            record_cost: args.record_cost,
        }),
        consumer_workers: args.consumer_workers,
    };
    autoperf_testbed::testbed_main(&exe, options)
        .map(|_| exit::OK)
        .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}

pub fn tier(args: TierArgs) -> Outcome {
    let tier = match args.tier.as_str() {
        "web" => autoperf_testbed::Tier::Web,
        "db" => autoperf_testbed::Tier::Db,
        "consumer" => autoperf_testbed::Tier::Consumer,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown tier `{other}`: expected web, db or consumer"
            )))
        }
    };
    let consume = match (args.kafka, args.topic, args.group) {
        (Some(bootstrap), Some(topic), Some(group)) => Some(autoperf_testbed::ConsumerOptions {
            bootstrap,
            topic,
            group,
            record_cost: std::time::Duration::from_micros(args.record_cost_us.unwrap_or(0)),
        }),
        _ => None,
    };
    let tier_args = autoperf_testbed::TierArgs {
        tier,
        listen: args.listen,
        workers: args.workers,
        db: args.db,
        name_tag: args.name_tag,
        session_memory: args.session_memory,
        consume,
    };
    let served = match tier {
        autoperf_testbed::Tier::Consumer => consumer_tier(tier_args),
        _ => autoperf_testbed::tier_main(tier_args),
    };
    served
        .map(|_| exit::OK)
        .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}

/// The consumer tier: the testbed names the process and pays for the
/// records; core's Kafka consumer reads them.
fn consumer_tier(args: autoperf_testbed::TierArgs) -> anyhow::Result<()> {
    use autoperf_core::protocol::kafka::consumer::{self, ConsumerSpec};
    let workers = args.workers;
    let mut failed = None;
    autoperf_testbed::consumer_tier_main(args, |options, pay, stop| {
        let target = autoperf_core::scenario::KafkaTarget::plaintext(&options.bootstrap);
        match autoperf_core::protocol::kafka::config(&target, std::time::Duration::from_secs(10)) {
            Ok(config) => {
                let spec = ConsumerSpec {
                    config,
                    topic: options.topic.clone(),
                    group: options.group.clone(),
                    workers,
                };
                consumer::run(&spec, pay, stop);
            }
            Err(e) => failed = Some(e.to_string()),
        }
    })?;
    match failed {
        Some(why) => anyhow::bail!("{why}"),
        None => Ok(()),
    }
}

pub fn agent(args: AgentArgs) -> Outcome {
    autoperf_agent::agent_main(autoperf_agent::AgentOptions {
        listen: args.listen,
        token_file: args.token_file,
        allow_cmdline: args.allow_cmdline,
        cgroup_root: args.cgroup_root,
    })
    .map(|_| exit::OK)
    .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
}
