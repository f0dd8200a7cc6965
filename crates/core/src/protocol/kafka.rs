//! Kafka through librdkafka (the `rdkafka` crate): one `FutureProducer` per
//! engine shard, each `produce` request one record, its response time the
//! wait for the broker's acknowledgement (as strict as `target.kafka.acks`).
//!
//! ```text
//!  user ─render key, value─▶ send_result ─▶ librdkafka queue ─batch─▶ broker
//!    ▲                                                                  │
//!    └──────────── DeliveryFuture (partition, offset | error) ◀── ack ──┘
//! ```
//!
//! Bounds: `message.timeout.ms` is the target's timeout, so a record the
//! broker never acknowledges fails as `timeout` after it; the user's own
//! watchdog adds a little on top in case librdkafka's report is late. At the
//! end of a level the shard drops its users and its producer: the drop
//! purges what is still queued and waits at most half a second, so a dead
//! broker cannot hold the level past its end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, FutureProducer, FutureRecord, Producer};

use super::registry;
use super::{failed, within, CallOutcome, TargetError, Transport};
use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{
    Action, AvroFraming, KafkaTarget, RecordValue, RequestId, Scenario, Template,
};

/// How long the start-of-run check waits for the cluster's metadata.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Past the target's timeout, how long a user still waits for librdkafka
/// to report a record it gave up on.
const REPORT_GRACE: Duration = Duration::from_secs(1);

/// The scenario's `produce` requests, ready to render: shared by every
/// shard's transport.
pub struct ProducePlans(Vec<ProducePlan>);

struct ProducePlan {
    topic: String,
    key: Option<Template>,
    /// Written before the value: the schema-registry header, if any.
    prefix: Vec<u8>,
    value: RecordValue,
}

impl ProducePlans {
    /// Plans every request; registers Avro schemas with their registry
    /// first, which is why this can fail.
    pub fn new(scenario: &Scenario) -> Result<Arc<ProducePlans>, TargetError> {
        let mut plans = Vec::with_capacity(scenario.requests.len());
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
            plans.push(ProducePlan {
                topic: produce.topic.clone(),
                key: produce.key.clone(),
                prefix,
                value: produce.value.clone(),
            });
        }
        Ok(Arc::new(ProducePlans(plans)))
    }

    fn topics(&self) -> impl Iterator<Item = &str> {
        let mut seen: Vec<&str> = Vec::new();
        self.0.iter().filter_map(move |p| {
            (!seen.contains(&p.topic.as_str())).then(|| {
                seen.push(&p.topic);
                p.topic.as_str()
            })
        })
    }
}

impl ProducePlan {
    fn render_value(
        &self,
        bindings: &mut impl Bindings,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), ErrorKind> {
        out.extend_from_slice(&self.prefix);
        match &self.value {
            RecordValue::Json(t) | RecordValue::Raw(t) => {
                t.render(bindings, out);
                Ok(())
            }
            RecordValue::Avro(avro) => avro
                .record
                .render(bindings, out, scratch)
                .map_err(|_| ErrorKind::Encode),
        }
    }
}

/// The producer settings: autoperf's defaults, then the scenario's own.
fn config(kafka: &KafkaTarget, timeout: Duration) -> ClientConfig {
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128).to_string();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &kafka.bootstrap)
        .set("client.id", "autoperf")
        .set("acks", kafka.acks.setting())
        // Java clients' default: the same key lands on the same partition.
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", &ms)
        .set("request.timeout.ms", &ms);
    for (key, value) in &kafka.settings {
        config.set(key, value);
    }
    config
}

/// One shard's producer.
pub struct KafkaTransport {
    producer: FutureProducer<BrokerWatch>,
    plans: Arc<ProducePlans>,
    timeout: Duration,
    /// Shared with the producer's `BrokerWatch`.
    all_down: Arc<AtomicBool>,
}

/// Hears librdkafka's client-wide errors. While every broker is down, a
/// record that times out is counted as `connect` (the cluster could not be
/// reached), not as a slow acknowledgement; the first record acknowledged
/// again ends that state.
#[derive(Clone, Default)]
struct BrokerWatch {
    all_down: Arc<AtomicBool>,
}

impl ClientContext for BrokerWatch {
    fn error(&self, error: KafkaError, _reason: &str) {
        // librdkafka keeps retrying by itself; its messages are not printed
        // (they would interleave with the live view), only classified.
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.all_down.store(true, Ordering::Relaxed);
        }
    }

    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _message: &str) {}
}

pub struct KafkaSession {
    key: Vec<u8>,
    value: Vec<u8>,
    scratch: Vec<u8>,
    watchdog: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl KafkaTransport {
    pub fn new(
        kafka: &KafkaTarget,
        timeout: Duration,
        plans: Arc<ProducePlans>,
    ) -> Result<KafkaTransport, TargetError> {
        let watch = BrokerWatch::default();
        let all_down = watch.all_down.clone();
        let producer = config(kafka, timeout)
            .create_with_context(watch)
            .map_err(|e| TargetError::Kafka {
                bootstrap: kafka.bootstrap.clone(),
                reason: e.to_string(),
            })?;
        Ok(KafkaTransport {
            producer,
            plans,
            timeout,
            all_down,
        })
    }
}

/// Asks the cluster for the topics' metadata (creating them where the
/// broker auto-creates topics), so a wrong address fails the run at once.
pub fn probe(scenario: &Scenario, kafka: &KafkaTarget) -> Result<(), TargetError> {
    let plans = ProducePlans::new(scenario)?;
    let unreachable = |reason: String| TargetError::Kafka {
        bootstrap: kafka.bootstrap.clone(),
        reason,
    };
    let producer: BaseProducer = config(kafka, scenario.target.timeout)
        .create()
        .map_err(|e| unreachable(e.to_string()))?;
    let wait = scenario.target.timeout.min(PROBE_TIMEOUT);
    for topic in plans.topics() {
        let metadata = producer
            .client()
            .fetch_metadata(Some(topic), wait)
            .map_err(|e| match e {
                KafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut) => {
                    unreachable(format!("no broker answered within {wait:?}"))
                }
                other => unreachable(other.to_string()),
            })?;
        if let Some(err) = metadata.topics().first().and_then(|t| t.error()) {
            let code = RDKafkaErrorCode::from(err);
            // A topic that does not exist yet is created by the producer's
            // own metadata request where the broker allows it (then it is
            // "leader not available" for a moment; the first records wait
            // in the producer). Where it does not, records fail, counted.
            if !matches!(
                code,
                RDKafkaErrorCode::LeaderNotAvailable | RDKafkaErrorCode::UnknownTopicOrPartition
            ) {
                return Err(unreachable(format!("topic `{topic}`: {code}")));
            }
        }
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
            watchdog: None,
        }
    }

    async fn call(
        &self,
        session: &mut KafkaSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        _body: Option<&mut Vec<u8>>,
    ) -> CallOutcome {
        let plan = &self.plans.0[id.index()];
        session.key.clear();
        session.value.clear();
        if let Some(key) = &plan.key {
            key.render(bindings, &mut session.key);
        }
        if let Err(kind) = plan.render_value(bindings, &mut session.value, &mut session.scratch) {
            return failed(kind, Duration::ZERO, None);
        }
        let mut record = FutureRecord::<[u8], [u8]>::to(&plan.topic).payload(&session.value[..]);
        if plan.key.is_some() {
            record = record.key(&session.key[..]);
        }
        let begin = Instant::now();
        let delivery = match self.producer.send_result(record) {
            Ok(delivery) => delivery,
            // Refused before it was queued: no response time to speak of.
            Err((e, _)) => return failed(error_kind(&e), Duration::ZERO, None),
        };
        let deadline = begin + self.timeout + REPORT_GRACE;
        let reported = within(&mut session.watchdog, deadline, delivery).await;
        let elapsed = begin.elapsed();
        let all_down = &self.all_down;
        match reported {
            Ok(Ok(Ok(delivery))) => {
                all_down.store(false, Ordering::Relaxed);
                CallOutcome {
                    result: Ok(delivery.partition.clamp(0, u16::MAX as i32) as u16),
                    response_time: elapsed,
                    connect_time: None,
                }
            }
            Ok(Ok(Err((e, _)))) => match error_kind(&e) {
                ErrorKind::Timeout if all_down.load(Ordering::Relaxed) => {
                    failed(ErrorKind::Connect, elapsed, None)
                }
                kind => failed(kind, elapsed, None),
            },
            // The producer went away with the record (the level ended).
            Ok(Err(_canceled)) => failed(ErrorKind::Closed, elapsed, None),
            Err(()) => failed(ErrorKind::Timeout, elapsed, None),
        }
    }
}

/// Delivery failures by kind: what librdkafka gave up on, what the broker
/// refused, what never left the client.
fn error_kind(e: &KafkaError) -> ErrorKind {
    use RDKafkaErrorCode as C;
    let code = match e {
        KafkaError::MessageProduction(code) => *code,
        _ => return ErrorKind::KafkaBroker,
    };
    match code {
        C::QueueFull => ErrorKind::KafkaQueueFull,
        C::MessageTimedOut | C::RequestTimedOut | C::OperationTimedOut => ErrorKind::Timeout,
        C::BrokerTransportFailure | C::AllBrokersDown | C::Resolve => ErrorKind::Connect,
        C::PurgeQueue | C::PurgeInflight | C::BrokerDestroy => ErrorKind::Closed,
        _ => ErrorKind::KafkaBroker,
    }
}
