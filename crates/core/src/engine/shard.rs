//! A shard: one OS thread with its own single-threaded runtime, its users
//! and its recorder. Nothing on the hot path is shared with other shards;
//! once a second the shard hands its interval statistics to the collector.
//!
//! ```text
//!  start        +1s          +2s               deadline
//!    |-----------|------------|------ … ---------|
//!      seq 0        seq 1                 last (partial) interval, `last = true`
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::LocalSet;

use super::coalesce;
use super::open::{self, OpenShard, OpenState};
use super::split::RampShare;
use super::user::{run_user, Shared};
use crate::measure::{IntervalStats, Snapshot};
use crate::protocol::Transport;

pub(crate) struct ShardPlan {
    pub index: usize,
    /// Closed-loop users (none in an open workload); a ramp's most.
    pub users: u32,
    /// Users over time instead of all `users` at once.
    pub ramp: Option<RampShare>,
    /// The arrivals of an open workload this shard starts.
    pub open: Option<OpenShard>,
    pub start: Instant,
    pub deadline: Instant,
    pub seed: u64,
    /// Wake-up coalescing's nap (zero: none).
    pub nap: Duration,
    /// The first measured interval: its users' completions are tallied.
    pub measured_from: u64,
}

const TICK: Duration = Duration::from_secs(1);

pub(crate) fn run_shard<T: Transport>(
    plan: ShardPlan,
    shared: Shared<T>,
    snapshots: Sender<Snapshot>,
    mut stop: watch::Receiver<bool>,
) {
    coalesce::precise_timers();
    let nap = coalesce::Nap::new(if shared.transport.reply_per_connection() {
        plan.nap
    } else {
        Duration::ZERO
    });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Before it waits on its sockets: see coalesce.rs.
        .on_thread_park(move || nap.before_park())
        .build()
    {
        Ok(rt) => rt,
        Err(_) => {
            // Without a runtime the shard can only report an empty interval.
            let _ = snapshots.send(Snapshot::empty(plan.index, 0, true, &shared));
            return;
        }
    };
    let requests = shared.scenario.requests.len();
    let shared = Rc::new(shared);
    // A fresh recorder for interval `seq`, tallying the users' completions
    // once the measured window has begun.
    let fresh = |seq: u64| {
        let mut stats = IntervalStats::new(requests);
        stats.users.counting = seq >= plan.measured_from;
        stats
    };
    let recorder = Rc::new(RefCell::new(fresh(0)));
    let local = LocalSet::new();
    // Closed users running now: all of them, or as many as the ramp has
    // started.
    let active = Rc::new(std::cell::Cell::new(match plan.ramp {
        Some(_) => 0,
        None => plan.users,
    }));
    let open_state = Rc::new(RefCell::new(OpenState::new(
        plan.start,
        plan.open.is_some(),
    )));
    local.block_on(&runtime, async {
        // Every shard of the level, in whichever process, begins together.
        tokio::time::sleep_until(tokio::time::Instant::from_std(plan.start)).await;
        let mut seeds = fastrand::Rng::with_seed(plan.seed);
        match plan.ramp.clone() {
            None => {
                for slot in 0..plan.users {
                    let rng = fastrand::Rng::with_seed(seeds.u64(..));
                    let user = run_user(shared.clone(), recorder.clone(), rng, slot);
                    tokio::task::spawn_local(user);
                }
            }
            Some(ramp) => {
                let spawn = {
                    let (shared, recorder) = (shared.clone(), recorder.clone());
                    let seeds = RefCell::new(fastrand::Rng::with_seed(seeds.u64(..)));
                    move |slot: u32| {
                        let rng = fastrand::Rng::with_seed(seeds.borrow_mut().u64(..));
                        let user = run_user(shared.clone(), recorder.clone(), rng, slot);
                        tokio::task::spawn_local(user)
                    }
                };
                tokio::task::spawn_local(follow_ramp(
                    ramp,
                    plan.users,
                    plan.start,
                    spawn,
                    active.clone(),
                ));
            }
        }
        if let Some(arrivals) = plan.open {
            tokio::task::spawn_local(open::schedule(
                arrivals,
                shared.clone(),
                recorder.clone(),
                open_state.clone(),
                (plan.start, plan.deadline),
                seeds.u64(..),
            ));
        }
        let start = tokio::time::Instant::from_std(plan.start);
        let deadline = tokio::time::Instant::from_std(plan.deadline);
        let mut ticker = tokio::time::interval_at(start + TICK, TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // The next interval to send: a shard starved past a whole tick
        // (an overloaded machine) still sends every interval, in order, the
        // collector waiting for each (what accumulated goes in the first).
        let next_seq = std::cell::Cell::new(0u64);
        let send_one = |seq: u64, last: bool| {
            let mut open = open_state.borrow_mut();
            open.interval_end = plan.start + TICK * (seq as u32 + 2);
            if last {
                // Never silently dropped: what still waits for a slot is counted.
                recorder.borrow_mut().arrivals_unstarted += open.waiting.len() as u64;
            }
            let stats = std::mem::replace(&mut *recorder.borrow_mut(), fresh(seq + 1));
            let _ = snapshots.send(Snapshot {
                shard: plan.index,
                seq,
                last,
                at: Instant::now(),
                stats,
                active_users: active.get() + open.in_flight,
                remote_cpu: Duration::ZERO,
                remote_quota: None,
            });
        };
        let send = |seq: u64, last: bool| {
            for skipped in next_seq.get()..seq {
                send_one(skipped, false);
            }
            send_one(seq, last);
            next_seq.set(seq + 1);
        };
        loop {
            tokio::select! {
                biased;
                _ = tokio::time::sleep_until(deadline) => {
                    settle_arrivals(&open_state, plan.deadline).await;
                    // The deadline's interval: the one it falls in (or ends).
                    let span = (deadline - start).as_secs_f64();
                    send((span.ceil() as u64).saturating_sub(1), true);
                    break;
                }
                _ = stopped(&mut stop) => {
                    let span = start.elapsed().as_secs_f64();
                    send(span.floor() as u64, true);
                    break;
                }
                at = ticker.tick() => {
                    settle_arrivals(&open_state, at.into_std()).await;
                    let seq = ((at - start).as_secs_f64().round() as u64).saturating_sub(1);
                    send(seq, false);
                }
            }
        }
    });
    // Dropping the LocalSet drops every user mid-flight: in-flight requests
    // at the deadline are neither waited for nor counted.
    drop(local);
}

/// How far ahead of its plan a ramp starts and stops users.
const RAMP_LEAD_S: f64 = 0.001;

/// Starts and stops this shard's users as its part of the ramp says,
/// waking exactly when the plan's count of users changes. A user the ramp
/// no longer wants stops at once (the latest started first): a request it
/// had in flight is neither waited for nor counted, as at a level's end.
async fn follow_ramp(
    ramp: RampShare,
    cap: u32,
    start: Instant,
    spawn: impl Fn(u32) -> tokio::task::JoinHandle<()>,
    active: Rc<std::cell::Cell<u32>>,
) {
    let mut users = Vec::new();
    loop {
        // A millisecond ahead of the plan, so a tick on the same instant
        // as a change (every whole second of a ramp of 100 users a second)
        // already counts it.
        let t = start.elapsed().as_secs_f64() + RAMP_LEAD_S;
        let want = ramp.users_at(t, cap) as usize;
        // A user takes the place of the last that stopped there, and its
        // class (`ClassDeal::user`), so the mix holds through the ramp.
        while users.len() < want {
            users.push(spawn(users.len() as u32));
        }
        while users.len() > want {
            if let Some(user) = users.pop() {
                user.abort();
            }
        }
        active.set(users.len() as u32);
        match ramp.ramp.next_change(t) {
            Some(next) => {
                let at = start + Duration::from_secs_f64((next - RAMP_LEAD_S).max(0.0));
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
            }
            // The plan holds from here on: keep the users (dropping their
            // handles would not stop them, but nothing is left to do).
            None => std::future::pending::<()>().await,
        }
    }
}

/// Lets the arrival scheduler record every arrival due before `boundary`
/// (its timer has fired, like the tick's) before the interval is sent, so
/// a thread that ran late does not move arrivals across the boundary. A
/// scheduler that has fallen far behind (an overloaded generator) may
/// never catch up: then the interval goes without them after `SETTLE_MAX`.
async fn settle_arrivals(open: &RefCell<OpenState>, boundary: Instant) {
    let give_up = Instant::now() + SETTLE_MAX;
    while !open.borrow().recorded_before(boundary) && Instant::now() < give_up {
        tokio::task::yield_now().await;
    }
}

/// How long a tick waits for a late arrival scheduler.
const SETTLE_MAX: Duration = Duration::from_millis(100);

/// Resolves once a stop is asked for; never when the signal is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stopped| *stopped).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Snapshot {
    fn empty<T: Transport>(shard: usize, seq: u64, last: bool, shared: &Shared<T>) -> Snapshot {
        Snapshot {
            shard,
            seq,
            last,
            at: Instant::now(),
            stats: IntervalStats::new(shared.scenario.requests.len()),
            active_users: 0,
            remote_cpu: Duration::ZERO,
            remote_quota: None,
        }
    }
}
