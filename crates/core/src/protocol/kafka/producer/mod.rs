//! One shard's Kafka producer: records batched per partition and sent to
//! each partition's leader over one connection per broker, all on the
//! shard's own thread — no locks, no cross-thread wake-ups, one write and
//! one read per batch of thousands of records.
//!
//! ```text
//!  send(topic, key, value) ─murmur2(key) % n─▶ partition's open batch ──┐
//!        │                                                                │ full, or linger over
//!        ▼                                                                ▼
//!   slot (waits) ◀── outcome per record ◀── reader ◀── broker ◀── writer: one Produce request
//!                                                                         for all of a broker's batches
//! ```
//!
//! librdkafka, which this replaces, spent ~2.3 µs of CPU per record here
//! (its own threads, a mutex per message, a delivery report handed to the
//! shard across threads) and on one core reached only 1.2–1.3× Java's
//! producer even without autoperf's engine around it (bench/README.md).
//!
//! - `config`: the producer's settings and its connections' security.
//! - `state`: what its parts share: topics, partitions, brokers, slots.
//! - `batch`: records into batches, batches into Produce requests.
//! - `metadata`: partitions and their leaders, asked of the cluster.
//! - `connection`: one connection to a broker (TCP, TLS, SASL).
//! - `broker`: a broker's connection task (writer, reader, reconnection).
//! - `delivery`: records' outcomes, settled or failed, and their senders.
//!
//! Failures: a broker that cannot be reached fails the records waiting for
//! it (`connect_refused` / `connect`) and is retried with backoff; a
//! connection that breaks fails the requests in flight (`reset`, `closed`);
//! a request unanswered past the target's timeout fails as `timeout` and
//! the connection is replaced. A batch the broker refuses for a passing
//! reason (its leader moving, a topic being made: Java's retriable errors)
//! goes again after `retry.backoff.ms`, until `delivery.timeout.ms` after
//! it was first sent, and its records count the retries, not an error;
//! with idempotence it keeps its sequence numbers while the connection's
//! producer id lasts, so the broker writes it once. Other errors the broker
//! reports are counted as `kafka_broker` (or `timeout`). A "not the leader"
//! kind of answer refreshes the topic's metadata. So does its age
//! (`metadata.max.age.ms`), which is how partitions added during a run
//! start getting records.

mod batch;
mod broker;
mod config;
mod connection;
mod delivery;
mod metadata;
mod state;

pub(super) use config::Security;
pub(super) use connection::{open, probe_producer_id, round_trip, Conn, OpenError};
pub(super) use metadata::fetch_metadata;

pub(crate) use config::Config;
use delivery::Delivery;
use metadata::load_metadata;
use state::*;
pub(crate) use state::{Producer, Settled, Sizes};

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use slab::Slab;
use tokio::sync::Notify;

use crate::measure::ErrorKind;
use crate::protocol::{CallOutcome, Fired};

impl Producer {
    pub(crate) fn new(config: Arc<Config>, names: Vec<String>, seed: u64) -> Producer {
        let topics = names
            .iter()
            .map(|_| Topic {
                meta: Meta::Unknown,
                refreshing: false,
                stale_at: Instant::now(),
                loaded: Rc::new(Notify::new()),
                partitions: Vec::new(),
                sticky: None,
            })
            .collect();
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Producer(Rc::new(Inner {
            config,
            epoch: (Instant::now(), epoch_ms),
            names,
            state: RefCell::new(State {
                topics,
                brokers: Vec::new(),
                slots: Slab::new(),
                rng: fastrand::Rng::with_seed(seed),
                correlation: 0,
                compressed: Vec::new(),
                spare: Vec::new(),
                sent_batches: 0,
            }),
        }))
    }

    fn state(&self) -> RefMut<'_, State> {
        self.0.state.borrow_mut()
    }

    /// Sends one record (at `begin`) and waits for its acknowledgement: the
    /// partition it was written to, or why not, its share of its batch's
    /// bytes, and how many times the batch was sent again.
    pub(crate) async fn send(
        &self,
        topic: usize,
        key: Option<&[u8]>,
        value: &[u8],
        begin: Instant,
    ) -> Settled {
        if let Err(kind) = self.metadata(topic, begin).await {
            return (Err(kind), Sizes::default(), 0);
        }
        let slot = self.0.state.borrow_mut().slots.insert(Slot::default());
        let delivery = Delivery {
            producer: self,
            slot,
            done: false,
        };
        self.queue(topic, key, value, begin, Sender::Waiting(slot))
            .await;
        delivery.await
    }

    /// Sends one record without waiting for it: `fired.sink` hears how it
    /// went. Returns once the record is in its batch.
    pub(crate) async fn fire(&self, topic: usize, key: Option<&[u8]>, value: &[u8], fired: Fired) {
        if let Err(kind) = self.metadata(topic, fired.begin).await {
            let outcome = CallOutcome {
                result: Err(kind),
                response_time: fired.begin.elapsed(),
                connect_time: None,
                http2_connection: false,
                status: 0,
                redirects: 0,
                retries: 0,
                body_bytes: 0,
                decoded_bytes: 0,
                tls: None,
            };
            let now = Instant::now();
            fired.sink.done(fired.request, fired.intended, outcome, now);
            return;
        }
        let begin = fired.begin;
        self.queue(topic, key, value, begin, Sender::Fired(fired))
            .await;
    }

    /// Puts the record in its batch once the batch has room.
    async fn queue(
        &self,
        topic: usize,
        key: Option<&[u8]>,
        value: &[u8],
        at: Instant,
        sender: Sender,
    ) {
        let mut sender = Some(sender);
        loop {
            match self.append(topic, key, value, at, &mut sender) {
                Ok(()) => return,
                // Its partition's batch is full: wait until it goes out.
                Err(drained) => drained.notified().await,
            }
        }
    }

    /// Waits until the topic's partitions and leaders are known; asks again
    /// in the background when a broker said they changed, or they are older
    /// than `metadata.max.age.ms` at `now`.
    async fn metadata(&self, topic: usize, now: Instant) -> Result<(), ErrorKind> {
        loop {
            let loaded = {
                let mut st = self.state();
                let t = &mut st.topics[topic];
                match t.meta {
                    Meta::Ready => {
                        if t.refreshing || now >= t.stale_at {
                            t.refreshing = false;
                            // Asked again in a second if this one fails.
                            t.stale_at = now + METADATA_RETRY;
                            tokio::task::spawn_local(load_metadata(self.clone(), topic));
                        }
                        return Ok(());
                    }
                    Meta::Failed { kind, until } if Instant::now() < until => return Err(kind),
                    Meta::Loading => t.loaded.clone(),
                    Meta::Unknown | Meta::Failed { .. } => {
                        t.meta = Meta::Loading;
                        tokio::task::spawn_local(load_metadata(self.clone(), topic));
                        t.loaded.clone()
                    }
                }
            };
            loaded.notified().await;
        }
    }
}
