//! A lean HTTP/1.1 keep-alive client connection: write one request, read
//! exactly one response (Content-Length, chunked, or until close), report
//! what happened as an `ErrorKind` rather than an error string. One buffer
//! per connection, reused for every response; the body is copied out only
//! when the caller asks for it (to extract values from it).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::net;
use crate::measure::ErrorKind;
use head::{find_crlf, parse_chunk_size, parse_head, Framing};

mod head;

/// Response heads larger than this are malformed for our purposes.
const MAX_HEAD: usize = 64 * 1024;
const READ_CHUNK: usize = 16 * 1024;

/// A finished exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Body bytes received (after de-chunking).
    pub body_len: u64,
    /// The connection cannot carry another request.
    pub close: bool,
    /// The response sets cookies.
    pub set_cookie: bool,
}

impl Reply {
    /// A redirect the client may follow (RFC 9110 15.4).
    pub(crate) fn redirects(&self) -> bool {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
    }
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
    pub(crate) fn new(kind: ErrorKind) -> Failure {
        Failure { kind, stale: false }
    }
}

pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Requests completed on this connection.
    served: u64,
    /// Of the exchange in progress: how much of its body to keep
    /// (`Response::max_body`); the rest is read and counted, not kept.
    keep_limit: usize,
}

/// Appends `chunk` to a kept body, as far as `limit` allows.
fn keep(out: &mut Vec<u8>, chunk: &[u8], limit: usize) {
    let room = limit.saturating_sub(out.len());
    out.extend_from_slice(&chunk[..chunk.len().min(room)]);
}

/// Connects to `addr`, from `local` when given.
pub(crate) async fn connect(
    addr: SocketAddr,
    local: Option<IpAddr>,
) -> Result<Connection, ErrorKind> {
    Ok(Connection::over_tcp(net::connect(addr, local).await?))
}

/// A connection's byte stream: plain TCP, or TLS over it. An enum, not a
/// boxed trait object, so plain HTTP pays one predictable branch per read
/// or write and nothing else.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// A recorded answer, handed out `step` bytes per read: the response
    /// reader without a socket, for the fuzzer and the tests.
    Replay {
        answer: Vec<u8>,
        at: usize,
        step: usize,
    },
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            // A server that closes without TLS's close_notify has still
            // ended the stream, as far as HTTP framing is concerned
            // (responses delimited by close); curl reads it the same way.
            Stream::Tls(s) => match Pin::new(s).poll_read(cx, buf) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                other => other,
            },
            Stream::Replay { answer, at, step } => {
                let n = (*step).min(answer.len() - *at).min(buf.remaining());
                buf.put_slice(&answer[*at..*at + n]);
                *at += n;
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Replay { .. } => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
            Stream::Replay { .. } => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Replay { .. } => Poll::Ready(Ok(())),
        }
    }
}

impl Connection {
    /// HTTP/1.1 over an established TLS connection.
    pub(crate) fn over_tls(stream: TlsStream<TcpStream>) -> Connection {
        Connection::on(Stream::Tls(Box::new(stream)))
    }

    /// HTTP/1.1 over a plain TCP connection.
    pub(crate) fn over_tcp(stream: TcpStream) -> Connection {
        Connection::on(Stream::Plain(stream))
    }

    /// A connection whose server answers every request with the bytes of
    /// `answer`, in reads of at most `step` bytes, then closes: how the
    /// fuzzer and the tests drive the response reader without a socket.
    pub fn replaying(answer: Vec<u8>, step: usize) -> Connection {
        Connection::on(Stream::Replay {
            answer,
            at: 0,
            step: step.max(1),
        })
    }

    fn on(stream: Stream) -> Connection {
        Connection {
            stream,
            buf: Vec::with_capacity(READ_CHUNK),
            served: 0,
            keep_limit: 0,
        }
    }
}

impl Connection {
    /// Sends `request` (a complete HTTP/1.1 request) and reads the response.
    /// `head_request` marks a HEAD, whose response has no body. When
    /// `response` is given, the head and the (de-chunked) body are kept in
    /// it; otherwise the head of a response that redirects or sets cookies
    /// is kept in `notable` (the client acts on those), and nothing of the
    /// others.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        response: Option<&mut super::Response>,
        notable: &mut Vec<u8>,
    ) -> Result<Reply, Failure> {
        let reused = self.served > 0;
        let stale = |kind: ErrorKind, got_nothing: bool| Failure {
            kind,
            stale: reused && got_nothing,
        };
        // TLS may hold records back until flushed; for TCP it is a no-op.
        let written = match self.stream.write_all(request).await {
            Ok(()) => self.stream.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return Err(stale(io_kind(&e), true));
        }
        self.buf.clear();
        let head = loop {
            if let Some(head) = parse_head(&self.buf, head_request)? {
                // Too long a head is malformed however its bytes arrived
                // (in one read it used to parse, in several it did not).
                if head.len > MAX_HEAD {
                    return Err(Failure::new(ErrorKind::Malformed));
                }
                // An interim response (100 Continue, 103 Early Hints) comes
                // before the final one, which follows on the same stream
                // (RFC 9110 §15.2: a client must parse them, asked or not).
                if head.status < 200 {
                    self.buf.drain(..head.len);
                    continue;
                }
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
        let mut body = match response {
            Some(r) => {
                r.head.extend_from_slice(&self.buf[..head.len]);
                self.keep_limit = r.max_body;
                Some(&mut r.body)
            }
            None => {
                notable.clear();
                if head.set_cookie || matches!(head.status, 301 | 302 | 303 | 307 | 308) {
                    notable.extend_from_slice(&self.buf[..head.len]);
                }
                None
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
            Framing::UntilClose => self.read_to_close(head.len, body).await?,
        };
        self.served += 1;
        Ok(Reply {
            status: head.status,
            body_len,
            close: head.close || head.framing == Framing::UntilClose,
            set_cookie: head.set_cookie,
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
                keep(out, &self.buf[pos..pos + take], self.keep_limit);
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
                keep(out, chunk, self.keep_limit);
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
                    keep(out, &self.buf[pos..pos + take], self.keep_limit);
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
    net::io_kind(e, ErrorKind::Reset)
}

#[cfg(test)]
mod tests;
