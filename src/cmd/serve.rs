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
        session_memory: args.session_memory,
    })
    .map(|_| exit::OK)
    .map_err(|e| Failure::cannot_proceed(format!("{e:#}")))
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
