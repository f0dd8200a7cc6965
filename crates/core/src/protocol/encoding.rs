//! Content codings (RFC 9110 8.4): what `target.compression` asks for, and
//! the decoding of what came, so checks and extraction read the text and
//! the body's sizes are known both as sent and as decoded.

use std::io::Read;

/// The `Accept-Encoding` of `target.compression: true`: what browsers ask.
pub(crate) const ACCEPT: &str = "gzip, deflate, br";

/// A decoded body larger than this is refused as malformed: a small
/// compressed answer must not take the generator's memory.
pub(crate) const MAX_DECODED: u64 = 256 << 20;

/// Decodes `body`, encoded by the codings of a `Content-Encoding` header
/// (applied in the order listed, so undone from the last), into `out`.
/// `Err` names a coding that is unknown or a body that does not decode.
pub(crate) fn decode(codings: &str, body: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let mut current = body.to_vec();
    for coding in codings.rsplit(',').map(str::trim) {
        let coding = coding.to_ascii_lowercase();
        let mut next = Vec::with_capacity(current.len() * 4);
        let read = match coding.as_str() {
            "" | "identity" => continue,
            "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(&current[..])
                .take(MAX_DECODED + 1)
                .read_to_end(&mut next),
            "deflate" => inflate(&current, &mut next),
            "br" => brotli_decompressor::Decompressor::new(&current[..], 16 * 1024)
                .take(MAX_DECODED + 1)
                .read_to_end(&mut next),
            other => return Err(format!("unknown content coding `{other}`")),
        };
        read.map_err(|e| format!("{coding} body does not decode: {e}"))?;
        if next.len() as u64 > MAX_DECODED {
            return Err(format!("{coding} body decodes past {MAX_DECODED} bytes"));
        }
        current = next;
    }
    *out = current;
    Ok(())
}

/// `deflate` is zlib-wrapped (RFC 9110 8.4.1.2), but some servers send a
/// raw deflate stream; both are read, as browsers do.
fn inflate(body: &[u8], out: &mut Vec<u8>) -> std::io::Result<usize> {
    let zlib = flate2::read::ZlibDecoder::new(body)
        .take(MAX_DECODED + 1)
        .read_to_end(out);
    if zlib.is_ok() {
        return zlib;
    }
    out.clear();
    flate2::read::DeflateDecoder::new(body)
        .take(MAX_DECODED + 1)
        .read_to_end(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_undone_last_first() {
        let text = b"hello hello hello hello".repeat(20);
        let mut out = Vec::new();
        decode("gzip", &gzip(&text), &mut out).unwrap();
        assert_eq!(out, text);
        decode("gzip, gzip", &gzip(&gzip(&text)), &mut out).unwrap();
        assert_eq!(out, text);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&text).unwrap();
        decode("deflate", &z.finish().unwrap(), &mut out).unwrap();
        assert_eq!(out, text);
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&text).unwrap();
        decode("Deflate", &raw.finish().unwrap(), &mut out).unwrap();
        assert_eq!(out, text);
        decode("identity", b"plain", &mut out).unwrap();
        assert_eq!(out, b"plain");
    }

    #[test]
    fn brotli_decodes() {
        // Ten X and ten Y, from brotli's own test vectors.
        let br = [
            0x1b, 0x13, 0x00, 0x00, 0xa4, 0xb0, 0xb2, 0xea, 0x81, 0x47, 0x02, 0x8a,
        ];
        let mut out = Vec::new();
        decode("br", &br, &mut out).unwrap();
        assert_eq!(out, b"XXXXXXXXXXYYYYYYYYYY");
    }

    #[test]
    fn garbage_and_unknown_codings_are_refused() {
        let mut out = Vec::new();
        assert!(decode("gzip", b"not gzip", &mut out).is_err());
        assert!(decode("zstd", b"x", &mut out)
            .unwrap_err()
            .contains("unknown content coding `zstd`"));
    }
}
