//! The web tier's client of the db tier: a pool of keep-alive HTTP/1.1
//! connections, so a `/db` request costs the db tier its burn and not a TCP
//! handshake.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Idle connections kept beyond this are closed: more than the web tier's
/// concurrency ever needs at once.
const MAX_IDLE: usize = 256;

/// Bounds a call to the db tier: the longest burn is 10 s.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

type Sender = SendRequest<Empty<Bytes>>;

/// Why a call to the db tier failed; answered to the client as 502.
#[derive(Debug)]
pub enum DbError {
    /// Could not connect or the connection broke.
    Transport(String),
    /// The db tier answered, but not with 200.
    Status(StatusCode),
    /// No answer within the call timeout.
    Timeout,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Transport(e) => write!(f, "db tier unreachable: {e}"),
            DbError::Status(s) => write!(f, "db tier answered {s}"),
            DbError::Timeout => write!(f, "db tier did not answer within {CALL_TIMEOUT:?}"),
        }
    }
}

pub struct DbClient {
    addr: SocketAddr,
    host: HeaderValue,
    idle: Mutex<Vec<Sender>>,
}

impl DbClient {
    pub fn new(addr: SocketAddr) -> DbClient {
        let host = HeaderValue::from_str(&addr.to_string()).expect("an address is a valid Host");
        DbClient {
            addr,
            host,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Asks the db tier to burn `cpu`.
    pub async fn burn(&self, cpu: Duration) -> Result<(), DbError> {
        let path = format!("/burn?ms={}", cpu.as_secs_f64() * 1000.0);
        match tokio::time::timeout(CALL_TIMEOUT, self.get(&path)).await {
            Ok(Ok(StatusCode::OK)) => Ok(()),
            Ok(Ok(status)) => Err(DbError::Status(status)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(DbError::Timeout),
        }
    }

    async fn get(&self, path: &str) -> Result<StatusCode, DbError> {
        let mut req = Request::get(path)
            .header(HOST, self.host.clone())
            .body(Empty::new())
            .expect("a valid request");
        // A pooled connection the db tier has closed meanwhile hands the
        // request back unsent; only then is it safe to try the next one.
        while let Some(mut sender) = self.checkout() {
            // Waits until the connection has finished with its last response.
            if sender.ready().await.is_err() {
                continue;
            }
            match sender.try_send_request(req).await {
                Ok(resp) => return self.finish(sender, resp).await,
                Err(mut e) => match e.take_message() {
                    Some(unsent) => req = unsent,
                    None => return Err(DbError::Transport(e.into_error().to_string())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| DbError::Transport(e.to_string()))?;
        self.finish(sender, resp).await
    }

    /// Reads the whole body, so the connection is free for the next request,
    /// and returns the connection to the pool.
    async fn finish(
        &self,
        sender: Sender,
        resp: hyper::Response<hyper::body::Incoming>,
    ) -> Result<StatusCode, DbError> {
        let status = resp.status();
        resp.into_body()
            .collect()
            .await
            .map_err(|e| DbError::Transport(e.to_string()))?;
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(sender);
        }
        Ok(status)
    }

    /// An idle connection that is still open, if any.
    fn checkout(&self) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(sender) = idle.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    async fn connect(&self) -> Result<Sender, DbError> {
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| DbError::Transport(format!("connect {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| DbError::Transport(e.to_string()))?;
        tokio::spawn(async move {
            // Ends when the db tier closes the connection or the sender is dropped.
            let _ = conn.await;
        });
        Ok(sender)
    }
}
