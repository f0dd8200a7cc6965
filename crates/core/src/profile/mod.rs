//! Profiling: the controller's side of the agents (`agents`), the sampler
//! that reads them every second during a run (`sampler`), and the per-tier
//! usage of a level computed from those readings (`usage`).

pub mod agents;
pub mod mode;
pub mod sampler;
pub mod usage;
pub mod watch;

pub use agents::{AgentError, AgentSet};
pub use mode::{ProfileController, TierDemands};
pub use sampler::{Reading, Sampler};
pub use usage::{tier_usage, TierUsage};
pub use watch::{watched_processes, DemandWatch, WatchedProcess};
