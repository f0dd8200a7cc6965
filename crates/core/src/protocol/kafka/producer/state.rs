//! The producer's state, shared by its parts on one shard's thread: the
//! topics and their partitions' open batches, the brokers and what is in
//! flight to each, and the slots where records await their outcomes.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use slab::Slab;
use tokio::sync::Notify;

use super::config::Config;
use crate::measure::ErrorKind;
use crate::protocol::Fired;

/// How long a shard waits before asking again for metadata that failed.
pub(crate) const METADATA_RETRY: Duration = Duration::from_secs(1);
/// Reconnect backoff: doubling from the first, up to the second.
pub(crate) const BACKOFF: (Duration, Duration) =
    (Duration::from_millis(50), Duration::from_secs(1));

/// A cheap handle; clones share the producer.
#[derive(Clone)]
pub(crate) struct Producer(pub(super) Rc<Inner>);

pub(crate) struct Inner {
    pub(crate) config: Arc<Config>,
    /// An instant and the Unix time in ms then: record timestamps.
    pub(crate) epoch: (Instant, i64),
    /// Topic names, by the index `send` takes.
    pub(crate) names: Vec<String>,
    pub(crate) state: RefCell<State>,
}

pub(crate) struct State {
    pub(crate) topics: Vec<Topic>,
    pub(crate) brokers: Vec<Broker>,
    pub(crate) slots: Slab<Slot>,
    pub(crate) rng: fastrand::Rng,
    pub(crate) correlation: i32,
    /// A batch's records compressed, before they join the request.
    pub(crate) compressed: Vec<u8>,
    /// Record buffers of answered batches, for the next batches to fill.
    pub(crate) spare: Vec<Vec<u8>>,
    /// Batches sent so far: each one's place, which retries keep.
    pub(crate) sent_batches: u64,
}

/// Spare record buffers kept at most (each holds up to `batch.size`).
pub(crate) const SPARE_BUFFERS: usize = 64;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Meta {
    Unknown,
    Loading,
    Ready,
    Failed { kind: ErrorKind, until: Instant },
}

pub(crate) struct Topic {
    pub(crate) meta: Meta,
    /// A broker said the metadata is out of date: ask again.
    pub(crate) refreshing: bool,
    /// Past this, the metadata is asked again (`metadata.max.age.ms`).
    pub(crate) stale_at: Instant,
    pub(crate) loaded: Rc<Notify>,
    pub(crate) partitions: Vec<Partition>,
    /// Records without a key fill one partition's batch at a time.
    pub(crate) sticky: Option<usize>,
}

pub(crate) struct Partition {
    pub(crate) id: i32,
    /// Index into `State::brokers`.
    pub(crate) leader: usize,
    pub(crate) batch: Batch,
    /// Batches the broker refused for a passing reason, back from their
    /// backoff, in the order they were first sent: each goes before the
    /// open batch.
    pub(crate) retries: VecDeque<Sent>,
    /// Told when the batch goes out (or fails): senders waiting for room.
    pub(crate) drained: Rc<Notify>,
}

#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) records: Vec<u8>,
    pub(crate) count: i32,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) senders: Vec<Sender>,
    /// Which broker's `open` list holds the partition: set while this
    /// batch, or a retry, waits to be sent.
    pub(crate) queued_at: Option<usize>,
}

pub(crate) struct Broker {
    pub(crate) node: i32,
    pub(crate) addr: String,
    /// `(topic, partition)` of every non-empty batch waiting for this broker.
    pub(crate) open: Vec<(usize, usize)>,
    /// When the oldest of them got its first record.
    pub(crate) oldest: Option<Instant>,
    /// One of them is full: send without waiting for the linger.
    pub(crate) full: bool,
    pub(crate) in_flight: VecDeque<InFlight>,
    /// Wakes the broker's task: records to send, or room in flight.
    pub(crate) wake: Rc<Notify>,
    pub(crate) running: bool,
    /// The idempotent producer's id on the current connection.
    pub(crate) idempotent: Option<Idempotent>,
    /// The connection sends nothing more; it ends once what it has in
    /// flight is answered (its producer id's sequences are lost, or its
    /// SASL session nears its end).
    pub(crate) retiring: bool,
    /// Its producer id's sequences are lost, and the id can take a new
    /// epoch: once what is in flight is answered, the connection bumps the
    /// epoch and goes on, instead of ending (KIP-360).
    pub(crate) bump_epoch: bool,
    /// Refused batches of this broker's answers still waiting out
    /// `retry.backoff.ms` before they go back in their queues. A bump waits
    /// for them: sent after the bump, the batches behind them would take
    /// their places (and their partitions' first numbers).
    pub(crate) requeues_pending: u32,
}

/// An idempotent producer on one broker connection: its id, and each
/// partition's next sequence number. Every connection gets an id of its own
/// (InitProducerId), so a connection that breaks with batches in an
/// unknown state takes its sequences with it and the next starts afresh,
/// as the broker expects of a new id.
///
/// A refused batch leaves a gap in its partition's sequence, and a broker
/// that lost the producer's state (it expired while the producer was idle)
/// knows none of them: either way the id's sequences are out of step. As
/// Java's idempotent producer does since KIP-360, the producer then waits
/// for what is in flight, bumps its epoch and numbers every partition from
/// 0 again — the broker takes a higher epoch starting at 0 as a fresh
/// start — and goes on over the same connection. A bump the broker refuses
/// in turn (nothing written since), or an epoch at its last value, ends the
/// connection and the next one asks for a new id.
pub(crate) struct Idempotent {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    /// By `(topic, partition id)`.
    pub(crate) sequences: std::collections::HashMap<(usize, i32), i32>,
    /// The epoch was bumped and no batch has been written under it yet.
    pub(crate) bump_unconfirmed: bool,
}

impl Idempotent {
    pub(crate) fn new(producer_id: i64, epoch: i16) -> Idempotent {
        Idempotent {
            producer_id,
            epoch,
            sequences: Default::default(),
            bump_unconfirmed: false,
        }
    }

    /// Whether a lost sequence can be mended by a new epoch.
    pub(crate) fn can_bump(&self) -> bool {
        self.epoch < i16::MAX && !self.bump_unconfirmed
    }

    /// A new epoch: every partition's sequence starts again at 0.
    pub(crate) fn bump(&mut self) {
        self.epoch += 1;
        self.sequences.clear();
        self.bump_unconfirmed = true;
    }

    /// The mark of a batch of `count` records to partition `(topic, id)`.
    pub(crate) fn next(
        &mut self,
        topic: usize,
        id: i32,
        count: i32,
    ) -> super::super::wire::Sequenced {
        let next = self.sequences.entry((topic, id)).or_insert(0);
        let base_sequence = *next;
        // Sequences wrap from i32::MAX to 0.
        *next = ((i64::from(base_sequence) + i64::from(count)) & 0x7fff_ffff) as i32;
        super::super::wire::Sequenced {
            producer_id: self.producer_id,
            epoch: self.epoch,
            base_sequence,
        }
    }
}

pub(crate) struct InFlight {
    pub(crate) correlation: i32,
    pub(crate) sent: Instant,
    pub(crate) batches: Vec<Sent>,
}

/// A batch sent and not answered yet; kept whole, to be sent again if the
/// broker refuses it for a passing reason.
pub(crate) struct Sent {
    pub(crate) topic: usize,
    pub(crate) partition: i32,
    pub(crate) senders: Vec<Sender>,
    /// The batch's records as sent and before compression.
    pub(crate) sizes: Sizes,
    /// Its records as written (uncompressed), and what the header says.
    pub(crate) records: Vec<u8>,
    pub(crate) count: i32,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
    /// Its producer id and sequence when last sent idempotently: a batch
    /// the broker may have written goes again under the same, so that the
    /// broker writes it once.
    pub(crate) sequenced: Option<super::super::wire::Sequenced>,
    /// When it was first sent: `delivery.timeout.ms` counts from here.
    pub(crate) first_sent: Instant,
    /// How many times it was sent again.
    pub(crate) retries: u16,
    /// Its place among the producer's batches: retries keep the order.
    pub(crate) order: u64,
}

/// Bytes of records on the wire (compressed) and as written, summed over
/// a batch or shared out to its records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub wire: u64,
    pub raw: u64,
}

impl Sizes {
    /// Record `i` of `n`'s share: the shares of all `n` sum to `self`.
    pub(crate) fn share(self, i: usize, n: usize) -> Sizes {
        let (i, n) = (i as u64, n.max(1) as u64);
        let part = |total: u64| match total.checked_mul(i + 1) {
            // A batch's bytes times its records fit in 64 bits: no 128-bit
            // division per record (1.2% of the generator's `perf` samples
            // at 1.2 M records/s).
            Some(upto) => upto / n - total * i / n,
            None => {
                let (total, i, n) = (u128::from(total), u128::from(i), u128::from(n));
                (total * (i + 1) / n - total * i / n) as u64
            }
        };
        Sizes {
            wire: part(self.wire),
            raw: part(self.raw),
        }
    }
}

/// Who hears a record's outcome.
pub(crate) enum Sender {
    /// A task awaiting `send`, by its slot.
    Waiting(usize),
    /// A fired record's sink.
    Fired(Fired),
}

/// A record's outcome: the partition written to, or why not; its share of
/// its batch's bytes; how many times its batch was sent again.
pub(crate) type Settled = (Result<u16, ErrorKind>, Sizes, u16);

#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) outcome: Option<Settled>,
    pub(crate) waker: Option<Waker>,
    /// Its sender stopped waiting (the level ended).
    pub(crate) abandoned: bool,
}
