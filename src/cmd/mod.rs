//! One function per subcommand: load inputs, call the core, print, choose
//! the exit code. A file per command family:
//!
//! - `run.rs`: `autoperf run`, one level judged by its thresholds.
//! - `capacity.rs`: `autoperf capacity`, closed or open, `--resume` and
//!   `--vary`; the exit code every analysis ends with.
//! - `profile.rs`: `autoperf profile`, each request type's service demands.
//! - `predict.rs`: `autoperf predict`, and the model's section `capacity`
//!   and `demo` add to their results.
//! - `demo.rs`: `autoperf demo`, the testbed, an agent and a capacity
//!   analysis in one.
//! - `serve.rs`: the roles this binary plays for others: `worker`,
//!   `generator`, `testbed`, `tier` and `agent`.
//! - `sources.rs`: where a plan's load comes from, generator processes
//!   here or workers elsewhere, from flags and the scenario's `workers:`.
//! - `execute.rs`: running a plan with the live view and Ctrl-C, failures
//!   mapped to exit codes.
//! - `report.rs`: what a results directory derives from run.json, after a
//!   run and on `autoperf report`.
//!
//! This file: `autoperf check`, and the scenario loading and default
//! results directory the commands share.

mod capacity;
mod demo;
mod execute;
mod predict;
mod profile;
mod report;
mod run;
mod serve;
mod sources;

use std::path::{Path, PathBuf};

use autoperf_core::results::ResultsDir;
use autoperf_core::scenario::{self, Override, Scenario};

use crate::{exit, print_out, Failure};

pub use capacity::capacity;
pub use demo::demo;
pub use predict::predict;
pub use profile::profile;
pub use report::report;
pub use run::run;
pub use serve::{agent, generator, testbed, tier, worker};

type Outcome = Result<u8, Failure>;

pub fn check(path: &Path, overrides: &[Override]) -> Outcome {
    let scenario = load(path, overrides)?;
    let script = scenario.script.as_ref().map_or(String::new(), |s| {
        let hooks: Vec<&str> = [(s.has_request, "request"), (s.has_response, "response")]
            .into_iter()
            .filter_map(|(has, name)| has.then_some(name))
            .collect();
        format!(", script {} ({})", s.chunk_name, hooks.join(" and "))
    });
    let classes = match scenario.classes.is_empty() {
        true => String::new(),
        false => {
            let each: Vec<String> = scenario
                .classes
                .iter()
                .map(|c| format!("{} {}%", c.name, (c.share * 1e3).round() / 10.0))
                .collect();
            format!(", classes {}", each.join(", "))
        }
    };
    print_out(&format!(
        "{}: ok — scenario `{}`, {} requests{classes}, target {}{script}\n",
        path.display(),
        scenario.name,
        scenario.requests.len(),
        scenario.target.endpoint
    ));
    Ok(exit::OK)
}

fn load(path: &Path, overrides: &[Override]) -> Result<Scenario, Failure> {
    scenario::load_with(path, overrides)
        .map_err(|diagnostics| Failure::bad_input(format!("{diagnostics}")))
}

fn out_dir(out: &Option<PathBuf>, scenario: &Scenario) -> PathBuf {
    out.clone()
        .unwrap_or_else(|| ResultsDir::default_path(&scenario.name))
}
