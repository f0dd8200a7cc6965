//! Queueing models parameterised by measured service demands (AutoPerf
//! sections 1 and 4: demands are measured so that models can extrapolate
//! to what was not tested).
//!
//! ```text
//! run.json (profile demands | capacity levels) + scenario (CBMG, Z, cores)
//!     → network::Model ── what-ifs (mix, cores, speedup, think) ──→ predict
//!        closed: capacity::mva::exact per N │ open: M/M/c per rate │ bounds │ vs measured
//! ```
//!
//! - `network`: the application's network from a results record.
//! - `multiclass`: MVA for the scenario's workload classes (`classes:`),
//!   each with its population, think time and demands.
//! - `predict`: points, bounds and the comparison with measured levels
//!   (`prediction.json`).
//! - `memory`: each tier's memory as a line in the users, fitted to the
//!   levels, for the points' memory.

pub mod memory;
pub(crate) mod multiclass;
pub(crate) mod network;
pub mod predict;

pub use network::Model;

pub use network::ModelError;

pub use network::Tier;
pub use predict::Prediction;
