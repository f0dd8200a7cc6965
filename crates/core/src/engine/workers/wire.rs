//! The byte stream between a controller and a worker: plain TCP, or TLS
//! over it when the worker has a certificate (`--tls-cert`) and the
//! controller the CA to check it with (`--worker-ca-file`).
//!
//! Both sides read on one thread while others write (snapshots out, a
//! `Stop` in), as they do on a cloned `TcpStream`. A TLS connection is
//! one state, so the clones of a TLS wire share it behind a lock that is
//! never held across a blocking socket call: a reader waits on the TCP
//! socket unlocked, then decrypts what came under the lock; a writer
//! encrypts under the lock, then sends holding only the send lock, taken
//! before the state's lock is let go so records leave in the order their
//! sequence numbers were given.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

/// One end of a controller–worker connection; clones share it.
pub(crate) enum Wire {
    Plain(TcpStream),
    Tls { tcp: TcpStream, shared: Arc<Shared> },
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// Held while encrypted bytes go out, so that they go in order.
    send: Mutex<()>,
}

struct State {
    conn: Connection,
    /// Bytes read from the socket that rustls has not taken yet (it takes
    /// no more while decrypted bytes wait to be read).
    received: Vec<u8>,
}

impl Wire {
    /// The controller's end: a TLS handshake with the worker at `name`,
    /// under the socket's timeouts.
    pub(crate) fn client(
        mut tcp: TcpStream,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<Wire> {
        let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)?;
        }
        Ok(Wire::tls(tcp, conn.into()))
    }

    /// The worker's end: a TLS handshake with a controller.
    pub(crate) fn server(mut tcp: TcpStream, config: Arc<ServerConfig>) -> io::Result<Wire> {
        let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)?;
        }
        Ok(Wire::tls(tcp, conn.into()))
    }

    fn tls(tcp: TcpStream, conn: Connection) -> Wire {
        Wire::Tls {
            tcp,
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    conn,
                    received: Vec::new(),
                }),
                send: Mutex::new(()),
            }),
        }
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Wire::Plain(tcp) | Wire::Tls { tcp, .. } => tcp,
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Wire> {
        Ok(match self {
            Wire::Plain(tcp) => Wire::Plain(tcp.try_clone()?),
            Wire::Tls { tcp, shared } => Wire::Tls {
                tcp: tcp.try_clone()?,
                shared: shared.clone(),
            },
        })
    }

    /// Timeouts are the socket's, so they hold for every clone.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }

    /// Ends the connection for every clone (a TLS peer sees the socket
    /// close; the protocol's `Bye` and `Done` are the polite ends).
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.tcp().shutdown(how)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Sends what the connection has to send, under the send lock taken
    /// before `state` is let go.
    fn flush_tls(&self, mut state: MutexGuard<'_, State>, mut tcp: &TcpStream) -> io::Result<()> {
        if !state.conn.wants_write() {
            return Ok(());
        }
        let mut out = Vec::new();
        while state.conn.wants_write() {
            state.conn.write_tls(&mut out)?;
        }
        let _sending = lock(&self.send);
        drop(state);
        tcp.write_all(&out)
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (mut tcp, shared) = match self {
            Wire::Plain(tcp) => return tcp.read(buf),
            Wire::Tls { tcp, shared } => (&*tcp, shared),
        };
        let mut raw = vec![0u8; 16 * 1024];
        loop {
            let mut state = lock(&shared.state);
            let State { conn, received } = &mut *state;
            while !received.is_empty() && conn.wants_read() {
                let taken = conn.read_tls(&mut &received[..])?;
                received.drain(..taken);
                conn.process_new_packets().map_err(io::Error::other)?;
            }
            match conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Data, the peer's close_notify (0), or its closing
                // without one (UnexpectedEof).
                done => {
                    shared.flush_tls(state, tcp)?;
                    return done;
                }
            }
            shared.flush_tls(state, tcp)?;
            // Nothing decrypted: wait for the socket, unlocked.
            let n = tcp.read(&mut raw)?;
            let mut state = lock(&shared.state);
            if n == 0 {
                // End of stream: rustls turns it into the reader's answer.
                state.conn.read_tls(&mut &[][..])?;
                state.conn.process_new_packets().map_err(io::Error::other)?;
            } else {
                state.received.extend_from_slice(&raw[..n]);
            }
        }
    }
}

impl Write for Wire {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let (tcp, shared) = match self {
            Wire::Plain(tcp) => return tcp.write(data),
            Wire::Tls { tcp, shared } => (&*tcp, shared),
        };
        let mut state = lock(&shared.state);
        let n = state.conn.writer().write(data)?;
        shared.flush_tls(state, tcp)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Wire::Plain(tcp) => tcp.flush(),
            Wire::Tls { .. } => Ok(()),
        }
    }
}
