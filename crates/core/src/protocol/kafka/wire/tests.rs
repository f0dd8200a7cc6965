use super::*;

#[test]
fn murmur2_matches_the_java_client() {
    // Values from Kafka's UtilsTest.testMurmur2.
    let cases: [(&[u8], i32); 4] = [
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
    ];
    for (data, java) in cases {
        assert_eq!(murmur2(data) as i32, java, "{data:?}");
    }
}

#[test]
fn varints_are_zigzag() {
    for (v, bytes) in [
        (0i64, vec![0u8]),
        (-1, vec![1]),
        (1, vec![2]),
        (63, vec![0x7e]),
        (64, vec![0x80, 0x01]),
        (-65, vec![0x81, 0x01]),
        (300, vec![0xd8, 0x04]),
    ] {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        assert_eq!(out, bytes, "{v}");
        assert_eq!(varint_len(v), bytes.len(), "{v}");
    }
    assert_eq!(varint_len(i64::MIN), 10);
}

#[test]
fn a_record_batch_has_the_length_and_crc_a_broker_checks() {
    let mut records = Vec::new();
    put_record(&mut records, 0, 0, Some(b"k"), b"v1");
    put_record(&mut records, 1, 5, None, b"value-2");
    // Length 9 (zig-zag 18), attributes, deltas 0 and 0, key length 1
    // (zig-zag 2), the key, value length 2 (zig-zag 4), the value.
    assert_eq!(records[..9], [18, 0, 0, 0, 2, b'k', 4, b'v', b'1']);
    let mut out = Vec::new();
    let batch = BatchRef {
        partition: 3,
        records: &records,
        attributes: 0,
        count: 2,
        base_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_005,
        sequenced: Some(Sequenced {
            producer_id: 77,
            epoch: 3,
            base_sequence: 1000,
        }),
    };
    let start = produce_begin(&mut out, 9, "autoperf", -1, 30_000, 1);
    produce_topic(&mut out, "t", 1);
    produce_batch(&mut out, &batch);
    produce_end(&mut out, start);
    let size = i32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
    assert_eq!(size, out.len() - 4);
    let batch_at = out.len() - records.len() - BATCH_HEADER;
    let b = &out[batch_at..];
    let length = i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize;
    assert_eq!(length, b.len() - 12);
    assert_eq!(b[16], 2, "magic");
    let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&b[21..]));
    // The idempotent producer's id, epoch and first sequence number.
    assert_eq!(i64::from_be_bytes(b[43..51].try_into().unwrap()), 77);
    assert_eq!(i16::from_be_bytes(b[51..53].try_into().unwrap()), 3);
    assert_eq!(i32::from_be_bytes(b[53..57].try_into().unwrap()), 1000);
    assert_eq!(i32::from_be_bytes(b[57..61].try_into().unwrap()), 2);
}

#[test]
fn metadata_and_produce_responses_decode() {
    let mut m = Vec::new();
    m.extend_from_slice(&0i32.to_be_bytes());
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&9i16.to_be_bytes());
    m.extend_from_slice(b"127.0.0.1");
    m.extend_from_slice(&9092i32.to_be_bytes());
    m.extend_from_slice(&(-1i16).to_be_bytes());
    m.extend_from_slice(&(-1i16).to_be_bytes());
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut m, "t");
    m.push(0);
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&0i16.to_be_bytes());
    m.extend_from_slice(&0i32.to_be_bytes());
    m.extend_from_slice(&1i32.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    let meta = metadata_response(&m).unwrap();
    assert_eq!(meta.brokers, [(1, "127.0.0.1:9092".to_string())]);
    assert_eq!(meta.topics[0].partitions, [(0, 1, 0)]);
    assert_eq!(metadata_response(&m[..m.len() - 3]), Err(Malformed));

    let mut p = Vec::new();
    p.extend_from_slice(&1i32.to_be_bytes());
    put_string(&mut p, "t");
    p.extend_from_slice(&1i32.to_be_bytes());
    p.extend_from_slice(&4i32.to_be_bytes());
    p.extend_from_slice(&6i16.to_be_bytes());
    p.extend_from_slice(&[0; 24]);
    p.extend_from_slice(&0i32.to_be_bytes());
    let mut seen = Vec::new();
    produce_response(&p, |t, part, e| seen.push((t.to_string(), part, e))).unwrap();
    assert_eq!(seen, [("t".to_string(), 4, 6)]);
}

#[test]
fn retriable_codes_say_whether_the_batch_may_have_been_written() {
    // NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION: written nowhere.
    assert_eq!(retriable(6), Some(Retriable::NotWritten));
    assert_eq!(retriable(3), Some(Retriable::NotWritten));
    // REQUEST_TIMED_OUT: the leader may have appended it.
    assert_eq!(retriable(REQUEST_TIMED_OUT), Some(Retriable::MaybeWritten));
    // MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, a sequence out of order: as
    // refused the next time.
    assert_eq!(retriable(10), None);
    assert_eq!(retriable(2), None);
    assert_eq!(retriable(45), None);
}
