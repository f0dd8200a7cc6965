//! Record-batch compression as Kafka's own clients write it: the records
//! of a v2 batch (everything after its header) compressed as one block,
//! the codec in the batch's attributes. gzip is RFC 1952; snappy uses the
//! xerial framing Java's producer writes (and every broker and consumer
//! reads); lz4 is the LZ4 frame format with independent 64 KiB blocks, as
//! Kafka's `KafkaLZ4BlockInputStream` wants; zstd is a standard frame.

use std::io::Write;

use crate::scenario::Compression;

/// xerial's `SnappyOutputStream` header: magic, version 1, compatible 1.
const XERIAL_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
/// xerial's default block: 32 KiB of input per snappy block.
const XERIAL_BLOCK: usize = 32 * 1024;

/// The batch attributes' codec bits.
pub(crate) fn attribute(codec: Compression) -> i16 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// Compresses `input` into `out` (cleared first). `level`: the codec's
/// own scale (gzip 1–9, zstd 1–22), `None` for its default (gzip 6, zstd
/// 3, as Java's producer).
pub(crate) fn compress(codec: Compression, level: Option<i32>, input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let level = level.unwrap_or(6).clamp(1, 9) as u32;
            let mut e =
                flate2::write::GzEncoder::new(std::mem::take(out), flate2::Compression::new(level));
            e.write_all(input).expect("writing to memory");
            *out = e.finish().expect("writing to memory");
        }
        Compression::Snappy => {
            out.extend_from_slice(&XERIAL_HEADER);
            let mut encoder = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK) {
                let at = out.len();
                out.extend_from_slice(&[0; 4]);
                out.resize(at + 4 + snap::raw::max_compress_len(chunk.len()), 0);
                let n = encoder
                    .compress(chunk, &mut out[at + 4..])
                    .expect("the buffer holds the worst case");
                out.truncate(at + 4 + n);
                out[at..at + 4].copy_from_slice(&(n as u32).to_be_bytes());
            }
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(std::mem::take(out));
            e.write_all(input).expect("writing to memory");
            *out = e.finish().expect("writing to memory");
        }
        Compression::Zstd => {
            let level = level.unwrap_or(3);
            *out = zstd::bulk::compress(input, level)
                .expect("zstd compresses any input at a valid level");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn records() -> Vec<u8> {
        // Repetitive like real records, longer than one snappy block.
        (0..4000)
            .flat_map(|i| {
                format!("{{\"sensor\":\"s{}\",\"value\":{}.5}}", i % 97, i % 13).into_bytes()
            })
            .collect()
    }

    #[test]
    fn every_codec_reads_back_with_an_independent_decoder_and_shrinks_records() {
        let input = records();
        let mut out = Vec::new();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            compress(codec, None, &input, &mut out);
            assert!(
                out.len() * 3 < input.len(),
                "{codec:?}: {} of {}",
                out.len(),
                input.len()
            );
            let back = match codec {
                Compression::Gzip => {
                    let mut v = Vec::new();
                    flate2::read::GzDecoder::new(&out[..])
                        .read_to_end(&mut v)
                        .unwrap();
                    v
                }
                Compression::Snappy => {
                    assert_eq!(out[..16], XERIAL_HEADER);
                    let mut v = Vec::new();
                    let mut at = 16;
                    while at < out.len() {
                        let n = u32::from_be_bytes(out[at..at + 4].try_into().unwrap()) as usize;
                        v.extend(
                            snap::raw::Decoder::new()
                                .decompress_vec(&out[at + 4..at + 4 + n])
                                .unwrap(),
                        );
                        at += 4 + n;
                    }
                    v
                }
                Compression::Lz4 => {
                    let mut v = Vec::new();
                    lz4_flex::frame::FrameDecoder::new(&out[..])
                        .read_to_end(&mut v)
                        .unwrap();
                    v
                }
                _ => zstd::decode_all(&out[..]).unwrap(),
            };
            assert_eq!(back, input, "{codec:?}");
        }
        // Levels matter where the codec has them.
        compress(Compression::Zstd, Some(1), &input, &mut out);
        let fast = out.len();
        compress(Compression::Zstd, Some(19), &input, &mut out);
        assert!(out.len() <= fast, "{} vs {fast}", out.len());
        compress(Compression::None, None, &input, &mut out);
        assert_eq!(out, input);
    }
}
