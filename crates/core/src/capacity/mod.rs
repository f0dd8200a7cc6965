//! The algorithmic heart of automatic capacity analysis (AutoPerf, ICPE'17,
//! section 2.1): pure state machines and formulas that decide *what* to run
//! and *when a level is done*, and never run anything themselves. The
//! controller feeds them numbers (per-second throughput, agent counters,
//! finished levels) and acts on their verdicts; tests feed them synthetic
//! curves, with no clock, no sleep and no I/O.
//!
//! ```text
//!  engine 1 s tick ──x_rps──→ steady::SteadyState ──Steady──┐
//!  agent counters ──S_p(t), n(t)──→ demand::DemandTracker ──┼→ LevelOutcome
//!  achieved think time (client::) ──client_bottleneck──────┘        │
//!                                                                    ▼
//!           search::LevelSearch ── next() → Run { users } | Done { stop_reason }
//!             ├─ range::   N_min (2.1.2, utilisation law), N* (eq. 3)
//!             └─ overload:: the power state machine (2.1.2, end)
//! ```
//!
//! - `steady`: steady state of one level from consecutive window means of throughput.
//! - `demand`: CPU service demand per request and its global-then-local convergence (2.1.1).
//! - `range`: the minimum level and Kleinrock's saturation number from per-tier demands.
//! - `overload`: the power `P = X/R` state machine that confirms overload.
//! - `client`: achieved think time by Little's law, the one client-bottleneck
//!   rule (2.1.3) every level is judged by.
//! - `search`: the level-selection state machine (2.1.2) and its summary.
//! - `rate`: the open-workload search for the highest arrival rate that
//!   meets the SLOs (Theodolite's rule).
//! - `guided`: the queueing model that picks the levels inside the range
//!   where the curve bends (beyond the paper; bisection is the fallback).
//! - `mva`: exact mean value analysis of a closed network with
//!   multi-server stations, which the guide and `model::predict` solve.
//!
//! The controller that wires these to running levels is `run::capacity`.

pub(crate) mod client;
pub(crate) mod demand;
pub(crate) mod guided;
pub(crate) mod mva;
pub(crate) mod overload;
pub(crate) mod range;
pub(crate) mod rate;
pub(crate) mod search;
pub(crate) mod steady;

#[cfg(test)]
mod tests;
