//! autoperf's integration tests: the built binary and the core's API
//! against real servers on loopback (the testbed, small servers written
//! here, a Kafka broker, network namespaces playing hosts, Chromium).
//!
//! One test binary, so the workspace links it once rather than once per
//! file. Tests run concurrently, except those that measure a CPU limit or
//! a process's CPU: they live in modules named `alone`, which
//! `scripts/test.sh` runs one at a time after the others, with nothing
//! beside them. Run by hand, `cargo test --release --test it` runs them
//! all at once; `support::alone()` still keeps the `alone` tests from
//! overlapping each other.

mod browser;
mod support;

mod capacity;
mod cgroups;
mod checks;
mod classes;
mod cli;
mod compare;
mod conditions;
mod engine;
mod functions;
mod generators;
mod https;
mod import;
mod journey;
mod kafka;
mod memory;
mod open_capacity;
mod open_workload;
mod predict;
mod profile;
mod prometheus;
mod push;
mod quiet;
mod record_shape;
mod report_html;
mod script;
mod server_slos;
mod shop;
mod trace;
mod trust;
mod workers;
