//! Kafka's wire protocol, the part a producer needs: request framing,
//! Metadata v4, Produce v7 and the v2 record batch (magic 2, CRC-32C), plus
//! the Java client's murmur2 key hash. Pure encoding and decoding, no I/O.
//!
//! ```text
//!  request  = size:i32  api_key:i16 api_version:i16 correlation_id:i32 client_id:string  body
//!  response = size:i32  correlation_id:i32  body
//!  batch    = 61-byte header (offsets, length, epoch, magic, crc, …, count)  records
//!  record   = length:varint attributes:i8 ts_delta:varlong offset_delta:varint
//!             key_len:varint key  value_len:varint value  headers:varint(0)
//! ```
//!
//! Versions: Produce v7, Metadata v4, InitProducerId v1, SaslHandshake v1
//! and SaslAuthenticate v1 are the newest without the "flexible" encoding,
//! and every broker from Kafka 2.2 on, 4.x included, speaks them.

const PRODUCE: i16 = 0;
const PRODUCE_VERSION: i16 = 7;
const METADATA: i16 = 3;
const METADATA_VERSION: i16 = 4;
const INIT_PRODUCER_ID: i16 = 22;
const INIT_PRODUCER_ID_VERSION: i16 = 1;
const SASL_HANDSHAKE: i16 = 17;
const SASL_HANDSHAKE_VERSION: i16 = 1;
const SASL_AUTHENTICATE: i16 = 36;
const SASL_AUTHENTICATE_VERSION: i16 = 1;

/// Bytes of a v2 record batch before its first record.
pub(crate) const BATCH_HEADER: usize = 61;

/// Starts a request in `out`: the size (patched by `finish_request`) and
/// the header.
fn begin_request(out: &mut Vec<u8>, api: i16, version: i16, correlation: i32, client: &str) {
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&api.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation.to_be_bytes());
    put_string(out, client);
}

/// Writes the size of the request that began at `start`.
fn finish_request(out: &mut [u8], start: usize) {
    let size = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A Metadata v4 request for `topics`, creating them where the broker
/// auto-creates topics.
pub(crate) fn metadata_request(out: &mut Vec<u8>, correlation: i32, client: &str, topics: &[&str]) {
    let start = out.len();
    begin_request(out, METADATA, METADATA_VERSION, correlation, client);
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for topic in topics {
        put_string(out, topic);
    }
    out.push(1); // allow_auto_topic_creation
    finish_request(out, start);
}

/// A SaslHandshake v1 request: the mechanism the client will use (then
/// SaslAuthenticate requests carry its exchange, per KIP-152).
pub(crate) fn sasl_handshake_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    mechanism: &str,
) {
    let start = out.len();
    begin_request(
        out,
        SASL_HANDSHAKE,
        SASL_HANDSHAKE_VERSION,
        correlation,
        client,
    );
    put_string(out, mechanism);
    finish_request(out, start);
}

/// A SaslAuthenticate v1 request carrying one client message.
pub(crate) fn sasl_authenticate_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    bytes: &[u8],
) {
    let start = out.len();
    begin_request(
        out,
        SASL_AUTHENTICATE,
        SASL_AUTHENTICATE_VERSION,
        correlation,
        client,
    );
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
    finish_request(out, start);
}

/// A SaslHandshake answer: its error code and the mechanisms the listener
/// takes.
pub fn sasl_handshake_response(body: &[u8]) -> Result<(i16, Vec<String>), Malformed> {
    let mut r = Reader::new(body);
    let error = r.i16()?;
    let mechanisms = (0..r.array_len()?)
        .map(|_| r.string().map(str::to_string))
        .collect::<Result<_, _>>()?;
    Ok((error, mechanisms))
}

/// A SaslAuthenticate answer.
#[derive(Debug, PartialEq)]
pub struct SaslAnswer<'a> {
    pub error: i16,
    pub message: Option<&'a str>,
    /// The server's message in the exchange.
    pub bytes: &'a [u8],
    /// How long the session lasts before the broker closes the connection
    /// (KIP-368); 0 for as long as it lasts.
    pub session_lifetime_ms: i64,
}

pub fn sasl_authenticate_response(body: &[u8]) -> Result<SaslAnswer<'_>, Malformed> {
    let mut r = Reader::new(body);
    let error = r.i16()?;
    let message = r.nullable_string()?;
    let len = r.i32()?;
    let bytes = r.take(len.max(0) as usize)?;
    let session_lifetime_ms = r.i64()?;
    Ok(SaslAnswer {
        error,
        message,
        bytes,
        session_lifetime_ms,
    })
}

/// An InitProducerId v1 request for an idempotent (not transactional)
/// producer.
pub fn init_producer_id_request(out: &mut Vec<u8>, correlation: i32, client: &str) {
    let start = out.len();
    begin_request(
        out,
        INIT_PRODUCER_ID,
        INIT_PRODUCER_ID_VERSION,
        correlation,
        client,
    );
    out.extend_from_slice(&(-1i16).to_be_bytes()); // transactional_id: null
    out.extend_from_slice(&(-1i32).to_be_bytes()); // transaction timeout: none
    finish_request(out, start);
}

/// An InitProducerId answer: its error code, the producer id and epoch.
pub fn init_producer_id_response(body: &[u8]) -> Result<(i16, i64, i16), Malformed> {
    let mut r = Reader::new(body);
    r.i32()?; // throttle time
    Ok((r.i16()?, r.i64()?, r.i16()?))
}

/// The idempotent producer's mark on a batch: who wrote it, and the
/// partition's sequence number of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequenced {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// Kafka's DUPLICATE_SEQUENCE_NUMBER: the batch was written before.
pub(crate) const DUPLICATE_SEQUENCE: i16 = 46;

/// Error codes after which a producer id's sequences are out of step with
/// the broker (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
/// UNKNOWN_PRODUCER_ID): only a new epoch or a new id brings them back.
pub(crate) fn sequence_lost(code: i16) -> bool {
    matches!(code, 45 | 47 | 59)
}

/// One partition's records, ready to go into a Produce request.
pub struct BatchRef<'a> {
    pub partition: i32,
    /// The records as they go on the wire (compressed per `attributes`).
    pub records: &'a [u8],
    /// The codec bits (0 uncompressed).
    pub attributes: i16,
    pub count: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// Set by an idempotent producer.
    pub sequenced: Option<Sequenced>,
}

/// Starts a Produce v7 request for `topics` topics; each follows with
/// `produce_topic` and its batches with `produce_batch`, then
/// `produce_end(out, start)` with what this returned.
pub fn produce_begin(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    acks: i16,
    timeout_ms: i32,
    topics: usize,
) -> usize {
    let start = out.len();
    begin_request(out, PRODUCE, PRODUCE_VERSION, correlation, client);
    out.extend_from_slice(&(-1i16).to_be_bytes()); // transactional_id: null
    out.extend_from_slice(&acks.to_be_bytes());
    out.extend_from_slice(&timeout_ms.to_be_bytes());
    out.extend_from_slice(&(topics as i32).to_be_bytes());
    start
}

pub fn produce_topic(out: &mut Vec<u8>, topic: &str, partitions: usize) {
    put_string(out, topic);
    out.extend_from_slice(&(partitions as i32).to_be_bytes());
}

pub fn produce_batch(out: &mut Vec<u8>, batch: &BatchRef<'_>) {
    out.extend_from_slice(&batch.partition.to_be_bytes());
    let size = BATCH_HEADER + batch.records.len();
    out.extend_from_slice(&(size as i32).to_be_bytes());
    put_batch(out, batch);
}

pub fn produce_end(out: &mut [u8], start: usize) {
    finish_request(out, start);
}

/// A v2 record batch: create time; a producer id where idempotent.
fn put_batch(out: &mut Vec<u8>, batch: &BatchRef<'_>) {
    out.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let length = (BATCH_HEADER - 12 + batch.records.len()) as i32;
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let checked = out.len();
    out.extend_from_slice(&batch.attributes.to_be_bytes());
    out.extend_from_slice(&(batch.count - 1).to_be_bytes()); // last offset delta
    out.extend_from_slice(&batch.base_timestamp.to_be_bytes());
    out.extend_from_slice(&batch.max_timestamp.to_be_bytes());
    let (id, epoch, sequence) = batch
        .sequenced
        .map_or((-1, -1, -1), |s| (s.producer_id, s.epoch, s.base_sequence));
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&batch.count.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[checked..]), batch.records);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(batch.records);
}

/// Appends one record to a batch's records: `offset_delta` is its place in
/// the batch, `timestamp_delta` its time after the batch's first record.
pub fn put_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: &[u8],
) {
    let key_len = key.map_or(-1, |k| k.len() as i64);
    let body = 1
        + varint_len(timestamp_delta)
        + varint_len(offset_delta.into())
        + varint_len(key_len)
        + key.map_or(0, <[u8]>::len)
        + varint_len(value.len() as i64)
        + value.len()
        + 1;
    put_varint(out, body as i64);
    out.push(0); // attributes
    put_varint(out, timestamp_delta);
    put_varint(out, offset_delta.into());
    put_varint(out, key_len);
    if let Some(key) = key {
        out.extend_from_slice(key);
    }
    put_varint(out, value.len() as i64);
    out.extend_from_slice(value);
    out.push(0); // no headers
}

/// Zig-zag varint, as records encode their lengths and deltas.
fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn varint_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - (z | 1).leading_zeros() as usize).div_ceil(7)
}

/// The Java client's `Utils.murmur2`: keyed records go to partition
/// `(murmur2(key) & 0x7fffffff) % partitions`, as any Java producer puts them.
pub(crate) fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// The largest response autoperf reads: a broker announcing more is not
/// answering a producer (Produce and Metadata answers are kilobytes), and
/// believing it would buffer up to 2 GiB.
pub(crate) const MAX_RESPONSE: usize = 64 << 20;

/// A malformed or unexpected response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed;

/// Reads a response body field by field.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, Malformed> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, Malformed> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn i64(&mut self) -> Result<i64, Malformed> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }

    /// Nullable bytes (i32 length, -1 for null): empty when null.
    fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.i32()?;
        self.take(len.max(0) as usize)
    }

    fn bool(&mut self) -> Result<bool, Malformed> {
        Ok(self.take(1)?[0] != 0)
    }

    fn string(&mut self) -> Result<&'a str, Malformed> {
        let len = self.i16()?;
        std::str::from_utf8(self.take(len.max(0) as usize)?).map_err(|_| Malformed)
    }

    fn nullable_string(&mut self) -> Result<Option<&'a str>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let text = self.take(len as usize)?;
        std::str::from_utf8(text).map(Some).map_err(|_| Malformed)
    }

    fn array_len(&mut self) -> Result<usize, Malformed> {
        let n = self.i32()?;
        // Every element takes at least a byte: a length past the rest is a lie.
        if n > self.buf.len() as i32 {
            return Err(Malformed);
        }
        Ok(n.max(0) as usize)
    }
}

/// What a Metadata v4 response says about the brokers and the topics.
#[derive(Debug, Default, PartialEq)]
pub struct Metadata {
    /// `(node id, host:port)`.
    pub brokers: Vec<(i32, String)>,
    pub topics: Vec<TopicMetadata>,
}

#[derive(Debug, PartialEq)]
pub struct TopicMetadata {
    pub name: String,
    pub error: i16,
    /// `(partition, leader node id or -1, error)`.
    pub partitions: Vec<(i32, i32, i16)>,
}

pub fn metadata_response(body: &[u8]) -> Result<Metadata, Malformed> {
    let mut r = Reader::new(body);
    r.i32()?; // throttle time
    let mut meta = Metadata::default();
    for _ in 0..r.array_len()? {
        let node = r.i32()?;
        let host = r.string()?;
        let port = r.i32()?;
        r.nullable_string()?; // rack
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        meta.brokers.push((node, addr));
    }
    r.nullable_string()?; // cluster id
    r.i32()?; // controller id
    for _ in 0..r.array_len()? {
        let error = r.i16()?;
        let name = r.string()?.to_string();
        r.bool()?; // internal
        let mut partitions = Vec::new();
        for _ in 0..r.array_len()? {
            let error = r.i16()?;
            let index = r.i32()?;
            let leader = r.i32()?;
            for _ in 0..2 {
                // replica and in-sync nodes
                let n = r.array_len()?;
                r.take(n * 4)?;
            }
            partitions.push((index, leader, error));
        }
        partitions.sort_unstable();
        meta.topics.push(TopicMetadata {
            name,
            error,
            partitions,
        });
    }
    Ok(meta)
}

/// Calls `each(topic, partition, error code)` for every partition a
/// Produce v7 response reports on.
pub fn produce_response(
    body: &[u8],
    mut each: impl FnMut(&str, i32, i16),
) -> Result<(), Malformed> {
    let mut r = Reader::new(body);
    for _ in 0..r.array_len()? {
        let topic = r.string()?;
        for _ in 0..r.array_len()? {
            let partition = r.i32()?;
            let error = r.i16()?;
            r.i64()?; // base offset
            r.i64()?; // log append time
            r.i64()?; // log start offset
            each(topic, partition, error);
        }
    }
    Ok(())
}

/// Kafka error codes that mean "ask for the metadata again".
pub(crate) fn stale_metadata(code: i16) -> bool {
    // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
    matches!(code, 3 | 5 | 6)
}

/// Kafka's REQUEST_TIMED_OUT.
pub(crate) const REQUEST_TIMED_OUT: i16 = 7;

/// What a retriable error code says of the batch it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retriable {
    /// The broker did not write it: sent again, it is written once.
    NotWritten,
    /// The broker may have written it (it timed out waiting for replicas,
    /// or lost them after the append): sent again, it may be written twice.
    MaybeWritten,
}

/// Whether a Produce error code is worth sending the batch again, as
/// Java's producer judges (the codes of its `RetriableException`s).
pub(crate) fn retriable(code: i16) -> Option<Retriable> {
    match code {
        // UNKNOWN_TOPIC_OR_PARTITION (metadata still settling),
        // LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        // KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
        3 | 5 | 6 | 19 | 56 | 74 | 75 => Some(Retriable::NotWritten),
        // REQUEST_TIMED_OUT, NETWORK_EXCEPTION,
        // NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        7 | 13 | 20 => Some(Retriable::MaybeWritten),
        _ => None,
    }
}

mod fetch;
mod offsets;
pub(crate) use fetch::*;
pub(crate) use offsets::*;

#[cfg(test)]
mod tests;
