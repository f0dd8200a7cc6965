//! A keep-alive HTTP/1.1 server that answers "ok" to every request and
//! counts them, and the addresses they came from: what the target saw, to
//! hold a run's merged figures against.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the test server saw: requests answered, and from which addresses.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicU64,
    pub peers: Mutex<BTreeSet<IpAddr>>,
}

/// A keep-alive HTTP/1.1 server answering "ok" to every request, one thread
/// per connection, until the test process exits.
pub fn counting_server() -> (SocketAddr, Arc<Seen>) {
    counting_server_on("127.0.0.1:0")
}

/// The same on `addr` (of the calling thread's network namespace).
pub fn counting_server_on(addr: &str) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind(addr).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let seen = shared.clone();
            if let Ok(peer) = stream.peer_addr() {
                seen.peers.lock().unwrap().insert(peer.ip());
            }
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        seen.requests.fetch_add(1, Ordering::Relaxed);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}
