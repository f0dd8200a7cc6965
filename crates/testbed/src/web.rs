//! The web tier: routes and their handlers.
//!
//! | request | cost |
//! |---|---|
//! | `GET /cpu?ms=M` | M ms of CPU on a web worker (its event loop) |
//! | `GET /db?web_ms=A&db_ms=B` | A ms on web, then B ms on the db tier (the web worker serves other connections meanwhile) |
//! | `POST /lock?ms=M&bytes=K` | M ms in the global critical section, no CPU, K bytes written |
//! | `GET /sleep?ms=M` | M ms, no CPU, no worker |
//! | `GET /static/*` | cacheable content, 304 on a matching validator |
//! | `GET /bytes?n=N` | a body of exactly N bytes |
//! | `POST /ingest`, `GET /ingest/count` | counts JSON records |
//! | `GET /health` | "ok" |
//! | `GET /metrics` | the process's CPU seconds and resident memory, for Prometheus |
//! | `/shop/*` | a shop behind a login (see [`crate::shop`]) |
//! | `/signed/*` | an API that takes only HMAC-signed requests (see [`crate::signed`]) |
//!
//! Every port speaks HTTP/1.1 and HTTP/2 (h2c by prior knowledge on the
//! plain port; h2 or HTTP/1.1 by ALPN on the HTTPS port, when there is one).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use crate::burn::{burn, request_started, Workers};
use crate::db_client::DbClient;
use crate::http::{
    self, json, method_not_allowed, not_found, ok, text, BadRequest, Body, Handler, Query,
};
use crate::lock::{CriticalSection, MAX_WRITE_BYTES};
use crate::shop::Shop;
use crate::static_files;

/// Largest `/bytes?n=`.
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// Largest accepted `/ingest` record.
const MAX_RECORD_BYTES: usize = 1 << 20;

/// Configuration of the web tier.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// Event loops, each on a thread of its own: the CPU burns that may run
    /// at once (see [`crate::burn`]).
    pub workers: usize,
    /// The db tier; `/db` answers 503 without one.
    pub db: Option<SocketAddr>,
    /// Bytes held for each open connection (see
    /// `TestbedOptions::session_memory`).
    pub session_memory: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            workers: 2,
            db: None,
            session_memory: 0,
        }
    }
}

/// Serves the web tier on `listener` until `shutdown` completes, then stops
/// accepting and lets in-flight requests finish for at most 2 s. The lock's
/// data directory is removed when the last connection has closed.
pub async fn serve_web(
    listener: tokio::net::TcpListener,
    config: WebConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    serve_web_and_https(listener, None, config, shutdown).await
}

/// [`serve_web`], and HTTPS on `https`'s port too.
pub(crate) async fn serve_web_and_https(
    listener: tokio::net::TcpListener,
    https: Option<http::TlsListener>,
    config: WebConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let workers = Workers::new("web-worker", config.workers)?;
    let shared = Arc::new(Shared {
        lock: CriticalSection::create()?,
        ingested: AtomicU64::new(0),
        filler: Mutex::new(Bytes::new()),
        shop: Shop::default(),
    });
    let web = |_loop| {
        Arc::new(Web {
            db: config.db.map(DbClient::new),
            shared: Arc::clone(&shared),
            session_memory: config.session_memory,
        })
    };
    http::serve(listener, https, &workers, web, shutdown).await
}

/// The handler of one event loop: it burns on that loop (see
/// [`crate::burn`]), and keeps its own connections to the db tier, since a
/// socket belongs to the reactor of the loop that opened it.
struct Web {
    db: Option<DbClient>,
    shared: Arc<Shared>,
    session_memory: usize,
}

/// The state every loop's requests share.
struct Shared {
    lock: CriticalSection,
    ingested: AtomicU64,
    /// The longest `/bytes` body served so far; shorter ones are slices of
    /// it, so a response costs its socket write and not a fresh buffer.
    filler: Mutex<Bytes>,
    shop: Shop,
}

impl Handler for Web {
    fn session_memory(&self) -> usize {
        self.session_memory
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        request_started();
        match self.route(req).await {
            Ok(resp) => resp,
            Err(bad) => bad.into_response(),
        }
    }
}

/// The one method a path accepts, or `None` for a path the web tier does not
/// serve.
fn method_of(path: &str) -> Option<Method> {
    match path {
        "/lock" | "/ingest" => Some(Method::POST),
        "/health" | "/cpu" | "/db" | "/sleep" | "/bytes" | "/ingest/count" | "/metrics" => {
            Some(Method::GET)
        }
        _ if path.starts_with("/static/") => Some(Method::GET),
        _ => None,
    }
}

impl Web {
    async fn route(&self, req: Request<Incoming>) -> Result<Response<Body>, BadRequest> {
        let uri = req.uri();
        let path = uri.path();
        if path.starts_with("/shop/") {
            return Ok(self.shared.shop.handle(req).await);
        }
        if path.starts_with("/signed/") {
            return crate::signed::handle(req).await;
        }
        match method_of(path) {
            None => return Ok(not_found(path)),
            Some(Method::POST) if req.method() != Method::POST => {
                return Ok(method_not_allowed("POST"))
            }
            Some(Method::GET) if req.method() != Method::GET => {
                return Ok(method_not_allowed("GET"))
            }
            Some(_) => {}
        }
        if path == "/ingest" {
            return self.ingest(req).await;
        }
        let query = Query::parse(uri.query());
        match path {
            "/health" => Ok(ok()),
            "/metrics" => Ok(crate::metrics::process_metrics()),
            "/cpu" => {
                burn(query.required_millis("ms")?);
                Ok(ok())
            }
            "/db" => {
                let web_cpu = query.millis("web_ms")?.unwrap_or_default();
                let db_cpu = query.millis("db_ms")?.unwrap_or_default();
                let Some(db) = &self.db else {
                    return Ok(text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "no db tier configured\n",
                    ));
                };
                burn(web_cpu);
                // The loop serves its other connections while the db tier works.
                Ok(match db.burn(db_cpu).await {
                    Ok(()) => ok(),
                    Err(e) => text(StatusCode::BAD_GATEWAY, format!("{e}\n")),
                })
            }
            "/lock" => {
                let hold = query.required_millis("ms")?;
                let bytes = query.bytes("bytes", MAX_WRITE_BYTES)?.unwrap_or(0);
                Ok(match self.shared.lock.enter(hold, bytes).await {
                    Ok(()) => ok(),
                    Err(e) => text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("lock file: {e}\n"),
                    ),
                })
            }
            "/sleep" => {
                tokio::time::sleep(query.required_millis("ms")?).await;
                Ok(ok())
            }
            "/bytes" => {
                let n = query
                    .bytes("n", MAX_BODY_BYTES)?
                    .ok_or_else(|| BadRequest("missing query parameter n (bytes)".into()))?;
                Ok(http::respond(
                    StatusCode::OK,
                    "application/octet-stream",
                    self.filler(n as usize),
                ))
            }
            "/ingest/count" => {
                let count = self.shared.ingested.load(Ordering::Relaxed);
                Ok(json(StatusCode::OK, &json!({ "count": count })))
            }
            _ => {
                let name = path.strip_prefix("/static/").unwrap_or_default();
                Ok(static_files::response(name, req.headers()).unwrap_or_else(|| not_found(path)))
            }
        }
    }

    /// `n` bytes of `x`, sharing one buffer that grows to the longest asked.
    fn filler(&self, n: usize) -> Bytes {
        let mut filler = self.shared.filler.lock().unwrap_or_else(|e| e.into_inner());
        if filler.len() < n {
            // Doubling bounds the rebuilds of a growing series of sizes.
            let len = n.next_power_of_two().min(MAX_BODY_BYTES as usize).max(n);
            *filler = Bytes::from(vec![b'x'; len]);
        }
        filler.slice(..n)
    }

    /// Accepts one JSON object, like an HTTP bridge in front of a message broker.
    async fn ingest(&self, req: Request<Incoming>) -> Result<Response<Body>, BadRequest> {
        let body: Bytes = match Limited::new(req.into_body(), MAX_RECORD_BYTES)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Ok(text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("a record is at most {MAX_RECORD_BYTES} bytes\n"),
                ))
            }
            Err(e) => return Err(BadRequest(format!("reading the record: {e}"))),
        };
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(serde_json::Value::Object(_)) => {
                let count = self.shared.ingested.fetch_add(1, Ordering::Relaxed) + 1;
                Ok(json(
                    StatusCode::OK,
                    &json!({ "accepted": 1, "count": count }),
                ))
            }
            Ok(_) => Err(BadRequest("a record must be a JSON object".into())),
            Err(e) => Err(BadRequest(format!("invalid JSON: {e}"))),
        }
    }
}
