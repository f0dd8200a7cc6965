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
//! still counts from when it was due. Each in-flight slot is a worker that
//! keeps its keep-alive connection, so an arrival reuses one when a worker
//! is idle.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::arrival_timer::ArrivalTimer;
use super::coalesce;
use super::level::Workload;
use super::tick_clock::TickClock;
use super::user::{record, run_arrival, Shared, User};
use crate::load::Pacer;
use crate::measure::stats::nanos;
use crate::measure::IntervalStats;
use crate::protocol::{CallOutcome, FireSink, Fired, Transport};
use crate::scenario::RequestId;

/// Arrivals the scheduler fires in a row before it lets other tasks run.
const FIRES_PER_YIELD: u32 = 64;

/// One shard's share of the arrivals: every `stride`-th, from `first`.
pub(crate) struct OpenShard {
    pub pacer: Pacer,
    pub first: u64,
    pub stride: u64,
    pub max_in_flight: u32,
}

/// New connections a shard opens at once. Arrivals that find no idle slot
/// start new ones, and when connects slow down (the server's accept queue
/// full, SYNs dropped and retried a second later) every late arrival would
/// open yet another: a storm of thousands of connects that only deepens the
/// stall. Past this many, an arrival waits for the first slot free instead.
/// On a healthy loopback a connect takes well under a millisecond, so this
/// still opens tens of thousands of connections a second.
const MAX_CONNECTING: u32 = 32;

/// Workers idle at every arrival of a window this long were not needed:
/// all but one of them go, and their connections close (5–10 s after the
/// last need of them, as windows fall; Apache's keep-alive timeout is 5 s).
/// A burst (a slow second of the server's) opens many connections;
/// without this, the shard would hold them, and their buffers, to the end
/// of a run of hours.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// A shard's open-workload bookkeeping.
///
/// In-flight slots are long-lived worker tasks, each with its own user (so
/// its connection and buffers): an arrival goes to an idle worker, and a new
/// worker is spawned only when none is idle and the cap allows. Spawning a
/// task and a user per arrival cost more than the request itself.
pub(crate) struct OpenState {
    /// Intended starts of the arrivals no worker has taken yet, oldest first.
    pub waiting: VecDeque<Instant>,
    /// Workers running an arrival.
    pub in_flight: u32,
    /// Workers alive (busy or idle).
    workers: u32,
    /// Idle workers not yet handed an arrival.
    idle: u32,
    /// New workers still opening their connection.
    connecting: u32,
    /// Idle workers woken to leave.
    retire: u32,
    /// The fewest workers idle at an arrival since `window_start`.
    idle_floor: u32,
    window_start: Instant,
    wake: Rc<Notify>,
    /// Told when a fired arrival ends while others wait for room.
    room: Rc<Notify>,
    /// The intended start of the next arrival the scheduler will record;
    /// `None` once it has recorded its last.
    pub next_due: Option<Instant>,
    /// The end of the interval the shard's recorder now collects.
    pub interval_end: Instant,
}

impl OpenState {
    /// The state of a shard whose arrivals (if it `schedules` any) begin at
    /// `start`.
    pub(crate) fn new(start: Instant, schedules: bool) -> OpenState {
        OpenState {
            waiting: VecDeque::new(),
            in_flight: 0,
            workers: 0,
            idle: 0,
            connecting: 0,
            retire: 0,
            idle_floor: u32::MAX,
            window_start: start,
            wake: Rc::new(Notify::new()),
            room: Rc::new(Notify::new()),
            next_due: schedules.then_some(start),
            interval_end: start + Duration::from_secs(1),
        }
    }

    /// Notes how many workers an arrival at `now` finds idle; once a
    /// window has passed with some idle at every arrival, all but one of
    /// those are woken to leave.
    fn note_idle(&mut self, now: Instant) {
        self.idle_floor = self.idle_floor.min(self.idle);
        if now.saturating_duration_since(self.window_start) < IDLE_WINDOW {
            return;
        }
        let surplus = self.idle_floor.saturating_sub(1);
        self.idle -= surplus;
        self.retire += surplus;
        for _ in 0..surplus {
            self.wake.notify_one();
        }
        self.idle_floor = self.idle;
        self.window_start = now;
    }

    /// Whether every arrival due before `boundary` has been recorded, so
    /// the interval ending there may be sent.
    pub(crate) fn recorded_before(&self, boundary: Instant) -> bool {
        self.next_due.is_none_or(|due| due >= boundary)
    }
}

/// Starts the shard's arrivals on time until the deadline.
pub(crate) async fn schedule<T: Transport>(
    mut arrivals: OpenShard,
    shared: Rc<Shared<T>>,
    recorder: Rc<RefCell<IntervalStats>>,
    state: Rc<RefCell<OpenState>>,
    (start, deadline): (Instant, Instant),
    seed: u64,
) {
    let mut seeds = fastrand::Rng::with_seed(seed);
    // One-request sessions over a transport that can fire: the scheduler
    // sends each arrival itself and a sink records it, no worker per
    // in-flight request.
    let mut firer = fires(&shared).map(|request| Firer {
        user: User::new(
            shared.clone(),
            recorder.clone(),
            fastrand::Rng::with_seed(seeds.u64(..)),
            shared.transport.new_session(),
        ),
        request,
        sink: Rc::new(OpenSink {
            recorder: recorder.clone(),
            state: state.clone(),
        }),
        since_yield: 0,
    });
    let max_in_flight = arrivals.max_in_flight;
    let timer = ArrivalTimer::new();
    // Arrivals handled since the scheduler last waited. Far behind schedule
    // (a rate no generator reaches) every arrival is due already and the
    // loop would never wait: it must still let the shard's deadline and
    // Ctrl-C run, or the level never ends.
    let mut busy = 0u32;
    let mut clock = TickClock::new();
    loop {
        busy += 1;
        if busy >= FIRES_PER_YIELD {
            busy = 0;
            tokio::task::yield_now().await;
            clock.lapsed();
        }
        if let Some(firer) = &mut firer {
            firer.fire_waiting(&state, max_in_flight, &mut clock).await;
        }
        let n = arrivals.pacer.issued();
        let next = arrivals.pacer.next_arrival().map(|offset| start + offset);
        let Some(intended) = next.filter(|&t| t < deadline) else {
            state.borrow_mut().next_due = None;
            // Arrivals still waiting for room go as it frees, to the end.
            if let Some(firer) = &mut firer {
                firer
                    .wait_until(deadline, &timer, &state, max_in_flight, &mut clock)
                    .await;
            }
            return;
        };
        if n % arrivals.stride != arrivals.first {
            continue;
        }
        state.borrow_mut().next_due = Some(intended);
        let mut now = clock.for_arrival(intended);
        if intended > now {
            busy = 0;
            match &mut firer {
                Some(firer) => {
                    firer
                        .wait_until(intended, &timer, &state, max_in_flight, &mut clock)
                        .await
                }
                None => timer.sleep_until(intended).await,
            }
            now = clock.read();
        }
        // An arrival counts in the interval it was due in, not the one that
        // happens to be open when a late thread gets to it: the ends of the
        // measured window must hold exactly the arrivals scheduled inside.
        while intended >= state.borrow().interval_end {
            tokio::task::yield_now().await;
            now = clock.read();
        }
        {
            let mut rec = recorder.borrow_mut();
            rec.arrivals += 1;
            let _ = rec
                .arrival_lateness
                .record(nanos(now.saturating_duration_since(intended)));
        }
        if let Some(firer) = &mut firer {
            let room = {
                let mut st = state.borrow_mut();
                let room = st.in_flight < arrivals.max_in_flight && st.waiting.is_empty();
                if room {
                    st.in_flight += 1;
                } else {
                    let mut rec = recorder.borrow_mut();
                    rec.arrivals_queued += 1;
                    wait_or_give_up(&mut st, &mut rec, intended);
                }
                room
            };
            if room {
                firer.fire(intended, now, &mut clock).await;
            }
            continue;
        }
        let mut st = state.borrow_mut();
        let mut rec = recorder.borrow_mut();
        if st.waiting.len() >= MAX_WAITING {
            rec.arrivals_queued += 1;
            wait_or_give_up(&mut st, &mut rec, intended);
            continue;
        }
        st.note_idle(now);
        st.waiting.push_back(intended);
        if st.idle > 0 {
            // Hand it to an idle worker.
            st.idle -= 1;
            st.wake.notify_one();
        } else if st.workers < arrivals.max_in_flight && st.connecting < MAX_CONNECTING {
            st.workers += 1;
            st.connecting += 1;
            let user = User::new(
                shared.clone(),
                recorder.clone(),
                fastrand::Rng::with_seed(seeds.u64(..)),
                shared.transport.new_session(),
            );
            tokio::task::spawn_local(worker(user, state.clone()));
        } else {
            // Every slot is busy (or enough are still connecting): it waits
            // for the first one free, counted.
            rec.arrivals_queued += 1;
        }
    }
}

/// Arrivals a shard keeps waiting for a slot, at most: far past what any
/// level can still start in time, and 16 MB of memory. Beyond it, a rate
/// the generator cannot reach would only grow the queue.
const MAX_WAITING: usize = 1 << 20;

/// Queues an arrival that found no room; past `MAX_WAITING` it is counted
/// as never started at once.
fn wait_or_give_up(st: &mut OpenState, rec: &mut IntervalStats, intended: Instant) {
    if st.waiting.len() < MAX_WAITING {
        st.waiting.push_back(intended);
    } else {
        rec.arrivals_unstarted += 1;
    }
}

/// The request every arrival sends when the scheduler can fire them
/// itself: a session of one request, nothing extracted from the answer
/// (there is no one to hand it to), over a transport that can fire.
fn fires<T: Transport>(shared: &Shared<T>) -> Option<RequestId> {
    let scenario = &shared.scenario;
    let request = match &shared.workload {
        // A class's arrival walks its class's session, as a user does.
        Workload::Session if !scenario.classes.is_empty() => return None,
        Workload::Session => {
            let start = scenario.session.only_start()?;
            scenario
                .session
                .transitions(start)
                .is_empty()
                .then_some(start)?
        }
        Workload::Profile { request, .. } => *request,
    };
    // A session's request that may be skipped goes by a user, which can
    // skip it; profiling never skips.
    let skippable =
        matches!(shared.workload, Workload::Session) && scenario.request(request).skip_if.is_some();
    let plain = scenario.request(request).extracts.is_empty() && !skippable;
    (plain && shared.transport.can_fire()).then_some(request)
}

/// The scheduler's own sender, for arrivals it fires itself.
struct Firer<T: Transport> {
    /// Renders every arrival (feeders, random values): one user for all.
    user: User<T>,
    request: RequestId,
    sink: Rc<OpenSink>,
    /// Arrivals fired since the scheduler last let other tasks run.
    since_yield: u32,
}

impl<T: Transport> Firer<T> {
    /// Fires the arrivals that waited for room, oldest first, while there
    /// is room.
    async fn fire_waiting(
        &mut self,
        state: &RefCell<OpenState>,
        max_in_flight: u32,
        clock: &mut TickClock,
    ) {
        loop {
            let next = {
                let mut st = state.borrow_mut();
                if st.in_flight >= max_in_flight {
                    None
                } else {
                    let next = st.waiting.pop_front();
                    st.in_flight += u32::from(next.is_some());
                    next
                }
            };
            let Some(intended) = next else { break };
            let now = clock.for_arrival(intended);
            self.fire(intended, now, clock).await;
        }
    }

    /// Sleeps until `until`, firing waiting arrivals whenever room frees.
    async fn wait_until(
        &mut self,
        until: Instant,
        timer: &ArrivalTimer,
        state: &RefCell<OpenState>,
        max_in_flight: u32,
        clock: &mut TickClock,
    ) {
        let room = state.borrow().room.clone();
        loop {
            tokio::select! {
                _ = timer.sleep_until(until) => return,
                _ = room.notified() => {
                    clock.lapsed();
                    self.fire_waiting(state, max_in_flight, clock).await
                }
            }
        }
    }

    /// Fires one arrival; a send that had to wait (its batch full) lapses
    /// the clock.
    async fn fire(&mut self, intended: Instant, begin: Instant, clock: &mut TickClock) {
        // Until the sink hears its outcome.
        coalesce::exchange_started();
        let fired = Fired {
            request: self.request,
            intended,
            begin,
            sink: self.sink.clone(),
        };
        if waited(self.user.fire(self.request, fired)).await {
            clock.lapsed();
        }
        self.since_yield += 1;
        if self.since_yield >= FIRES_PER_YIELD {
            // A record in its batch is ready at once: behind schedule, the
            // scheduler would never give the transport's connections a turn
            // to send and read.
            self.since_yield = 0;
            tokio::task::yield_now().await;
            clock.lapsed();
        }
    }
}

/// Awaits `f`; true when it had to wait (was pending at least once).
async fn waited(f: impl std::future::Future<Output = ()>) -> bool {
    let mut f = std::pin::pin!(f);
    let mut pending = false;
    std::future::poll_fn(|cx| {
        let poll = f.as_mut().poll(cx);
        pending |= poll.is_pending();
        poll
    })
    .await;
    pending
}

/// Records fired arrivals as their outcomes come, and frees their room.
struct OpenSink {
    recorder: Rc<RefCell<IntervalStats>>,
    state: Rc<RefCell<OpenState>>,
}

impl FireSink for OpenSink {
    fn done(&self, request: RequestId, intended: Instant, outcome: CallOutcome, now: Instant) {
        let open = Some((intended, now));
        // Arrivals are fired only without classes (`fires`).
        record(
            &mut self.recorder.borrow_mut(),
            request,
            None,
            open,
            &outcome,
        );
        coalesce::exchange_ended(Some(outcome.response_time));
        let mut st = self.state.borrow_mut();
        st.in_flight -= 1;
        if !st.waiting.is_empty() {
            st.room.notify_one();
        }
    }
}

/// One in-flight slot: runs arrivals as long as there are any, then waits
/// for the scheduler to hand it the next.
async fn worker<T: Transport>(mut user: User<T>, state: Rc<RefCell<OpenState>>) {
    user.prepare().await;
    state.borrow_mut().connecting -= 1;
    loop {
        let next = {
            let mut st = state.borrow_mut();
            let next = st.waiting.pop_front();
            if next.is_some() {
                st.in_flight += 1;
            }
            next
        };
        match next {
            Some(intended) => {
                run_arrival(&mut user, intended).await;
                state.borrow_mut().in_flight -= 1;
            }
            None => {
                let wake = {
                    let mut st = state.borrow_mut();
                    st.idle += 1;
                    st.wake.clone()
                };
                wake.notified().await;
                // Woken to leave (nothing waits): the user, its connection
                // and its buffers go with the task.
                let mut st = state.borrow_mut();
                if st.retire > 0 && st.waiting.is_empty() {
                    st.retire -= 1;
                    st.workers -= 1;
                    return;
                }
            }
        }
    }
}
