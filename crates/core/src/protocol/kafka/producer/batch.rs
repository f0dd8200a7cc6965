//! Building batches: a record into its partition's open batch, and a
//! broker's waiting batches into one Produce request.

use super::broker::broker_task;
use super::delivery::settle_batch;
use std::rc::Rc;
use std::time::Instant;

use tokio::sync::Notify;

use super::super::codec;
use super::super::wire::{self, BatchRef};
use crate::scenario::Compression;

use super::state::*;

impl Producer {
    /// Adds the record to its partition's open batch; returns its slot, or
    /// what to wait for when that batch is full. A broker takes one batch
    /// per partition per request, and refuses one past its
    /// `message.max.bytes`, so a full batch cannot grow.
    pub(super) fn append(
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
            // Listed already when a retry of the partition waits.
            if batch.queued_at.is_none() {
                batch.queued_at = Some(leader);
                broker.open.push((topic, p));
            }
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

    /// Writes one Produce request into `out` with one batch of each
    /// partition waiting for broker `b` (a retry before the open batch:
    /// a broker takes one batch per partition per request); moves them in
    /// flight.
    pub(super) fn drain(&self, b: usize, out: &mut Vec<u8>) {
        let config = &self.0.config;
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            correlation,
            compressed,
            spare,
            sent_batches,
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
        let now = Instant::now();
        let mut sent = Vec::with_capacity(open.len());
        // Partitions with more to send than this request takes, for this
        // broker and for the one their leadership moved to.
        let mut again = Vec::new();
        let mut moved = Vec::new();
        let mut i = 0;
        while i < open.len() {
            let t = open[i].0;
            let same = open[i..].iter().take_while(|(x, _)| *x == t).count();
            wire::produce_topic(out, &self.0.names[t], same);
            for &(_, p) in &open[i..i + same] {
                let topic = &mut topics[t];
                let partition = &mut topic.partitions[p];
                let mut s = match partition.retries.pop_front() {
                    Some(mut retry) => {
                        retry.retries = retry.retries.saturating_add(1);
                        retry
                    }
                    None => {
                        if topic.sticky == Some(p) {
                            topic.sticky = None;
                        }
                        let batch = &mut partition.batch;
                        let records = spare.pop().unwrap_or_default();
                        *sent_batches += 1;
                        let s = Sent {
                            topic: t,
                            partition: partition.id,
                            senders: std::mem::take(&mut batch.senders),
                            sizes: Sizes::default(),
                            records: std::mem::replace(&mut batch.records, records),
                            count: batch.count,
                            base_timestamp: batch.base_timestamp,
                            max_timestamp: batch.max_timestamp,
                            sequenced: None,
                            first_sent: now,
                            retries: 0,
                            order: *sent_batches,
                        };
                        batch.count = 0;
                        partition.drained.notify_waiters();
                        s
                    }
                };
                let raw = s.records.len() as u64;
                let records = if config.compression == Compression::None {
                    &s.records[..]
                } else {
                    codec::compress(
                        config.compression,
                        config.compression_level,
                        &s.records,
                        compressed,
                    );
                    &compressed[..]
                };
                let wire = records.len() as u64;
                s.sizes = Sizes { wire, raw };
                s.sequenced = brokers[b].idempotent.as_mut().map(|session| {
                    // A retry goes under the numbers it had on this
                    // producer id; anything else takes the next ones.
                    match s.sequenced {
                        Some(was)
                            if (was.producer_id, was.epoch)
                                == (session.producer_id, session.epoch) =>
                        {
                            was
                        }
                        _ => session.next(t, partition.id, s.count),
                    }
                });
                wire::produce_batch(
                    out,
                    &BatchRef {
                        partition: partition.id,
                        records,
                        attributes: codec::attribute(config.compression),
                        count: s.count,
                        base_timestamp: s.base_timestamp,
                        max_timestamp: s.max_timestamp,
                        sequenced: s.sequenced,
                    },
                );
                if partition.batch.count == 0 && partition.retries.is_empty() {
                    partition.batch.queued_at = None;
                } else if partition.leader == b {
                    again.push((t, p));
                } else {
                    // Its leader moved: what is left goes there.
                    partition.batch.queued_at = Some(partition.leader);
                    moved.push((t, p, partition.leader));
                }
                sent.push(s);
            }
            i += same;
        }
        wire::produce_end(out, start);
        open.clear();
        let broker = &mut brokers[b];
        // Keeps the vector's room for the next round.
        open.append(&mut again);
        broker.open = open;
        if !broker.open.is_empty() {
            // What is left waited its linger already.
            broker.oldest = Some(now);
            broker.full = true;
        }
        for (t, p, leader) in moved {
            let broker = &mut brokers[leader];
            broker.open.push((t, p));
            broker.oldest = Some(now);
            broker.full = true;
            broker.wake.notify_one();
            if !broker.running {
                broker.running = true;
                tokio::task::spawn_local(broker_task(self.clone(), leader));
            }
        }
        if config.acks == 0 {
            // No answer comes: written is acknowledged.
            for s in sent {
                let partition = s.partition as u16;
                settle_batch(slots, spare, s, Ok(partition), now);
            }
        } else {
            brokers[b].in_flight.push_back(InFlight {
                correlation: *correlation,
                sent: Instant::now(),
                batches: sent,
            });
        }
    }
}
