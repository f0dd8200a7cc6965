//! What a consumer reads and commits with: Fetch v4 and OffsetCommit v2
//! (a "simple" consumer's commit: generation -1, no member, as Java's
//! `assign()` + `commitSync()` sends), non-flexible versions every broker
//! from Kafka 2.2 to 4.x speaks.
//!
//! A fetched partition's records are read batch by batch, headers only:
//! a batch's first offset, its last offset delta and its count say which
//! offsets it holds, whatever its compression; the records themselves are
//! not decoded (the testbed's consumer only counts and pays for them).

use super::{begin_request, finish_request, put_string, Malformed, Reader, BATCH_HEADER};

const FETCH: i16 = 1;
const FETCH_VERSION: i16 = 4;
const OFFSET_COMMIT: i16 = 8;
const OFFSET_COMMIT_VERSION: i16 = 2;
/// A fetch's whole answer at most, well under the largest answer the
/// connection takes (`MAX_RESPONSE`): the broker still sends a partition's
/// first batch whole however large (KIP-74), so progress never stalls.
const MAX_FETCH_BYTES: i32 = 32 << 20;

/// Where a fetch starts in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchFrom {
    pub partition: i32,
    pub offset: i64,
}

/// A Fetch v4 request for `partitions` of `topic`, waiting up to
/// `max_wait_ms` for at least a byte, at most `max_bytes` per partition.
pub(crate) fn fetch_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    topic: &str,
    partitions: &[FetchFrom],
    max_wait_ms: i32,
    max_bytes: i32,
) {
    let start = out.len();
    begin_request(out, FETCH, FETCH_VERSION, correlation, client);
    out.extend_from_slice(&(-1i32).to_be_bytes()); // replica id: a client
    out.extend_from_slice(&max_wait_ms.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    let total = max_bytes.saturating_mul(partitions.len() as i32);
    out.extend_from_slice(&total.min(MAX_FETCH_BYTES).to_be_bytes());
    out.push(0); // isolation: read uncommitted
    out.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_string(out, topic);
    out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for p in partitions {
        out.extend_from_slice(&p.partition.to_be_bytes());
        out.extend_from_slice(&p.offset.to_be_bytes());
        out.extend_from_slice(&max_bytes.to_be_bytes());
    }
    finish_request(out, start);
}

/// What a fetch gave one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub partition: i32,
    /// 0, or the broker's error code for this partition.
    pub error: i16,
    /// The offset the next fetch starts at (the fetch's own when nothing
    /// whole came back).
    pub next_offset: i64,
    /// Records at or past the fetch's offset in the whole batches that
    /// came back (control records included: they take offsets too).
    pub records: u64,
    /// The partition's end (high watermark): `high_watermark - next_offset`
    /// is what is left to read.
    pub high_watermark: i64,
}

/// Each partition's answer to a fetch from `from` (the offsets asked,
/// by partition), taking at most `max_records` of each partition's (as
/// Java's `max.poll.records`: the rest is fetched again next time).
pub(crate) fn fetch_response(
    body: &[u8],
    from: &[FetchFrom],
    max_records: u64,
) -> Result<Vec<Fetched>, Malformed> {
    let mut r = Reader::new(body);
    r.i32()?; // throttle time
    let mut fetched = Vec::new();
    for _ in 0..r.array_len()? {
        r.string()?; // topic
        for _ in 0..r.array_len()? {
            let partition = r.i32()?;
            let error = r.i16()?;
            let high_watermark = r.i64()?;
            r.i64()?; // last stable offset
            let aborted = r.i32()?;
            for _ in 0..aborted.max(0) {
                r.i64()?; // producer id
                r.i64()?; // first offset
            }
            let records = r.bytes()?;
            let asked = from
                .iter()
                .find(|f| f.partition == partition)
                .map_or(0, |f| f.offset);
            let (next_offset, count) = whole_batches(records, asked, max_records)?;
            fetched.push(Fetched {
                partition,
                error,
                next_offset,
                records: count,
                high_watermark,
            });
        }
    }
    Ok(fetched)
}

/// The offset after the records taken from `records` — at most `max`, at
/// or past `from`, in whole batches — and how many were taken. A fetch
/// may end in a partial batch (cut at the size limit): it is left for the
/// next fetch.
fn whole_batches(mut records: &[u8], from: i64, max: u64) -> Result<(i64, u64), Malformed> {
    let mut next = from;
    let mut count = 0u64;
    // first offset:i64, length:i32, then `length` bytes from the epoch on.
    while records.len() >= 12 && count < max {
        let base = i64::from_be_bytes(records[0..8].try_into().unwrap());
        let length = i32::from_be_bytes(records[8..12].try_into().unwrap());
        let total = 12 + length.max(0) as usize;
        if total > records.len() {
            break;
        }
        if total < BATCH_HEADER {
            return Err(Malformed);
        }
        let magic = records[16];
        if magic != 2 {
            return Err(Malformed);
        }
        let last_delta = i32::from_be_bytes(records[23..27].try_into().unwrap());
        let last = base + i64::from(last_delta.max(0));
        if last >= next {
            let first = base.max(next);
            let taken = ((last + 1 - first) as u64).min(max - count);
            count += taken;
            next = first + taken as i64;
        }
        records = &records[total..];
    }
    Ok((next, count))
}

/// One partition's offset to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Commit {
    pub partition: i32,
    pub offset: i64,
}

/// An OffsetCommit v2 request for `group`'s `offsets` in `topic`, as a
/// consumer outside any group generation commits (generation -1, no
/// member): the group must have no members of its own.
pub(crate) fn offset_commit_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    group: &str,
    topic: &str,
    offsets: &[Commit],
) {
    let start = out.len();
    begin_request(
        out,
        OFFSET_COMMIT,
        OFFSET_COMMIT_VERSION,
        correlation,
        client,
    );
    put_string(out, group);
    out.extend_from_slice(&(-1i32).to_be_bytes()); // generation
    put_string(out, ""); // member id
    out.extend_from_slice(&(-1i64).to_be_bytes()); // retention: the broker's
    out.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_string(out, topic);
    out.extend_from_slice(&(offsets.len() as i32).to_be_bytes());
    for c in offsets {
        out.extend_from_slice(&c.partition.to_be_bytes());
        out.extend_from_slice(&c.offset.to_be_bytes());
        out.extend_from_slice(&(-1i16).to_be_bytes()); // metadata: null
    }
    finish_request(out, start);
}

/// The first error code of a commit's answer, or 0 when every partition's
/// offset was taken.
pub(crate) fn offset_commit_response(body: &[u8]) -> Result<i16, Malformed> {
    let mut r = Reader::new(body);
    let mut first = 0;
    for _ in 0..r.array_len()? {
        r.string()?;
        for _ in 0..r.array_len()? {
            r.i32()?;
            let error = r.i16()?;
            if first == 0 {
                first = error;
            }
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 batch header (no records after it: only the header is read)
    /// at `base` holding `count` offsets.
    fn batch(base: i64, count: i32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&base.to_be_bytes());
        b.extend_from_slice(&((BATCH_HEADER - 12) as i32).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        b.push(2); // magic
        b.extend_from_slice(&0u32.to_be_bytes()); // crc
        b.extend_from_slice(&0i16.to_be_bytes()); // attributes
        b.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
        b.resize(BATCH_HEADER - 4, 0);
        b.extend_from_slice(&count.to_be_bytes());
        assert_eq!(b.len(), BATCH_HEADER);
        b
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    #[test]
    fn whole_batches_count_from_the_fetch_offset_and_leave_a_cut_one() {
        let mut records = batch(100, 10);
        records.extend(batch(110, 5));
        // Cut: the third batch's first 20 bytes only.
        records.extend(&batch(115, 7)[..20]);
        // Fetched from 104: the first batch counts 104..=109.
        assert_eq!(whole_batches(&records, 104, 1000).unwrap(), (115, 11));
        // At most 8 taken: the second batch's first two, the rest next time.
        assert_eq!(whole_batches(&records, 104, 8).unwrap(), (112, 8));
        assert_eq!(whole_batches(&[], 42, 1000).unwrap(), (42, 0));
        let mut old = batch(0, 1);
        old[16] = 1;
        assert_eq!(whole_batches(&old, 0, 1000), Err(Malformed));
    }

    #[test]
    fn a_fetch_answer_gives_each_partition_its_next_offset() {
        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes()); // throttle
        body.extend_from_slice(&1i32.to_be_bytes());
        string(&mut body, "t");
        body.extend_from_slice(&2i32.to_be_bytes());
        // Partition 0: two batches.
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&30i64.to_be_bytes()); // high watermark
        body.extend_from_slice(&30i64.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes()); // no aborted list
        let mut records = batch(0, 10);
        records.extend(batch(10, 10));
        body.extend_from_slice(&(records.len() as i32).to_be_bytes());
        body.extend(&records);
        // Partition 3: not its leader, no records.
        body.extend_from_slice(&3i32.to_be_bytes());
        body.extend_from_slice(&6i16.to_be_bytes());
        body.extend_from_slice(&(-1i64).to_be_bytes());
        body.extend_from_slice(&(-1i64).to_be_bytes());
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        let from = [
            FetchFrom {
                partition: 0,
                offset: 0,
            },
            FetchFrom {
                partition: 3,
                offset: 7,
            },
        ];
        let fetched = fetch_response(&body, &from, 1000).unwrap();
        assert_eq!(fetched[0].next_offset, 20);
        assert_eq!(fetched[0].records, 20);
        assert_eq!(fetched[0].high_watermark, 30);
        assert_eq!((fetched[1].error, fetched[1].next_offset), (6, 7));
        assert_eq!(
            fetch_response(&body[..body.len() - 3], &from, 1000),
            Err(Malformed)
        );
    }

    #[test]
    fn a_commit_names_no_member_and_reads_the_first_refusal() {
        let mut out = Vec::new();
        let offsets = [Commit {
            partition: 2,
            offset: 99,
        }];
        offset_commit_request(&mut out, 5, "ap", "g", "t", &offsets);
        // size, api 8 v2, correlation 5, client, group, generation -1,
        // member "", retention -1, topic t, partition 2 at 99, null metadata.
        assert_eq!(&out[4..8], &[0, 8, 0, 2]);
        let body = &out[4 + 8 + 4..];
        assert_eq!(&body[..3], &[0, 1, b'g']);
        assert_eq!(&body[3..7], &(-1i32).to_be_bytes());
        assert_eq!(&body[7..9], &[0, 0]);
        assert_eq!(&out[out.len() - 14..out.len() - 10], &2i32.to_be_bytes());
        let mut answer = Vec::new();
        answer.extend_from_slice(&1i32.to_be_bytes());
        string(&mut answer, "t");
        answer.extend_from_slice(&2i32.to_be_bytes());
        answer.extend_from_slice(&2i32.to_be_bytes());
        answer.extend_from_slice(&0i16.to_be_bytes());
        answer.extend_from_slice(&4i32.to_be_bytes());
        answer.extend_from_slice(&25i16.to_be_bytes());
        assert_eq!(offset_commit_response(&answer), Ok(25));
    }
}
