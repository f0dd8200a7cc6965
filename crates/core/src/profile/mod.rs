//! Profiling: the controller's side of the agents (`agents`) and of
//! Prometheus (`prometheus`, read like an agent; `promql`, the PromQL
//! thresholds read over each level), the sampler
//! that reads them every second during a run (`sampler`), the per-tier
//! usage of a level computed from those readings (`usage`), and the
//! per-process demand convergence a level waits for (`watch`). The profiling
//! mode's controller is `run::profile`.

pub mod agents;
#[cfg(feature = "kafka")]
pub mod kafka_lag;
pub mod latest_lag;
pub mod prometheus;
pub mod promql;
pub mod sampler;
pub mod usage;
pub mod watch;

pub use agents::{AgentError, AgentSet};
pub use sampler::{Reading, Sampler};
pub use usage::{tier_usage, ServerSecond, TierFigures};
pub use watch::{watched_processes, DemandWatch, WatchedProcess};
