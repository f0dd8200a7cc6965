//! HTTP/1.1 as a transport: one keep-alive connection per user (TLS for
//! `https://`), a cookie jar per user once a response sets one, and
//! redirects followed on the target's own origin — the whole exchange timed
//! as one request.

use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::cookies::Jar;
use super::request::RequestPlan;
use super::{
    failed, http1, redirect, tls, CallOutcome, Handshake, Opened, Response, TargetError, Transport,
};
use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{Action, BaseUrl, CookiePolicy, RequestId, Scenario};

/// HTTP/1.1 over keep-alive TCP (or TLS) connections, one per user.
pub struct HttpTransport {
    addr: SocketAddr,
    base: BaseUrl,
    cookies: CookiePolicy,
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
    /// The head of the last response that redirected or set cookies (when
    /// the caller keeps no response of its own).
    notable: Vec<u8>,
    /// Made when the first cookie comes.
    jar: Option<Box<Jar>>,
    /// The user's one request timer (see `within`).
    watchdog: Option<Pin<Box<Sleep>>>,
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
            base: base.clone(),
            cookies: scenario.target.cookies,
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
            notable: Vec::new(),
            jar: None,
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
                        redirects,
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
                        Err(kind) => return (Err(kind), Duration::ZERO, opened),
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
                conn.exchange(
                    &session.out,
                    head_request,
                    response.as_deref_mut(),
                    &mut session.notable,
                ),
            )
            .await;
            let elapsed = begin.elapsed();
            match exchanged {
                Ok(Ok(reply)) => {
                    if reply.close {
                        session.conn = None;
                    }
                    return (Ok(reply), elapsed, opened);
                }
                Ok(Err(failure)) => {
                    session.conn = None;
                    if failure.stale && attempt == 0 {
                        continue;
                    }
                    return (Err(failure.kind), elapsed, opened);
                }
                Err(_) => {
                    // The response may still arrive later: the connection is
                    // out of step, so it is dropped.
                    session.conn = None;
                    return (Err(ErrorKind::Timeout), elapsed, opened);
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
