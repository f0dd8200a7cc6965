//! The validated scenario: domain types with units, produced by `decode` from
//! the YAML file and consumed by the engine. After validation nothing here is
//! optional-by-accident or stringly typed: durations are `Duration`, requests
//! and variables are referred to by index newtypes, templates are compiled.
//!
//! This file holds `Scenario` itself; the parts it is made of live beside
//! it, each decoded by its namesake in `decode/` (`load.rs` by
//! `arrivals.rs`, `users.rs` and `think.rs`; `threshold.rs` by the
//! scenario's `threshold.rs`):
//!
//! - `target.rs`: where requests go (`Target`, `Endpoint`, `BaseUrl`) and
//!   how the HTTP client behaves (version, cookies);
//! - `tls.rs`: TLS settings and the PEM files they name, for an `https://`
//!   target and a Kafka cluster alike;
//! - `kafka.rs`: a Kafka target: the producer's settings, acks, security;
//! - `load.rs`: how load is offered: users over time (closed), arrivals
//!   over time (open), and the think time between requests;
//! - `data.rs`: the `data:` feeders;
//! - `requests.rs`: what each request sends, checks and extracts;
//! - `threshold.rs`: the SLOs a run is judged by;
//! - `capacity.rs`: the capacity analysis's tunables and the servers it
//!   profiles;
//! - `workers.rs`: the worker hosts that generate the load.

use std::path::PathBuf;
use std::time::Duration;

mod capacity;
mod data;
mod kafka;
mod load;
mod requests;
mod target;
mod threshold;
mod tls;
mod workers;

pub(crate) use super::ids::FeederId;

pub use super::ids::RequestId;

pub(crate) use super::ids::VarId;
use super::session::Cbmg;
pub use capacity::SearchStrategy;
pub(crate) use capacity::{CapacitySettings, PrometheusQueries};
pub(crate) use capacity::{Selector, ServerSpec};
pub(crate) use data::{Feeder, FeederMode, FeederSource};
pub use kafka::KafkaTarget;
pub(crate) use kafka::{Acks, Compression, KafkaSecurity};
pub(crate) use kafka::{ProducerSettings, SaslMechanism, SaslSettings};
pub use load::ThinkTime;
pub(crate) use load::{ArrivalSpacing, ArrivalStage, Arrivals};
pub(crate) use load::{UserStage, UserStages};
pub(crate) use requests::{
    Action, AvroFraming, AvroValue, Body, Check, CheckKind, Extract, ExtractFrom, HttpRequest,
    OnMissing, Produce, RecordValue, Request,
};
pub use target::BaseUrl;
pub(crate) use target::CookiePolicy;
pub use target::Endpoint;
pub(crate) use target::{HttpVersion, Target, DEFAULT_MAX_BODY};
pub(crate) use threshold::{Comparison, Metric, PromqlQuery, Threshold};
pub(crate) use tls::{PemFile, TlsSettings};
pub use workers::{WorkerSettings, WorkerSpec};

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// The file it was read from (for messages and the report).
    pub source: PathBuf,
    /// The file's text as written, kept for the report.
    pub text: String,
    /// The `--set KEY=VALUE` applied over the text, in order.
    pub overrides: Vec<String>,
    pub target: Target,
    pub think_time: ThinkTime,
    pub feeders: Vec<Feeder>,
    pub requests: Vec<Request>,
    /// Names bound by `extract`, indexed by `VarId`.
    pub variables: Vec<String>,
    pub session: Cbmg,
    pub servers: Vec<ServerSpec>,
    pub prerequisites: Vec<RequestId>,
    pub thresholds: Vec<Threshold>,
    pub capacity: CapacitySettings,
    /// An open workload to run when `run` is given neither users nor a rate.
    pub arrivals: Option<Arrivals>,
    /// A closed workload to run when `run` is given neither users nor a
    /// rate: users at once, or over time.
    pub users: Option<UserStages>,
    /// Workers on other hosts that generate the load (`workers:`).
    pub workers: Option<WorkerSettings>,
    /// The Lua hooks run around every request (`script:`).
    pub script: Option<super::script::Script>,
}

impl Scenario {
    pub(crate) fn request(&self, id: RequestId) -> &Request {
        &self.requests[id.index()]
    }

    /// Mean visits per session to each request that are sent: the CBMG's
    /// expected visits, but none to a request whose `skip_if:` always
    /// holds (known at load time: `${env.…}`, literals) — a session passes
    /// through it without a request, a load or a think.
    pub fn expected_sent_visits(&self) -> Vec<f64> {
        let mut visits = self.session.expected_visits();
        for (v, r) in visits.iter_mut().zip(&self.requests) {
            if r.skip_if.as_ref().and_then(|c| c.constant()) == Some(true) {
                *v = 0.0;
            }
        }
        visits
    }

    /// The think time after `id`: its own, or the scenario's.
    pub(crate) fn think_after(&self, id: RequestId) -> &ThinkTime {
        self.request(id)
            .think_time
            .as_ref()
            .unwrap_or(&self.think_time)
    }

    /// The mean think time per request of a session, each request's think
    /// weighted by how often a session visits it (the scenario's `think_time`
    /// when no request has its own).
    pub fn mean_think_time(&self) -> Duration {
        if self.requests.iter().all(|r| r.think_time.is_none()) {
            return self.think_time.mean();
        }
        let visits = self.expected_sent_visits();
        let total: f64 = visits.iter().sum();
        // No visits, or a loop only a condition ends (its visits unbounded
        // when the condition is taken to hold).
        if !(total > 0.0 && total.is_finite()) {
            return self.think_time.mean();
        }
        let weighted: f64 = visits
            .iter()
            .enumerate()
            .map(|(i, v)| v * self.think_after(RequestId(i as u32)).mean().as_secs_f64())
            .sum();
        Duration::from_secs_f64(weighted / total)
    }

    pub fn request_id(&self, name: &str) -> Option<RequestId> {
        self.requests
            .iter()
            .position(|r| r.name == name)
            .map(|i| RequestId(i as u32))
    }
}
