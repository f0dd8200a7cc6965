//! Which connections the agent serves. A connection is *pending* until its
//! first authorised request, and only then takes one of the served slots.
//! Pending connections get `AUTH_DEADLINE` to make that request, and when
//! `MAX_PENDING` already wait, a new one evicts the oldest: idle
//! unauthenticated connections can delay an authorised client by a few
//! milliseconds, never lock it out (before, the slots went at accept, so 64
//! idle connections without a token shut the controller out).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Connections waiting for their first authorised request, at most.
pub const MAX_PENDING: usize = 64;

/// How long a new connection has to make an authorised request.
pub const AUTH_DEADLINE: Duration = Duration::from_secs(2);

pub struct Admission {
    slots: Arc<Semaphore>,
    pending: Mutex<VecDeque<(u64, Arc<Notify>)>>,
    next_id: AtomicU64,
}

/// One connection's standing.
pub struct Ticket {
    id: u64,
    admission: Arc<Admission>,
    evicted: Arc<Notify>,
    admitted: AtomicBool,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Admission {
    /// Serves at most `slots` authorised connections at once.
    pub fn new(slots: usize) -> Arc<Admission> {
        Arc::new(Admission {
            slots: Arc::new(Semaphore::new(slots)),
            pending: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
        })
    }

    fn pending(&self) -> MutexGuard<'_, VecDeque<(u64, Arc<Notify>)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection just accepted: pending, evicting the oldest pending
    /// one when `MAX_PENDING` wait already.
    pub fn arrive(self: &Arc<Self>) -> Arc<Ticket> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut pending = self.pending();
        while pending.len() >= MAX_PENDING {
            if let Some((_, oldest)) = pending.pop_front() {
                oldest.notify_one();
            }
        }
        pending.push_back((id, evicted.clone()));
        Arc::new(Ticket {
            id,
            admission: self.clone(),
            evicted,
            admitted: AtomicBool::new(false),
            slot: Mutex::new(None),
        })
    }
}

impl Ticket {
    /// Called on every authorised request: the first takes a slot. False
    /// when every slot is taken (the request is refused, the connection
    /// stays pending).
    pub fn admit(&self) -> bool {
        if self.admitted.load(Ordering::Acquire) {
            return true;
        }
        let Ok(permit) = self.admission.slots.clone().try_acquire_owned() else {
            return false;
        };
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(permit);
        self.admitted.store(true, Ordering::Release);
        self.leave_pending();
        true
    }

    pub fn admitted(&self) -> bool {
        self.admitted.load(Ordering::Acquire)
    }

    /// Completes when a newer connection pushed this one out.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }

    fn leave_pending(&self) {
        self.admission.pending().retain(|(id, _)| *id != self.id);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.leave_pending();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_pending_connection_makes_room_and_slots_go_to_the_authorised() {
        let admission = Admission::new(1);
        let first = admission.arrive();
        let others: Vec<_> = (0..MAX_PENDING - 1).map(|_| admission.arrive()).collect();
        // One more: the first is told to go.
        let newest = admission.arrive();
        tokio::time::timeout(Duration::from_secs(1), first.evicted())
            .await
            .expect("evicted");
        assert!(newest.admit(), "the newest authorises and is served");
        assert!(!others[0].admit(), "the one slot is taken");
        drop(newest);
        assert!(others[0].admit(), "its slot went back with the connection");
        assert!(others[0].admitted());
    }
}
