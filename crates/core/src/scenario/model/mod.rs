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
//! - `workers.rs`: the worker hosts that generate the load;
//! - `classes.rs`: workload classes, each with its session and think time.

use std::path::PathBuf;
use std::time::Duration;

mod capacity;
mod classes;
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
pub(crate) use classes::{deal, pick};
pub use classes::{users_per_class, UserClass, MAX_CLASSES};
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
    /// Kinds of users, each with its session, think time and share
    /// (`classes:`); empty: every user walks `session` with `think_time`.
    pub classes: Vec<UserClass>,
}

impl Scenario {
    pub(crate) fn request(&self, id: RequestId) -> &Request {
        &self.requests[id.index()]
    }

    /// Class `class`'s session graph (the scenario's, without classes).
    pub(crate) fn session_of(&self, class: usize) -> &Cbmg {
        self.classes
            .get(class)
            .map_or(&self.session, |c| &c.session)
    }

    /// Class `class`'s think time (the scenario's, without classes).
    pub(crate) fn think_time_of(&self, class: usize) -> &ThinkTime {
        self.classes
            .get(class)
            .map_or(&self.think_time, |c| &c.think_time)
    }

    /// Each class's share of the users, in order (`[1.0]` without classes).
    pub fn class_shares(&self) -> Vec<f64> {
        match self.classes.is_empty() {
            true => vec![1.0],
            false => self.classes.iter().map(|c| c.share).collect(),
        }
    }

    /// Mean visits per session of class `class` to each request that are
    /// sent: its CBMG's expected visits, but none to a request whose
    /// `skip_if:` always holds (known at load time: `${env.…}`, literals)
    /// — a session passes through it without a request, a load or a think.
    pub fn expected_sent_visits_of(&self, class: usize) -> Vec<f64> {
        let mut visits = self.session_of(class).expected_visits();
        for (v, r) in visits.iter_mut().zip(&self.requests) {
            if r.skip_if.as_ref().and_then(|c| c.constant()) == Some(true) {
                *v = 0.0;
            }
        }
        visits
    }

    /// Mean visits per session to each request that are sent, over the
    /// classes' sessions in their shares (as an open workload's arrivals
    /// pick them).
    pub fn expected_sent_visits(&self) -> Vec<f64> {
        let mut visits = vec![0.0; self.requests.len()];
        for (class, share) in self.class_shares().into_iter().enumerate() {
            for (v, c) in visits.iter_mut().zip(self.expected_sent_visits_of(class)) {
                *v += share * c;
            }
        }
        visits
    }

    /// The think time after `id` for a user of `class`: the request's
    /// own, or the class's.
    pub(crate) fn think_after(&self, class: usize, id: RequestId) -> &ThinkTime {
        self.request(id)
            .think_time
            .as_ref()
            .unwrap_or_else(|| self.think_time_of(class))
    }

    /// The mean think time per request of class `class`'s sessions, each
    /// request's think weighted by how often a session visits it.
    pub fn mean_think_time_of(&self, class: usize) -> Duration {
        if self.requests.iter().all(|r| r.think_time.is_none()) {
            return self.think_time_of(class).mean();
        }
        let (weighted, total) = self.think_per_session(class);
        match total > 0.0 && total.is_finite() {
            true => Duration::from_secs_f64(weighted / total),
            // No visits, or a loop only a condition ends (its visits
            // unbounded when the condition is taken to hold).
            false => self.think_time_of(class).mean(),
        }
    }

    /// The mean think time per request of a session, over every class in
    /// its share (the scenario's `think_time` when nothing else is set).
    pub fn mean_think_time(&self) -> Duration {
        if self.classes.is_empty() {
            return self.mean_think_time_of(0);
        }
        let (mut weighted, mut total) = (0.0, 0.0);
        for (class, share) in self.class_shares().into_iter().enumerate() {
            let (w, t) = self.think_per_session(class);
            if !(t > 0.0 && t.is_finite()) {
                return self.think_time.mean();
            }
            weighted += share * w;
            total += share * t;
        }
        Duration::from_secs_f64(weighted / total)
    }

    /// The mean think time per request of closed users: with classes,
    /// each class's weighted by the requests its users send at light load
    /// — a user of class c sends one per `Z_c`, so the weights are
    /// `share_c / Z_c` (a session's length does not matter, unlike for
    /// arrivals: `mean_think_time`).
    pub fn closed_mean_think_time(&self) -> Duration {
        if self.classes.is_empty() {
            return self.mean_think_time();
        }
        // A class that does not think sends as fast as it is answered: a
        // millisecond stands for that.
        let floor = 1e-3;
        let (mut rate, mut shares) = (0.0, 0.0);
        for (c, class) in self.classes.iter().enumerate() {
            let z = self.mean_think_time_of(c).as_secs_f64();
            rate += class.share / z.max(floor);
            shares += class.share;
        }
        let z = shares / rate;
        Duration::from_secs_f64(if z <= floor { 0.0 } else { z })
    }

    /// The think time a closed level is judged by (the client-bottleneck
    /// rule, the demand checks): the scenario's; with classes, one of mean
    /// `mean` (the classes' as the level weighed them, else
    /// `closed_mean_think_time`) and the classes' largest spread.
    pub(crate) fn judged_think_time(&self, mean: Option<Duration>) -> ThinkTime {
        if self.classes.is_empty() {
            return self.think_time;
        }
        let mean = mean.unwrap_or_else(|| self.closed_mean_think_time());
        let cv = self
            .classes
            .iter()
            .map(|c| c.think_time.cv())
            .fold(0.0, f64::max);
        match cv > 0.0 {
            true => ThinkTime::LogNormal { mean, cv },
            false => ThinkTime::Constant(mean),
        }
    }

    /// A session of `class`'s think time in seconds and its requests.
    fn think_per_session(&self, class: usize) -> (f64, f64) {
        let visits = self.expected_sent_visits_of(class);
        let weighted = visits
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v * self
                    .think_after(class, RequestId(i as u32))
                    .mean()
                    .as_secs_f64()
            })
            .sum();
        (weighted, visits.iter().sum())
    }

    pub fn request_id(&self, name: &str) -> Option<RequestId> {
        self.requests
            .iter()
            .position(|r| r.name == name)
            .map(|i| RequestId(i as u32))
    }
}
