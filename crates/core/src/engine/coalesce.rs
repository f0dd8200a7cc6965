//! Wake-up coalescing: a shard's thread that awaits two replies or more
//! naps a moment before it waits on its sockets, so that the replies
//! arriving meanwhile cost it one wake-up instead of one each.
//!
//! Why: a thread asleep in `epoll_wait` is woken by the *sender* of the
//! data. On loopback that is the server, and on a VM waking a halted vCPU
//! (an inter-processor interrupt, a VM exit) costs the server's core a few
//! microseconds per wake-up. A fast generator sleeps after nearly every
//! reply and so makes the server it measures slower: against nginx on one
//! core, autoperf without naps woke 0.96 times per request (wrk 0.80) and
//! nginx served 3.5% fewer requests per second than it did for wrk. While
//! the thread naps nobody waits on its sockets, a reply only marks them
//! ready, and the nap's end is the thread's own timer on its own core. The
//! same trade a network card makes with interrupt coalescing.
//!
//! The cost is accuracy: a reply that arrives during a nap is read up to
//! one nap late (20 µs by default; waking from `epoll_wait` on a VM takes
//! several µs too). So a thread naps only where that is small next to what
//! it measures: with two replies awaited or more (with one there is nothing
//! to coalesce), and while its replies take on average at least
//! `MIN_RATIO` naps (200 µs). Faster replies are timed as exactly as without
//! naps. Against nginx, 4 users with 49 µs replies would have read them
//! 22 µs late, while 64 users, whose replies take 0.5–1 ms, got 13% more
//! throughput, a tenth off their p50, and 20% less generator CPU per
//! request. `--coalesce 0` turns it off.
//!
//! Only transports whose every reply comes on a connection of its own nap
//! (HTTP: `Transport::reply_per_connection`). Kafka's acknowledgements come
//! many records to a produce response, so there is nothing to gather: at
//! 20,000 records/s naps only cost 0.025 cores more.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The nap when the run does not choose one.
pub const DEFAULT_NAP: Duration = Duration::from_micros(20);

/// Timer slack the shard threads ask for, so that a nap of 20 µs is not
/// one of 70 µs (Linux's default slack is 50 µs).
const TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// A thread naps only while its mean response time is at least this many
/// naps: a reply read one nap late is then off by a tenth at most.
const MIN_RATIO: u32 = 10;

/// Weight of the newest response time in the running mean: 1/16.
const MEAN_SHIFT: u32 = 4;

thread_local! {
    /// Exchanges this thread has sent and awaits the outcome of.
    static AWAITED: Cell<u32> = const { Cell::new(0) };
    /// Running mean of its response times, in nanoseconds.
    static MEAN_NS: Cell<u64> = const { Cell::new(0) };
    /// When the arrival timer (arrival_timer.rs) waiting on this thread is
    /// due: a nap ends by then.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The arrival timer's deadline, for as long as it waits.
pub(crate) struct Deadline(());

impl Deadline {
    pub(crate) fn set(at: Instant) -> Deadline {
        DEADLINE.set(Some(at));
        Deadline(())
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        DEADLINE.set(None);
    }
}

/// Counts an exchange as awaited on this thread until `exchange_ended`.
pub(crate) fn exchange_started() {
    AWAITED.set(AWAITED.get().saturating_add(1));
}

/// Ends an exchange; `took` is its response time when it got one.
pub(crate) fn exchange_ended(took: Option<Duration>) {
    AWAITED.set(AWAITED.get().saturating_sub(1));
    if let Some(took) = took {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let mean = MEAN_NS.get();
        // mean += (took - mean) / 16, in unsigned arithmetic.
        MEAN_NS.set(mean - (mean >> MEAN_SHIFT) + (took >> MEAN_SHIFT));
    }
}

/// An exchange awaited for as long as this lives; `done` gives its
/// response time, a future dropped mid-exchange ends it without one.
pub(crate) struct Awaited {
    took: Option<Duration>,
}

impl Awaited {
    pub(crate) fn begin() -> Awaited {
        exchange_started();
        Awaited { took: None }
    }

    pub(crate) fn done(mut self, took: Duration) {
        self.took = Some(took);
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        exchange_ended(self.took);
    }
}

/// Asks for fine timer slack on the calling (shard) thread: its naps and
/// timers fire within a microsecond of when they are due.
pub(crate) fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches
    // nothing but the calling thread's slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS) };
}

/// A shard's nap, with the mean response time below which it does not
/// nap worked out once rather than at every park.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Nap {
    length: Duration,
    min_mean_ns: u64,
}

impl Nap {
    /// `length` zero: never.
    pub(crate) fn new(length: Duration) -> Nap {
        Nap {
            length,
            min_mean_ns: u64::try_from((length * MIN_RATIO).as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// The shard runtime's hook before it waits on its sockets and timers:
    /// naps when at least two replies are awaited and they take long
    /// enough (see the module's documentation), never past the arrival
    /// timer's deadline.
    pub(crate) fn before_park(self) {
        if self.length.is_zero() || AWAITED.get() < 2 || MEAN_NS.get() < self.min_mean_ns {
            return;
        }
        let nap = match DEADLINE.get() {
            Some(due) => self
                .length
                .min(due.saturating_duration_since(Instant::now())),
            None => self.length,
        };
        if !nap.is_zero() {
            std::thread::sleep(nap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naps_only_with_two_slow_enough_replies_awaited() {
        std::thread::spawn(|| {
            precise_timers();
            let nap = Duration::from_millis(2);
            let naps = || {
                let t = Instant::now();
                Nap::new(nap).before_park();
                t.elapsed() >= nap
            };
            // Replies faster than ten naps: none, however many are awaited.
            for _ in 0..100 {
                Awaited::begin().done(nap * 5);
            }
            let (a, b) = (Awaited::begin(), Awaited::begin());
            assert!(!naps(), "fast replies");
            a.done(nap * 5);
            b.done(nap * 5);

            // Slow enough: a nap once two are awaited.
            for _ in 0..100 {
                Awaited::begin().done(nap * 20);
            }
            let one = Awaited::begin();
            assert!(!naps(), "one reply awaited");
            exchange_started();
            assert!(naps(), "two slow replies awaited");
            let t = Instant::now();
            Nap::new(Duration::ZERO).before_park();
            assert!(t.elapsed() < nap, "turned off");
            {
                let _due = Deadline::set(Instant::now());
                assert!(!naps(), "an arrival due: no nap past it");
            }
            assert!(naps(), "the arrival timer gone");
            drop(one);
            assert!(!naps(), "one left");
            exchange_ended(None);
            exchange_ended(None);
            assert_eq!(AWAITED.get(), 0, "never below zero");
        })
        .join()
        .unwrap();
    }
}
