//! Profiling: the controller's side of the agents (`agents`) and of
//! Prometheus (`prometheus`, read like an agent; `promql`, the PromQL
//! thresholds read over each level), the sampler
//! that reads them every second during a run (`sampler`), the per-tier
//! usage of a level computed from those readings (`usage`), and the
//! per-process demand convergence a level waits for (`watch`). The profiling
//! mode's controller is `run::profile`.

pub(crate) mod agents;
#[cfg(feature = "kafka")]
pub(crate) mod kafka_lag;
pub mod latest_lag;
pub(crate) mod prometheus;
pub(crate) mod promql;
pub(crate) mod sampler;
pub(crate) mod usage;
pub(crate) mod watch;

pub use agents::AgentError;

pub use agents::AgentSet;
pub use sampler::{Reading, Sampler};
pub use usage::{tier_usage, ServerSecond, TierFigures};
pub use watch::watched_processes;
pub(crate) use watch::{DemandWatch, WatchedProcess};
