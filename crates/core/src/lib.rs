//! autoperf's measurement core. It knows nothing of the command line: the
//! binary turns argv into typed values and calls in here; tests drive it
//! through this API.
//!
//! ```text
//! YAML → scenario (located tree → validated Scenario) ─┐
//! load shapes (pure) ───────────────────────────────────┼→ engine: one Level (closed users | open arrivals)
//!                                                       │    on per-thread shards (or generator processes)
//!                                                       │    → protocol (http1 | kafka) → outcome
//! per-shard recorder ─1 s tick→ Snapshot ──────────────→ collector: level totals + per-second series
//!                                                          → sinks (live view, results files, controller)
//! run: a LevelController chooses levels ─→ engine per level ─→ record (level object, typed analysis)
//!        fixed list | capacity (steady? demands? search) | profile (one request type at a time)
//! record → results dir (levels.jsonl, timeseries.csv, run.json) → report (text, csv, html, svg)
//! ```
//!
//! Layers, lowest first; a module imports only from layers below it (or
//! beside it, on the same layer), which `scripts/seams.py` checks:
//! `scenario`, `load` → `measure` → `protocol` → `engine` → `capacity` (pure
//! algorithms) → `record` (shapes, and the rules that fill them) → `profile`
//! (the agents, turned into record shapes) → `model` (predictions from a
//! record) → `thresholds`, `results`, `report`, `import` → `compare`, `run`.
//!
//! - `scenario`: the file format, validation with located diagnostics, templates, the CBMG.
//! - `load`: pure load shapes: arrival pacing, rate stages.
//! - `measure`: outcomes, mergeable interval statistics, the collector of ticks.
//! - `protocol`: the transport trait; HTTP/1.1, HTTP/2 and Kafka clients of
//!   our own.
//! - `engine`: runs one level: users or arrivals on per-thread shards, spread
//!   over generator processes when one cannot hold them.
//! - `capacity`: the capacity analysis's pure state machines and formulas
//!   (AutoPerf 2.1): steady state, demand convergence, the level search,
//!   the client-bottleneck rule.
//! - `profile`: the agents' client, the per-second sampler, per-tier usage,
//!   per-process demand convergence.
//! - `record`: the JSON shapes of level objects and `run.json` (the contract
//!   in docs/design.md, section 4), typed down to the analysis.
//! - `model`: what the record predicts: the queueing model's throughput and
//!   response time at untested loads (`autoperf predict`).
//! - `thresholds`: the scenario's SLOs checked against a level.
//! - `results`: the results directory, written as the run goes so nothing measured is lost.
//! - `report`: text tables, levels.csv, the HTML report, Prometheus metrics
//!   (written, or pushed as the run goes).
//! - `import`: scenarios written from recorded traffic (HAR files, access
//!   logs), `autoperf import`.
//! - `compare`: two results directories compared, figure by figure, with
//!   limits and a significance test (`autoperf compare`, `--baseline`).
//! - `run`: drives levels: `run_levels` with a fixed list, the capacity
//!   controller or the profile controller.
//!
//! The API is what is `pub`: exactly what the binary, the fuzz targets and
//! the integration tests use, reached at most three modules deep. Everything
//! else is `pub(crate)`, so an item's reach says who can depend on it, and
//! code no caller uses shows up as dead.

pub mod capacity;
pub mod compare;
pub mod engine;
pub mod import;
pub mod load;
pub mod measure;
pub mod model;
pub mod profile;
pub mod protocol;
pub mod record;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod thresholds;
