//! The worker's door: connections that have not proven the token yet.
//!
//! Each has `HELLO_DEADLINE` from the moment it connected to say hello,
//! however it trickles its bytes (a read timeout restarts with every byte:
//! one byte every few seconds held a connection for ever); a reaper closes
//! those past it. When the door is full — `MAX_STRANGERS` waiting, or
//! `MAX_PER_SOURCE` from one address — a newcomer is still let in and the
//! oldest one waiting (from the same address, when that is the limit) is
//! closed instead: a controller's hello takes one round trip, a trickler's
//! forever, so strangers cannot keep a controller out however many they
//! are.

use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a connection may take, from its first moment, to prove it
/// holds the token. Longer than the controller's own handshake timeout
/// (10 s, `link.rs`): when the two wait on each other (a controller
/// without TLS at a TLS worker), the controller gives up first and says
/// why, instead of seeing the connection closed and trying again.
pub(super) const HELLO_DEADLINE: Duration = Duration::from_secs(15);

/// Connections waiting to say hello at once: a few controllers and
/// probes, not a flood of idle ones.
const MAX_STRANGERS: usize = 64;

/// Of those, from one source address.
const MAX_PER_SOURCE: usize = 16;

/// How often the reaper looks for connections past their deadline.
const REAP_EVERY: Duration = Duration::from_millis(200);

pub(super) struct Door {
    waiting: Mutex<Vec<Waiting>>,
    next_id: AtomicU64,
}

struct Waiting {
    id: u64,
    since: Instant,
    peer: IpAddr,
    /// A handle on the connection's socket, to close it from here.
    socket: TcpStream,
}

/// A connection's place among those waiting; it leaves when let in or
/// dropped.
pub(super) struct Ticket {
    door: Arc<Door>,
    id: u64,
}

impl Door {
    /// An empty door, with its reaper running for as long as the door is
    /// there.
    pub(super) fn open() -> Arc<Door> {
        let door = Arc::new(Door {
            waiting: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&door);
        let _ = std::thread::Builder::new()
            .name("autoperf-worker-door".into())
            .spawn(move || loop {
                std::thread::sleep(REAP_EVERY);
                match weak.upgrade() {
                    Some(door) => door.close_late(Instant::now()),
                    None => return,
                }
            });
        door
    }

    /// Lets `stream` wait to say hello, closing the oldest one waiting if
    /// the door is full.
    pub(super) fn enter(self: &Arc<Door>, stream: &TcpStream) -> std::io::Result<Ticket> {
        let socket = stream.try_clone()?;
        let peer = stream.peer_addr()?.ip();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let same_source = waiting.iter().filter(|w| w.peer == peer).count();
        // Oldest first: the list is in order of arrival.
        let evict = if same_source >= MAX_PER_SOURCE {
            waiting.iter().position(|w| w.peer == peer)
        } else if waiting.len() >= MAX_STRANGERS {
            Some(0)
        } else {
            None
        };
        if let Some(i) = evict {
            let _ = waiting.remove(i).socket.shutdown(Shutdown::Both);
        }
        waiting.push(Waiting {
            id,
            since: Instant::now(),
            peer,
            socket,
        });
        Ok(Ticket {
            door: self.clone(),
            id,
        })
    }

    /// Closes the connections that had `HELLO_DEADLINE` and said nothing
    /// valid in it.
    fn close_late(&self, now: Instant) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|w| {
            let late = now.duration_since(w.since) >= HELLO_DEADLINE;
            if late {
                let _ = w.socket.shutdown(Shutdown::Both);
            }
            !late
        });
    }

    fn leave(&self, id: u64) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|w| w.id != id);
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.lock().unwrap().len()
    }
}

impl Ticket {
    /// The connection proved the token: it no longer waits.
    pub(super) fn admitted(self) {}
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.door.leave(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use super::*;

    /// `n` connections to a listener, and the server's ends of them.
    fn connections(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let servers = (0..n).map(|_| listener.accept().unwrap().0).collect();
        (clients, servers)
    }

    fn closed(client: &mut TcpStream) -> bool {
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        matches!(client.read(&mut [0u8; 1]), Ok(0) | Err(_))
    }

    #[test]
    fn a_full_door_closes_the_oldest_waiting_from_the_same_address_and_lets_the_newcomer_in() {
        let door = Door::open();
        let (mut clients, servers) = connections(MAX_PER_SOURCE + 1);
        let tickets: Vec<Ticket> = servers.iter().map(|s| door.enter(s).unwrap()).collect();
        // All from 127.0.0.1: the first one made room for the last.
        assert_eq!(door.waiting(), MAX_PER_SOURCE);
        assert!(closed(&mut clients[0]));
        // The one let in leaves the door, and so does a dropped one.
        let mut tickets = tickets.into_iter();
        let _evicted = tickets.next();
        tickets.next().unwrap().admitted();
        assert_eq!(door.waiting(), MAX_PER_SOURCE - 1);
    }

    #[test]
    fn a_connection_that_says_nothing_valid_in_time_is_closed_however_it_trickles() {
        let door = Door::open();
        let (mut clients, servers) = connections(2);
        let _tickets: Vec<Ticket> = servers.iter().map(|s| door.enter(s).unwrap()).collect();
        // Not yet late: still open.
        door.close_late(Instant::now());
        assert_eq!(door.waiting(), 2);
        door.close_late(Instant::now() + HELLO_DEADLINE);
        assert_eq!(door.waiting(), 0);
        assert!(closed(&mut clients[0]) && closed(&mut clients[1]));
    }
}
