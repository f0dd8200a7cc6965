//! HTTP as a transport: one keep-alive connection per user (TLS for
//! `https://`), HTTP/1.1 or HTTP/2 (`target.http`; over HTTP/2 up to
//! `streams_per_connection` users share a connection, a stream each), a
//! cookie jar per user once a response sets one, and redirects followed on
//! the target's own origin — the whole exchange timed as one request.

use std::cell::RefCell;
use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::time::Sleep;

use super::cookies::Jar;
use super::request::RequestPlan;
use super::{
    encoding, failed, http1, http2, net, redirect, tls, CallOutcome, Handshake, Opened, Response,
    TargetError, Transport,
};
use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{Action, BaseUrl, CookiePolicy, HttpVersion, RequestId, Scenario};

/// HTTP over keep-alive TCP (or TLS) connections.
pub struct HttpTransport {
    addr: SocketAddr,
    base: BaseUrl,
    cookies: CookiePolicy,
    http: HttpVersion,
    /// Set for `https://` targets.
    tls: Option<tls::Tls>,
    /// Users per HTTP/2 connection, and the connection the next user
    /// joins with how many it has.
    streams: usize,
    group: RefCell<(Arc<SharedH2>, usize)>,
    plans: Vec<RequestPlan>,
    timeout: Duration,
    /// Source address of every connection (`None`: the OS chooses).
    /// Source addresses, taken in turn (empty: the OS chooses).
    local: Vec<IpAddr>,
    next_local: std::cell::Cell<usize>,
}

pub struct HttpSession {
    conn: Option<http1::Connection>,
    /// The HTTP/2 connection this user shares (unset for HTTP/1.1).
    h2: Option<Arc<SharedH2>>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// The head of the last response that redirected or set cookies (when
    /// the caller keeps no response of its own).
    notable: Vec<u8>,
    /// A compressed answer the caller keeps nothing of, and the decoding
    /// of one (buffers kept for the next).
    kept: Response,
    decoded: Vec<u8>,
    /// Made when the first cookie comes.
    jar: Option<Box<Jar>>,
    /// The user's one request timer (see `within`).
    watchdog: Option<Pin<Box<Sleep>>>,
}

/// An HTTP/2 connection and the users who share it: whoever finds it
/// missing opens it while the others wait. Its users all live on one
/// shard's thread; it is `Sync` only because transports are made before
/// they move to their shards.
#[derive(Default)]
struct SharedH2 {
    conn: Mutex<Option<http2::Connection>>,
    /// Bumped at every new connection, so a user whose stream failed drops
    /// the connection it used, not one another user has opened since.
    generation: AtomicU64,
    opening: AtomicBool,
    opened: Notify,
}

/// A connection just opened.
enum Conn {
    H1(http1::Connection),
    H2(http2::Connection),
}

/// Why a connection could not be opened: the kind counted, and the words
/// for the message that stops a run at its start.
struct OpenFailure {
    kind: ErrorKind,
    reason: String,
    /// The TLS handshake (or the HTTP/2 agreement) failed, not the connect.
    tls: bool,
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
        let http = scenario.target.http;
        let alpn: &[&[u8]] = match http {
            HttpVersion::Http1 => &[b"http/1.1"],
            HttpVersion::Http2 => &[b"h2"],
            HttpVersion::Auto => &[b"h2", b"http/1.1"],
        };
        let tls =
            match base.tls {
                true => Some(tls::Tls::new(base, &scenario.target.tls, alpn).map_err(
                    |reason| TargetError::Tls {
                        authority: authority.clone(),
                        reason,
                    },
                )?),
                false => None,
            };
        Ok(HttpTransport {
            addr,
            base: base.clone(),
            cookies: scenario.target.cookies,
            http,
            tls,
            streams: scenario.target.streams_per_connection.max(1) as usize,
            group: RefCell::new((Arc::default(), 0)),
            plans: scenario
                .requests
                .iter()
                .map(|r| match &r.action {
                    Action::Http(http) if scenario.target.compression => {
                        RequestPlan::new(http, base).accept_encoding(encoding::ACCEPT)
                    }
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
        match self.open(true).await.0 {
            Ok(_) => Ok(()),
            Err(f) if f.tls => Err(TargetError::Tls {
                authority: self.addr.to_string(),
                reason: f.reason,
            }),
            Err(f) => Err(TargetError::Unreachable {
                authority: self.addr.to_string(),
                reason: f.reason,
            }),
        }
    }

    /// Opens a connection, TLS and HTTP/2 included: the connection and its
    /// timings.
    /// `confirm`: make sure an HTTP/2 server answers (for `probe`).
    async fn open(&self, confirm: bool) -> (Result<Conn, OpenFailure>, Opened) {
        let begin = Instant::now();
        let connected =
            tokio::time::timeout(self.timeout, net::connect(self.addr, self.local_address())).await;
        let mut opened = Opened {
            connect: begin.elapsed(),
            tls: None,
            http2: false,
        };
        let tcp = match connected {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(kind)) => {
                let reason = match kind {
                    ErrorKind::ConnectRefused => "connection refused".into(),
                    kind => kind.name().into(),
                };
                return (Err(OpenFailure::connect(kind, reason)), opened);
            }
            Err(_) => {
                let reason = format!("no answer to connect within {:?}", self.timeout);
                return (
                    Err(OpenFailure::connect(ErrorKind::Connect, reason)),
                    opened,
                );
            }
        };
        let Some(tls) = &self.tls else {
            if self.http != HttpVersion::Http2 {
                return (Ok(Conn::H1(http1::Connection::over_tcp(tcp))), opened);
            }
            let shaken =
                tokio::time::timeout(self.timeout, http2::handshake(tcp, false, confirm)).await;
            let conn = match shaken {
                Ok(Ok(conn)) => Ok(Conn::H2(conn)),
                Ok(Err(kind)) => Err(OpenFailure::h2(kind, "the HTTP/2 cleartext (h2c) handshake failed: does the server speak h2c? set target.http to `1.1` otherwise".into())),
                Err(_) => Err(OpenFailure::h2(ErrorKind::Timeout, format!("no HTTP/2 settings from the server within {:?} (does it speak h2c?)", self.timeout))),
            };
            opened.http2 = conn.is_ok();
            return (conn, opened);
        };
        let begin = Instant::now();
        let shaken = tokio::time::timeout(self.timeout, tls.connect(tcp)).await;
        let took = begin.elapsed();
        let shaken = match shaken {
            Ok(Ok(shaken)) => shaken,
            Ok(Err(e)) => {
                let kind = match e.kind() {
                    std::io::ErrorKind::InvalidData => ErrorKind::Tls,
                    _ => ErrorKind::Reset,
                };
                return (
                    Err(OpenFailure::tls(
                        kind,
                        tls::explain(&e, &tls.name, &tls::HTTP_SETTINGS),
                    )),
                    opened,
                );
            }
            Err(_) => {
                let reason = format!("no TLS handshake within {:?}", self.timeout);
                return (Err(OpenFailure::tls(ErrorKind::Timeout, reason)), opened);
            }
        };
        opened.tls = Some(Handshake {
            took,
            resumed: shaken.resumed,
        });
        if !shaken.h2 {
            if self.http == HttpVersion::Http2 {
                let reason = http2::refused_alpn(&tls.name).to_string();
                return (Err(OpenFailure::tls(ErrorKind::Tls, reason)), opened);
            }
            return (
                Ok(Conn::H1(http1::Connection::over_tls(shaken.stream))),
                opened,
            );
        }
        match tokio::time::timeout(self.timeout, http2::handshake(shaken.stream, true, confirm))
            .await
        {
            Ok(Ok(conn)) => (
                Ok(Conn::H2(conn)),
                Opened {
                    http2: true,
                    ..opened
                },
            ),
            Ok(Err(kind)) => (
                Err(OpenFailure::h2(
                    kind,
                    format!(
                        "the HTTP/2 handshake with {} failed ({})",
                        tls.name,
                        kind.name()
                    ),
                )),
                opened,
            ),
            Err(_) => (
                Err(OpenFailure::h2(
                    ErrorKind::Timeout,
                    format!(
                        "no HTTP/2 settings from {} within {:?}",
                        tls.name, self.timeout
                    ),
                )),
                opened,
            ),
        }
    }

    /// Puts a new connection where the session finds it.
    fn keep(&self, session: &mut HttpSession, conn: Conn) {
        match conn {
            Conn::H1(conn) => session.conn = Some(conn),
            Conn::H2(conn) => {
                let shared = session.h2.get_or_insert_with(Arc::default);
                *shared.conn.lock().expect("one thread") = Some(conn);
                shared.generation.fetch_add(1, Relaxed);
            }
        }
    }

    /// The user's HTTP/2 connection when it has one, with its generation;
    /// waits while another user of it is opening it.
    async fn shared_h2(&self, session: &HttpSession) -> Option<(http2::Connection, u64)> {
        let shared = session.h2.as_ref()?;
        while shared.opening.load(Relaxed) {
            let notified = shared.opened.notified();
            if !shared.opening.load(Relaxed) {
                break;
            }
            notified.await;
        }
        let conn = shared.conn.lock().expect("one thread").clone()?;
        Some((conn, shared.generation.load(Relaxed)))
    }

    /// Opens the session's connection; for a shared HTTP/2 connection,
    /// marks it being opened so its other users wait instead of opening
    /// their own.
    async fn open_for(&self, session: &mut HttpSession) -> (Result<(), ErrorKind>, Opened) {
        let shared = session.h2.clone();
        if let Some(shared) = &shared {
            shared.opening.store(true, Relaxed);
        }
        let (connected, opened) = self.open(false).await;
        let result = match connected {
            Ok(conn) => {
                self.keep(session, conn);
                Ok(())
            }
            Err(f) => Err(f.kind),
        };
        if let Some(shared) = &shared {
            shared.opening.store(false, Relaxed);
            shared.opened.notify_waiters();
        }
        (result, opened)
    }

    /// Forgets a failed HTTP/2 connection, unless a newer one replaced it.
    fn drop_h2(&self, session: &HttpSession, generation: u64) {
        if let Some(shared) = &session.h2 {
            if shared.generation.load(Relaxed) == generation {
                shared.conn.lock().expect("one thread").take();
            }
        }
    }
}

impl OpenFailure {
    fn connect(kind: ErrorKind, reason: String) -> OpenFailure {
        OpenFailure {
            kind,
            reason,
            tls: false,
        }
    }

    fn tls(kind: ErrorKind, reason: String) -> OpenFailure {
        OpenFailure {
            kind,
            reason,
            tls: true,
        }
    }

    /// The server would not speak HTTP/2: counted as malformed answers
    /// (or timeouts), reported like a TLS failure (the fix is a setting).
    fn h2(kind: ErrorKind, reason: String) -> OpenFailure {
        let kind = match kind {
            ErrorKind::Timeout => ErrorKind::Timeout,
            ErrorKind::Reset | ErrorKind::Closed => kind,
            _ => ErrorKind::Malformed,
        };
        OpenFailure::tls(kind, reason)
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
            h2: self.join_h2(),
            out: Vec::new(),
            scratch: Vec::new(),
            notable: Vec::new(),
            kept: Response::default(),
            decoded: Vec::new(),
            jar: None,
            watchdog: None,
        }
    }

    async fn prepare(&self, session: &mut HttpSession) -> Option<Opened> {
        if session.conn.is_some() || self.shared_h2(session).await.is_some() {
            return None;
        }
        match self.open_for(session).await {
            (Ok(()), opened) => Some(opened),
            _ => None,
        }
    }

    fn end_session(&self, session: &mut HttpSession) {
        if self.cookies == CookiePolicy::Session {
            if let Some(jar) = &mut session.jar {
                jar.clear();
            }
        }
    }

    fn cookie<'s>(&self, session: &'s HttpSession, name: &str) -> Option<&'s str> {
        session.jar.as_ref()?.value(name)
    }

    async fn call(
        &self,
        session: &mut HttpSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        response: Option<&mut Response>,
    ) -> CallOutcome {
        if !self.plans[id.index()].decodes {
            return self.follow(session, id, bindings, response).await;
        }
        // A compressed answer is read whole to be decoded, even when the
        // caller keeps nothing of it: its decoded size is reported.
        let mut own = None;
        let response = match response {
            Some(r) => r,
            None => own.insert(std::mem::take(&mut session.kept)),
        };
        let mut outcome = self
            .follow(session, id, bindings, Some(&mut *response))
            .await;
        if outcome.status != 0 {
            decode_body(response, &mut session.decoded, &mut outcome);
        }
        if let Some(own) = own {
            session.kept = own;
        }
        outcome
    }
}

/// Undoes the response's content coding in place; a body that will not
/// decode makes the request `malformed`.
fn decode_body(response: &mut Response, decoded: &mut Vec<u8>, outcome: &mut CallOutcome) {
    let Some(codings) = response.header("content-encoding") else {
        return;
    };
    match encoding::decode(codings, &response.body, decoded) {
        Ok(()) => {
            std::mem::swap(&mut response.body, decoded);
            outcome.decoded_bytes = response.body.len() as u64;
        }
        Err(_) => outcome.result = Err(ErrorKind::Malformed),
    }
}

impl HttpTransport {
    /// Sends request `id` and follows its redirects: the whole exchange.
    async fn follow(
        &self,
        session: &mut HttpSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        mut response: Option<&mut Response>,
    ) -> CallOutcome {
        let plan = &self.plans[id.index()];
        plan.render(bindings, &mut session.out, &mut session.scratch);
        self.add_cookies(session);
        let mut head_request = plan.head;
        let mut opened = None;
        let mut response_time = Duration::ZERO;
        let mut redirects = 0u8;
        loop {
            let (exchanged, elapsed, o) = self
                .exchange(session, head_request, response.as_deref_mut())
                .await;
            response_time += elapsed;
            opened = opened.or(o);
            let reply = match exchanged {
                Ok(reply) => reply,
                Err(kind) => {
                    let mut outcome = failed(kind, response_time, opened);
                    outcome.redirects = redirects;
                    return outcome;
                }
            };
            let head = match response.as_deref() {
                Some(r) => &r.head[..],
                None => &session.notable[..],
            };
            if reply.set_cookie && self.cookies != CookiePolicy::Off {
                let url = self.url(redirect::request_line(&session.out).1);
                if let Some(url) = url {
                    session
                        .jar
                        .get_or_insert_with(Box::default)
                        .take_from(head, &url);
                }
            }
            let location = super::header_value(head, "location");
            let next = match location {
                Some(location) if reply.redirects() && plan.follow_redirects => {
                    let current = redirect::request_line(&session.out).1;
                    redirect::same_origin_target(location, &self.base, current)
                        .ok_or(ErrorKind::RedirectOffTarget)
                        .map(Some)
                }
                _ => Ok(None),
            };
            let target = match next {
                Ok(Some(target)) if redirects < redirect::MAX_HOPS => target,
                Ok(Some(_)) | Err(_) => {
                    let kind = next.err().unwrap_or(ErrorKind::RedirectLimit);
                    let mut outcome = failed(kind, response_time, opened);
                    outcome.status = reply.status;
                    outcome.redirects = redirects;
                    return outcome;
                }
                Ok(None) => {
                    let result = match ErrorKind::from_status(reply.status) {
                        Some(kind) => Err(kind),
                        None => Ok(reply.status),
                    };
                    return CallOutcome {
                        result,
                        status: reply.status,
                        response_time,
                        connect_time: opened.map(|o| o.connect),
                        tls: opened.and_then(|o| o.tls),
                        http2_connection: opened.is_some_and(|o| o.http2),
                        redirects,
                        body_bytes: reply.body_len,
                        decoded_bytes: reply.body_len,
                    };
                }
            };
            let method = redirect::request_line(&session.out).0.to_string();
            let (next_method, keep_body) = redirect::next_method(reply.status, &method);
            let next_method = next_method.to_string();
            redirect::rewrite(&mut session.out, &next_method, &target, keep_body);
            self.add_cookies(session);
            head_request = next_method == "HEAD";
            redirects += 1;
        }
    }
}

impl HttpTransport {
    /// The URL of a request target on the base, for the cookie rules.
    fn url(&self, target: &str) -> Option<url::Url> {
        url::Url::parse(&format!("{}{target}", self.base.origin())).ok()
    }

    /// Adds the jar's `Cookie` header to the request in `session.out`.
    fn add_cookies(&self, session: &mut HttpSession) {
        let Some(jar) = &session.jar else { return };
        let Some(url) = self.url(redirect::request_line(&session.out).1) else {
            return;
        };
        session.scratch.clear();
        jar.write_header(&url, &mut session.scratch);
        redirect::insert_header(&mut session.out, &session.scratch);
    }

    /// One exchange on the user's connection, opened (or re-opened) as
    /// needed: the reply or why not, how long the exchange took, and the
    /// connection opened for it.
    async fn exchange(
        &self,
        session: &mut HttpSession,
        head_request: bool,
        mut response: Option<&mut Response>,
    ) -> (Result<http1::Reply, ErrorKind>, Duration, Option<Opened>) {
        let mut opened = None;
        // A reused connection the server closed while idle (or an HTTP/2
        // stream it refused) gets one retry on a fresh connection; anything
        // else is reported as it happened.
        for attempt in 0..2 {
            if session.conn.is_none() && self.shared_h2(session).await.is_none() {
                let (connected, o) = self.open_for(session).await;
                opened = Some(o);
                if let Err(kind) = connected {
                    return (Err(kind), Duration::ZERO, opened);
                }
            }
            if let Some(r) = response.as_deref_mut() {
                r.head.clear();
                r.body.clear();
            }
            let begin = Instant::now();
            let deadline = begin + self.timeout;
            let (exchanged, h2) = match session.conn.as_mut() {
                Some(conn) => {
                    let work = conn.exchange(
                        &session.out,
                        head_request,
                        response.as_deref_mut(),
                        &mut session.notable,
                    );
                    (within(&mut session.watchdog, deadline, work).await, None)
                }
                None => {
                    let Some((mut conn, generation)) = self.shared_h2(session).await else {
                        // Another user's attempt to open it failed meanwhile.
                        continue;
                    };
                    let work = conn.exchange(
                        &session.out,
                        head_request,
                        response.as_deref_mut(),
                        &mut session.notable,
                    );
                    let exchanged = within(&mut session.watchdog, deadline, work).await;
                    (exchanged, Some(generation))
                }
            };
            let elapsed = begin.elapsed();
            match exchanged {
                Ok(Ok(reply)) => {
                    if reply.close {
                        session.conn = None;
                    }
                    return (Ok(reply), elapsed, opened);
                }
                Ok(Err(failure)) => {
                    match h2 {
                        Some(generation) => self.drop_h2(session, generation),
                        None => session.conn = None,
                    }
                    if failure.stale && attempt == 0 {
                        continue;
                    }
                    return (Err(failure.kind), elapsed, opened);
                }
                Err(_) => {
                    // The response may still arrive later: an HTTP/1.1
                    // connection is out of step, so it is dropped; an
                    // HTTP/2 stream is reset as its future is dropped.
                    if h2.is_none() {
                        session.conn = None;
                    }
                    return (Err(ErrorKind::Timeout), elapsed, opened);
                }
            }
        }
        (Err(ErrorKind::Closed), Duration::ZERO, opened)
    }

    /// The HTTP/2 connection a new user shares: the current group's until
    /// it has `streams` users.
    fn join_h2(&self) -> Option<Arc<SharedH2>> {
        if self.http == HttpVersion::Http1 {
            return None;
        }
        let mut group = self.group.borrow_mut();
        if group.1 == self.streams {
            *group = (Arc::default(), 0);
        }
        group.1 += 1;
        Some(group.0.clone())
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
