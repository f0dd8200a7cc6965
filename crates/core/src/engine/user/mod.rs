//! One closed-loop virtual user: walk the CBMG — send, wait for the whole
//! response, think, pick the next request — until the shard drops it.
//! `journey`: where a session goes (conditions, skips); `traced`: the
//! same walk for `run --trace`; `bindings`: what its templates and its
//! script's hooks see.

mod bindings;
mod journey;
mod record;
mod traced;

pub(crate) use record::record;

pub(crate) use traced::trace_session;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::checks;
use super::coalesce::Awaited;
use super::extract;
use super::feed::Feeds;
use super::hooks::{Hooks, UserTable};
use super::level::Workload;
use super::split::ClassDeal;
use super::think::{self, ThinkStream};
use super::tracer::Tracer;
use crate::measure::{ErrorKind, IntervalStats};
use crate::protocol::{Fired, Response, Transport};
use crate::scenario::{Last, RequestId, Scenario, VarId};
use bindings::{Script, UserBindings};

/// After a failed connect the user waits at least this long, so a dead
/// target with zero think time does not turn the generator into a spin loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// A closed user whose whole session was skipped (`skip_if:`) waits this
/// long before the next, so a session that never sends is not a spin loop.
/// It counts as think time: the user was not waiting for the server.
const EMPTY_SESSION_PAUSE: Duration = Duration::from_millis(10);

/// The class of a user of none (profiling): `Scenario::session_of` and
/// `think_time_of` give the scenario's own.
const NO_CLASS: usize = usize::MAX;

/// What became of a request a user came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stepped {
    /// Sent (or failed before it could be); true when it could not
    /// connect.
    Sent { connect_failed: bool },
    /// Its `skip_if:` held: nothing was sent.
    Skipped,
    /// The script's `request(ctx)` failed it: counted, not sent.
    Unsent,
}

/// What `ready_request` found.
enum Ready {
    Send,
    Skip,
}

/// Data shared by every user of a level.
pub(crate) struct Shared<T> {
    pub scenario: Arc<Scenario>,
    pub workload: Workload,
    pub transport: T,
    /// The data feeders' rows, shared by all users of the process.
    pub feeder_cursors: Arc<Feeds>,
    /// Users this shard has started: they alternate between the two halves
    /// of `UserTally`, so the halves stay even.
    pub users_started: std::cell::Cell<u64>,
    /// Where this shard's users' places start (`think::place`): uniform
    /// in [0, 1), from the shard's seed.
    pub think_origin: f64,
    /// The scenario's script, loaded in this thread (`script:`).
    pub hooks: Option<Hooks>,
    /// Which class each user joins (`classes:`).
    pub classes: ClassDeal,
}

/// A closed user in place `slot` of its shard's users (which gives its
/// class).
pub(crate) async fn run_user<T: Transport>(
    shared: Rc<Shared<T>>,
    recorder: Rc<RefCell<IntervalStats>>,
    rng: fastrand::Rng,
    slot: u32,
) {
    let scenario = shared.scenario.clone();
    let session = shared.transport.new_session();
    let mut user = User::new(shared, recorder, rng, session);
    // Profiling loads one request: its users walk no class's session and
    // think the scenario's own think time.
    user.class = match user.shared.workload {
        Workload::Session => user.shared.classes.user(slot),
        Workload::Profile { .. } => NO_CLASS,
    };

    // Users start spread over one think time, so they do not all fire at
    // t = 0 and stay in lockstep, each as if it had been running all along
    // (see engine/think.rs). This first pause is not measured.
    let first = user.start_thinking();
    tokio::time::sleep(first).await;

    match &user.shared.workload.clone() {
        Workload::Session => loop {
            user.recorder.borrow_mut().sessions += 1;
            user.begin_session();
            let mut current = scenario.session_of(user.class).first(user.rng.f64());
            loop {
                user.step(current, None).await;
                if user.exhausted {
                    user.shared.transport.end_session(&mut user.session);
                    return;
                }
                match user.next(current) {
                    Some(next) => current = next,
                    None => break,
                }
            }
            user.shared.transport.end_session(&mut user.session);
            if !user.sent {
                user.recorder.borrow_mut().think.add(EMPTY_SESSION_PAUSE);
                tokio::time::sleep(EMPTY_SESSION_PAUSE).await;
            }
        },
        Workload::Profile {
            request,
            prerequisites,
        } => {
            // The prerequisites run once, in the warm-up, so their cost is
            // outside the measured window; their extracted values stay.
            user.recorder.borrow_mut().sessions += 1;
            for &p in prerequisites {
                user.step(p, None).await;
            }
            while !user.exhausted {
                user.step(*request, None).await;
            }
        }
    }
}

/// Open workloads: one arrival's session (or, in profiling mode, its one
/// request), with latency counted from `intended`, the arrival's planned
/// start, and from each think's planned end after that.
pub(crate) async fn run_arrival<T: Transport>(user: &mut User<T>, intended: Instant) {
    let scenario = user.shared.scenario.clone();
    user.recorder.borrow_mut().sessions += 1;
    let mut intended = intended;
    match &user.shared.workload {
        Workload::Session => {
            // Each arrival is a session of a class of its own.
            user.class = user.shared.classes.arrival(user.rng.f64());
            user.begin_session();
            let mut current = scenario.session_of(user.class).first(user.rng.f64());
            loop {
                intended = user
                    .step(current, Some(intended))
                    .await
                    .unwrap_or_else(Instant::now);
                if user.exhausted {
                    // An open user serves the next arrival: only this
                    // session ends.
                    user.exhausted = false;
                    break;
                }
                match user.next(current) {
                    Some(next) => current = next,
                    None => break,
                }
            }
            user.shared.transport.end_session(&mut user.session);
        }
        Workload::Profile { request, .. } => {
            let request = *request;
            user.step_without_think(request, Some(intended)).await;
        }
    }
}

/// One user's state between requests.
pub(crate) struct User<T: Transport> {
    shared: Rc<Shared<T>>,
    recorder: Rc<RefCell<IntervalStats>>,
    rng: fastrand::Rng,
    session: T::Session,
    /// Its class (`classes:`; 0 without): whose session it walks, and
    /// whose figures its requests count in.
    class: usize,
    vars: Vec<Vec<u8>>,
    rows: Vec<Option<usize>>,
    /// The last response kept (head and body), for checks and extracts;
    /// reused so a user allocates it once.
    response: Response,
    /// The variables `cookie.NAME` templates read, with the cookie names.
    cookie_vars: Vec<(VarId, String)>,
    /// A `unique` feeder had no row left for it: the user stops.
    exhausted: bool,
    /// What the last request answered, for `when:` and `skip_if:`.
    last: Last,
    /// Whether this session has sent a request yet (`skip_if:` may skip
    /// them all).
    sent: bool,
    /// Requests skipped since the last one sent.
    skipped_in_a_row: u32,
    /// `run --trace`: where its exchanges are printed.
    trace: Option<Rc<RefCell<Tracer>>>,
    /// Its own table in the script (`ctx.user`), for its whole life.
    script_user: UserTable,
    /// Why the script failed its last request, until recorded.
    script_failure: Option<String>,
    /// Where its think times' uniforms come from.
    think: ThinkStream,
    /// Where among its shard's users it starts in that stream
    /// (`think::place`).
    place: f64,
    /// Its completions in the measured window so far, and its half of the
    /// users: for the throughput's interval (`UserTally`).
    made: u32,
    first_half: bool,
}

impl<T: Transport> User<T> {
    pub(crate) fn new(
        shared: Rc<Shared<T>>,
        recorder: Rc<RefCell<IntervalStats>>,
        mut rng: fastrand::Rng,
        session: T::Session,
    ) -> User<T> {
        let started = shared.users_started.get();
        shared.users_started.set(started + 1);
        let place = think::place(shared.think_origin, started);
        let scenario = &shared.scenario;
        User {
            class: 0,
            vars: vec![Vec::new(); scenario.variables.len()],
            rows: vec![None; scenario.feeders.len()],
            response: Response::default(),
            cookie_vars: scenario
                .variables
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let name = v.strip_prefix("cookie.")?;
                    Some((VarId(i as u32), name.to_string()))
                })
                .collect(),
            session,
            shared,
            recorder,
            think: ThinkStream::new(rng.f64()),
            place,
            made: 0,
            first_half: started.is_multiple_of(2),
            rng,
            exhausted: false,
            last: Last::default(),
            sent: false,
            skipped_in_a_row: 0,
            trace: None,
            script_user: None,
            script_failure: None,
        }
    }

    /// What comes before `request` is rendered: its rows of the data
    /// (`DataExhausted` when a unique feeder has none left), its
    /// `skip_if:` judged with them, then its `set:` variables in order
    /// (`Encode` when one cannot be computed; it keeps its value then).
    fn ready_request(&mut self, request: RequestId) -> Result<Ready, ErrorKind> {
        if !self.take_rows(request) {
            return Err(ErrorKind::DataExhausted);
        }
        if self.skips(request) {
            return Ok(Ready::Skip);
        }
        if self.shared.scenario.request(request).sets.is_empty() {
            return Ok(Ready::Send);
        }
        let shared = self.shared.clone();
        for (var, template) in &shared.scenario.request(request).sets {
            let mut value = Vec::new();
            let (_, _, mut bindings) = self.parts(None);
            template
                .render(&mut bindings, &mut value)
                .map_err(|_| ErrorKind::Encode)?;
            self.vars[var.index()] = value;
        }
        Ok(Ready::Send)
    }

    /// Fresh rows for a request: the `unique` ones it reads are taken now,
    /// the others as its templates ask. False when a `unique` feeder has
    /// none left (the user is then exhausted).
    fn take_rows(&mut self, request: RequestId) -> bool {
        self.rows.iter_mut().for_each(|r| *r = None);
        let feeds = &self.shared.feeder_cursors;
        for &feeder in feeds.unique_reads(request) {
            match feeds.take(feeder, &mut self.rng) {
                Some(row) => self.rows[feeder.index()] = Some(row),
                None => {
                    self.exhausted = true;
                    return false;
                }
            }
        }
        true
    }

    /// Places the user's think-time stream where a user running all along
    /// would be, and returns what remains of the think time it is in: the
    /// user's first pause.
    fn start_thinking(&mut self) -> Duration {
        let think = self.shared.scenario.think_time_of(self.class);
        let (stream, first) = ThinkStream::stationary(think, self.place, self.rng.f64());
        self.think = stream;
        first
    }

    /// Opens the user's connection ahead of its first request.
    pub(crate) async fn prepare(&mut self) {
        if let Some(opened) = self.shared.transport.prepare(&mut self.session).await {
            let mut rec = self.recorder.borrow_mut();
            rec.connect.add(opened.connect);
            rec.http2_connections += u64::from(opened.http2);
            if let Some(tls) = opened.tls {
                rec.tls.add(tls.took);
                rec.tls_resumed += u64::from(tls.resumed);
            }
        }
    }

    /// Send one request, wait for the whole response, record it, extract
    /// from it, then think. `intended` (open workloads) is when the request
    /// was meant to go out; then the return value is when the next one is.
    /// A request its `skip_if:` skips sends nothing and takes no think
    /// time: the session goes on from it at once.
    async fn step(&mut self, current: RequestId, intended: Option<Instant>) -> Option<Instant> {
        let connect_failed = match self.step_without_think(current, intended).await {
            Stepped::Sent { connect_failed } => connect_failed,
            Stepped::Unsent => {
                // Nothing awaited: let the shard's other users run.
                tokio::task::yield_now().await;
                false
            }
            Stepped::Skipped => {
                // Nothing awaited: let the shard's other users and its
                // deadline run.
                tokio::task::yield_now().await;
                return intended;
            }
        };
        if self.exhausted {
            return intended.map(|_| Instant::now());
        }
        let scenario = &*self.shared.scenario;
        let think = scenario
            .think_after(self.class, current)
            .sample(self.think.next());
        let think = if connect_failed {
            think.max(CONNECT_BACKOFF)
        } else {
            think
        };
        if !think.is_zero() {
            let begin = Instant::now();
            let planned = begin + think;
            tokio::time::sleep_until(tokio::time::Instant::from_std(planned)).await;
            let woke = Instant::now();
            let mut rec = self.recorder.borrow_mut();
            rec.think.add(woke - begin);
            let late = woke.saturating_duration_since(planned);
            let _ = rec
                .timer_lateness
                .record(crate::measure::stats::nanos(late));
            intended.map(|_| planned)
        } else {
            // No yield here: the exchange itself waits on the socket, and
            // tokio's cooperative budget stops a user whose socket is always
            // ready from starving the others.
            self.recorder.borrow_mut().think.add(Duration::ZERO);
            // Only open workloads use the value; closed ones skip the clock.
            intended.map(|_| Instant::now())
        }
    }

    /// The request part of `step`; true when it could not connect.
    async fn step_without_think(
        &mut self,
        current: RequestId,
        intended: Option<Instant>,
    ) -> Stepped {
        match self.ready_request(current) {
            Ok(Ready::Send) => {}
            Ok(Ready::Skip) => {
                self.skipped_in_a_row += 1;
                self.recorder.borrow_mut().per_request[current.index()].skipped += 1;
                return Stepped::Skipped;
            }
            Err(kind) => {
                self.last = Last::default();
                let outcome = crate::protocol::failed(kind, Duration::ZERO, None);
                if self.trace.is_some() {
                    self.response.head.clear();
                    self.response.body.clear();
                    self.trace_exchange(current, &outcome, &[], &[], false);
                }
                let open = intended.map(|t| (t, Instant::now()));
                let class = self.counted_class();
                let mut rec = self.recorder.borrow_mut();
                record(&mut rec, current, class, open, &outcome);
                if open.is_none() {
                    rec.users.complete(&mut self.made, self.first_half);
                }
                return Stepped::Sent {
                    connect_failed: false,
                };
            }
        }
        self.sent = true;
        self.skipped_in_a_row = 0;
        let shared = self.shared.clone();
        let request = shared.scenario.request(current);
        let tracing = self.trace.is_some();
        let scripted = shared.hooks.as_ref().is_some_and(Hooks::reads_responses);
        let reads = request.reads_response() || tracing || scripted;
        let mut response = std::mem::take(&mut self.response);
        let recorder = self.recorder.clone();
        let (transport, session, mut bindings) = self.parts(Some(current));
        let awaited = Awaited::begin();
        let mut outcome = transport
            .call(
                session,
                current,
                &mut bindings,
                reads.then_some(&mut response),
            )
            .await;
        awaited.done(outcome.response_time);
        if (tracing || scripted)
            && !request.reads_response()
            && outcome.result == Err(ErrorKind::BodyTooLarge)
        {
            // Kept only to be shown or for the script: past `max_body` it
            // is what a run without them makes of it, judged by its status.
            outcome.result = ErrorKind::from_status(outcome.status).map_or(Ok(outcome.status), Err);
        }
        let mut rec = recorder.borrow_mut();
        let checks_before = tracing.then(|| rec.per_request[current.index()].checks.clone());
        // A body cut at `max_body` cannot be judged: its checks count
        // neither way.
        let judged = outcome.result != Err(ErrorKind::BodyTooLarge);
        if !request.checks.is_empty() && outcome.status != 0 && judged {
            // Check values may hold templates: the user's values so far.
            outcome.result = checks::judge(
                &request.checks,
                outcome.status,
                outcome.result,
                &response,
                &mut bindings,
                &mut rec.per_request[current.index()],
            );
        }
        self.response = response;
        let extracting = !request.extracts.is_empty() && outcome.result.is_ok();
        if extracting {
            let transport = &self.shared.transport;
            let session = &self.session;
            let found = extract::extract(
                request,
                &self.response,
                |name| transport.cookie(session, name),
                &mut self.vars,
            );
            if !found {
                outcome.result = Err(ErrorKind::ExtractMissing);
            }
        }
        self.refresh_cookie_vars();
        self.script_response(current, &mut outcome);
        self.last = Last {
            status: outcome.status,
            ok: outcome.result.is_ok(),
        };
        // A closed user's completion counts toward its share of the
        // level's throughput; an open workload's arrivals are not users'.
        if intended.is_none() {
            rec.users.complete(&mut self.made, self.first_half);
        }
        if let Some(before) = checks_before {
            let after = &rec.per_request[current.index()].checks;
            self.trace_exchange(current, &outcome, &before, after, extracting);
        }
        let connect_failed = record(
            &mut rec,
            current,
            self.counted_class(),
            intended.map(|t| (t, Instant::now())),
            &outcome,
        );
        self.note_script_failure(&mut rec, current);
        match outcome.result {
            Err(ErrorKind::ScriptRequest) => Stepped::Unsent,
            _ => Stepped::Sent { connect_failed },
        }
    }

    /// The class its requests count in, when the scenario has classes.
    fn counted_class(&self) -> Option<usize> {
        // A profiled user is of no class (`NO_CLASS`).
        (!self.shared.scenario.classes.is_empty() && self.class != NO_CLASS).then_some(self.class)
    }

    /// `${cookie.NAME}`: the implicit variables follow the user's jar.
    fn refresh_cookie_vars(&mut self) {
        for &(var, ref name) in &self.cookie_vars {
            let value = self.shared.transport.cookie(&self.session, name);
            let slot = &mut self.vars[var.index()];
            slot.clear();
            slot.extend_from_slice(value.unwrap_or_default().as_bytes());
        }
    }

    /// Renders `request` and sends it by `Transport::fire`: `fired.sink`
    /// records it when its outcome comes.
    pub(crate) async fn fire(&mut self, request: RequestId, fired: Fired) {
        self.recorder.borrow_mut().sessions += 1;
        // Each arrival is a session of its own, as `run_arrival`'s are.
        if matches!(self.shared.workload, Workload::Session) {
            self.begin_session();
        }
        match self.ready_request(request) {
            Ok(Ready::Send) => {}
            // `engine::open::fires` leaves a session's request with a
            // `skip_if:` to the workers, which can skip it.
            Ok(Ready::Skip) => unreachable!("a request that may be skipped is not fired"),
            Err(kind) => {
                let outcome = crate::protocol::failed(kind, Duration::ZERO, None);
                fired
                    .sink
                    .done(request, fired.intended, outcome, Instant::now());
                return;
            }
        }
        let (transport, session, mut bindings) = self.parts(None);
        // Only Kafka fires, and a script hooks HTTP requests only.
        transport.fire(session, request, &mut bindings, fired).await;
    }

    /// What sending a request takes: the transport, this user's session,
    /// and the bindings its templates render with (a fresh row of each
    /// feeder) — and, rendering request `sending`, the script's
    /// `request(ctx)` runs on it.
    fn parts(&mut self, sending: Option<RequestId>) -> (&T, &mut T::Session, UserBindings<'_>) {
        let script = match (&self.shared.hooks, sending) {
            (Some(hooks), Some(request)) => Some(Script {
                hooks,
                request,
                user: &mut self.script_user,
                failure: &mut self.script_failure,
            }),
            _ => None,
        };
        let bindings = UserBindings {
            rng: &mut self.rng,
            vars: &mut self.vars,
            feeders: &self.shared.scenario.feeders,
            cursors: &self.shared.feeder_cursors,
            rows: &mut self.rows,
            script,
        };
        (&self.shared.transport, &mut self.session, bindings)
    }
}
