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

use super::state::*;

impl Producer {
    /// Settles every record of the answered request.
    pub(super) fn answered(&self, b: usize, body: &[u8]) -> Result<(), ErrorKind> {
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
        let mut sequence_lost = false;
        let idempotent = broker.idempotent.is_some();
        let parsed = wire::produce_response(&body[4..], |topic, partition, code| {
            let Some(i) = batches
                .iter()
                .position(|s| s.partition == partition && names[s.topic] == topic)
            else {
                return;
            };
            let s = batches.swap_remove(i);
            let n = s.senders.len();
            let outcome = match code {
                // A duplicate was written before: that write stands.
                0 | wire::DUPLICATE_SEQUENCE => Ok(partition.clamp(0, u16::MAX as i32) as u16),
                wire::REQUEST_TIMED_OUT => Err(ErrorKind::Timeout),
                code if wire::sequence_lost(code) => {
                    sequence_lost = true;
                    Err(ErrorKind::KafkaBroker)
                }
                code => {
                    if wire::stale_metadata(code) {
                        topics[s.topic].refreshing = true;
                    }
                    // A batch not written leaves a gap in its partition's
                    // sequence numbers, which the broker refuses after.
                    sequence_lost |= idempotent;
                    Err(ErrorKind::KafkaBroker)
                }
            };
            for (i, sender) in s.senders.into_iter().enumerate() {
                settle(slots, sender, outcome, s.sizes.share(i, n), now);
            }
        });
        // Partitions the answer left out (or that a malformed answer did not
        // reach) did not get their records.
        for s in batches {
            for sender in s.senders {
                settle(
                    slots,
                    sender,
                    Err(ErrorKind::Malformed),
                    Sizes::default(),
                    now,
                );
            }
        }
        if sequence_lost {
            // Every later batch on this producer id would be refused: the
            // connection sends no more, the answers in flight still settle
            // their records, and the next connection gets a new id.
            broker.retiring = true;
        }
        broker.wake.notify_one();
        parsed.map_err(|_| ErrorKind::Malformed)
    }

    /// Fails what is in flight to broker `b` (its connection is gone).
    pub(super) fn fail_in_flight(&self, b: usize, kind: ErrorKind) {
        let mut st = self.state();
        let State { brokers, slots, .. } = &mut *st;
        let now = Instant::now();
        for request in brokers[b].in_flight.drain(..) {
            for s in request.batches {
                for sender in s.senders {
                    settle(slots, sender, Err(kind), Sizes::default(), now);
                }
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
                settle(slots, sender, Err(kind), Sizes::default(), now);
            }
        }
    }
}

/// Gives a record its outcome (and its share of its batch's bytes) and
/// wakes its sender, or frees the slot when nobody waits any more.
pub(super) fn settle(
    slots: &mut Slab<Slot>,
    sender: Sender,
    outcome: Result<u16, ErrorKind>,
    sizes: Sizes,
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
    s.outcome = Some((outcome, sizes));
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
    /// The partition written to, or why not; the record's bytes.
    type Output = (Result<u16, ErrorKind>, Sizes);

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
