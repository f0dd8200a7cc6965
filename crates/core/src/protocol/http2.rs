//! HTTP/2 client connections with the h2 crate: one connection carries
//! many requests at once, each a stream. The request arrives rendered as
//! HTTP/1.1 bytes (the same plan, cookies and redirect rewriting serve
//! both versions) and leaves as HTTP/2 frames; the response comes back with
//! a head written the HTTP/1.1 way (`HTTP/2 200` and `name: value` lines),
//! so checks, extraction and the cookie jar read either version alike.
//!
//! h2 does the protocol: HPACK, flow control (each body chunk read is
//! handed back to the window at once), SETTINGS, PING and GOAWAY. A
//! connection's frames are driven by a task of its own on the shard's
//! runtime; users hold cheap handles to it.

use std::io;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::Reason;
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use tokio::io::{AsyncRead, AsyncWrite};

use super::http1::{Failure, Reply};
use super::{net, Response};
use crate::measure::ErrorKind;

/// Streams a connection may carry at once, as the client sees it; the
/// server's own limit (SETTINGS_MAX_CONCURRENT_STREAMS) applies too.
const INITIAL_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

/// The read buffer under each connection: one frame of the default
/// SETTINGS_MAX_FRAME_SIZE and its header.
const READ_BUFFER: usize = 16 * 1024 + 9;

/// A handle to one HTTP/2 connection; clones share it.
#[derive(Clone)]
pub(crate) struct Connection {
    send: SendRequest<Bytes>,
    /// `http` or `https`, for the requests' `:scheme`.
    scheme: &'static str,
}

/// Runs the HTTP/2 handshake over `io` (a fresh TCP connection for h2c, or
/// a TLS one that negotiated `h2`) and starts the task that drives it.
/// `confirm`: also wait for the server to answer a PING, which only a
/// server speaking HTTP/2 does (h2 sends its preface without waiting).
pub(crate) async fn handshake<S>(io: S, tls: bool, confirm: bool) -> Result<Connection, ErrorKind>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // h2 reads into what is left of an 8 KiB buffer: a 4 KiB answer took
    // two reads (4,087 bytes, then the rest). Reading whole frames of the
    // default maximum size in one go saves a system call per response.
    let io = tokio::io::BufReader::with_capacity(READ_BUFFER, io);
    let (send, mut connection) = h2::client::Builder::new()
        .initial_window_size(INITIAL_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| kind(&e))?;
    let ping = confirm.then(|| connection.ping_pong()).flatten();
    tokio::spawn(async move {
        // Ends when every handle is gone, the peer goes away, or the
        // shard's runtime stops; users see the error on their streams.
        let _ = connection.await;
    });
    if let Some(mut ping) = ping {
        ping.ping(h2::Ping::opaque()).await.map_err(|e| kind(&e))?;
    }
    Ok(Connection {
        send,
        scheme: if tls { "https" } else { "http" },
    })
}

impl Connection {
    /// Sends `request` (complete HTTP/1.1 bytes, as `RequestPlan` renders
    /// them) as one stream and reads its response: the same contract as
    /// `http1::Connection::exchange`. A stream the server refused or a
    /// connection it was leaving before the stream started is `stale`: the
    /// request was not processed and may go again on a new connection.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        response: Option<&mut Response>,
        notable: &mut Vec<u8>,
    ) -> Result<Reply, Failure> {
        let (request, body) =
            translate(request, self.scheme).ok_or(Failure::new(ErrorKind::Malformed))?;
        let mut send = self.send.clone();
        send = send.ready().await.map_err(|e| failure(&e, true))?;
        let end = body.is_empty();
        let (answer, mut stream) = send
            .send_request(request, end)
            .map_err(|e| failure(&e, true))?;
        if !end {
            stream
                .send_data(body, true)
                .map_err(|e| failure(&e, true))?;
        }
        let answer = answer.await.map_err(|e| failure(&e, false))?;
        let (parts, mut body) = answer.into_parts();
        let status = parts.status.as_u16();
        let set_cookie = parts.headers.contains_key(http::header::SET_COOKIE);
        let redirects = matches!(status, 301 | 302 | 303 | 307 | 308);
        let mut limit = 0;
        let mut kept = match response {
            Some(r) => {
                write_head(status, &parts.headers, &mut r.head);
                limit = r.max_body;
                Some(&mut r.body)
            }
            None => {
                notable.clear();
                if set_cookie || redirects {
                    write_head(status, &parts.headers, notable);
                }
                None
            }
        };
        let mut body_len = 0u64;
        if !head_request {
            while let Some(chunk) = body.data().await {
                let chunk = chunk.map_err(|e| failure(&e, false))?;
                body_len += chunk.len() as u64;
                // Give the window back at once: the engine never holds a
                // body back, so the server should never wait on us.
                let _ = body.flow_control().release_capacity(chunk.len());
                if let Some(out) = kept.as_deref_mut() {
                    let room = limit.saturating_sub(out.len());
                    out.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
            }
        }
        Ok(Reply {
            status,
            body_len,
            close: false,
            set_cookie,
        })
    }
}

/// An HTTP/1.1 request (ours: one request line, `Name: value` lines, a
/// body sized by Content-Length) as an HTTP/2 request and its body. The
/// headers HTTP/2 forbids (RFC 9113 8.2.2) are left out; `Host` becomes
/// the `:authority`.
fn translate(raw: &[u8], scheme: &str) -> Option<(Request<()>, Bytes)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let body = Bytes::copy_from_slice(&raw[end + 4..]);
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let method = Method::from_bytes(start.next()?.as_bytes()).ok()?;
    let target = start.next()?;
    let mut authority = None;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        let name = name.trim().to_ascii_lowercase();
        match name.as_str() {
            "host" => authority = Some(value),
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" => {}
            "te" if !value.eq_ignore_ascii_case("trailers") => {}
            _ => headers.push((
                HeaderName::from_bytes(name.as_bytes()).ok()?,
                HeaderValue::from_str(value).ok()?,
            )),
        }
    }
    let uri = Uri::builder()
        .scheme(scheme)
        .authority(authority?)
        .path_and_query(target)
        .build()
        .ok()?;
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .version(http::Version::HTTP_2)
        .body(())
        .ok()?;
    let map = request.headers_mut();
    map.reserve(headers.len());
    for (name, value) in headers {
        map.append(name, value);
    }
    Some((request, body))
}

/// A response head the HTTP/1.1 way, for the readers of `Response::head`.
fn write_head(status: u16, headers: &http::HeaderMap, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("HTTP/2 {status}\r\n").as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// How an h2 failure is counted; `before_answer`: nothing of the response
/// had come, so a connection the server was leaving (GOAWAY) or a stream
/// it refused was never processed.
fn failure(e: &h2::Error, before_answer: bool) -> Failure {
    let refused = e.reason() == Some(Reason::REFUSED_STREAM)
        || (e.is_go_away() && e.reason() == Some(Reason::NO_ERROR));
    Failure {
        kind: kind(e),
        stale: refused || (before_answer && (e.is_go_away() || e.is_io())),
    }
}

fn kind(e: &h2::Error) -> ErrorKind {
    if let Some(io) = e.get_io() {
        return net::io_kind(io, ErrorKind::Reset);
    }
    if e.is_go_away() && e.reason() == Some(Reason::NO_ERROR) {
        return ErrorKind::Closed;
    }
    match e.reason() {
        Some(Reason::PROTOCOL_ERROR)
        | Some(Reason::FRAME_SIZE_ERROR)
        | Some(Reason::COMPRESSION_ERROR)
        | Some(Reason::FLOW_CONTROL_ERROR) => ErrorKind::Malformed,
        _ if e.is_io() => ErrorKind::Reset,
        _ => ErrorKind::Reset,
    }
}

/// The server did not agree to HTTP/2 over TLS.
pub(crate) fn refused_alpn(name: &str) -> io::Error {
    io::Error::other(format!(
        "{name} did not agree to HTTP/2 (ALPN): set target.http to `1.1` or `auto`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http1_bytes_become_an_http2_request() {
        let raw = b"POST /shop/cart?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: autoperf\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: 2\r\nCookie: a=1\r\n\r\n{}";
        let (request, body) = translate(raw, "https").unwrap();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(
            request.uri().to_string(),
            "https://127.0.0.1:8080/shop/cart?x=1"
        );
        assert_eq!(&body[..], b"{}");
        let h = request.headers();
        assert!(h.get("host").is_none() && h.get("connection").is_none());
        assert_eq!(h.get("cookie").unwrap(), "a=1");
        assert_eq!(h.get("content-length").unwrap(), "2");
        assert!(
            translate(b"GET / HTTP/1.1\r\n\r\n", "http").is_none(),
            "no Host"
        );
    }

    #[test]
    fn heads_read_like_http1() {
        let mut headers = http::HeaderMap::new();
        headers.append("set-cookie", HeaderValue::from_static("a=1"));
        headers.append("set-cookie", HeaderValue::from_static("b=2"));
        headers.append("location", HeaderValue::from_static("/next"));
        let mut head = Vec::new();
        write_head(303, &headers, &mut head);
        assert_eq!(super::super::header_value(&head, "Location"), Some("/next"));
        let text = String::from_utf8(head).unwrap();
        assert!(text.starts_with("HTTP/2 303\r\n") && text.ends_with("\r\n\r\n"));
        assert_eq!(text.matches("set-cookie: ").count(), 2);
    }
}
