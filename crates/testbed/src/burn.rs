//! CPU burns measured in thread CPU time, and the fixed pool of threads
//! that serves a tier's connections and runs their burns.
//!
//! A tier's CPU demand is known by construction because a burn of `d` spins
//! until *its own thread* has consumed `d` of CPU (`CLOCK_THREAD_CPUTIME_ID`),
//! however long that takes in wall time on a busy machine.
//!
//! A tier serves its connections on `workers + 1` threads (a multi-threaded
//! tokio runtime), and a request burns on the thread that read it, like a
//! thread-pool server whose threads do their own I/O. A semaphore lets at
//! most `workers` burns run at once, so one thread is always left to read
//! requests and answer the ones that do not burn; a request that sleeps or
//! waits for another tier, or for a permit, is a parked task that holds no
//! thread.
//!
//! ```text
//!   accept (caller's runtime) ──connection──▶ threads 0..=N: read ─permit─▶ burn d here ─▶ call db / respond
//!                                                            (at most N burn; the others poll I/O)
//! ```
//!
//! Burning in place keeps a tier's own CPU per request small next to the
//! burns it is asked for. Handing each burn to a separate pool of burn
//! threads, as this module did before, took two more thread wake-ups per
//! burn (one to start it, one to resume the request), and on a small VM,
//! where a wake-up and its system calls cost tens of microseconds of CPU,
//! that was 0.04 ms more of tb-web's own CPU per `/db?web_ms=1`.
//!
//! Before burning, the task yields once. A thread about to block in a burn
//! must not be the one left holding tokio's I/O driver: the runtime's other
//! threads sleep on a condition variable while one thread waits in the
//! driver, and a burning thread does not poll it, so requests that arrive
//! meanwhile would wait for the burn to end. The yield sends the thread
//! searching for other work; finding only its own task again, it wakes a
//! sleeping sibling (tokio's rule for the last searcher), which finds
//! nothing and goes to wait in the driver. `requests_are_read_while_a_burn_runs`
//! in tests/concurrency.rs holds this in place.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

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

/// Spins until the calling thread has consumed `cpu` of CPU time.
pub fn burn(cpu: Duration) {
    let deadline = thread_cpu_time() + cpu;
    let mut x = 0u64;
    while thread_cpu_time() < deadline {
        // Some real work between clock reads, so the burn is mostly user time
        // rather than the clock syscall (the thread CPU clock has no vDSO).
        for i in 0..200u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

/// The threads of a tier, named `{name}-{i}`: `workers + 1` that serve
/// connections, and the blocking threads `/lock` sleeps on. Dropping it
/// stops them without waiting for a burn in progress.
pub struct Workers {
    // Always `Some` until dropped.
    runtime: Option<Runtime>,
    burns: Arc<Burns>,
}

impl Workers {
    /// Starts the threads for at most `workers` burns at once (at least one).
    pub fn new(name: &str, workers: usize) -> std::io::Result<Workers> {
        let workers = workers.max(1);
        let name = name.to_owned();
        let next = AtomicUsize::new(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            // One more than may burn: the thread that reads requests while
            // every permit is taken.
            .worker_threads(workers + 1)
            .thread_name_fn(move || format!("{name}-{}", next.fetch_add(1, Ordering::Relaxed)))
            .enable_all()
            .build()?;
        Ok(Workers {
            runtime: Some(runtime),
            burns: Arc::new(Burns {
                permits: Semaphore::new(workers),
                workers,
            }),
        })
    }

    /// The gate that the burns of tasks spawned here go through.
    pub fn burns(&self) -> Arc<Burns> {
        Arc::clone(&self.burns)
    }

    /// Runs `task` on these threads.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime
            .as_ref()
            .expect("the runtime lives until drop")
            .spawn(task)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // Unlike dropping the runtime, this is allowed inside another
        // runtime (the tier's accept loop), and does not wait for a thread
        // that is still burning: the tier is going away.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Lets at most `workers` burns run at once.
pub struct Burns {
    permits: Semaphore,
    workers: usize,
}

impl Burns {
    /// Number of burns that may run at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Burns `cpu` on the calling thread once fewer than `workers` burns
    /// run. Only for tasks spawned on [`Workers`]: on any other runtime the
    /// burn would stall that runtime's I/O.
    pub async fn burn(&self, cpu: Duration) {
        if cpu.is_zero() {
            return;
        }
        // The semaphore is never closed.
        let Ok(_permit) = self.permits.acquire().await else {
            return;
        };
        // Hands the I/O driver to a sibling thread (see the module docs).
        tokio::task::yield_now().await;
        burn(cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burns_run_on_the_workers() {
        let workers = Workers::new("test-worker", 2).unwrap();
        let burns = workers.burns();
        assert_eq!(burns.workers(), 2);
        let before = thread_cpu_time();
        let on_worker = workers.spawn(async move {
            burns.burn(Duration::from_millis(5)).await;
            std::thread::current().name().map(str::to_owned)
        });
        let name = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(on_worker)
            .unwrap();
        assert!(
            name.as_deref()
                .is_some_and(|n| n.starts_with("test-worker-")),
            "{name:?}"
        );
        assert!(
            thread_cpu_time() - before < Duration::from_millis(2),
            "the caller did not burn"
        );
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
