//! The Kafka response decoders (Metadata v4, Produce v7, SaslHandshake v1,
//! SaslAuthenticate v1): any body decodes
//! or is `Malformed`, never a panic, and never allocates beyond what the
//! body could hold.
#![no_main]
use autoperf_core::protocol::kafka::wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(meta) = wire::metadata_response(data) {
        let partitions: usize = meta.topics.iter().map(|t| t.partitions.len()).sum();
        // Each broker and partition takes bytes of the body.
        assert!(meta.brokers.len() + partitions <= data.len());
    }
    let mut reported = 0usize;
    let _ = wire::produce_response(data, |_topic, _partition, _code| reported += 1);
    assert!(reported * 30 <= data.len());
    if let Ok((_, mechanisms)) = wire::sasl_handshake_response(data) {
        assert!(mechanisms.len() * 2 <= data.len());
    }
    if let Ok(answer) = wire::sasl_authenticate_response(data) {
        assert!(answer.bytes.len() <= data.len());
    }
});
