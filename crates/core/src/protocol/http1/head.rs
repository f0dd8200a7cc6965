//! Reading a response's head: the status line and the headers that say
//! how its body is delimited, and the chunk-size lines of a chunked body.
//! Pure functions over the connection's buffer, on the hot path once per
//! response.

use super::Failure;
use crate::measure::ErrorKind;

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A response head as read: its status, its length in bytes, how its body
/// is delimited, and the headers the connection acts on.
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) len: usize,
    pub(super) framing: Framing,
    pub(super) close: bool,
    pub(super) set_cookie: bool,
}

pub(super) fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

pub(super) fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    // Chunk extensions (";name=value") are allowed and ignored.
    let hex = line.split(|&c| c == b';').next()?;
    let hex = std::str::from_utf8(hex).ok()?.trim();
    if hex.is_empty() || hex.len() > 15 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Parses a complete response head at the start of `buf`, or `None` when
/// more bytes are needed.
///
/// A hand-rolled reader rather than a general parser: it runs once per
/// response on the hot path, needs only the status and three headers, and
/// finds line ends eight bytes at a time instead of validating every byte.
/// Anything it cannot read as `HTTP/1.x NNN …` followed by `Name: value`
/// lines is `Malformed`.
pub(super) fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, Failure> {
    let malformed = || Failure::new(ErrorKind::Malformed);
    let Some(eol) = find_byte(b'\n', buf) else {
        return if buf.len() >= 12 && !buf.starts_with(b"HTTP/1.") {
            Err(malformed())
        } else {
            Ok(None)
        };
    };
    // Status line: "HTTP/1.x NNN reason".
    let line = trim_cr(&buf[..eol]);
    if line.len() < 12 || !line.starts_with(b"HTTP/1.") || line[8] != b' ' {
        return Err(malformed());
    }
    let minor = line[7];
    if minor != b'0' && minor != b'1' {
        return Err(malformed());
    }
    let code = &line[9..12];
    if !code.iter().all(u8::is_ascii_digit) || line.get(12).is_some_and(|&c| c != b' ') {
        return Err(malformed());
    }
    let status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let http10 = minor == b'0';
    let mut close = http10;
    let mut length = None;
    let mut chunked = false;
    let mut set_cookie = false;
    let mut pos = eol + 1;
    let len = loop {
        let Some(i) = find_byte(b'\n', &buf[pos..]) else {
            return Ok(None);
        };
        let line = trim_cr(&buf[pos..pos + i]);
        pos += i + 1;
        if line.is_empty() {
            break pos;
        }
        let colon = find_byte(b':', line).ok_or_else(malformed)?;
        let name = &line[..colon];
        if name.is_empty() || name[0] <= b' ' || name[name.len() - 1] <= b' ' {
            return Err(malformed());
        }
        let value = || line[colon + 1..].trim_ascii();
        // Length first: most headers are dismissed by one comparison.
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let n = parse_decimal(value()).ok_or_else(malformed)?;
                if length.is_some_and(|m| m != n) {
                    return Err(malformed());
                }
                length = Some(n);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                chunked = value()
                    .split(|&c| c == b',')
                    .next_back()
                    .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            }
            10 if name.eq_ignore_ascii_case(b"set-cookie") => set_cookie = true,
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in value().split(|&c| c == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        close = false;
                    }
                }
            }
            _ => {}
        }
    };
    // Three digits are not all a status: 1xx to 5xx are (RFC 9110 §15).
    // 101 Switching Protocols answers an upgrade, which is never asked.
    if !(100..=599).contains(&status) || status == 101 {
        return Err(malformed());
    }
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some(Head {
        status,
        len,
        framing,
        close,
        set_cookie,
    }))
}

/// The first `needle` in `hay`, eight bytes per step (the classic "has a
/// zero byte" word trick). For heads of a few hundred bytes this beats a
/// SIMD `memchr`, whose set-up costs more than the scan.
pub(super) fn find_byte(needle: u8, hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * u64::from(needle);
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ pattern;
        // Exact for the lowest matching byte, which is the first one.
        let found = word.wrapping_sub(LO) & !word & HI;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == needle)
        .map(|i| at + i)
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0'))
    })
}
