//! Scenario files: from YAML text to a validated `Scenario`.
//!
//! ```text
//! text ─yaml.rs→ located tree ─decode/→ Scenario (model/)
//!                      │              ├ templates (template.rs)
//!                      │              ├ session CBMG (session.rs)
//!                      │              ├ thresholds (threshold.rs), durations (duration.rs)
//!                      └──────────────┴→ Diagnostics (diagnostic.rs): every problem, located
//! ```
//!
//! `load` and `parse` either return a scenario the engine can run as is, or
//! every problem found in the file (`autoperf check` prints them all). The
//! format is described for editors by `schema/scenario.schema.json`.

pub(crate) mod avro;
pub(crate) mod condition;
pub mod decode;
pub(crate) mod diagnostic;
pub(crate) mod duration;
pub(crate) mod env;
pub(crate) mod files;
pub mod ids;
pub(crate) mod model;
pub(crate) mod overrides;
pub(crate) mod rate;
pub(crate) mod script;
pub(crate) mod session;
pub(crate) mod sources;
pub mod template;
pub(crate) mod threshold;
pub(crate) mod yaml;

#[cfg(test)]
mod kafka_tests;
#[cfg(test)]
mod prometheus_tests;
#[cfg(test)]
mod tests;

use std::path::Path;

pub(crate) use condition::Last;
pub(crate) use diagnostic::Diagnostic;

pub use diagnostic::Diagnostics;
pub use duration::parse_duration;
pub use model::*;
pub use overrides::Override;
pub use rate::parse_per_second;
pub use script::Script;
pub(crate) use template::Escape;
pub use template::Template;
pub use threshold::parse_threshold;

/// Reads and validates a scenario file. CSV paths in `data:` are relative
/// to the file's directory.
pub fn load(path: &Path) -> Result<Scenario, Diagnostics> {
    load_with(path, &[])
}

/// `load`, with `--set` overrides applied over the file's values.
pub fn load_with(path: &Path, overrides: &[Override]) -> Result<Scenario, Diagnostics> {
    let bytes = files::read_bounded(path, files::SCENARIO_LIMIT, "scenario file")
        .map_err(|e| Diagnostics(vec![Diagnostic::file(path.to_path_buf(), e)]))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        Diagnostics(vec![Diagnostic::file(
            path.to_path_buf(),
            format!(
                "cannot read scenario file `{}`: not UTF-8 text (invalid byte at offset {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )])
    })?;
    parse_with(&text, path, overrides)
}

#[cfg(test)]
/// Validates scenario text; `path` names the file in messages and is where
/// CSV paths are resolved from.
pub(crate) fn parse(text: &str, path: &Path) -> Result<Scenario, Diagnostics> {
    parse_with(text, path, &[])
}

/// `parse`, with `--set` overrides applied over the text's values.
pub fn parse_with(
    text: &str,
    path: &Path,
    overrides: &[Override],
) -> Result<Scenario, Diagnostics> {
    decode::decode(text, path, overrides).map_err(|mut errors| {
        errors.sort_by_key(|d| (d.line, d.column));
        errors.dedup();
        Diagnostics(errors)
    })
}
