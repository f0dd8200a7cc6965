//! The web tier's client of the db tier: the db tier's wire protocol over a
//! pool of keep-alive TCP connections, so a `/db` request costs the web tier
//! an 8-byte write and a 1-byte read, not an HTTP exchange or a handshake.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::db::wire;

/// Idle connections kept beyond this are closed: more than the web tier's
/// concurrency ever needs at once.
const MAX_IDLE: usize = 256;

/// Bounds a call to the db tier: the longest burn is 10 s.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to the db tier failed; answered to the client as 502.
#[derive(Debug)]
pub enum DbError {
    /// Could not connect, or the connection broke.
    Transport(String),
    /// The db tier refused the request, and said why.
    Refused(String),
    /// No answer within the call timeout.
    Timeout,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Transport(e) => write!(f, "db tier unreachable: {e}"),
            DbError::Refused(reason) => write!(f, "db tier refused: {reason}"),
            DbError::Timeout => write!(f, "db tier did not answer within {CALL_TIMEOUT:?}"),
        }
    }
}

pub struct DbClient {
    addr: SocketAddr,
    idle: Mutex<Vec<TcpStream>>,
}

impl DbClient {
    pub fn new(addr: SocketAddr) -> DbClient {
        DbClient {
            addr,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Asks the db tier to burn `cpu`.
    pub async fn burn(&self, cpu: Duration) -> Result<(), DbError> {
        tokio::time::timeout(CALL_TIMEOUT, self.call(wire::request(cpu)))
            .await
            .unwrap_or(Err(DbError::Timeout))
    }

    async fn call(&self, request: [u8; wire::REQUEST_LEN]) -> Result<(), DbError> {
        // A pooled connection the db tier has closed meanwhile fails before
        // the first byte of the reply, and the db tier closes a connection
        // only between requests: then the request was not carried out and is
        // safe to send once more, on a fresh connection.
        if let Some(mut stream) = self.checkout() {
            if let Ok(reply) = exchange(&mut stream, &request).await {
                self.checkin(stream);
                return reply;
            }
        }
        let mut stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| DbError::Transport(format!("connect {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let reply = exchange(&mut stream, &request)
            .await
            .map_err(|e| DbError::Transport(e.to_string()))?;
        self.checkin(stream);
        reply
    }

    fn checkout(&self) -> Option<TcpStream> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn checkin(&self, stream: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(stream);
        }
    }
}

/// Sends one request and reads its whole reply, leaving the connection ready
/// for the next. The outer error means the connection is unusable.
async fn exchange(
    stream: &mut TcpStream,
    request: &[u8; wire::REQUEST_LEN],
) -> std::io::Result<Result<(), DbError>> {
    stream.write_all(request).await?;
    // Read into a buffer longer than the reply: a read that does not fill
    // its buffer tells tokio the socket is drained, so the next call waits
    // for readiness instead of first trying a read that fails with EAGAIN
    // (one system call less per call; see `crate::burn` on why they count).
    let mut reply = [0u8; 64];
    let mut len = 0;
    loop {
        let n = stream.read(&mut reply[len..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        len += n;
        match reply[0] {
            wire::DONE => return Ok(Ok(())),
            wire::REFUSED if len >= 3 => break,
            wire::REFUSED => {}
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("unexpected reply byte {other:#04x}"),
                ))
            }
        }
    }
    // A refusal is rare: read the rest of its reason plainly.
    let reason_len = usize::from(u16::from_be_bytes([reply[1], reply[2]]));
    let mut reason = reply[3..len].to_vec();
    if reason.len() < reason_len {
        let mut rest = vec![0; reason_len - reason.len()];
        stream.read_exact(&mut rest).await?;
        reason.extend_from_slice(&rest);
    }
    reason.truncate(reason_len);
    Ok(Err(DbError::Refused(
        String::from_utf8_lossy(&reason).into_owned(),
    )))
}
