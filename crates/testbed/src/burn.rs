//! CPU burns measured in thread CPU time, and the fixed pool of worker threads
//! that runs them.
//!
//! A tier's CPU demand is known by construction because a burn of `d` spins
//! until *its own thread* has consumed `d` of CPU (`CLOCK_THREAD_CPUTIME_ID`),
//! however long that takes in wall time on a busy machine. At most `workers`
//! burns run at once, like the request threads of a thread-pool server: the
//! I/O runtime hands a burn to the pool and awaits the answer, so a request
//! that sleeps or waits for another tier holds no worker.
//!
//! ```text
//!   I/O tasks ──Burn{d, done}──▶ queue ──▶ worker 0..N (spin d of thread CPU) ──done──▶ I/O task
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

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

/// One burn waiting for a worker.
struct Job {
    cpu: Duration,
    done: oneshot::Sender<()>,
}

/// The jobs waiting for a worker. A condition variable wakes exactly one idle
/// worker per job, where a channel receiver shared behind a mutex would wake
/// two threads (the receiver and the next one in line for the mutex).
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

struct QueueState {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A worker never panics while holding the lock; if one did, the
        // queue itself is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next job, or `None` once the pool is dropped.
    fn next(&self) -> Option<Job> {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A fixed pool of worker threads that execute burns one at a time each.
/// Dropping the pool lets the workers finish their current burn and exit.
pub struct BurnPool {
    queue: Arc<Queue>,
    workers: usize,
}

impl BurnPool {
    /// Starts `workers` threads named `{name}-{i}` (at least one).
    pub fn new(name: &str, workers: usize) -> std::io::Result<BurnPool> {
        let workers = workers.max(1);
        let queue = Arc::new(Queue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        });
        let pool = BurnPool {
            queue: Arc::clone(&queue),
            workers,
        };
        for i in 0..workers {
            let queue = Arc::clone(&queue);
            // On failure `pool` is dropped, which stops the threads started so far.
            thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || worker(&queue))?;
        }
        Ok(pool)
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Burns `cpu` on a worker thread, waiting in the queue while all are busy.
    pub async fn burn(&self, cpu: Duration) {
        if cpu.is_zero() {
            return;
        }
        let (done, finished) = oneshot::channel();
        self.queue.lock().jobs.push_back(Job { cpu, done });
        self.queue.ready.notify_one();
        // The workers outlive `self`, so the job is answered.
        let _ = finished.await;
    }
}

impl Drop for BurnPool {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
    }
}

fn worker(queue: &Queue) {
    while let Some(job) = queue.next() {
        // A client that went away still costs its burn: the server already
        // committed the work, as a real thread-pool server would.
        burn(job.cpu);
        let _ = job.done.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn the_pool_burns_on_its_workers() {
        let pool = BurnPool::new("test-burn", 2).unwrap();
        let before = thread_cpu_time();
        pool.burn(Duration::from_millis(5)).await;
        pool.burn(Duration::ZERO).await;
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
