//! Opening TCP connections and naming I/O failures, for every transport:
//! one place decides Nagle, source-address binding, and which
//! `std::io::Error` becomes which `ErrorKind`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use tokio::net::{TcpSocket, TcpStream};

use crate::measure::ErrorKind;

/// Connects to `addr`, from `local` when given (a source address of its own
/// gives another ~28,000 ephemeral ports toward the same server port).
pub(crate) async fn connect(
    addr: SocketAddr,
    local: Option<IpAddr>,
) -> Result<TcpStream, ErrorKind> {
    let connected = match local {
        None => TcpStream::connect(addr).await,
        Some(ip) => connect_from(addr, ip).await,
    };
    connected.map(ready).map_err(|e| connect_kind(&e))
}

/// Connects to `host:port`, resolving the name (Kafka's brokers are named
/// by the cluster).
pub(crate) async fn connect_named(addr: &str) -> Result<TcpStream, ErrorKind> {
    TcpStream::connect(addr)
        .await
        .map(ready)
        .map_err(|e| connect_kind(&e))
}

/// Requests and batches are written whole: Nagle would only add delay.
fn ready(stream: TcpStream) -> TcpStream {
    let _ = stream.set_nodelay(true);
    stream
}

async fn connect_from(addr: SocketAddr, ip: IpAddr) -> io::Result<TcpStream> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // Let connect() choose the port for the whole 4-tuple; a bind() to port
    // 0 alone would reserve a port for every destination, halving the range.
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and a pointer to an int of the stated size.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

/// Why a connect failed: refused (nothing listening) or anything else.
pub(crate) fn connect_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        _ => ErrorKind::Connect,
    }
}

/// Why reading or writing an open connection failed. `otherwise` names
/// what the transport makes of the rest: HTTP calls them `reset` (the
/// exchange broke), Kafka `connect` (the broker connection is redone).
pub(crate) fn io_kind(e: &io::Error, otherwise: ErrorKind) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => ErrorKind::Reset,
        io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => otherwise,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_by_kind() {
        let e = |k| io::Error::from(k);
        assert_eq!(
            io_kind(&e(io::ErrorKind::BrokenPipe), ErrorKind::Connect),
            ErrorKind::Reset
        );
        assert_eq!(
            io_kind(&e(io::ErrorKind::UnexpectedEof), ErrorKind::Reset),
            ErrorKind::Closed
        );
        assert_eq!(
            io_kind(&e(io::ErrorKind::Other), ErrorKind::Reset),
            ErrorKind::Reset
        );
        assert_eq!(
            io_kind(&e(io::ErrorKind::Other), ErrorKind::Connect),
            ErrorKind::Connect
        );
        assert_eq!(
            connect_kind(&e(io::ErrorKind::ConnectionRefused)),
            ErrorKind::ConnectRefused
        );
    }

    #[tokio::test]
    async fn a_port_nobody_listens_on_is_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert_eq!(
            connect(addr, None).await.err(),
            Some(ErrorKind::ConnectRefused)
        );
        assert_eq!(
            connect_named(&addr.to_string()).await.err(),
            Some(ErrorKind::ConnectRefused)
        );
    }
}
