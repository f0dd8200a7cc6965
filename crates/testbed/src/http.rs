//! What both tiers share: the accept loop with graceful shutdown (HTTP/1.1
//! and HTTP/2 on every port, TLS on an optional second one), responses, and
//! query-string parameters with their one-line 400 reasons.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::burn::Workers;

/// Set on a request's extensions by the server when it came over TLS.
#[derive(Clone, Copy)]
pub struct OverTls;

/// The body of every testbed response.
pub type Body = Full<Bytes>;

/// How long in-flight requests may run on after shutdown is signalled.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Answers requests; one per tier.
pub trait Handler: Send + Sync + 'static {
    /// Whether the tier also speaks a binary protocol of its own on its port:
    /// a connection whose first byte is 0 (never the first byte of an HTTP
    /// request) goes to [`Handler::serve_binary`] instead of hyper.
    const BINARY: bool = false;

    fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> impl Future<Output = Response<Body>> + Send;

    /// Bytes to hold while a connection is open (0: none).
    fn session_memory(&self) -> usize {
        0
    }

    /// Serves one binary-protocol connection until the peer closes it or
    /// `stop` fires between two requests.
    fn serve_binary(
        self: Arc<Self>,
        stream: TcpStream,
        stop: Stop,
    ) -> impl Future<Output = ()> + Send {
        drop((stream, stop));
        async {}
    }
}

/// Held by every open connection: tells it to finish its request in flight
/// and close, and while any is held the server is still draining.
pub struct Stop(watch::Receiver<()>);

impl Stop {
    /// Completes once shutdown has begun.
    pub async fn requested(&mut self) {
        // An error means the server is gone, which is a stop too.
        let _ = self.0.changed().await;
    }
}

/// A second port that speaks TLS (ALPN: h2, then http/1.1).
pub struct TlsListener {
    pub listener: TcpListener,
    pub acceptor: TlsAcceptor,
}

type Builder = auto::Builder<TokioExecutor>;

/// Serves HTTP/1.1 (keep-alive unless the client says close) and HTTP/2 on
/// `listener`, and over TLS on `tls`, until `shutdown` completes, then stops accepting and lets open connections
/// finish their in-flight request for at most [`DRAIN_TIMEOUT`].
///
/// Connections are accepted here, on the caller's runtime, so that a new
/// one is taken while every loop burns, and then each is pinned to one of
/// `workers`' loops, where it is served by `handler(loop index)`: a handler
/// per loop, because the sockets it opens belong to that loop's reactor.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    tls: Option<TlsListener>,
    workers: &Workers,
    handler: impl Fn(usize) -> Arc<H>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let handlers: Vec<Arc<H>> = (0..workers.count()).map(handler).collect();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(true).half_close(false);
    let builder = Arc::new(builder);
    let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
    // Every connection holds a receiver; the drain is over when all are gone.
    let (drain, _) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, over_tls) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => (stream, false),
                Err(e) => {
                    eprintln!("testbed: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            accepted = async { tls.as_ref().expect("guarded").listener.accept().await }, if tls.is_some() => match accepted {
                Ok((stream, _peer)) => (stream, true),
                Err(e) => {
                    // Out of file descriptors and the like: the condition is
                    // transient under load, so wait a little instead of spinning.
                    eprintln!("testbed: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // A socket belongs to the reactor of the runtime that registered
        // it: move it over to its loop's (into_std leaves it non-blocking).
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let stop = Stop(drain.subscribe());
        let acceptor = over_tls.then(|| acceptor.clone()).flatten();
        workers.pin(|index| {
            let (handler, builder) = (Arc::clone(&handlers[index]), Arc::clone(&builder));
            async move {
                let Ok(stream) = TcpStream::from_std(stream) else {
                    return;
                };
                let _session = SessionMemory::hold(handler.session_memory());
                match acceptor {
                    None => connection(stream, handler, builder, stop).await,
                    Some(acceptor) => {
                        let shaken = tokio::time::timeout(DRAIN_TIMEOUT, acceptor.accept(stream));
                        if let Ok(Ok(stream)) = shaken.await {
                            serve_http(TokioIo::new(stream), true, handler, builder, stop).await;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = drain.send(());
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain.closed()).await;
    Ok(())
}

/// Memory mapped and written (so resident) for as long as a connection
/// is open. Straight from the kernel, not the allocator: it leaves with
/// the connection, whatever an allocator keeps of what was freed
/// (mimalloc, in the static build, kept closed sessions' memory resident
/// for a while: a fit of memory per user came out 10% high in CI).
struct SessionMemory {
    at: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone; nothing else points
// into it.
unsafe impl Send for SessionMemory {}

impl SessionMemory {
    fn hold(len: usize) -> SessionMemory {
        let none = SessionMemory {
            at: std::ptr::null_mut(),
            len: 0,
        };
        if len == 0 {
            return none;
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            eprintln!(
                "testbed: cannot map {len} bytes of session memory: {}",
                std::io::Error::last_os_error()
            );
            return none;
        }
        // SAFETY: `at` is `len` writable bytes just mapped. Written, so
        // resident (an untouched mapping costs no memory).
        unsafe { std::ptr::write_bytes(at.cast::<u8>(), 0xa5, len) };
        SessionMemory { at, len }
    }
}

impl Drop for SessionMemory {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the mapping made in `hold`, unmapped once.
            unsafe { libc::munmap(self.at, self.len) };
        }
    }
}

async fn connection<H: Handler>(
    stream: TcpStream,
    handler: Arc<H>,
    builder: Arc<Builder>,
    mut stop: Stop,
) {
    if H::BINARY {
        let mut first = [0u8; 1];
        let peeked = tokio::select! {
            peeked = stream.peek(&mut first) => peeked,
            () = stop.requested() => return,
        };
        match peeked {
            Ok(1) if first[0] == 0 => return handler.serve_binary(stream, stop).await,
            Ok(1) => {}
            // Closed before saying anything, or reset.
            _ => return,
        }
    }
    serve_http(TokioIo::new(stream), false, handler, builder, stop).await;
}

/// Serves HTTP on one connection (either version, as the client starts it).
async fn serve_http<H: Handler, S>(
    io: TokioIo<S>,
    over_tls: bool,
    handler: Arc<H>,
    builder: Arc<Builder>,
    mut stop: Stop,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let handler = Arc::clone(&handler);
        if over_tls {
            req.extensions_mut().insert(OverTls);
        }
        async move { Ok::<_, Infallible>(handler.handle(req).await) }
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    // A client resetting its connection is its business, not an error.
    tokio::select! {
        _ = conn.as_mut() => return,
        () = stop.requested() => {}
    }
    // Closes an idle connection at once, or after the response in flight.
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// A response with a body and a content type.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A plain-text response; `text` should end with a newline. A `&'static
/// str` is sent without a copy.
pub fn text(status: StatusCode, text: impl Into<Bytes>) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", text)
}

/// 200 "ok".
pub fn ok() -> Response<Body> {
    text(StatusCode::OK, "ok\n")
}

/// A JSON response.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    respond(status, "application/json", format!("{value}\n"))
}

/// 404 for a path this tier does not serve.
pub fn not_found(path: &str) -> Response<Body> {
    text(StatusCode::NOT_FOUND, format!("no such resource: {path}\n"))
}

/// 405 with the one method the resource accepts.
pub fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, format!("use {allow}\n"));
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

/// A bad request: the reason is one line, shown to whoever sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest(pub String);

impl BadRequest {
    pub fn into_response(self) -> Response<Body> {
        text(StatusCode::BAD_REQUEST, format!("{}\n", self.0))
    }
}

/// The parameters of a query string. Parameters a handler does not ask for
/// are ignored: scenarios add their own (`&actor=…&page=3`) to vary URLs.
pub struct Query<'a> {
    raw: &'a str,
}

/// Upper bound of every duration parameter: a testbed request that burns or
/// sleeps longer than this is a mistake, and bounds shutdown.
const MAX_MS: f64 = 10_000.0;

impl<'a> Query<'a> {
    pub fn parse(query: Option<&'a str>) -> Query<'a> {
        Query {
            raw: query.unwrap_or(""),
        }
    }

    /// The value of `name`: a scan of the few parameters there are, which
    /// costs less than collecting them.
    fn take(&self, name: &str) -> Result<Option<&'a str>, BadRequest> {
        let mut values = self
            .raw
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v);
        let found = values.next();
        if values.next().is_some() {
            return Err(BadRequest(format!("query parameter {name} given twice")));
        }
        Ok(found)
    }

    /// A duration in milliseconds, fractional allowed, 0 ≤ ms ≤ 10 000.
    pub fn millis(&self, name: &str) -> Result<Option<Duration>, BadRequest> {
        let Some(raw) = self.take(name)? else {
            return Ok(None);
        };
        match raw.parse::<f64>() {
            Ok(ms) if (0.0..=MAX_MS).contains(&ms) => {
                Ok(Some(Duration::from_secs_f64(ms / 1000.0)))
            }
            _ => Err(BadRequest(format!(
                "query parameter {name}={raw}: expected milliseconds between 0 and {MAX_MS}"
            ))),
        }
    }

    /// A required duration in milliseconds.
    pub fn required_millis(&self, name: &str) -> Result<Duration, BadRequest> {
        self.millis(name)?
            .ok_or_else(|| BadRequest(format!("missing query parameter {name} (milliseconds)")))
    }

    /// A byte count, 0 ≤ n ≤ `max`.
    pub fn bytes(&self, name: &str, max: u64) -> Result<Option<u64>, BadRequest> {
        let Some(raw) = self.take(name)? else {
            return Ok(None);
        };
        match raw.parse::<u64>() {
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(BadRequest(format!(
                "query parameter {name}={raw}: expected a byte count between 0 and {max}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters() {
        let q = Query::parse(Some("ms=0.5&bytes=10"));
        assert_eq!(q.required_millis("ms"), Ok(Duration::from_micros(500)));
        assert_eq!(q.bytes("bytes", 100), Ok(Some(10)));

        let q = Query::parse(None);
        assert!(q.required_millis("ms").is_err());
        assert_eq!(q.millis("ms"), Ok(None));

        for bad in [
            "ms=-1",
            "ms=abc",
            "ms=NaN",
            "ms=inf",
            "ms=20000",
            "ms=1&ms=2",
            "ms=",
        ] {
            let q = Query::parse(Some(bad));
            assert!(q.millis("ms").is_err(), "{bad}");
        }
        let q = Query::parse(Some("n=101"));
        assert!(q.bytes("n", 100).is_err());

        let q = Query::parse(Some("actor=Ann%20Lee&ms=1&page=3"));
        assert_eq!(q.millis("ms"), Ok(Some(Duration::from_millis(1))));
    }
}
