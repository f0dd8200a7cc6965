//! The testbed's integration tests, one binary: both tiers in process over
//! real HTTP on loopback, the tiers as child processes, the stub schema
//! registry. (`sigterm.rs` stays a binary of its own: it signals its own
//! process.)

mod common;

mod concurrency;
mod endpoints;
mod registry;
mod spawn;

/// Tests that read this process's own CPU time (its web-worker threads,
/// the whole process): any other test's tiers would count too, so
/// `scripts/test.sh` runs them one at a time after the others.
mod alone {
    mod cpu_cost;
    mod reads_during_burns;
}
