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
//! Failures: a broker that cannot be reached fails the records waiting for
//! it (`connect_refused` / `connect`) and is retried with backoff; a
//! connection that breaks fails the requests in flight (`reset`, `closed`);
//! a request unanswered past the target's timeout fails as `timeout` and
//! the connection is replaced. Errors the broker reports are counted as
//! `kafka_broker` (or `timeout`), and a "not the leader" kind of answer
//! refreshes the topic's metadata. So does its age (`metadata.max.age.ms`),
//! which is how partitions added during a run start getting records.

use std::cell::{RefCell, RefMut};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slab::Slab;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::wire::{self, BatchRef};
use crate::measure::ErrorKind;
use crate::protocol::{CallOutcome, Fired};

/// The producer's settings, shared by every shard.
#[derive(Debug, Clone)]
pub struct Config {
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// 0, 1 or -1 (all in-sync replicas).
    pub acks: i16,
    pub linger: Duration,
    pub batch_bytes: usize,
    /// Produce requests awaiting their answer, per broker connection.
    pub max_in_flight: usize,
    /// Per request, and for connecting and metadata.
    pub timeout: Duration,
    /// Metadata older than this is asked again.
    pub metadata_max_age: Duration,
}

/// How long a shard waits before asking again for metadata that failed.
const METADATA_RETRY: Duration = Duration::from_secs(1);
/// Reconnect backoff: doubling from the first, up to the second.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));

/// A cheap handle; clones share the producer.
#[derive(Clone)]
pub struct Producer(Rc<Inner>);

struct Inner {
    config: Arc<Config>,
    /// An instant and the Unix time in ms then: record timestamps.
    epoch: (Instant, i64),
    /// Topic names, by the index `send` takes.
    names: Vec<String>,
    state: RefCell<State>,
}

struct State {
    topics: Vec<Topic>,
    brokers: Vec<Broker>,
    slots: Slab<Slot>,
    rng: fastrand::Rng,
    correlation: i32,
}

#[derive(Clone, Copy, PartialEq)]
enum Meta {
    Unknown,
    Loading,
    Ready,
    Failed { kind: ErrorKind, until: Instant },
}

struct Topic {
    meta: Meta,
    /// A broker said the metadata is out of date: ask again.
    refreshing: bool,
    /// Past this, the metadata is asked again (`metadata.max.age.ms`).
    stale_at: Instant,
    loaded: Rc<Notify>,
    partitions: Vec<Partition>,
    /// Records without a key fill one partition's batch at a time.
    sticky: Option<usize>,
}

struct Partition {
    id: i32,
    /// Index into `State::brokers`.
    leader: usize,
    batch: Batch,
    /// Told when the batch goes out (or fails): senders waiting for room.
    drained: Rc<Notify>,
}

#[derive(Default)]
struct Batch {
    records: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    senders: Vec<Sender>,
    /// Which broker's `open` list holds this batch (set while non-empty).
    queued_at: Option<usize>,
}

struct Broker {
    node: i32,
    addr: String,
    /// `(topic, partition)` of every non-empty batch waiting for this broker.
    open: Vec<(usize, usize)>,
    /// When the oldest of them got its first record.
    oldest: Option<Instant>,
    /// One of them is full: send without waiting for the linger.
    full: bool,
    in_flight: VecDeque<InFlight>,
    /// Wakes the broker's task: records to send, or room in flight.
    wake: Rc<Notify>,
    running: bool,
}

struct InFlight {
    correlation: i32,
    sent: Instant,
    batches: Vec<Sent>,
}

struct Sent {
    topic: usize,
    partition: i32,
    senders: Vec<Sender>,
}

/// Who hears a record's outcome.
enum Sender {
    /// A task awaiting `send`, by its slot.
    Waiting(usize),
    /// A fired record's sink.
    Fired(Fired),
}

#[derive(Default)]
struct Slot {
    outcome: Option<Result<u16, ErrorKind>>,
    waker: Option<Waker>,
    /// Its sender stopped waiting (the level ended).
    abandoned: bool,
}

impl Producer {
    pub fn new(config: Arc<Config>, names: Vec<String>, seed: u64) -> Producer {
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
            }),
        }))
    }

    fn state(&self) -> RefMut<'_, State> {
        self.0.state.borrow_mut()
    }

    /// Sends one record (at `begin`) and waits for its acknowledgement: the
    /// partition it was written to, or why not.
    pub async fn send(
        &self,
        topic: usize,
        key: Option<&[u8]>,
        value: &[u8],
        begin: Instant,
    ) -> Result<u16, ErrorKind> {
        self.metadata(topic, begin).await?;
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
    pub async fn fire(&self, topic: usize, key: Option<&[u8]>, value: &[u8], fired: Fired) {
        if let Err(kind) = self.metadata(topic, fired.begin).await {
            let outcome = CallOutcome {
                result: Err(kind),
                response_time: fired.begin.elapsed(),
                connect_time: None,
                status: 0,
                redirects: 0,
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

    /// Adds the record to its partition's open batch; returns its slot, or
    /// what to wait for when that batch is full. A broker takes one batch
    /// per partition per request, and refuses one past its
    /// `message.max.bytes`, so a full batch cannot grow.
    fn append(
        &self,
        topic: usize,
        key: Option<&[u8]>,
        value: &[u8],
        at: Instant,
        sender: &mut Option<Sender>,
    ) -> Result<(), Rc<Notify>> {
        let config = &self.0.config;
        // The record's create time, from the instant the engine already
        // read: one clock read per record fewer.
        let (base, base_ms) = self.0.epoch;
        let now_ms = base_ms + at.saturating_duration_since(base).as_millis() as i64;
        let mut st = self.state();
        let State {
            topics,
            brokers,
            rng,
            ..
        } = &mut *st;
        let t = &mut topics[topic];
        let n = t.partitions.len();
        let room = |batch: &Batch| {
            batch.count == 0
                || batch.records.len() + key.map_or(0, <[u8]>::len) + value.len() + 24
                    <= config.batch_bytes
        };
        let p = match key {
            Some(key) => (wire::murmur2(key) & 0x7fff_ffff) as usize % n,
            None => {
                // Sticky: fill one partition's batch, then go on to another.
                let mut p = *t.sticky.get_or_insert_with(|| rng.usize(..n));
                if !room(&t.partitions[p].batch) {
                    p = rng.usize(..n);
                    t.sticky = Some(p);
                }
                p
            }
        };
        let partition = &mut t.partitions[p];
        if !room(&partition.batch) {
            // Full for this record: send it now rather than after the linger.
            if let Some(b) = partition.batch.queued_at {
                if !brokers[b].full {
                    brokers[b].full = true;
                    brokers[b].wake.notify_one();
                }
            }
            return Err(partition.drained.clone());
        }
        let batch = &mut partition.batch;
        // A batch queued before its leader moved still goes out from there.
        let leader = batch.queued_at.unwrap_or(partition.leader);
        let broker = &mut brokers[leader];
        if batch.count == 0 {
            batch.base_timestamp = now_ms;
            batch.max_timestamp = now_ms;
            batch.queued_at = Some(leader);
            broker.open.push((topic, p));
            broker.oldest.get_or_insert_with(Instant::now);
            if broker.open.len() == 1 {
                // The broker's task starts the linger from here.
                broker.wake.notify_one();
            }
        }
        wire::put_record(
            &mut batch.records,
            batch.count,
            now_ms - batch.base_timestamp,
            key,
            value,
        );
        batch.count += 1;
        batch.max_timestamp = batch.max_timestamp.max(now_ms);
        batch.senders.extend(sender.take());
        if batch.records.len() >= config.batch_bytes && !broker.full {
            broker.full = true;
            broker.wake.notify_one();
        }
        if !broker.running {
            broker.running = true;
            tokio::task::spawn_local(broker_task(self.clone(), leader));
        }
        Ok(())
    }

    /// Writes one Produce request with every batch waiting for broker `b`
    /// into `out`; moves their records in flight.
    fn drain(&self, b: usize, out: &mut Vec<u8>) {
        let config = &self.0.config;
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            correlation,
            ..
        } = &mut *st;
        let broker = &mut brokers[b];
        let mut open = std::mem::take(&mut broker.open);
        broker.full = false;
        broker.oldest = None;
        open.sort_unstable();
        *correlation = correlation.wrapping_add(1);
        let topic_count = {
            let mut n = 0;
            let mut last = None;
            for &(t, _) in &open {
                if last != Some(t) {
                    n += 1;
                    last = Some(t);
                }
            }
            n
        };
        let timeout_ms = config.timeout.as_millis().min(i32::MAX as u128) as i32;
        let start = wire::produce_begin(
            out,
            *correlation,
            &config.client_id,
            config.acks,
            timeout_ms,
            topic_count,
        );
        let mut sent = Vec::with_capacity(open.len());
        let mut i = 0;
        while i < open.len() {
            let t = open[i].0;
            let same = open[i..].iter().take_while(|(x, _)| *x == t).count();
            wire::produce_topic(out, &self.0.names[t], same);
            for &(_, p) in &open[i..i + same] {
                let topic = &mut topics[t];
                if topic.sticky == Some(p) {
                    topic.sticky = None;
                }
                let partition = &mut topic.partitions[p];
                let batch = &mut partition.batch;
                wire::produce_batch(
                    out,
                    &BatchRef {
                        partition: partition.id,
                        records: &batch.records,
                        count: batch.count,
                        base_timestamp: batch.base_timestamp,
                        max_timestamp: batch.max_timestamp,
                    },
                );
                batch.records.clear();
                batch.count = 0;
                batch.queued_at = None;
                partition.drained.notify_waiters();
                sent.push(Sent {
                    topic: t,
                    partition: partition.id,
                    senders: std::mem::take(&mut batch.senders),
                });
            }
            i += same;
        }
        wire::produce_end(out, start);
        open.clear();
        let broker = &mut brokers[b];
        if broker.open.is_empty() {
            // Keeps the vector's room for the next round.
            broker.open = open;
        }
        if config.acks == 0 {
            // No answer comes: written is acknowledged.
            let now = Instant::now();
            for s in sent {
                for sender in s.senders {
                    settle(slots, sender, Ok(s.partition as u16), now);
                }
            }
        } else {
            broker.in_flight.push_back(InFlight {
                correlation: *correlation,
                sent: Instant::now(),
                batches: sent,
            });
        }
    }

    /// Settles every record of the answered request.
    fn answered(&self, b: usize, body: &[u8]) -> Result<(), ErrorKind> {
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            ..
        } = &mut *st;
        let broker = &mut brokers[b];
        let correlation = i32::from_be_bytes(
            body.get(..4)
                .and_then(|c| c.try_into().ok())
                .ok_or(ErrorKind::Malformed)?,
        );
        let request = broker.in_flight.pop_front().ok_or(ErrorKind::Malformed)?;
        if request.correlation != correlation {
            // The connection is out of step: it is dropped, and this
            // request fails with the rest in flight.
            broker.in_flight.push_front(request);
            return Err(ErrorKind::Malformed);
        }
        let mut batches = request.batches;
        let names = &self.0.names;
        let now = Instant::now();
        let parsed = wire::produce_response(&body[4..], |topic, partition, code| {
            let Some(i) = batches
                .iter()
                .position(|s| s.partition == partition && names[s.topic] == topic)
            else {
                return;
            };
            let s = batches.swap_remove(i);
            let outcome = match code {
                0 => Ok(partition.clamp(0, u16::MAX as i32) as u16),
                wire::REQUEST_TIMED_OUT => Err(ErrorKind::Timeout),
                code => {
                    if wire::stale_metadata(code) {
                        topics[s.topic].refreshing = true;
                    }
                    Err(ErrorKind::KafkaBroker)
                }
            };
            for sender in s.senders {
                settle(slots, sender, outcome, now);
            }
        });
        // Partitions the answer left out (or that a malformed answer did not
        // reach) did not get their records.
        for s in batches {
            for sender in s.senders {
                settle(slots, sender, Err(ErrorKind::Malformed), now);
            }
        }
        broker.wake.notify_one();
        parsed.map_err(|_| ErrorKind::Malformed)
    }

    /// Fails what is in flight to broker `b` (its connection is gone).
    fn fail_in_flight(&self, b: usize, kind: ErrorKind) {
        let mut st = self.state();
        let State { brokers, slots, .. } = &mut *st;
        let now = Instant::now();
        for request in brokers[b].in_flight.drain(..) {
            for s in request.batches {
                for sender in s.senders {
                    settle(slots, sender, Err(kind), now);
                }
            }
        }
    }

    /// Fails the records waiting for broker `b` (it cannot be reached).
    fn fail_open(&self, b: usize, kind: ErrorKind) {
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            ..
        } = &mut *st;
        let broker = &mut brokers[b];
        broker.full = false;
        broker.oldest = None;
        let now = Instant::now();
        for (t, p) in broker.open.drain(..) {
            let partition = &mut topics[t].partitions[p];
            partition.drained.notify_waiters();
            let batch = &mut partition.batch;
            batch.records.clear();
            batch.count = 0;
            batch.queued_at = None;
            for sender in batch.senders.drain(..) {
                settle(slots, sender, Err(kind), now);
            }
        }
    }

    /// What broker `b`'s task should do next.
    fn next_step(&self, b: usize) -> Step {
        let config = &self.0.config;
        let st = self.0.state.borrow();
        let broker = &st.brokers[b];
        let wake = broker.wake.clone();
        let Some(oldest) = broker.oldest else {
            return Step::Wait(wake, None);
        };
        if broker.in_flight.len() >= config.max_in_flight {
            return Step::Wait(wake, None);
        }
        let due = oldest + config.linger;
        if broker.full || Instant::now() >= due {
            Step::Send
        } else {
            Step::Wait(wake, Some(due))
        }
    }

    /// When the oldest request to broker `b` times out, if any is in flight.
    fn request_deadline(&self, b: usize) -> Option<Instant> {
        let st = self.0.state.borrow();
        let sent = st.brokers[b].in_flight.front()?.sent;
        Some(sent + self.0.config.timeout)
    }
}

enum Step {
    Send,
    Wait(Rc<Notify>, Option<Instant>),
}

/// Gives a record its outcome and wakes its sender, or frees the slot when
/// nobody waits any more.
fn settle(slots: &mut Slab<Slot>, sender: Sender, outcome: Result<u16, ErrorKind>, now: Instant) {
    let slot = match sender {
        Sender::Waiting(slot) => slot,
        Sender::Fired(fired) => {
            let outcome = CallOutcome {
                result: outcome,
                response_time: now.saturating_duration_since(fired.begin),
                connect_time: None,
                status: 0,
                redirects: 0,
                tls: None,
            };
            fired.sink.done(fired.request, fired.intended, outcome, now);
            return;
        }
    };
    let Some(s) = slots.get_mut(slot) else {
        return;
    };
    if s.abandoned {
        slots.remove(slot);
        return;
    }
    s.outcome = Some(outcome);
    if let Some(waker) = s.waker.take() {
        waker.wake();
    }
}

/// A record's acknowledgement, awaited.
struct Delivery<'a> {
    producer: &'a Producer,
    slot: usize,
    done: bool,
}

impl Future for Delivery<'_> {
    type Output = Result<u16, ErrorKind>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.producer.state();
        let slot = &mut st.slots[self.slot];
        if let Some(outcome) = slot.outcome {
            st.slots.remove(self.slot);
            drop(st);
            self.done = true;
            return Poll::Ready(outcome);
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Delivery<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.producer.state();
        if let Some(slot) = st.slots.get_mut(self.slot) {
            if slot.outcome.is_some() {
                st.slots.remove(self.slot);
            } else {
                slot.abandoned = true;
                slot.waker = None;
            }
        }
    }
}

/// Asks the cluster about `topic` until its partitions all have a leader
/// (a topic being auto-created has none for a moment), or the timeout.
async fn load_metadata(producer: Producer, topic: usize) {
    let config = producer.0.config.clone();
    let name = producer.0.names[topic].clone();
    let give_up = Instant::now() + config.timeout;
    let outcome = loop {
        let result = fetch_metadata(&config, &name).await;
        let ready = match &result {
            Ok(meta) => meta.topics.iter().find(|t| t.name == name).filter(|t| {
                let known = |leader: i32| meta.brokers.iter().any(|&(node, _)| node == leader);
                t.error == 0
                    && !t.partitions.is_empty()
                    && t.partitions.iter().all(|&(_, leader, _)| known(leader))
            }),
            Err(_) => None,
        };
        if let (Some(t), Ok(meta)) = (ready, &result) {
            break Ok((meta.brokers.clone(), t.partitions.clone()));
        }
        if Instant::now() >= give_up {
            break Err(result.err().unwrap_or(ErrorKind::KafkaBroker));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut st = producer.state();
    let State {
        topics, brokers, ..
    } = &mut *st;
    let t = &mut topics[topic];
    match outcome {
        Ok((nodes, partitions)) => {
            for (node, addr) in nodes {
                match brokers.iter_mut().find(|b| b.node == node) {
                    Some(b) => b.addr = addr,
                    None => brokers.push(Broker {
                        node,
                        addr,
                        open: Vec::new(),
                        oldest: None,
                        full: false,
                        in_flight: VecDeque::new(),
                        wake: Rc::new(Notify::new()),
                        running: false,
                    }),
                }
            }
            let index = |node: i32| brokers.iter().position(|b| b.node == node);
            let fresh: Vec<(i32, usize)> = partitions
                .iter()
                .filter_map(|&(id, leader, _)| Some((id, index(leader)?)))
                .collect();
            // Partitions come sorted by id, and a topic's only ever grow. On a
            // refresh, batches already queued stay with the broker that holds
            // them (`queued_at`) and go out from there; new ones go to the new
            // leader; added partitions start empty.
            for (i, (id, leader)) in fresh.into_iter().enumerate() {
                match t.partitions.get_mut(i) {
                    Some(p) => {
                        p.id = id;
                        p.leader = leader;
                    }
                    None => t.partitions.push(Partition {
                        id,
                        leader,
                        batch: Batch::default(),
                        drained: Rc::new(Notify::new()),
                    }),
                }
            }
            t.stale_at = Instant::now() + config.metadata_max_age;
            t.meta = if t.partitions.is_empty() {
                Meta::Failed {
                    kind: ErrorKind::KafkaBroker,
                    until: Instant::now() + METADATA_RETRY,
                }
            } else {
                Meta::Ready
            };
        }
        Err(kind) if t.meta != Meta::Ready => {
            t.meta = Meta::Failed {
                kind,
                until: Instant::now() + METADATA_RETRY,
            };
        }
        Err(_) => {}
    }
    t.loaded.notify_waiters();
}

/// One Metadata request, to each bootstrap broker in turn until one answers.
pub(super) async fn fetch_metadata(
    config: &Config,
    topic: &str,
) -> Result<wire::Metadata, ErrorKind> {
    let mut last = ErrorKind::Connect;
    for addr in &config.bootstrap {
        let asked = async {
            let mut stream = connect(addr, config.timeout).await?;
            let mut request = Vec::new();
            wire::metadata_request(&mut request, 1, &config.client_id, &[topic]);
            stream.write_all(&request).await.map_err(|e| io_kind(&e))?;
            let mut size = [0u8; 4];
            stream
                .read_exact(&mut size)
                .await
                .map_err(|e| io_kind(&e))?;
            let size = i32::from_be_bytes(size).clamp(0, 64 << 20) as usize;
            let mut body = vec![0; size];
            stream
                .read_exact(&mut body)
                .await
                .map_err(|e| io_kind(&e))?;
            if body.len() < 4 {
                return Err(ErrorKind::Malformed);
            }
            wire::metadata_response(&body[4..]).map_err(|_| ErrorKind::Malformed)
        };
        match tokio::time::timeout(config.timeout, asked).await {
            Ok(Ok(meta)) => return Ok(meta),
            Ok(Err(kind)) => last = kind,
            Err(_) => last = ErrorKind::Timeout,
        }
    }
    Err(last)
}

async fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, ErrorKind> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Err(ErrorKind::ConnectRefused)
        }
        Ok(Err(_)) => Err(ErrorKind::Connect),
        Err(_) => Err(ErrorKind::Connect),
    }
}

fn io_kind(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as Io;
    match e.kind() {
        Io::ConnectionReset | Io::BrokenPipe | Io::ConnectionAborted => ErrorKind::Reset,
        Io::UnexpectedEof => ErrorKind::Closed,
        Io::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Connect,
    }
}

/// Keeps one connection to broker `b` while it has records to send:
/// connects, serves, and on failure fails what depended on it and
/// reconnects with backoff.
async fn broker_task(producer: Producer, b: usize) {
    let mut backoff = BACKOFF.0;
    loop {
        // Nothing to send: no connection needed yet.
        loop {
            let (waiting, wake) = {
                let st = producer.0.state.borrow();
                (st.brokers[b].oldest.is_some(), st.brokers[b].wake.clone())
            };
            if waiting {
                break;
            }
            wake.notified().await;
        }
        let addr = producer.0.state.borrow().brokers[b].addr.clone();
        match connect(&addr, producer.0.config.timeout).await {
            Ok(stream) => {
                let opened = Instant::now();
                let kind = serve(&producer, b, stream).await;
                producer.fail_in_flight(b, kind);
                if opened.elapsed() < BACKOFF.1 {
                    // Accepted, then dropped at once (a port that speaks
                    // something else, a connection limit): no tight loop.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF.1);
                } else {
                    backoff = BACKOFF.0;
                }
            }
            Err(kind) => {
                producer.fail_open(b, kind);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF.1);
            }
        }
    }
}

/// Runs one connection until it fails; returns how.
async fn serve(producer: &Producer, b: usize, stream: TcpStream) -> ErrorKind {
    let (read, write) = stream.into_split();
    tokio::select! {
        kind = writer(producer, b, write) => kind,
        kind = reader(producer, b, read) => kind,
    }
}

async fn writer(producer: &Producer, b: usize, mut write: OwnedWriteHalf) -> ErrorKind {
    let mut out = Vec::new();
    loop {
        match producer.next_step(b) {
            Step::Send => {
                out.clear();
                producer.drain(b, &mut out);
                // A broker that stops reading must not hold records (with
                // acks=0, nothing in flight would time out) past the timeout.
                let timeout = producer.0.config.timeout;
                match tokio::time::timeout(timeout, write.write_all(&out)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return io_kind(&e),
                    Err(_) => return ErrorKind::Timeout,
                }
            }
            Step::Wait(wake, None) => wake.notified().await,
            Step::Wait(wake, Some(due)) => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(due.into()) => {}
                }
            }
        }
    }
}

async fn reader(producer: &Producer, b: usize, mut read: OwnedReadHalf) -> ErrorKind {
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut at = 0;
    loop {
        // Every whole response in the buffer.
        while buf.len() - at >= 4 {
            let size = i32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
            let Ok(size) = usize::try_from(size) else {
                return ErrorKind::Malformed;
            };
            if buf.len() - at - 4 < size {
                break;
            }
            if let Err(kind) = producer.answered(b, &buf[at + 4..at + 4 + size]) {
                return kind;
            }
            at += 4 + size;
        }
        buf.drain(..at);
        at = 0;
        let deadline = producer.request_deadline(b);
        let check = deadline.unwrap_or_else(|| Instant::now() + producer.0.config.timeout);
        tokio::select! {
            read = read.read_buf(&mut buf) => match read {
                Ok(0) => return ErrorKind::Closed,
                Ok(_) => {}
                Err(e) => return io_kind(&e),
            },
            _ = tokio::time::sleep_until(check.into()) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return ErrorKind::Timeout;
                }
            }
        }
        if buf.capacity() - buf.len() < 16 << 10 {
            buf.reserve(64 << 10);
        }
    }
}
