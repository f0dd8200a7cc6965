//! Where a plan's load comes from: this host's generator processes, or
//! workers on other hosts, from the generator flags and the scenario's
//! `workers:` (flags first).

use autoperf_core::engine::workers::WorkerSpec;
use autoperf_core::engine::{Generators, LoadSources, WorkerPool};
use autoperf_core::scenario::Scenario;

use crate::cli::GeneratorArgs;
use crate::Failure;

/// Generator processes run this binary; flags may ask for more of them,
/// for source addresses, or for workers on other hosts (`--workers`, else
/// the scenario's `workers:`). `scale_out`: a capacity analysis, which
/// starts on one worker and adds more when the generator limits a level.
pub(super) fn load_sources(
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
