//! Opening an HTTP connection: TCP from the next source address, TLS for
//! `https://`, the HTTP/2 handshake (ALPN or h2c), and each failure named
//! for the message that stops a run at its start; and the HTTP/2
//! connections users share, opened by whoever finds one missing.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use super::{HttpSession, HttpTransport};
use crate::measure::ErrorKind;
use crate::protocol::{http1, http2, net, tls, Handshake, Opened};
use crate::scenario::HttpVersion;

/// An HTTP/2 connection and the users who share it: whoever finds it
/// missing opens it while the others wait. Its users all live on one
/// shard's thread; it is `Sync` only because transports are made before
/// they move to their shards.
#[derive(Default)]
pub(super) struct SharedH2 {
    conn: Mutex<Option<http2::Connection>>,
    /// Bumped at every new connection, so a user whose stream failed drops
    /// the connection it used, not one another user has opened since.
    generation: AtomicU64,
    opening: AtomicBool,
    opened: Notify,
}

/// A connection just opened.
pub(super) enum Conn {
    H1(http1::Connection),
    H2(http2::Connection),
}

/// Why a connection could not be opened: the kind counted, and the words
/// for the message that stops a run at its start.
pub(super) struct OpenFailure {
    kind: ErrorKind,
    pub(super) reason: String,
    /// The TLS handshake (or the HTTP/2 agreement) failed, not the connect.
    pub(super) tls: bool,
}

impl HttpTransport {
    /// The source address of the next connection.
    fn local_address(&self) -> Option<IpAddr> {
        if self.local.is_empty() {
            return None;
        }
        let i = self.next_local.get();
        self.next_local.set(i.wrapping_add(1));
        Some(self.local[i % self.local.len()])
    }
    /// Opens a connection, TLS and HTTP/2 included: the connection and its
    /// timings.
    /// `confirm`: make sure an HTTP/2 server answers (for `probe`).
    pub(super) async fn open(&self, confirm: bool) -> (Result<Conn, OpenFailure>, Opened) {
        let begin = Instant::now();
        let connected =
            tokio::time::timeout(self.timeout, net::connect(self.addr, self.local_address())).await;
        let mut opened = Opened {
            connect: begin.elapsed(),
            tls: None,
            http2: false,
        };
        let tcp = match connected {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(kind)) => {
                let reason = match kind {
                    ErrorKind::ConnectRefused => "connection refused".into(),
                    kind => kind.name().into(),
                };
                return (Err(OpenFailure::connect(kind, reason)), opened);
            }
            Err(_) => {
                let reason = format!("no answer to connect within {:?}", self.timeout);
                return (
                    Err(OpenFailure::connect(ErrorKind::Connect, reason)),
                    opened,
                );
            }
        };
        let Some(tls) = &self.tls else {
            if self.http != HttpVersion::Http2 {
                return (Ok(Conn::H1(http1::Connection::over_tcp(tcp))), opened);
            }
            let shaken =
                tokio::time::timeout(self.timeout, http2::handshake(tcp, false, confirm)).await;
            let conn = match shaken {
                Ok(Ok(conn)) => Ok(Conn::H2(conn)),
                Ok(Err(kind)) => Err(OpenFailure::h2(kind, "the HTTP/2 cleartext (h2c) handshake failed: does the server speak h2c? set target.http to `1.1` otherwise".into())),
                Err(_) => Err(OpenFailure::h2(ErrorKind::Timeout, format!("no HTTP/2 settings from the server within {:?} (does it speak h2c?)", self.timeout))),
            };
            opened.http2 = conn.is_ok();
            return (conn, opened);
        };
        let begin = Instant::now();
        let shaken = tokio::time::timeout(self.timeout, tls.connect(tcp)).await;
        let took = begin.elapsed();
        let shaken = match shaken {
            Ok(Ok(shaken)) => shaken,
            Ok(Err(e)) => {
                let kind = match e.kind() {
                    std::io::ErrorKind::InvalidData => ErrorKind::Tls,
                    _ => ErrorKind::Reset,
                };
                return (
                    Err(OpenFailure::tls(
                        kind,
                        tls::explain(&e, &tls.name, &tls::HTTP_SETTINGS),
                    )),
                    opened,
                );
            }
            Err(_) => {
                let reason = format!("no TLS handshake within {:?}", self.timeout);
                return (Err(OpenFailure::tls(ErrorKind::Timeout, reason)), opened);
            }
        };
        opened.tls = Some(Handshake {
            took,
            resumed: shaken.resumed,
        });
        if !shaken.h2 {
            if self.http == HttpVersion::Http2 {
                let reason = http2::refused_alpn(&tls.name).to_string();
                return (Err(OpenFailure::tls(ErrorKind::Tls, reason)), opened);
            }
            return (
                Ok(Conn::H1(http1::Connection::over_tls(shaken.stream))),
                opened,
            );
        }
        match tokio::time::timeout(self.timeout, http2::handshake(shaken.stream, true, confirm))
            .await
        {
            Ok(Ok(conn)) => (
                Ok(Conn::H2(conn)),
                Opened {
                    http2: true,
                    ..opened
                },
            ),
            Ok(Err(kind)) => (
                Err(OpenFailure::h2(
                    kind,
                    format!(
                        "the HTTP/2 handshake with {} failed ({})",
                        tls.name,
                        kind.name()
                    ),
                )),
                opened,
            ),
            Err(_) => (
                Err(OpenFailure::h2(
                    ErrorKind::Timeout,
                    format!(
                        "no HTTP/2 settings from {} within {:?}",
                        tls.name, self.timeout
                    ),
                )),
                opened,
            ),
        }
    }

    /// Puts a new connection where the session finds it.
    fn keep(&self, session: &mut HttpSession, conn: Conn) {
        match conn {
            Conn::H1(conn) => session.conn = Some(conn),
            Conn::H2(conn) => {
                let shared = session.h2.get_or_insert_with(Arc::default);
                *shared.conn.lock().expect("one thread") = Some(conn);
                shared.generation.fetch_add(1, Relaxed);
            }
        }
    }

    /// The user's HTTP/2 connection when it has one, with its generation;
    /// waits while another user of it is opening it.
    pub(super) async fn shared_h2(
        &self,
        session: &HttpSession,
    ) -> Option<(http2::Connection, u64)> {
        let shared = session.h2.as_ref()?;
        while shared.opening.load(Relaxed) {
            let notified = shared.opened.notified();
            if !shared.opening.load(Relaxed) {
                break;
            }
            notified.await;
        }
        let conn = shared.conn.lock().expect("one thread").clone()?;
        Some((conn, shared.generation.load(Relaxed)))
    }

    /// Opens the session's connection; for a shared HTTP/2 connection,
    /// marks it being opened so its other users wait instead of opening
    /// their own.
    pub(super) async fn open_for(
        &self,
        session: &mut HttpSession,
    ) -> (Result<(), ErrorKind>, Opened) {
        let shared = session.h2.clone();
        if let Some(shared) = &shared {
            shared.opening.store(true, Relaxed);
        }
        let (connected, opened) = self.open(false).await;
        let result = match connected {
            Ok(conn) => {
                self.keep(session, conn);
                Ok(())
            }
            Err(f) => Err(f.kind),
        };
        if let Some(shared) = &shared {
            shared.opening.store(false, Relaxed);
            shared.opened.notify_waiters();
        }
        (result, opened)
    }

    /// Forgets a failed HTTP/2 connection, unless a newer one replaced it.
    pub(super) fn drop_h2(&self, session: &HttpSession, generation: u64) {
        if let Some(shared) = &session.h2 {
            if shared.generation.load(Relaxed) == generation {
                shared.conn.lock().expect("one thread").take();
            }
        }
    }

    /// The HTTP/2 connection a new user shares: the current group's until
    /// it has `streams` users.
    pub(super) fn join_h2(&self) -> Option<Arc<SharedH2>> {
        if self.http == HttpVersion::Http1 {
            return None;
        }
        let mut group = self.group.borrow_mut();
        if group.1 == self.streams {
            *group = (Arc::default(), 0);
        }
        group.1 += 1;
        Some(group.0.clone())
    }
}

impl OpenFailure {
    fn connect(kind: ErrorKind, reason: String) -> OpenFailure {
        OpenFailure {
            kind,
            reason,
            tls: false,
        }
    }

    fn tls(kind: ErrorKind, reason: String) -> OpenFailure {
        OpenFailure {
            kind,
            reason,
            tls: true,
        }
    }

    /// The server would not speak HTTP/2: counted as malformed answers
    /// (or timeouts), reported like a TLS failure (the fix is a setting).
    fn h2(kind: ErrorKind, reason: String) -> OpenFailure {
        let kind = match kind {
            ErrorKind::Timeout => ErrorKind::Timeout,
            ErrorKind::Reset | ErrorKind::Closed => kind,
            _ => ErrorKind::Malformed,
        };
        OpenFailure::tls(kind, reason)
    }
}
