//! What a consumer group's lag is read from: its coordinator
//! (FindCoordinator v1), the offsets it committed (OffsetFetch v3) and the
//! partitions' end offsets (ListOffsets v1). Non-flexible versions, which
//! every broker from Kafka 2.2 to 4.x speaks.

use super::{begin_request, finish_request, put_string, Malformed, Reader};

const LIST_OFFSETS: i16 = 2;
const LIST_OFFSETS_VERSION: i16 = 1;
const OFFSET_FETCH: i16 = 9;
const OFFSET_FETCH_VERSION: i16 = 3;
const FIND_COORDINATOR: i16 = 10;
const FIND_COORDINATOR_VERSION: i16 = 1;

/// ListOffsets' timestamp that asks for the end (the next offset written).
pub(crate) const LATEST: i64 = -1;

/// A FindCoordinator v1 request for consumer group `group`.
pub(crate) fn find_coordinator_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    group: &str,
) {
    let start = out.len();
    begin_request(
        out,
        FIND_COORDINATOR,
        FIND_COORDINATOR_VERSION,
        correlation,
        client,
    );
    put_string(out, group);
    out.push(0); // key type: a group
    finish_request(out, start);
}

/// The coordinator's `host:port`, or the error code the broker gave.
pub(crate) fn find_coordinator_response(body: &[u8]) -> Result<Result<String, i16>, Malformed> {
    let mut r = Reader::new(body);
    r.i32()?; // throttle time
    let error = r.i16()?;
    r.nullable_string()?; // error message
    r.i32()?; // node id
    let host = r.string()?;
    let port = r.i32()?;
    if error != 0 {
        return Ok(Err(error));
    }
    Ok(Ok(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }))
}

/// An OffsetFetch v3 request for every partition group `group` committed.
pub(crate) fn offset_fetch_request(out: &mut Vec<u8>, correlation: i32, client: &str, group: &str) {
    let start = out.len();
    begin_request(out, OFFSET_FETCH, OFFSET_FETCH_VERSION, correlation, client);
    put_string(out, group);
    out.extend_from_slice(&(-1i32).to_be_bytes()); // topics: all
    finish_request(out, start);
}

/// One partition's committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Committed {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The group's committed offsets (those of partitions without one, -1,
/// left out), or the group's or a partition's error code.
pub(crate) fn offset_fetch_response(body: &[u8]) -> Result<Result<Vec<Committed>, i16>, Malformed> {
    let mut r = Reader::new(body);
    r.i32()?; // throttle time
    let mut committed = Vec::new();
    let mut partition_error = 0;
    for _ in 0..r.array_len()? {
        let topic = r.string()?;
        for _ in 0..r.array_len()? {
            let partition = r.i32()?;
            let offset = r.i64()?;
            r.nullable_string()?; // metadata
            let error = r.i16()?;
            if error != 0 {
                partition_error = error;
            } else if offset >= 0 {
                committed.push(Committed {
                    topic: topic.to_string(),
                    partition,
                    offset,
                });
            }
        }
    }
    let error = r.i16()?;
    Ok(match (error, partition_error) {
        (0, 0) => Ok(committed),
        (0, e) | (e, _) => Err(e),
    })
}

/// ListOffsets' timestamp that asks for the start (the oldest offset kept).
pub(crate) const EARLIEST: i64 = -2;

/// A ListOffsets v1 request for the end offsets of `partitions`, by topic.
pub(crate) fn list_offsets_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    partitions: &[(&str, Vec<i32>)],
) {
    list_offsets_at(out, correlation, client, partitions, LATEST);
}

/// A ListOffsets v1 request for the offsets of `partitions` at `at`: the
/// end ([`LATEST`]), the start ([`EARLIEST`]).
pub(crate) fn list_offsets_at(
    out: &mut Vec<u8>,
    correlation: i32,
    client: &str,
    partitions: &[(&str, Vec<i32>)],
    at: i64,
) {
    let start = out.len();
    begin_request(out, LIST_OFFSETS, LIST_OFFSETS_VERSION, correlation, client);
    out.extend_from_slice(&(-1i32).to_be_bytes()); // replica id: a client
    out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for (topic, ids) in partitions {
        put_string(out, topic);
        out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
        for id in ids {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&at.to_be_bytes());
        }
    }
    finish_request(out, start);
}

/// One partition's end offset, or the error code the broker gave.
pub(crate) type EndOffset = (String, i32, Result<i64, i16>);

/// `(topic, partition, end offset or the error code)` for each partition
/// the answer reports.
pub(crate) fn list_offsets_response(body: &[u8]) -> Result<Vec<EndOffset>, Malformed> {
    let mut r = Reader::new(body);
    let mut ends = Vec::new();
    for _ in 0..r.array_len()? {
        let topic = r.string()?;
        for _ in 0..r.array_len()? {
            let partition = r.i32()?;
            let error = r.i16()?;
            r.i64()?; // timestamp
            let offset = r.i64()?;
            let end = if error == 0 { Ok(offset) } else { Err(error) };
            ends.push((topic.to_string(), partition, end));
        }
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    #[test]
    fn requests_carry_their_api_version_and_fields() {
        let mut out = Vec::new();
        find_coordinator_request(&mut out, 7, "ap", "g");
        // size, api 10 v1, correlation 7, client "ap", key "g", type 0.
        assert_eq!(
            out,
            [0, 0, 0, 16, 0, 10, 0, 1, 0, 0, 0, 7, 0, 2, b'a', b'p', 0, 1, b'g', 0]
        );
        out.clear();
        offset_fetch_request(&mut out, 1, "", "g");
        assert_eq!(&out[4..8], &[0, 9, 0, 3]);
        assert_eq!(&out[out.len() - 7..], &[0, 1, b'g', 0xff, 0xff, 0xff, 0xff]);
        out.clear();
        list_offsets_request(&mut out, 1, "", &[("t", vec![0, 1])]);
        assert_eq!(&out[4..8], &[0, 2, 0, 1]);
        // Two partitions, each asking for the latest offset.
        assert_eq!(out.len(), 4 + 10 + 4 + 4 + 3 + 4 + 2 * 12);
        assert_eq!(&out[out.len() - 8..], &(-1i64).to_be_bytes());
    }

    #[test]
    fn answers_decode_and_errors_are_told_apart() {
        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&(-1i16).to_be_bytes());
        body.extend_from_slice(&3i32.to_be_bytes());
        string(&mut body, "127.0.0.1");
        body.extend_from_slice(&9092i32.to_be_bytes());
        assert_eq!(
            find_coordinator_response(&body),
            Ok(Ok("127.0.0.1:9092".into()))
        );
        // COORDINATOR_NOT_AVAILABLE.
        body[4..6].copy_from_slice(&15i16.to_be_bytes());
        assert_eq!(find_coordinator_response(&body), Ok(Err(15)));

        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&1i32.to_be_bytes());
        string(&mut body, "in");
        body.extend_from_slice(&2i32.to_be_bytes());
        for (p, offset) in [(0i32, 41i64), (1, -1)] {
            body.extend_from_slice(&p.to_be_bytes());
            body.extend_from_slice(&offset.to_be_bytes());
            body.extend_from_slice(&(-1i16).to_be_bytes());
            body.extend_from_slice(&0i16.to_be_bytes());
        }
        body.extend_from_slice(&0i16.to_be_bytes());
        let committed = offset_fetch_response(&body).unwrap().unwrap();
        assert_eq!(
            committed,
            [Committed {
                topic: "in".into(),
                partition: 0,
                offset: 41
            }]
        );
        // GROUP_AUTHORIZATION_FAILED for the whole group.
        let at = body.len() - 2;
        body[at..].copy_from_slice(&30i16.to_be_bytes());
        assert_eq!(offset_fetch_response(&body), Ok(Err(30)));
        assert_eq!(offset_fetch_response(&body[..9]), Err(Malformed));

        let mut body = Vec::new();
        body.extend_from_slice(&1i32.to_be_bytes());
        string(&mut body, "in");
        body.extend_from_slice(&2i32.to_be_bytes());
        for (p, error, offset) in [(0i32, 0i16, 100i64), (1, 6, -1)] {
            body.extend_from_slice(&p.to_be_bytes());
            body.extend_from_slice(&error.to_be_bytes());
            body.extend_from_slice(&(-1i64).to_be_bytes());
            body.extend_from_slice(&offset.to_be_bytes());
        }
        assert_eq!(
            list_offsets_response(&body).unwrap(),
            [("in".into(), 0, Ok(100)), ("in".into(), 1, Err(6))]
        );
    }
}
