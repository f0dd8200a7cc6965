//! Why a level could not run.

use crate::protocol::TargetError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The OS would not give us threads or a runtime.
    #[error("cannot start the load generator: {0}")]
    Start(String),
    /// The level needs more connections than the generators allowed can
    /// hold; the message says which limit and the fix.
    #[error("{0}")]
    Placement(String),
    /// Workers could not be reached, refused us, or failed a job; the
    /// message names the worker.
    #[error("{0}")]
    Workers(String),
    /// Ctrl-C before any load was sent; the message says where it stopped.
    #[error("{0}")]
    Interrupted(String),
}
