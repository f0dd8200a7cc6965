//! autoperf's measurement core. It knows nothing of the command line: the
//! binary turns argv into typed values and calls in here; tests and the
//! capacity controller drive it through this API.
//!
//! ```text
//! YAML → scenario (located tree → validated Scenario) ─┐
//!                                                       ├→ engine (shards of closed-loop users) → protocol (http1) → outcome
//! per-shard recorder ─1 s tick→ Snapshot ──────────────→ collector: level totals + per-second series → sinks (progress, files)
//! LevelRun → record (versioned run record) → results dir (levels.jsonl, timeseries.csv, run.json) → report (text)
//! ```
//!
//! - `scenario`: the file format, validation with located diagnostics, templates, the CBMG.
//! - `engine`: runs one load level: users on per-thread shards, stop and deadline handling.
//! - `profile`: the agents' client, the per-second sampler, per-tier usage of a level.
//! - `protocol`: the transport trait and the lean HTTP/1.1 keep-alive client.
//! - `measure`: outcomes, mergeable interval statistics, the collector of ticks.
//! - `record`: the JSON shapes of level objects and `run.json` (the contract in DESIGN.md).
//! - `results`: the results directory, written as the run goes so nothing measured is lost.
//! - `runner`: runs a planned series of levels and keeps the results directory current.
//! - `report`: the text summary tables.

pub mod capacity;
pub mod engine;
pub mod load;
pub mod measure;
pub mod profile;
pub mod protocol;
pub mod record;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod thresholds;
