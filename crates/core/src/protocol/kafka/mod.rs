//! Kafka: a producer of autoperf's own (`producer.rs`, over `wire.rs`),
//! one per engine shard, each `produce` request one record, its response
//! time the wait for the broker's acknowledgement (as strict as
//! `target.kafka.acks`).
//!
//! ```text
//!  user ─render key, value─▶ Producer::send ─▶ partition batch ─▶ broker
//!    ▲                                                               │
//!    └────────────── outcome (partition | error kind) ◀──── ack ─────┘
//! ```
//!
//! Why not librdkafka: it cost ~2.3 µs of CPU per record behind the engine
//! and, even alone in a tight loop, reached only 1.2–1.3× Java's producer
//! on one core, short of the 1.5× the load generator must beat it by (see
//! bench/README.md). Keys still land where a Java client puts them
//! (murmur2), and the wire format is checked by librdkafka and by
//! Confluent's Python client in the tests.
//!
//! - `producer`: the producer, one per shard.
//! - `wire`: the Kafka protocol's requests and responses, as bytes.
//! - `codec`: record-batch compression (gzip, snappy, lz4, zstd).
//! - `sasl`: SASL's client side (PLAIN, SCRAM, OAUTHBEARER).
//! - `lag`: a consumer group's lag, read from the brokers.
//! - `consumer`: the testbed's stream processor, a consumer group whose
//!   lag and CPU per record the tests judge.
//!
//! Bounds: a record unacknowledged after the target's timeout fails as
//! `timeout`; at the end of a level the shard drops its users and its
//! producer with them, so a dead broker cannot hold the level past its end.

mod codec;
pub mod consumer;
pub(crate) mod lag;
mod producer;
mod sasl;
/// Public for the fuzzer (fuzz/), which feeds its decoders arbitrary bytes.
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use self::producer::Config;
use self::producer::{Producer, Security};
use super::registry;
use super::{failed, CallOutcome, Fired, TargetError, Transport};
use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{
    Action, AvroFraming, KafkaTarget, RecordValue, RequestId, Scenario, Template,
};

/// How long the start-of-run check waits for the cluster's metadata.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The scenario's `produce` requests, ready to render: shared by every
/// shard's transport.
pub(crate) struct ProducePlans {
    plans: Vec<ProducePlan>,
    /// Every topic produced to, once each.
    topics: Vec<String>,
}

struct ProducePlan {
    /// Index into `ProducePlans::topics`.
    topic: usize,
    key: Option<Template>,
    /// Written before the value: the schema-registry header, if any.
    prefix: Vec<u8>,
    value: RecordValue,
}

impl ProducePlans {
    /// Plans every request; registers Avro schemas with their registry
    /// first, which is why this can fail.
    pub(crate) fn new(scenario: &Scenario) -> Result<Arc<ProducePlans>, TargetError> {
        let mut plans = Vec::with_capacity(scenario.requests.len());
        let mut topics: Vec<String> = Vec::new();
        for request in &scenario.requests {
            let Action::Produce(produce) = &request.action else {
                unreachable!("validation keeps HTTP requests to HTTP targets")
            };
            let mut prefix = Vec::new();
            if let RecordValue::Avro(avro) = &produce.value {
                let id = match &avro.framing {
                    AvroFraming::Bare => None,
                    AvroFraming::SchemaId(id) => Some(*id),
                    AvroFraming::Registry { url, subject } => Some(registry::register(
                        url,
                        subject,
                        &avro.schema_json,
                        scenario.target.timeout,
                    )?),
                };
                if let Some(id) = id {
                    // Confluent's wire format: magic byte 0, the id big-endian.
                    prefix.push(0);
                    prefix.extend_from_slice(&id.to_be_bytes());
                }
            }
            let topic = match topics.iter().position(|t| *t == produce.topic) {
                Some(i) => i,
                None => {
                    topics.push(produce.topic.clone());
                    topics.len() - 1
                }
            };
            plans.push(ProducePlan {
                topic,
                key: produce.key.clone(),
                prefix,
                value: produce.value.clone(),
            });
        }
        Ok(Arc::new(ProducePlans { plans, topics }))
    }
}

impl ProducePlan {
    /// Renders the record's key and value into the session's buffers.
    fn render(
        &self,
        session: &mut KafkaSession,
        bindings: &mut impl Bindings,
    ) -> Result<(), ErrorKind> {
        session.key.clear();
        session.value.clear();
        if let Some(key) = &self.key {
            key.render(bindings, &mut session.key)
                .map_err(|_| ErrorKind::Encode)?;
        }
        self.render_value(bindings, &mut session.value, &mut session.scratch)
    }

    fn render_value(
        &self,
        bindings: &mut impl Bindings,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), ErrorKind> {
        out.extend_from_slice(&self.prefix);
        match &self.value {
            RecordValue::Json(t) | RecordValue::Raw(t) => {
                t.render(bindings, out).map_err(|_| ErrorKind::Encode)
            }
            RecordValue::Avro(avro) => avro
                .record
                .render(bindings, out, scratch)
                .map_err(|_| ErrorKind::Encode),
        }
    }
}

/// The producer's configuration for a target; an error (a CA or key file
/// that cannot be read) names the setting to fix.
pub fn config(kafka: &KafkaTarget, timeout: Duration) -> Result<Arc<Config>, TargetError> {
    let settings = &kafka.producer;
    let tls = match &kafka.security.tls {
        Some(tls) => {
            Some(
                Security::tls_connector(tls).map_err(|reason| TargetError::KafkaRefused {
                    bootstrap: kafka.bootstrap.clone(),
                    reason,
                })?,
            )
        }
        None => None,
    };
    Ok(Arc::new(Config {
        bootstrap: kafka
            .bootstrap
            .split(',')
            .map(|b| {
                let b = b.trim();
                b.split_once("://").map_or(b, |(_, addr)| addr).to_string()
            })
            .collect(),
        client_id: settings.client_id.clone(),
        acks: kafka.acks.code(),
        linger: settings.linger,
        batch_bytes: settings.batch_bytes as usize,
        max_in_flight: settings.max_in_flight as usize,
        metadata_max_age: settings.metadata_max_age,
        retry_backoff: settings.retry_backoff,
        delivery_timeout: settings.delivery_timeout,
        compression: settings.compression,
        compression_level: settings.compression_level,
        security: Security {
            tls,
            sasl: kafka.security.sasl.clone(),
        },
        idempotence: settings.idempotence,
        timeout,
    }))
}

/// One shard's producer and the requests it sends. Built on the shard's
/// own thread: the producer lives there.
pub(crate) struct KafkaTransport {
    producer: Producer,
    plans: Arc<ProducePlans>,
}

pub(crate) struct KafkaSession {
    key: Vec<u8>,
    value: Vec<u8>,
    scratch: Vec<u8>,
}

impl KafkaTransport {
    pub(crate) fn new(config: Arc<Config>, plans: Arc<ProducePlans>, seed: u64) -> KafkaTransport {
        KafkaTransport {
            producer: Producer::new(config, plans.topics.clone(), seed),
            plans,
        }
    }
}

/// Asks the cluster for the topics' metadata (creating them where the
/// broker auto-creates topics), so a wrong address fails the run at once.
pub(crate) fn probe(scenario: &Scenario, kafka: &KafkaTarget) -> Result<(), TargetError> {
    let plans = ProducePlans::new(scenario)?;
    let wait = scenario.target.timeout.min(PROBE_TIMEOUT);
    let mut config = (*config(kafka, wait)?).clone();
    config.timeout = wait;
    let unreachable = |reason: String| TargetError::Kafka {
        bootstrap: kafka.bootstrap.clone(),
        reason,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unreachable(e.to_string()))?;
    for topic in &plans.topics {
        let meta = runtime
            .block_on(producer::fetch_metadata(&config, topic))
            .map_err(|failed| {
                if let Some(reason) = failed.reason {
                    return TargetError::KafkaRefused {
                        bootstrap: kafka.bootstrap.clone(),
                        reason,
                    };
                }
                let tls = kafka.security.tls.as_ref();
                let client_cert = tls.is_some_and(|t| t.client_cert.is_some());
                let refused = |reason: String| TargetError::KafkaRefused {
                    bootstrap: kafka.bootstrap.clone(),
                    reason,
                };
                match failed.kind {
                    ErrorKind::ConnectRefused => unreachable("connection refused".to_string()),
                    ErrorKind::Connect => unreachable(format!("no broker answered within {wait:?}")),
                    // Connected, then no Kafka answer: a TLS listener that
                    // wants a client certificate drops the connection once
                    // the handshake is over.
                    ErrorKind::Tls | ErrorKind::Timeout | ErrorKind::Closed | ErrorKind::Reset
                        if tls.is_some() && !client_cert =>
                    {
                        refused(format!("no answer over TLS ({}): if the listener requires a client certificate, give ssl.certificate.location and ssl.key.location; check that security.protocol matches the listener", failed.kind.name()))
                    }
                    // Kafka's framing read from a listener that speaks
                    // another protocol (TLS, SASL), or the reverse.
                    ErrorKind::Malformed | ErrorKind::Closed | ErrorKind::Reset | ErrorKind::Timeout => {
                        refused(format!("the broker's answer failed ({}): check that security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) matches the listener at bootstrap", failed.kind.name()))
                    }
                    other => unreachable(format!("its answer failed ({})", other.name())),
                }
            })?;
        // A topic that does not exist yet is being created by this very
        // request where the broker allows it (then it is "leader not
        // available" for a moment; the first records wait). Where it does
        // not, or the topic is unusable, say so now.
        if let Some(t) = meta.topics.iter().find(|t| t.name == *topic) {
            if t.error != 0 && !matches!(t.error, 3 | 5) {
                return Err(unreachable(format!(
                    "topic `{topic}`: Kafka error code {}",
                    t.error
                )));
            }
        }
    }
    if config.idempotence {
        runtime
            .block_on(producer::probe_producer_id(&config))
            .map_err(|failed| match failed.reason {
                Some(reason) => TargetError::KafkaRefused {
                    bootstrap: kafka.bootstrap.clone(),
                    reason,
                },
                // The metadata came from this broker a moment ago: it is
                // there, but does not hand out producer ids.
                None => TargetError::KafkaRefused {
                    bootstrap: kafka.bootstrap.clone(),
                    reason: format!(
                        "the broker's answer to InitProducerId failed ({}): set enable.idempotence: false for a broker without idempotent producers",
                        failed.kind.name()
                    ),
                },
            })?;
    }
    Ok(())
}

impl Transport for KafkaTransport {
    type Session = KafkaSession;

    fn new_session(&self) -> KafkaSession {
        KafkaSession {
            key: Vec::new(),
            value: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn can_fire(&self) -> bool {
        true
    }

    async fn fire(
        &self,
        session: &mut KafkaSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        fired: Fired,
    ) {
        let plan = &self.plans.plans[id.index()];
        if let Err(kind) = plan.render(session, bindings) {
            let outcome = failed(kind, Duration::ZERO, None);
            fired.sink.done(id, fired.intended, outcome, Instant::now());
            return;
        }
        let key = plan.key.is_some().then_some(&session.key[..]);
        self.producer
            .fire(plan.topic, key, &session.value, fired)
            .await;
    }

    async fn call(
        &self,
        session: &mut KafkaSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        _response: Option<&mut super::Response>,
    ) -> CallOutcome {
        let plan = &self.plans.plans[id.index()];
        if let Err(kind) = plan.render(session, bindings) {
            return failed(kind, Duration::ZERO, None);
        }
        let begin = Instant::now();
        let key = plan.key.is_some().then_some(&session.key[..]);
        // No timer per record: the producer bounds every wait itself (see
        // `producer.rs`), and 20,000 users' timers cost more than the rest.
        let sent = self
            .producer
            .send(plan.topic, key, &session.value, begin)
            .await;
        let elapsed = begin.elapsed();
        match sent {
            (Ok(partition), sizes, retries) => CallOutcome {
                result: Ok(partition),
                response_time: elapsed,
                connect_time: None,
                http2_connection: false,
                status: 0,
                redirects: 0,
                retries,
                // The record's share of its batch as sent, and as written
                // before compression.
                body_bytes: sizes.wire,
                decoded_bytes: sizes.raw,
                tls: None,
            },
            (Err(kind), _, retries) => CallOutcome {
                retries,
                ..failed(kind, elapsed, None)
            },
        }
    }
}
