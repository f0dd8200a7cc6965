//! Building batches: a record into its partition's open batch, and a
//! broker's waiting batches into one Produce request.

use super::broker::broker_task;
use super::delivery::settle;
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
    pub(super) fn drain(&self, b: usize, out: &mut Vec<u8>) {
        let config = &self.0.config;
        let mut st = self.state();
        let State {
            topics,
            brokers,
            slots,
            correlation,
            compressed,
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
                let raw = batch.records.len() as u64;
                let records = if config.compression == Compression::None {
                    &batch.records[..]
                } else {
                    codec::compress(
                        config.compression,
                        config.compression_level,
                        &batch.records,
                        compressed,
                    );
                    &compressed[..]
                };
                let wire = records.len() as u64;
                let sequenced = brokers[b]
                    .idempotent
                    .as_mut()
                    .map(|session| session.next(t, partition.id, batch.count));
                wire::produce_batch(
                    out,
                    &BatchRef {
                        partition: partition.id,
                        records,
                        attributes: codec::attribute(config.compression),
                        count: batch.count,
                        base_timestamp: batch.base_timestamp,
                        max_timestamp: batch.max_timestamp,
                        sequenced,
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
                    sizes: Sizes { wire, raw },
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
                let n = s.senders.len();
                for (i, sender) in s.senders.into_iter().enumerate() {
                    settle(
                        slots,
                        sender,
                        Ok(s.partition as u16),
                        s.sizes.share(i, n),
                        now,
                    );
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
}
