//! The open workload: arrivals start sessions at the times a load shape
//! (`crate::load`) gives, whatever the server's answers do — a slow server
//! does not slow the arrivals down (no coordinated omission).
//!
//! ```text
//!  pacer ── intended t ──▶ free slot? ── yes ─▶ session (latency from t)
//!                               │ no
//!                               ▼
//!                         wait queue (counted: arrivals_queued) ─▶ next free slot
//!                         still waiting at the end: arrivals_unstarted
//! ```
//!
//! The intended start travels with the arrival: a queued arrival's latency
//! still counts from when it was due. Connections are pooled per shard, so
//! an arrival reuses an idle keep-alive connection when one exists.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::user::{run_arrival, Shared, User};
use super::Workload;
use crate::load::{Pacer, RateShape, Spacing};
use crate::measure::stats::nanos;
use crate::measure::IntervalStats;
use crate::protocol::Transport;

/// One open-workload load level.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpenPlan {
    /// 1-based index of the level in its run.
    pub index: u32,
    /// Arrivals per second over time, from the level's start (warm-up
    /// included).
    pub shape: RateShape,
    pub spacing: Spacing,
    pub warmup: Duration,
    /// Measured time after the warm-up (at most: a stop may end it sooner).
    pub duration: Duration,
    /// Sessions in flight at most, over the whole generator. Arrivals past
    /// it wait for a slot, and are counted.
    pub max_in_flight: u32,
    /// `Session`: each arrival walks one session. `Profile`: each arrival
    /// sends the one request (prerequisites are not run).
    pub workload: Workload,
}

impl OpenPlan {
    /// A constant rate with evenly spaced arrivals.
    pub fn constant(index: u32, rate: f64, warmup: Duration, duration: Duration) -> OpenPlan {
        OpenPlan {
            index,
            shape: RateShape::constant(rate),
            spacing: Spacing::Even,
            warmup,
            duration,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            workload: Workload::Session,
        }
    }

    /// Mean target rate over the measured window (arrivals per second).
    pub fn target_rate(&self) -> f64 {
        let from = self.warmup;
        let to = self.warmup + self.duration;
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            (self.shape.count_at(to) - self.shape.count_at(from)) / secs
        } else {
            self.shape.rate_at(from)
        }
    }
}

/// Enough for a slow server at a high rate, yet bounded: each in-flight
/// session holds a connection (a file descriptor) and its buffers.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 10_000;

/// One shard's share of the arrivals: every `stride`-th, from `first`.
pub struct OpenShard {
    pub pacer: Pacer,
    pub first: u64,
    pub stride: u64,
    pub max_in_flight: u32,
}

/// A shard's open-workload bookkeeping.
pub struct OpenState<T: Transport> {
    /// Intended starts of the arrivals waiting for a slot, oldest first.
    pub waiting: VecDeque<Instant>,
    pub in_flight: u32,
    /// Idle sessions (keep-alive connections) for the next arrivals.
    idle: Vec<T::Session>,
}

impl<T: Transport> Default for OpenState<T> {
    fn default() -> Self {
        OpenState {
            waiting: VecDeque::new(),
            in_flight: 0,
            idle: Vec::new(),
        }
    }
}

/// Starts the shard's arrivals on time until the deadline.
pub async fn schedule<T: Transport>(
    mut arrivals: OpenShard,
    shared: Rc<Shared<T>>,
    recorder: Rc<RefCell<IntervalStats>>,
    state: Rc<RefCell<OpenState<T>>>,
    (start, deadline): (Instant, Instant),
    seed: u64,
) {
    let mut seeds = fastrand::Rng::with_seed(seed);
    loop {
        let n = arrivals.pacer.issued();
        let Some(offset) = arrivals.pacer.next_arrival() else {
            return;
        };
        if n % arrivals.stride != arrivals.first {
            continue;
        }
        let intended = start + offset;
        if intended >= deadline {
            return;
        }
        let mut now = Instant::now();
        if intended > now {
            tokio::time::sleep_until(tokio::time::Instant::from_std(intended)).await;
            now = Instant::now();
        }
        let mut st = state.borrow_mut();
        {
            let mut rec = recorder.borrow_mut();
            rec.arrivals += 1;
            let _ = rec
                .arrival_lateness
                .record(nanos(now.saturating_duration_since(intended)));
            if st.in_flight >= arrivals.max_in_flight {
                rec.arrivals_queued += 1;
                st.waiting.push_back(intended);
                continue;
            }
        }
        st.in_flight += 1;
        let session = st
            .idle
            .pop()
            .unwrap_or_else(|| shared.transport.new_session());
        drop(st);
        let user = User::new(
            shared.clone(),
            recorder.clone(),
            fastrand::Rng::with_seed(seeds.u64(..)),
            session,
        );
        tokio::task::spawn_local(slot(user, state.clone(), intended));
    }
}

/// One in-flight slot: runs its arrival, then any that queued meanwhile.
async fn slot<T: Transport>(mut user: User<T>, state: Rc<RefCell<OpenState<T>>>, first: Instant) {
    let mut intended = first;
    loop {
        run_arrival(&mut user, intended).await;
        let mut st = state.borrow_mut();
        match st.waiting.pop_front() {
            Some(next) => intended = next,
            None => {
                st.in_flight -= 1;
                st.idle.push(user.into_session());
                return;
            }
        }
    }
}
