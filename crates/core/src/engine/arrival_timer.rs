//! The arrival scheduler's timer: wakes within microseconds of an arrival's
//! intended start, where tokio's timer wheel rounds every deadline up to
//! its next millisecond.
//!
//! Why it matters: an open workload's latency counts from the intended
//! start, so a timer that fires late adds its lateness to every response
//! time. With tokio's 1 ms wheel, evenly spaced arrivals at 1,000/s against
//! nginx (about 50 µs a request) measured a p99 of 1.3 ms — the timer's, not
//! the server's. A `timerfd` armed for each wait costs two system calls
//! (arm, read) and is used only when the next arrival is not yet due: a
//! scheduler that is busy finds its arrivals due already and never sleeps.
//! Its wake-ups are at least `MIN_GAP` (250 µs) apart, so that at high
//! rates one serves several arrivals.
//!
//! While the timer is armed, wake-up coalescing (coalesce.rs) naps no
//! longer than until the deadline.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::coalesce;

/// A one-shot `timerfd` on `CLOCK_MONOTONIC` (the clock of `Instant`),
/// or tokio's timer when the kernel would not give one.
pub(crate) struct ArrivalTimer {
    fd: Option<AsyncFd<OwnedFd>>,
    /// When the timer last woke the thread.
    woke: Cell<Option<Instant>>,
}

/// The timer wakes its thread at most once per gap: at high rates a
/// wake-up serves several arrivals. At 20,000 arrivals/s a wake-up per
/// arrival (14 µs each on this VM, a VM exit included) cost the generator
/// 0.28 cores more than tokio's timer; one per 250 µs at most bounds the
/// timer's own lateness to 0.25 ms, a quarter of tokio's millisecond.
const MIN_GAP: Duration = Duration::from_micros(250);

impl ArrivalTimer {
    /// Must be called inside the shard's runtime (it registers the timer
    /// with that runtime's reactor).
    pub(crate) fn new() -> ArrivalTimer {
        let fd = timerfd().ok().and_then(|fd| {
            // SAFETY: an OwnedFd's descriptor is valid, stays open and is
            // the same for as long as the AsyncFd owns it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
        });
        ArrivalTimer {
            fd,
            woke: Cell::new(None),
        }
    }

    /// Returns at `deadline`, at once when it has passed, or — when the
    /// timer last woke less than `MIN_GAP` before `deadline` — `MIN_GAP`
    /// after that wake-up.
    pub(crate) async fn sleep_until(&self, deadline: Instant) {
        let Some(fd) = &self.fd else {
            return tokio::time::sleep_until(deadline.into()).await;
        };
        if Instant::now() >= deadline {
            return;
        }
        let deadline = match self.woke.get() {
            Some(woke) => deadline.max(woke + MIN_GAP),
            None => deadline,
        };
        let _deadline = coalesce::Deadline::set(deadline);
        loop {
            let now = Instant::now();
            if now >= deadline {
                self.woke.set(Some(now));
                return;
            }
            if arm(fd.get_ref(), deadline - now).is_err() {
                return tokio::time::sleep_until(deadline.into()).await;
            }
            match fd.readable().await {
                Ok(mut ready) => {
                    // Consume the expiry (or find none: a wake-up left over
                    // from a wait that was given up), then wait for the next.
                    let mut expiries = [0u8; 8];
                    // SAFETY: reads at most 8 bytes into an 8-byte buffer
                    // from a descriptor this timer owns.
                    unsafe {
                        libc::read(
                            fd.get_ref().as_raw_fd(),
                            expiries.as_mut_ptr().cast(),
                            expiries.len(),
                        )
                    };
                    ready.clear_ready();
                }
                Err(_) => return tokio::time::sleep_until(deadline.into()).await,
            }
        }
    }
}

fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create takes two integer flags and returns a new
    // descriptor or -1.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms the timer to expire once, `after` from now (at least 1 ns: zero
/// would disarm it).
fn arm(fd: &OwnedFd, after: Duration) -> io::Result<()> {
    let after = after.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            // `as _`, not `as libc::time_t`: the libc crate deprecates that alias on musl.
            tv_sec: after.as_secs() as _,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: a valid timerfd and a valid itimerspec; no old value asked.
    let r = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_within_a_fraction_of_a_millisecond() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let timer = ArrivalTimer::new();
            assert!(timer.fd.is_some(), "a timerfd on Linux");
            let mut late = Vec::new();
            for i in 0..100u64 {
                // Deadlines between two of tokio's millisecond ticks, past
                // the gap after the last wake-up.
                let deadline = Instant::now() + MIN_GAP + Duration::from_micros(i * 7);
                timer.sleep_until(deadline).await;
                let woke = Instant::now();
                assert!(woke >= deadline, "never early");
                late.push(woke - deadline);
            }
            late.sort();
            // tokio's wheel, which rounds up to its next millisecond, is
            // 0.5 ms late at the median over deadlines spread like these; a
            // timerfd tens of µs, even on a busy machine.
            let median = late[late.len() / 2];
            assert!(median < Duration::from_micros(400), "median {median:?}");

            // A wait given up (a select took the other branch) leaves no
            // early wake-up behind.
            // `biased`: the wait is polled first (arming the timer), then
            // the ready branch wins. (Only a thread descheduled for the 2 ms
            // between making the deadline and polling finds it passed.)
            tokio::select! {
                biased;
                _ = timer.sleep_until(Instant::now() + Duration::from_millis(2)) => {}
                _ = std::future::ready(()) => {}
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            let deadline = Instant::now() + Duration::from_millis(20);
            timer.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline);
        });
    }
}
