//! autoperf's built-in testbed: a real two-tier HTTP system whose costs are
//! known by construction, for the demo, for tests, and as a control
//! experiment — the true saturation throughput of a scenario on it is
//! `workers_b / D_b` for the busiest tier b.
//!
//! ```text
//!   client ──HTTP/1.1, h2──▶ tb-web ──db wire protocol──▶ tb-db (also HTTP, same port)
//!                        │ accept: the main thread    │ accept: the main thread
//!                        │ N event loops, each serves │ N event loops, each serves
//!                        │ its connections and burns  │ its connections and burns
//!                        │ one lock + data file       │
//! ```
//!
//! Layout:
//! - [`burn`]: CPU burns in thread CPU time, and the event loops that serve and burn;
//! - `http`: the shared accept loop with graceful shutdown, responses, query parameters;
//! - [`web`] and [`db`]: the tiers' routes (`web` lists every endpoint and its cost);
//! - `db_client`: the web tier's keep-alive pool to the db tier, on its wire protocol;
//! - `lock`, `static_files`: the critical section and the cacheable content;
//! - `metrics`: `/metrics`, the process metrics a Prometheus scrapes;
//! - [`shop`]: a shop behind a login, for whole user journeys;
//! - `tls`: the web tier's HTTPS port and its self-signed certificate;
//! - `tier`: one tier as a named OS process (`autoperf tier web|db|consumer`);
//! - [`process`]: the launcher that starts the tiers, waits for them and stops them;
//! - [`registry`]: a stub of Confluent's Schema Registry for the Kafka tests.
//!
//! Tests and the CLI drive it through [`serve_web`]/[`serve_db`] (in process,
//! on an injected listener) or [`Testbed::spawn`] (as child processes).

pub mod burn;
pub mod db;
mod db_client;
mod http;
mod lock;
mod metrics;
pub mod process;
pub mod registry;
pub mod shop;
pub mod signed;
mod static_files;
mod tier;
mod tls;
pub mod web;

pub use db::{serve_db, DbConfig};
pub use process::{testbed_main, Testbed, TestbedOptions};
pub use tier::{consumer_tier_main, tier_main, ConsumerOptions, PayForRecords, Tier, TierArgs};
pub use web::{serve_web, WebConfig};
