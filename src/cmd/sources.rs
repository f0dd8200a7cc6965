//! Where a plan's load comes from: the generator flags as the core's
//! typed options (the core decides between this host's generator
//! processes and workers on other hosts, flags before the scenario's
//! `workers:`).

use autoperf_core::engine::workers::WorkerSpec;
use autoperf_core::engine::{Generators, LoadSources, WorkerPool};
use autoperf_core::scenario::{Scenario, WorkerSettings};

use crate::cli::GeneratorArgs;
use crate::Failure;

/// Generator processes run this binary; flags may ask for more of them,
/// for source addresses, or for workers on other hosts. `scale_out`: a
/// capacity analysis, which starts on one worker and adds more when the
/// generator limits a level.
pub(super) fn load_sources(
    args: Option<&GeneratorArgs>,
    scenario: &Scenario,
    scale_out: bool,
) -> Result<LoadSources, Failure> {
    let given = args.map(worker_flags).transpose()?;
    let here = Generators {
        processes: args.and_then(|a| a.generators),
        local_addresses: args.map(|a| a.local_addresses.clone()).unwrap_or_default(),
        program: std::env::current_exe().ok(),
        coalesce: args.and_then(|a| a.coalesce),
    };
    let workers =
        WorkerPool::from_settings(given.as_ref(), scenario.workers.as_ref(), &here, scale_out)
            .map_err(Failure::bad_input)?;
    Ok(LoadSources { here, workers })
}

/// The worker flags, as the settings they override the scenario's
/// `workers:` with.
fn worker_flags(args: &GeneratorArgs) -> Result<WorkerSettings, Failure> {
    let addresses = args
        .workers
        .iter()
        .map(|w| WorkerSpec::parse(w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::bad_input(format!("--workers {e}")))?;
    Ok(WorkerSettings {
        addresses,
        token_file: args.worker_token_file.clone(),
        ca_file: args.worker_ca_file.clone(),
        min: args.min_workers,
        start: args.start_workers,
    })
}
