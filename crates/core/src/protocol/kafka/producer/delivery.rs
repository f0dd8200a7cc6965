//! Records' outcomes: an answered request settles its records, a broken
//! connection or an unreachable broker fails them, and a sender awaits its
//! record's acknowledgement as a `Delivery`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use slab::Slab;

use super::super::wire;
use crate::measure::ErrorKind;
use crate::protocol::CallOutcome;

use super::broker::broker_task;

use super::state::*;

impl Producer {
    /// Settles every record of the answered request, or puts its batch
    /// back for another try when the broker refused it for a passing
    /// reason (a leader moving, a topic being made) and its delivery
    /// timeout has not passed.
    pub(super) fn answered(&self, b: usize, body: &[u8]) -> Result<(), ErrorKind> {
        let config = &self.0.config;
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            spare,
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
        let mut sequence_lost = false;
        let mut written = false;
        let idempotent = broker.idempotent.is_some();
        let mut retry = Vec::new();
        let parsed = wire::produce_response(&body[4..], |topic, partition, code| {
            let Some(i) = batches
                .iter()
                .position(|s| s.partition == partition && names[s.topic] == topic)
            else {
                return;
            };
            let s = batches.swap_remove(i);
            let outcome = match code {
                // A duplicate was written before: that write stands.
                0 | wire::DUPLICATE_SEQUENCE => {
                    written = true;
                    Ok(partition.clamp(0, u16::MAX as i32) as u16)
                }
                code => {
                    if wire::stale_metadata(code) {
                        topics[s.topic].refreshing = true;
                    }
                    // A batch not written leaves a gap in its partition's
                    // sequence numbers, which the broker refuses after, so
                    // the connection's producer id is done with. One that
                    // timed out may have been written: it goes again under
                    // the same numbers while the id lasts (`drain`), and
                    // the broker writes it once.
                    if code != wire::REQUEST_TIMED_OUT {
                        sequence_lost |= idempotent;
                    }
                    let again = match wire::retriable(code) {
                        Some(_) => true,
                        // Refused for its numbers, on a producer id of the
                        // connection's own: not written, and numbered
                        // afresh on the next connection.
                        None => idempotent && wire::sequence_lost(code),
                    };
                    if again && now < s.first_sent + config.delivery_timeout {
                        retry.push(s);
                        return;
                    }
                    Err(match code {
                        wire::REQUEST_TIMED_OUT => ErrorKind::Timeout,
                        _ => ErrorKind::KafkaBroker,
                    })
                }
            };
            settle_batch(slots, spare, s, outcome, now);
        });
        // Partitions the answer left out (or that a malformed answer did not
        // reach) did not get their records.
        for s in batches {
            settle_batch(slots, spare, s, Err(ErrorKind::Malformed), now);
        }
        if let Some(session) = broker.idempotent.as_mut().filter(|_| written) {
            session.bump_unconfirmed = false;
        }
        if sequence_lost {
            // Every later batch on this producer id would be refused: the
            // connection sends no more, and the answers in flight still
            // settle their records. Then a new epoch goes on over the same
            // connection (`Idempotent`), or the next connection gets a new id.
            broker.retiring = true;
            broker.bump_epoch |= broker.idempotent.as_ref().is_some_and(|s| s.can_bump());
        }
        broker.wake.notify_one();
        if !retry.is_empty() {
            broker.requeues_pending += 1;
            let backoff = config.retry_backoff;
            tokio::task::spawn_local(requeue_after(self.clone(), b, backoff, retry));
        }
        parsed.map_err(|_| ErrorKind::Malformed)
    }

    /// Puts refused batches back in their partitions' queues, each before
    /// the batches sent after it, and lists the partitions with a broker:
    /// the one that holds the partition already, or its leader now.
    fn requeue(&self, batches: Vec<Sent>) {
        let mut st = self.state();
        let State {
            topics, brokers, ..
        } = &mut *st;
        for s in batches {
            let topic = &mut topics[s.topic];
            // Partitions only grow, and keep their places.
            let Some(p) = topic.partitions.iter().position(|x| x.id == s.partition) else {
                continue;
            };
            let partition = &mut topic.partitions[p];
            let at = partition
                .retries
                .iter()
                .position(|r| r.order > s.order)
                .unwrap_or(partition.retries.len());
            let t = s.topic;
            partition.retries.insert(at, s);
            let b = *partition.batch.queued_at.get_or_insert_with(|| {
                brokers[partition.leader].open.push((t, p));
                partition.leader
            });
            let broker = &mut brokers[b];
            broker.oldest.get_or_insert_with(Instant::now);
            broker.full = true;
            broker.wake.notify_one();
            if !broker.running {
                broker.running = true;
                tokio::task::spawn_local(broker_task(self.clone(), b));
            }
        }
    }

    /// Fails what is in flight to broker `b` (its connection is gone).
    pub(super) fn fail_in_flight(&self, b: usize, kind: ErrorKind) {
        let mut st = self.state();
        let State {
            brokers,
            slots,
            spare,
            ..
        } = &mut *st;
        let now = Instant::now();
        for request in brokers[b].in_flight.drain(..) {
            for s in request.batches {
                settle_batch(slots, spare, s, Err(kind), now);
            }
        }
    }

    /// Fails the records waiting for broker `b` (it cannot be reached).
    pub(super) fn fail_open(&self, b: usize, kind: ErrorKind) {
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            spare,
            ..
        } = &mut *st;
        let broker = &mut brokers[b];
        broker.full = false;
        broker.oldest = None;
        let now = Instant::now();
        for (t, p) in broker.open.drain(..) {
            let partition = &mut topics[t].partitions[p];
            partition.drained.notify_waiters();
            for s in partition.retries.drain(..) {
                settle_batch(slots, spare, s, Err(kind), now);
            }
            let batch = &mut partition.batch;
            batch.records.clear();
            batch.count = 0;
            batch.queued_at = None;
            for sender in batch.senders.drain(..) {
                settle(slots, sender, Err(kind), Sizes::default(), 0, now);
            }
        }
    }
}

/// Waits `retry.backoff.ms`, then puts the batches broker `b` refused back
/// to be sent.
async fn requeue_after(
    producer: Producer,
    b: usize,
    backoff: std::time::Duration,
    batches: Vec<Sent>,
) {
    tokio::time::sleep(backoff).await;
    producer.requeue(batches);
    let mut st = producer.state();
    let pending = &mut st.brokers[b].requeues_pending;
    *pending = pending.saturating_sub(1);
}

/// Settles every record of batch `s` with `outcome`, each with its share
/// of the batch's bytes, and keeps its buffer for a next batch.
pub(super) fn settle_batch(
    slots: &mut Slab<Slot>,
    spare: &mut Vec<Vec<u8>>,
    s: Sent,
    outcome: Result<u16, ErrorKind>,
    now: Instant,
) {
    let n = s.senders.len();
    let sizes = match outcome {
        Ok(_) => s.sizes,
        Err(_) => Sizes::default(),
    };
    for (i, sender) in s.senders.into_iter().enumerate() {
        settle(slots, sender, outcome, sizes.share(i, n), s.retries, now);
    }
    if spare.len() < SPARE_BUFFERS {
        let mut records = s.records;
        records.clear();
        spare.push(records);
    }
}

/// Gives a record its outcome (and its share of its batch's bytes) and
/// wakes its sender, or frees the slot when nobody waits any more.
pub(super) fn settle(
    slots: &mut Slab<Slot>,
    sender: Sender,
    outcome: Result<u16, ErrorKind>,
    sizes: Sizes,
    retries: u16,
    now: Instant,
) {
    let slot = match sender {
        Sender::Waiting(slot) => slot,
        Sender::Fired(fired) => {
            let outcome = CallOutcome {
                result: outcome,
                response_time: now.saturating_duration_since(fired.begin),
                connect_time: None,
                http2_connection: false,
                status: 0,
                redirects: 0,
                retries,
                body_bytes: sizes.wire,
                decoded_bytes: sizes.raw,
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
    s.outcome = Some((outcome, sizes, retries));
    if let Some(waker) = s.waker.take() {
        waker.wake();
    }
}

/// A record's acknowledgement, awaited.
pub(super) struct Delivery<'a> {
    pub(super) producer: &'a Producer,
    pub(super) slot: usize,
    pub(super) done: bool,
}

impl Future for Delivery<'_> {
    type Output = Settled;

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
