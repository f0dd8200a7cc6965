//! CPU burns measured in thread CPU time, and the event loops that serve a
//! tier's connections and run their burns.
//!
//! A tier's CPU demand is known by construction because a burn of `d` spins
//! until *its own thread* has consumed `d` of CPU (`CLOCK_THREAD_CPUTIME_ID`),
//! however long that takes in wall time on a busy machine.
//!
//! A request asking for `d` costs its tier `d` in total, its handling
//! included. Reading, parsing, answering, calling the db tier and the thread
//! wake-ups between cost tens of microseconds each, and twice as much on a
//! slower or busier machine: left alone they would add a machine-dependent 5–12%
//! to a 1 ms demand. So each loop keeps a ledger: the CPU its thread spent
//! outside burns since the last one ended, and the requests it started
//! meanwhile. A burn is shortened by that CPU per request, and the tier's
//! CPU per request is `d` exactly in steady state (shifted by one request:
//! a request's reply and the next one's parsing fall in the same window).
//! Requests that burn nothing cost what their handling costs; mixed with
//! burning ones, they add their share to the window and only that share is
//! taken off. A handling cost larger than `d` is not hidden: the burn is then
//! zero and the request costs what it costs.
//!
//! A tier has `workers` event loops, each a single-threaded tokio runtime on
//! an OS thread of its own, like the worker processes of a pre-fork server
//! (Apache's prefork or event MPM, PHP-FPM behind nginx, gunicorn with sync
//! workers): each accepted connection is pinned to the loop with the fewest
//! open connections, and a request burns right there, blocking its loop —
//! requests on the loop's other connections wait, as they would behind a busy
//! pre-fork worker. A request that sleeps, waits for the lock or for another
//! tier is a parked task: its loop serves other connections meanwhile.
//!
//! ```text
//!   accept (caller's runtime) ──connection, least-connections──▶ loop i: read ─▶ burn d here ─▶ call db / respond
//!                                                                  (one loop per worker; at most one burn each)
//! ```
//!
//! Why loops and not one pool of threads: a tier's own CPU per request is
//! mostly thread wake-ups (tens of microseconds each on a small VM), and it
//! must stay small next to the burns it is asked for. A loop that reads,
//! burns and answers on one thread wakes once for the request and once per
//! reply it waits for (tb-web's `/db`: two). A multi-threaded runtime that
//! burns in place also had to hand its I/O driver to a sibling thread before
//! each burn (one more wake-up), and a separate burn pool two more.
//!
//! Queueing: one loop per tier is a single-server FCFS station (M/M/1 when
//! arrivals are Poisson). With `workers` > 1 each loop has a queue of its own
//! instead of one shared queue — `workers` single servers, not one
//! `workers`-server station: the saturation throughput is still
//! `workers / D` while every loop has connections, but below it a request
//! may wait behind a busy loop while another is idle.
//!
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// CPU time consumed so far by the calling thread.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // every Linux kernel supports, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// This thread's CPU outside burns: see the module's documentation.
#[derive(Clone, Copy)]
struct Ledger {
    /// Thread CPU time when the last burn ended, or when the first request
    /// started; `None` before either.
    mark: Option<Duration>,
    /// Requests started since `mark`.
    requests: u32,
}

thread_local! {
    static LEDGER: Cell<Ledger> = const { Cell::new(Ledger { mark: None, requests: 0 }) };
}

/// Counts a request that this thread's loop starts handling.
pub fn request_started() {
    LEDGER.with(|ledger| {
        let mut l = ledger.get();
        l.mark = l.mark.or_else(|| Some(thread_cpu_time()));
        l.requests = l.requests.saturating_add(1);
        ledger.set(l);
    });
}

/// Burns what is left of a request's `cpu` once its share of the loop's
/// handling since the last burn is taken off (see the module's
/// documentation). Without a request started, burns `cpu` exactly.
pub fn burn(cpu: Duration) {
    if cpu.is_zero() {
        return;
    }
    let now = thread_cpu_time();
    let ledger = LEDGER.get();
    let handling = match ledger.mark {
        Some(mark) if ledger.requests > 0 => now.saturating_sub(mark) / ledger.requests,
        _ => Duration::ZERO,
    };
    let deadline = now + cpu.saturating_sub(handling);
    spin_until(deadline);
    // The spin's overshoot past the deadline counts as handling, in the next window.
    LEDGER.set(Ledger {
        mark: Some(deadline),
        requests: 0,
    });
}

/// Spins until the calling thread's CPU time reaches `deadline`.
fn spin_until(deadline: Duration) {
    let mut x = 0u64;
    while thread_cpu_time() < deadline {
        // Some real work between clock reads, so the burn is mostly user time
        // rather than the clock syscall (the thread CPU clock has no vDSO).
        for i in 0..200u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

/// A tier's event loops, named `{name}-{i}`, and the blocking threads
/// `/lock` sleeps on. Dropping it stops them without waiting for a burn in
/// progress.
pub struct Workers {
    loops: Vec<Loop>,
    /// Where the search for the least-loaded loop starts, so that ties are
    /// broken round-robin.
    next: AtomicUsize,
}

/// One event loop: its runtime's handle, the connections pinned to it, and
/// the signal that ends it.
struct Loop {
    handle: Handle,
    connections: Arc<AtomicUsize>,
    // Dropping the sender ends the loop.
    _stop: oneshot::Sender<()>,
}

impl Workers {
    /// Starts `workers` event loops (at least one).
    pub fn new(name: &str, workers: usize) -> std::io::Result<Workers> {
        let loops = (0..workers.max(1))
            .map(|i| Loop::start(format!("{name}-{i}")))
            .collect::<std::io::Result<_>>()?;
        Ok(Workers {
            loops,
            next: AtomicUsize::new(0),
        })
    }

    /// Number of event loops, hence of burns that may run at once.
    pub fn count(&self) -> usize {
        self.loops.len()
    }

    /// Runs the life of one connection on the loop with the fewest open
    /// connections, which counts it until the future ends. `connection`
    /// receives the index of that loop and runs in the acceptor; the future
    /// it returns runs on the loop (create sockets inside it: a socket
    /// belongs to the reactor of the runtime that registers it).
    pub fn pin<F>(&self, connection: impl FnOnce(usize) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let n = self.loops.len();
        // Ties go round-robin, so that a burst of new connections spreads.
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let index = (start..start + n)
            .map(|i| i % n)
            .min_by_key(|&i| self.loops[i].connections.load(Ordering::Relaxed))
            .expect("at least one loop");
        let chosen = &self.loops[index];
        chosen.connections.fetch_add(1, Ordering::Relaxed);
        let open = ConnectionCount(Arc::clone(&chosen.connections));
        let task = connection(index);
        // Wakes the loop if it is idle: once per connection, not per request.
        chosen.handle.spawn(async move {
            let _open = open;
            task.await;
        });
    }
}

/// Decrements its loop's connection count when the connection ends.
struct ConnectionCount(Arc<AtomicUsize>);

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Loop {
    fn start(name: String) -> std::io::Result<Loop> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(format!("{name}-blocking"))
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new().name(name).spawn(move || {
            let _ = runtime.block_on(stopped);
            // Neither waits for a burn in progress nor for `/lock`'s
            // blocking sleeps: the tier is going away.
            runtime.shutdown_background();
        })?;
        Ok(Loop {
            handle,
            connections: Arc::new(AtomicUsize::new(0)),
            _stop: stop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_loop_and_burn_there() {
        let workers = Workers::new("test-worker", 2).unwrap();
        assert_eq!(workers.count(), 2);
        let (tx, rx) = std::sync::mpsc::channel();
        // Every connection stays open until the end, so each new one goes
        // to the loop with fewer.
        let (release, held) = tokio::sync::watch::channel(());
        let before = thread_cpu_time();
        for _ in 0..4 {
            let (tx, mut held) = (tx.clone(), held.clone());
            workers.pin(move |index| async move {
                burn(Duration::from_millis(5));
                let name = std::thread::current().name().map(str::to_owned);
                tx.send((index, name)).unwrap();
                let _ = held.changed().await;
            });
        }
        let mut seen: Vec<_> = (0..4).map(|_| rx.recv().unwrap()).collect();
        seen.sort();
        let indices: Vec<usize> = seen.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, [0, 0, 1, 1]);
        for (index, name) in seen {
            assert_eq!(name, Some(format!("test-worker-{index}")));
        }
        assert!(
            thread_cpu_time() - before < Duration::from_millis(2),
            "the caller did not burn"
        );
        drop(release);
    }

    #[test]
    fn a_request_costs_what_it_asks_its_handling_included() {
        // Runs on a thread of its own: the ledger is per thread. Figures are
        // medians: on a virtual machine a slice the host took from the vCPU
        // can count as this thread's CPU time (CI: 20 requests cost 7 ms
        // more than asked), and one such window says nothing of the rule.
        std::thread::spawn(|| {
            let handling = Duration::from_micros(300);
            let asked = Duration::from_millis(2);
            request_started();
            let mut window_start = thread_cpu_time();
            let mut windows: Vec<Duration> = (0..21)
                .map(|_| {
                    burn(asked);
                    // The reply, then the next request's parsing: handling outside the burn.
                    spin_until(thread_cpu_time() + handling);
                    request_started();
                    let now = thread_cpu_time();
                    now - std::mem::replace(&mut window_start, now)
                })
                .collect();
            // Every burn but the first took the window's handling off.
            let per_request = median(&mut windows[1..]);
            assert!(per_request >= asked - handling / 20, "{windows:?}");
            assert!(per_request < asked + handling / 5, "{windows:?}");

            // Requests that burn nothing cost their own handling, and a
            // burning request only its share of the window.
            let mut burns: Vec<Duration> = (0..5)
                .map(|_| {
                    for _ in 0..3 {
                        spin_until(thread_cpu_time() + handling);
                        request_started();
                    }
                    let before = thread_cpu_time();
                    burn(asked);
                    thread_cpu_time() - before
                })
                .collect();
            let burned = median(&mut burns);
            assert!(burned >= asked - handling * 2, "{burns:?}");
            assert!(burned < asked - handling / 2, "{burns:?}");
        })
        .join()
        .unwrap();
    }

    fn median(xs: &mut [Duration]) -> Duration {
        xs.sort();
        xs[xs.len() / 2]
    }

    #[test]
    fn burn_consumes_the_requested_thread_cpu() {
        let before = thread_cpu_time();
        burn(Duration::from_millis(20));
        let used = thread_cpu_time() - before;
        assert!(used >= Duration::from_millis(20), "{used:?}");
        assert!(used < Duration::from_millis(22), "{used:?}");
    }
}
