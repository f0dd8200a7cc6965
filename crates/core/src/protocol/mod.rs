//! Transports: how one rendered request reaches the target and what came
//! back. The engine is written once against `Transport`; HTTP/1.1 and Kafka
//! (`kafka.rs`, cargo feature `kafka`) implement it.

pub mod http1;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod registry;
pub mod request;
pub mod tls;

use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{Action, BaseUrl, RequestId, Scenario};

use self::request::RequestPlan;

/// What one call came to, with its timings.
#[derive(Debug, Clone, Copy)]
pub struct CallOutcome {
    /// `Ok(status)` for a complete response with a non-error status (for
    /// Kafka, the partition the record was written to).
    pub result: Result<u16, ErrorKind>,
    /// The HTTP status of a complete response, error statuses included
    /// (0 when none came, and for Kafka).
    pub status: u16,
    /// First byte written to last byte read (zero when nothing was sent).
    pub response_time: Duration,
    /// Set when the call had to open a connection first.
    pub connect_time: Option<Duration>,
    /// Set when that connection also shook hands in TLS.
    pub tls: Option<Handshake>,
}

/// A TLS handshake, timed apart from the TCP connect before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handshake {
    pub took: Duration,
    /// The session of an earlier connection was resumed.
    pub resumed: bool,
}

/// A connection opened ahead of a user's first request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opened {
    pub connect: Duration,
    pub tls: Option<Handshake>,
}

/// What a caller keeps of a response, to check or extract from: the head
/// (status line and headers, as received) and the decoded body.
#[derive(Debug, Default)]
pub struct Response {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let head = std::str::from_utf8(&self.head).ok()?;
        head.split("\r\n").skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A request sent by `Transport::fire`, and who hears how it went.
pub struct Fired {
    pub request: RequestId,
    /// The arrival's planned start: latency counts from here.
    pub intended: Instant,
    /// When it was sent: the service time counts from here.
    pub begin: Instant,
    pub sink: std::rc::Rc<dyn FireSink>,
}

/// Hears the outcomes of fired requests.
pub trait FireSink {
    /// `now`: when the outcome came (read once for a whole batch).
    fn done(&self, request: RequestId, intended: Instant, outcome: CallOutcome, now: Instant);
}

/// A way of sending the scenario's requests. `Session` is one user's state
/// (its connection and buffers).
pub trait Transport: 'static {
    type Session;

    fn new_session(&self) -> Self::Session;

    /// Opens the session's connection ahead of its first request, when the
    /// transport has one; returns how long connecting took (`None` when
    /// there was nothing to do or it failed: the next call will say why).
    fn prepare(&self, _session: &mut Self::Session) -> impl Future<Output = Option<Opened>> {
        std::future::ready(None)
    }

    /// Whether `fire` works: the transport can send without a task waiting
    /// for each answer.
    fn can_fire(&self) -> bool {
        false
    }

    /// Whether every awaited reply comes on a connection of its own, so
    /// that replies awaited together wake the generator once each unless
    /// it coalesces them (engine/coalesce.rs). Kafka's acknowledgements
    /// come many records to a produce response: nothing to coalesce.
    fn reply_per_connection(&self) -> bool {
        false
    }

    /// Sends request `id` and returns once it is on its way (or could not
    /// be): `fired.sink` hears the outcome when it comes. Open workloads of
    /// one-request sessions use it, so a record costs no task, no wake-up
    /// and no timer — only what the protocol itself needs.
    fn fire(
        &self,
        _session: &mut Self::Session,
        _id: RequestId,
        _bindings: &mut impl Bindings,
        _fired: Fired,
    ) -> impl Future<Output = ()> {
        async { unreachable!("fire() on a transport that cannot") }
    }

    /// Sends request `id`, rendered with `bindings`; keeps the response's
    /// head and body in `response` when given.
    fn call(
        &self,
        session: &mut Self::Session,
        id: RequestId,
        bindings: &mut impl Bindings,
        response: Option<&mut Response>,
    ) -> impl Future<Output = CallOutcome>;
}

/// HTTP/1.1 over keep-alive TCP (or TLS) connections, one per user.
pub struct HttpTransport {
    addr: SocketAddr,
    /// Set for `https://` targets.
    tls: Option<tls::Tls>,
    plans: Vec<RequestPlan>,
    timeout: Duration,
    /// Source address of every connection (`None`: the OS chooses).
    /// Source addresses, taken in turn (empty: the OS chooses).
    local: Vec<IpAddr>,
    next_local: std::cell::Cell<usize>,
}

pub struct HttpSession {
    conn: Option<http1::Connection>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// The user's one request timer (see `within`).
    watchdog: Option<Pin<Box<Sleep>>>,
}

/// The target could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The host name did not resolve.
    #[error("cannot resolve target {authority}: {reason}")]
    Resolve { authority: String, reason: String },
    /// Nothing accepted a connection at the start of the run.
    #[error("target {authority} is unreachable: {reason} (is the server running? check target.base_url)")]
    Unreachable { authority: String, reason: String },
    /// The TLS client could not be set up, or the target's handshake
    /// failed at the start of the run; `reason` names the fix.
    #[error("target {authority}: {reason}")]
    Tls { authority: String, reason: String },
    /// No Kafka broker answered at the bootstrap addresses.
    #[error("Kafka at {bootstrap} is unreachable: {reason} (is the broker running? check target.kafka.bootstrap)")]
    Kafka { bootstrap: String, reason: String },
    /// The schema registry did not take the schema.
    #[error("cannot register the Avro schema of subject `{subject}` at {url}: {reason}")]
    Registry {
        url: String,
        subject: String,
        reason: String,
    },
}

impl HttpTransport {
    pub fn new(scenario: &Scenario, base: &BaseUrl) -> Result<HttpTransport, TargetError> {
        let authority = base.authority();
        let addr = (base.host.as_str(), base.port)
            .to_socket_addrs()
            .map_err(|e| TargetError::Resolve {
                authority: authority.clone(),
                reason: e.to_string(),
            })?
            .next()
            .ok_or_else(|| TargetError::Resolve {
                authority: authority.clone(),
                reason: "no address".into(),
            })?;
        let tls = match base.tls {
            true => Some(tls::Tls::new(base, &scenario.target.tls).map_err(|reason| {
                TargetError::Tls {
                    authority: authority.clone(),
                    reason,
                }
            })?),
            false => None,
        };
        Ok(HttpTransport {
            addr,
            tls,
            plans: scenario
                .requests
                .iter()
                .map(|r| match &r.action {
                    Action::Http(http) => RequestPlan::new(http, base),
                    Action::Produce(_) => {
                        unreachable!("validation keeps `produce` requests to Kafka targets")
                    }
                })
                .collect(),
            timeout: scenario.target.timeout,
            local: Vec::new(),
            next_local: std::cell::Cell::new(0),
        })
    }

    /// Connections come from `local` (addresses of this host) in turn,
    /// beginning with the one at `first`.
    pub fn with_local_addresses(mut self, local: Vec<IpAddr>, first: usize) -> HttpTransport {
        self.next_local = std::cell::Cell::new(first);
        self.local = local;
        self
    }

    /// The source address of the next connection.
    fn local_address(&self) -> Option<IpAddr> {
        if self.local.is_empty() {
            return None;
        }
        let i = self.next_local.get();
        self.next_local.set(i.wrapping_add(1));
        Some(self.local[i % self.local.len()])
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Opens and closes one connection (with its TLS handshake), so a run
    /// against a dead target, or one whose certificate will not verify,
    /// fails at once with a clear message instead of counting errors.
    pub async fn probe(&self) -> Result<(), TargetError> {
        let unreachable = |reason: String| TargetError::Unreachable {
            authority: self.addr.to_string(),
            reason,
        };
        let conn = match tokio::time::timeout(
            self.timeout,
            http1::connect(self.addr, self.local_address()),
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(ErrorKind::ConnectRefused)) => {
                return Err(unreachable("connection refused".into()))
            }
            Ok(Err(kind)) => return Err(unreachable(kind.name().into())),
            Err(_) => {
                return Err(unreachable(format!(
                    "no answer to connect within {:?}",
                    self.timeout
                )))
            }
        };
        let Some(tls) = &self.tls else {
            return Ok(());
        };
        match tokio::time::timeout(self.timeout, conn.start_tls(tls)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(TargetError::Tls {
                authority: self.addr.to_string(),
                reason: tls::explain(&e, &tls.name),
            }),
            Err(_) => Err(TargetError::Tls {
                authority: self.addr.to_string(),
                reason: format!("no TLS handshake within {:?}", self.timeout),
            }),
        }
    }

    /// Opens a connection, TLS included: the connection and its timings.
    async fn open(&self) -> (Result<http1::Connection, ErrorKind>, Opened) {
        let begin = Instant::now();
        let connected = tokio::time::timeout(
            self.timeout,
            http1::connect(self.addr, self.local_address()),
        )
        .await;
        let mut opened = Opened {
            connect: begin.elapsed(),
            tls: None,
        };
        let conn = match connected {
            Ok(Ok(conn)) => conn,
            Ok(Err(kind)) => return (Err(kind), opened),
            Err(_) => return (Err(ErrorKind::Connect), opened),
        };
        let Some(tls) = &self.tls else {
            return (Ok(conn), opened);
        };
        let begin = Instant::now();
        let shaken = tokio::time::timeout(self.timeout, conn.start_tls(tls)).await;
        let took = begin.elapsed();
        match shaken {
            Ok(Ok((conn, resumed))) => {
                opened.tls = Some(Handshake { took, resumed });
                (Ok(conn), opened)
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                (Err(ErrorKind::Tls), opened)
            }
            Ok(Err(_)) => (Err(ErrorKind::Reset), opened),
            Err(_) => (Err(ErrorKind::Timeout), opened),
        }
    }
}

impl Transport for HttpTransport {
    type Session = HttpSession;

    /// One keep-alive connection per user.
    fn reply_per_connection(&self) -> bool {
        true
    }

    fn new_session(&self) -> HttpSession {
        HttpSession {
            conn: None,
            out: Vec::new(),
            scratch: Vec::new(),
            watchdog: None,
        }
    }

    async fn prepare(&self, session: &mut HttpSession) -> Option<Opened> {
        if session.conn.is_some() {
            return None;
        }
        match self.open().await {
            (Ok(conn), opened) => {
                session.conn = Some(conn);
                Some(opened)
            }
            _ => None,
        }
    }

    async fn call(
        &self,
        session: &mut HttpSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        mut response: Option<&mut Response>,
    ) -> CallOutcome {
        let plan = &self.plans[id.index()];
        plan.render(bindings, &mut session.out, &mut session.scratch);
        let mut opened = None;
        // A reused connection the server closed while idle gets one retry on
        // a fresh connection; anything else is reported as it happened.
        for attempt in 0..2 {
            let conn = match session.conn.as_mut() {
                Some(conn) => conn,
                None => {
                    let (connected, o) = self.open().await;
                    opened = Some(o);
                    match connected {
                        Ok(conn) => session.conn.insert(conn),
                        Err(kind) => return failed(kind, Duration::ZERO, opened),
                    }
                }
            };
            if let Some(r) = response.as_deref_mut() {
                r.head.clear();
                r.body.clear();
            }
            let begin = Instant::now();
            let exchanged = within(
                &mut session.watchdog,
                begin + self.timeout,
                conn.exchange(&session.out, plan.head, response.as_deref_mut()),
            )
            .await;
            let elapsed = begin.elapsed();
            match exchanged {
                Ok(Ok(reply)) => {
                    if reply.close {
                        session.conn = None;
                    }
                    let result = match ErrorKind::from_status(reply.status) {
                        Some(kind) => Err(kind),
                        None => Ok(reply.status),
                    };
                    return CallOutcome {
                        result,
                        status: reply.status,
                        response_time: elapsed,
                        connect_time: opened.map(|o| o.connect),
                        tls: opened.and_then(|o| o.tls),
                    };
                }
                Ok(Err(failure)) => {
                    session.conn = None;
                    if failure.stale && attempt == 0 {
                        continue;
                    }
                    return failed(failure.kind, elapsed, opened);
                }
                Err(_) => {
                    // The response may still arrive later: the connection is
                    // out of step, so it is dropped.
                    session.conn = None;
                    return failed(ErrorKind::Timeout, elapsed, opened);
                }
            }
        }
        unreachable!("the second attempt always returns")
    }
}

/// Runs `work` until `deadline`; `Err(())` when the deadline came first.
///
/// `tokio::time::timeout` would insert and remove a timer-wheel entry for
/// every request. Instead each user keeps one timer and lets it lag: it is
/// armed for some earlier request's deadline, and when it fires before the
/// current deadline it is simply re-armed. A busy user re-arms it once per
/// timeout period rather than once per request.
async fn within<F: Future>(
    watchdog: &mut Option<Pin<Box<Sleep>>>,
    deadline: Instant,
    work: F,
) -> Result<F::Output, ()> {
    let deadline = tokio::time::Instant::from_std(deadline);
    let timer = watchdog.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        while timer.as_mut().poll(cx).is_ready() {
            if timer.deadline() >= deadline {
                return Poll::Ready(Err(()));
            }
            // It fired for an earlier request: catch up to this one's.
            timer.as_mut().reset(deadline);
        }
        Poll::Pending
    })
    .await
}

fn failed(kind: ErrorKind, response_time: Duration, opened: Option<Opened>) -> CallOutcome {
    CallOutcome {
        result: Err(kind),
        status: 0,
        response_time,
        connect_time: opened.map(|o| o.connect),
        tls: opened.and_then(|o| o.tls),
    }
}
