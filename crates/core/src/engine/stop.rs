//! The stop signal: how Ctrl-C, a controller or a deadline ends a level.

use std::sync::{Arc, Mutex, Weak};

use tokio::sync::watch;

/// Asks a running level (and the run around it) to stop early. Cloning
/// shares the signal; a `child` stops with its parent (Ctrl-C ends the
/// level) but can also be stopped alone (a controller ends one level).
#[derive(Clone)]
pub struct StopSignal(Arc<StopInner>);

struct StopInner {
    flag: watch::Sender<bool>,
    children: Mutex<Vec<Weak<StopInner>>>,
}

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal(Arc::new(StopInner {
            flag: watch::channel(false).0,
            children: Mutex::new(Vec::new()),
        }))
    }
}

impl StopSignal {
    pub fn stop(&self) {
        self.0.stop();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        *self.0.flag.borrow()
    }

    /// Waits `duration`, or less when the signal stops meanwhile; true
    /// when it did.
    pub(crate) fn wait(&self, duration: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + duration;
        while !self.is_stopped() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
        }
        true
    }

    /// A signal that also stops when this one does.
    pub(crate) fn child(&self) -> StopSignal {
        let child = StopSignal::default();
        let mut children = self.0.children.lock().unwrap_or_else(|e| e.into_inner());
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&child.0));
        drop(children);
        if self.is_stopped() {
            child.stop();
        }
        child
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.flag.subscribe()
    }
}

impl StopInner {
    fn stop(&self) {
        self.flag.send_replace(true);
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        for child in children.iter().filter_map(Weak::upgrade) {
            child.stop();
        }
    }
}
