//! A lean HTTP/1.1 keep-alive client connection: write one request, read
//! exactly one response (Content-Length, chunked, or until close), report
//! what happened as an `ErrorKind` rather than an error string. One buffer
//! per connection, reused for every response; the body is copied out only
//! when the caller asks for it (to extract values from it).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::ErrorKind;

/// Response heads larger than this are malformed for our purposes.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

/// A finished exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Body bytes received (after de-chunking).
    pub body_len: u64,
    /// The connection cannot carry another request.
    pub close: bool,
}

/// Why an exchange failed, and whether a fresh connection may try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub kind: ErrorKind,
    /// The server closed a reused keep-alive connection before answering a
    /// single byte: it had closed it while idle, so the request was never
    /// processed and may be sent again on a new connection.
    pub stale: bool,
}

impl Failure {
    fn new(kind: ErrorKind) -> Failure {
        Failure { kind, stale: false }
    }
}

pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Requests completed on this connection.
    served: u64,
}

pub async fn connect(addr: SocketAddr) -> Result<Connection, ErrorKind> {
    match TcpStream::connect(addr).await {
        Ok(stream) => {
            // Requests are written whole; Nagle would only add delay.
            let _ = stream.set_nodelay(true);
            Ok(Connection {
                stream,
                buf: Vec::with_capacity(READ_CHUNK),
                served: 0,
            })
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(ErrorKind::ConnectRefused),
        Err(_) => Err(ErrorKind::Connect),
    }
}

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

struct Head {
    status: u16,
    len: usize,
    framing: Framing,
    close: bool,
}

impl Connection {
    /// Sends `request` (a complete HTTP/1.1 request) and reads the response.
    /// `head_request` marks a HEAD, whose response has no body. When `body`
    /// is given, the (de-chunked) body is appended to it.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<Reply, Failure> {
        let reused = self.served > 0;
        let stale = |kind: ErrorKind, got_nothing: bool| Failure {
            kind,
            stale: reused && got_nothing,
        };
        if let Err(e) = self.stream.write_all(request).await {
            return Err(stale(io_kind(&e), true));
        }
        self.buf.clear();
        let head = loop {
            if let Some(head) = parse_head(&self.buf, head_request)? {
                break head;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(Failure::new(ErrorKind::Malformed));
            }
            match self.read_more().await {
                Ok(0) => {
                    let nothing = self.buf.is_empty();
                    return Err(stale(ErrorKind::Closed, nothing));
                }
                Ok(_) => {}
                Err(e) => {
                    let nothing = self.buf.is_empty();
                    return Err(stale(io_kind(&e), nothing));
                }
            }
        };
        let body_len = match head.framing {
            Framing::None => {
                if self.buf.len() > head.len {
                    // Bytes beyond a body-less response: not a stream we can trust.
                    return Err(Failure::new(ErrorKind::Malformed));
                }
                0
            }
            Framing::Length(n) => self.read_length(head.len, n, body.as_deref_mut()).await?,
            Framing::Chunked => self.read_chunked(head.len, body.as_deref_mut()).await?,
            Framing::UntilClose => self.read_to_close(head.len, body.as_deref_mut()).await?,
        };
        self.served += 1;
        Ok(Reply {
            status: head.status,
            body_len,
            close: head.close || head.framing == Framing::UntilClose,
        })
    }

    async fn read_more(&mut self) -> io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        self.stream.read_buf(&mut self.buf).await
    }

    /// Reads a body of exactly `n` bytes, of which the buffer may already
    /// hold some after the head at `start`.
    async fn read_length(
        &mut self,
        start: usize,
        n: u64,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<u64, Failure> {
        let mut remaining = n;
        let mut pos = start;
        loop {
            let have = (self.buf.len() - pos) as u64;
            let take = have.min(remaining) as usize;
            if let Some(out) = body.as_deref_mut() {
                out.extend_from_slice(&self.buf[pos..pos + take]);
            }
            remaining -= take as u64;
            if have > take as u64 {
                // The server sent more than it announced.
                return Err(Failure::new(ErrorKind::Malformed));
            }
            if remaining == 0 {
                return Ok(n);
            }
            // Everything buffered is consumed: reuse the buffer from its start.
            self.buf.clear();
            pos = 0;
            self.fill().await?;
        }
    }

    async fn read_to_close(
        &mut self,
        start: usize,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<u64, Failure> {
        let mut total = 0u64;
        let mut pos = start;
        loop {
            let chunk = &self.buf[pos..];
            total += chunk.len() as u64;
            if let Some(out) = body.as_deref_mut() {
                out.extend_from_slice(chunk);
            }
            self.buf.clear();
            pos = 0;
            match self.read_more().await {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                Err(e) => return Err(Failure::new(io_kind(&e))),
            }
        }
    }

    /// Decodes a chunked body in place as it streams in.
    async fn read_chunked(
        &mut self,
        start: usize,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<u64, Failure> {
        let mut pos = start;
        let mut total = 0u64;
        loop {
            // Chunk-size line.
            let line_end = loop {
                if let Some(i) = find_crlf(&self.buf[pos..]) {
                    break pos + i;
                }
                if self.buf.len() - pos > 1024 {
                    return Err(Failure::new(ErrorKind::Malformed));
                }
                self.compact(&mut pos);
                self.fill().await?;
            };
            let size = parse_chunk_size(&self.buf[pos..line_end])
                .ok_or(Failure::new(ErrorKind::Malformed))?;
            pos = line_end + 2;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    let end = loop {
                        if let Some(i) = find_crlf(&self.buf[pos..]) {
                            break pos + i;
                        }
                        if self.buf.len() - pos > MAX_HEAD {
                            return Err(Failure::new(ErrorKind::Malformed));
                        }
                        self.compact(&mut pos);
                        self.fill().await?;
                    };
                    let empty = end == pos;
                    pos = end + 2;
                    if empty {
                        if pos != self.buf.len() {
                            return Err(Failure::new(ErrorKind::Malformed));
                        }
                        return Ok(total);
                    }
                }
            }
            // Chunk data followed by CRLF.
            let mut remaining = size;
            while remaining > 0 {
                if pos == self.buf.len() {
                    self.buf.clear();
                    pos = 0;
                    self.fill().await?;
                }
                let take = ((self.buf.len() - pos) as u64).min(remaining) as usize;
                if let Some(out) = body.as_deref_mut() {
                    out.extend_from_slice(&self.buf[pos..pos + take]);
                }
                pos += take;
                remaining -= take as u64;
                total += take as u64;
            }
            while self.buf.len() - pos < 2 {
                self.compact(&mut pos);
                self.fill().await?;
            }
            if &self.buf[pos..pos + 2] != b"\r\n" {
                return Err(Failure::new(ErrorKind::Malformed));
            }
            pos += 2;
        }
    }

    /// Drops consumed bytes so the buffer does not grow with the body.
    fn compact(&mut self, pos: &mut usize) {
        if *pos > 0 {
            self.buf.drain(..*pos);
            *pos = 0;
        }
    }

    /// Reads at least one more byte; end of stream mid-response is `Closed`.
    async fn fill(&mut self) -> Result<(), Failure> {
        match self.read_more().await {
            Ok(0) => Err(Failure::new(ErrorKind::Closed)),
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::new(io_kind(&e))),
        }
    }
}

fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        _ => ErrorKind::Reset,
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

fn parse_chunk_size(line: &[u8]) -> Option<u64> {
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
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Failure::new(ErrorKind::Malformed)),
    };
    let status = response.code.ok_or(Failure::new(ErrorKind::Malformed))?;
    let mut close = response.version == Some(0);
    let mut length = None;
    let mut chunked = false;
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(Failure::new(ErrorKind::Malformed))?;
            if length.is_some_and(|m| m != n) {
                return Err(Failure::new(ErrorKind::Malformed));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .split(|&c| c == b',')
                .next_back()
                .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&c| c == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && response.version == Some(0) {
                    close = false;
                }
            }
        }
    }
    if (100..200).contains(&status) {
        // Interim responses (100 Continue) are not expected: we never send
        // Expect. Treat as a protocol surprise.
        return Err(Failure::new(ErrorKind::Malformed));
    }
    let framing = if head_request || status == 204 || status == 304 {
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
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_framing() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
            .unwrap()
            .unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Length(5));
        assert!(!h.close);
        let h = parse_head(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(h.close);
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::UntilClose);
        assert!(h.close);
        let h = parse_head(
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::None);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false)
            .unwrap()
            .is_none());
        assert!(parse_head(b"garbage\r\n\r\n", false).is_err());
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a"), Some(26));
        assert_eq!(parse_chunk_size(b"0;ext=1"), Some(0));
        assert_eq!(parse_chunk_size(b"zz"), None);
        assert_eq!(parse_chunk_size(b""), None);
    }
}
