//! The db tier. Its port speaks two protocols, told apart by a connection's
//! first byte:
//!
//! - the testbed's own wire protocol, which the web tier uses, as a real
//!   database speaks its own protocol rather than HTTP (see [`wire`]);
//! - HTTP for people and health checks: `GET /burn?ms=B` burns B ms of CPU
//!   on a db worker, `GET /health` answers "ok".

use std::future::Future;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::burn::{burn, request_started, Workers};
use crate::http::{
    self, method_not_allowed, not_found, ok, BadRequest, Body, Handler, Query, Stop,
};

/// Configuration of the db tier.
#[derive(Debug, Clone)]
pub struct DbConfig {
    /// Event loops, each on a thread of its own: the CPU burns that may run
    /// at once (see [`crate::burn`]).
    pub workers: usize,
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig { workers: 2 }
    }
}

/// The db tier's wire protocol, over a keep-alive TCP connection, one
/// request at a time:
///
/// ```text
///   request: u64 big-endian — microseconds of CPU to burn (at most 10 s)
///   reply:   0x00                                  — burned
///          | 0x01, u16 big-endian length, UTF-8    — refused, and why
/// ```
///
/// Because a burn is at most 10 s = 10^7 µs < 2^56, a request's first byte
/// is always 0, which no HTTP request starts with: that is how the tier tells
/// the protocols apart on one port.
pub mod wire {
    use std::time::Duration;

    /// Length of a request.
    pub const REQUEST_LEN: usize = 8;
    /// The reply to a request that was carried out.
    pub const DONE: u8 = 0;
    /// The first byte of a refusal, followed by its length-prefixed reason.
    pub const REFUSED: u8 = 1;
    /// The longest burn a request may ask for.
    pub const MAX_BURN: Duration = Duration::from_secs(10);

    /// The request for a burn of `cpu`, to the nearest microsecond.
    pub fn request(cpu: Duration) -> [u8; REQUEST_LEN] {
        let micros = (cpu.as_nanos() + 500) / 1000;
        u64::try_from(micros).unwrap_or(u64::MAX).to_be_bytes()
    }

    /// The burn a request asks for, or why it is refused.
    pub fn parse(request: [u8; REQUEST_LEN]) -> Result<Duration, String> {
        let cpu = Duration::from_micros(u64::from_be_bytes(request));
        if cpu > MAX_BURN {
            return Err(format!("a burn of {cpu:?} is longer than {MAX_BURN:?}"));
        }
        Ok(cpu)
    }

    /// A refusal on the wire.
    pub fn refusal(reason: &str) -> Vec<u8> {
        let reason = &reason.as_bytes()[..reason.len().min(u16::MAX as usize)];
        let mut reply = Vec::with_capacity(3 + reason.len());
        reply.push(REFUSED);
        reply.extend_from_slice(&(reason.len() as u16).to_be_bytes());
        reply.extend_from_slice(reason);
        reply
    }
}

/// Serves the db tier on `listener` until `shutdown` completes.
pub async fn serve_db(
    listener: tokio::net::TcpListener,
    config: DbConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let workers = Workers::new("db-worker", config.workers)?;
    let db = Arc::new(Db);
    http::serve(listener, None, &workers, |_| Arc::clone(&db), shutdown).await
}

/// Handlers run on the tier's event loops, and burn on the loop that runs
/// them (see [`crate::burn`]).
struct Db;

impl Handler for Db {
    const BINARY: bool = true;

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        request_started();
        self.route(&req)
            .await
            .unwrap_or_else(BadRequest::into_response)
    }

    async fn serve_binary(self: Arc<Self>, mut stream: TcpStream, mut stop: Stop) {
        let mut request = [0u8; wire::REQUEST_LEN];
        loop {
            let read = tokio::select! {
                read = stream.read_exact(&mut request) => read,
                () = stop.requested() => return,
            };
            if read.is_err() {
                // The web tier closed the connection.
                return;
            }
            request_started();
            let written = match wire::parse(request) {
                Ok(cpu) => {
                    burn(cpu);
                    stream.write_all(&[wire::DONE]).await
                }
                Err(reason) => stream.write_all(&wire::refusal(&reason)).await,
            };
            if written.is_err() {
                return;
            }
        }
    }
}

impl Db {
    async fn route(&self, req: &Request<Incoming>) -> Result<Response<Body>, BadRequest> {
        match req.uri().path() {
            "/health" => Ok(ok()),
            "/metrics" => Ok(crate::metrics::process_metrics()),
            "/burn" if req.method() != Method::GET => Ok(method_not_allowed("GET")),
            "/burn" => {
                let cpu = Query::parse(req.uri().query()).required_millis("ms")?;
                burn(cpu);
                Ok(ok())
            }
            path => Ok(not_found(path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wire;
    use std::time::Duration;

    #[test]
    fn requests_round_trip_and_start_with_zero() {
        for cpu in [Duration::ZERO, Duration::from_micros(2500), wire::MAX_BURN] {
            let request = wire::request(cpu);
            assert_eq!(request[0], 0, "{cpu:?}");
            assert_eq!(wire::parse(request), Ok(cpu));
        }
        assert_eq!(
            wire::parse(wire::request(Duration::from_nanos(1499))),
            Ok(Duration::from_micros(1))
        );
        assert!(wire::parse(wire::request(wire::MAX_BURN + Duration::from_micros(1))).is_err());
        assert!(wire::parse([0xff; 8]).is_err());
        assert_eq!(wire::refusal("no"), [wire::REFUSED, 0, 2, b'n', b'o']);
    }
}
