//! Transports: how one rendered request reaches the target and what came
//! back. The engine is written once against `Transport`; HTTP (`http/`:
//! opening connections in `connect`, a request and its response in
//! `exchange`; over `http1`'s or `http2`'s connections, TLS by `tls`, with
//! `cookies`, `redirect` and `encoding`) and Kafka (`kafka/`, cargo feature
//! `kafka`) implement it. `net` opens their TCP connections and names their
//! I/O failures; `request` renders HTTP requests; `registry` talks to a
//! schema registry, and `side` to the endpoints beside the target
//! (Prometheus, push receivers).

pub(crate) mod cookies;
pub(crate) mod encoding;
mod http;
pub mod http1;
pub(crate) mod http2;
#[cfg(feature = "kafka")]
pub mod kafka;
pub(crate) mod net;
pub(crate) mod redirect;
pub(crate) mod registry;
pub(crate) mod request;
pub(crate) mod side;
pub(crate) mod tls;

use std::future::Future;
use std::time::{Duration, Instant};

use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::RequestId;

pub(crate) use self::http::HttpTransport;

/// What one call came to, with its timings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallOutcome {
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
    /// That connection speaks HTTP/2.
    pub http2_connection: bool,
    /// Redirects followed on the way to this response.
    pub redirects: u8,
    /// Times a Kafka record's batch was sent again after a retriable
    /// refusal (a leader moving); its response time includes them.
    pub retries: u16,
    /// The final response's body as it came (after de-chunking), and
    /// after its content coding was undone (the same unless compressed).
    pub body_bytes: u64,
    pub decoded_bytes: u64,
}

/// A TLS handshake, timed apart from the TCP connect before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Handshake {
    pub took: Duration,
    /// The session of an earlier connection was resumed.
    pub resumed: bool,
}

/// A connection opened ahead of a user's first request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Opened {
    pub connect: Duration,
    pub tls: Option<Handshake>,
    /// It speaks HTTP/2 (asked for, or agreed by ALPN).
    pub http2: bool,
}

/// The value of the first header called `name` (any case) in a response
/// head (status line and headers, as received).
pub(crate) fn header_value<'h>(head: &'h [u8], name: &str) -> Option<&'h str> {
    let head = std::str::from_utf8(head).ok()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// What a caller keeps of a response, to check or extract from: the head
/// (status line and headers, as received) and the decoded body.
#[derive(Debug)]
pub struct Response {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// The most of the body kept: past it the rest is read and counted
    /// (`CallOutcome::body_bytes`), not kept, so one huge answer cannot take
    /// the generator's memory (a scenario's `target.max_body`).
    pub max_body: usize,
}

/// `target.max_body` when the scenario gives none (the scenario's own).
pub(crate) use crate::scenario::DEFAULT_MAX_BODY;

impl Default for Response {
    fn default() -> Response {
        Response {
            head: Vec::new(),
            body: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

impl Response {
    /// Whether the body was cut at `max_body`: `body_bytes` were sent.
    pub(crate) fn cut(&self, body_bytes: u64) -> bool {
        body_bytes > self.body.len() as u64
    }

    /// The value of the first header called `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.head, name)
    }
}

/// A request sent by `Transport::fire`, and who hears how it went.
pub(crate) struct Fired {
    pub request: RequestId,
    /// The arrival's planned start: latency counts from here.
    pub intended: Instant,
    /// When it was sent: the service time counts from here.
    pub begin: Instant,
    pub sink: std::rc::Rc<dyn FireSink>,
}

/// Hears the outcomes of fired requests.
pub(crate) trait FireSink {
    /// `now`: when the outcome came (read once for a whole batch).
    fn done(&self, request: RequestId, intended: Instant, outcome: CallOutcome, now: Instant);
}

/// A way of sending the scenario's requests. `Session` is one user's state
/// (its connection and buffers).
pub(crate) trait Transport: 'static {
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

    /// The user's session ended (a walk of the CBMG): per-session state
    /// such as session cookies goes.
    fn end_session(&self, _session: &mut Self::Session) {}

    /// The value of the user's cookie `name`, when it has one.
    fn cookie<'s>(&self, _session: &'s Self::Session, _name: &str) -> Option<&'s str> {
        None
    }

    /// The requests the last `call` sent (one per redirect hop) with the
    /// head of each answer, when the transport keeps them (`run --trace`).
    fn take_hops(&self, _session: &mut Self::Session) -> Vec<Hop> {
        Vec::new()
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

/// One request as it went out (head and body, in HTTP/1.1's form whatever
/// the connection spoke) and the head of its answer (empty when none came).
#[derive(Debug, Clone, Default)]
pub(crate) struct Hop {
    pub request: Vec<u8>,
    pub head: Vec<u8>,
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
    /// A Kafka broker answered but refused TLS or SASL; `reason` names the
    /// setting to fix.
    #[error("Kafka: {reason}")]
    KafkaRefused { bootstrap: String, reason: String },
    /// The schema registry did not take the schema.
    #[error("cannot register the Avro schema of subject `{subject}` at {url}: {reason}")]
    Registry {
        url: String,
        subject: String,
        reason: String,
    },
}

/// A call that got no usable response.
pub(crate) fn failed(
    kind: ErrorKind,
    response_time: Duration,
    opened: Option<Opened>,
) -> CallOutcome {
    CallOutcome {
        result: Err(kind),
        status: 0,
        response_time,
        connect_time: opened.map(|o| o.connect),
        tls: opened.and_then(|o| o.tls),
        http2_connection: opened.is_some_and(|o| o.http2),
        redirects: 0,
        retries: 0,
        body_bytes: 0,
        decoded_bytes: 0,
    }
}
