//! HTTP as a transport: one keep-alive connection per user (TLS for
//! `https://`), HTTP/1.1 or HTTP/2 (`target.http`; over HTTP/2 up to
//! `streams_per_connection` users share a connection, a stream each), a
//! cookie jar per user once a response sets one, and redirects followed on
//! the target's own origin — the whole exchange timed as one request.
//!
//! This file holds the transport and its session, and what the engine
//! calls; `connect` opens connections (TCP, TLS, the HTTP/2 handshake, the
//! HTTP/2 connections users share, source addresses) and `exchange` sends a
//! request and reads its response (redirects, cookies, decoding, the
//! request timer).

mod connect;
mod exchange;

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Sleep;

use super::cookies::Jar;
use super::request::RequestPlan;
use super::{encoding, http1, tls, CallOutcome, Hop, Opened, Response, TargetError, Transport};
use crate::measure::ErrorKind;
use crate::scenario::template::Bindings;
use crate::scenario::{Action, BaseUrl, CookiePolicy, HttpVersion, RequestId, Scenario};
use connect::SharedH2;
use exchange::decode_body;

/// HTTP over keep-alive TCP (or TLS) connections.
pub(crate) struct HttpTransport {
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
    /// `target.max_body`: the most of a body kept for checks and extraction.
    max_body: usize,
    /// `run --trace`: each session keeps its calls' hops.
    trace: bool,
}

pub(crate) struct HttpSession {
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
    /// The user's one request timer (see `exchange::within`).
    watchdog: Option<Pin<Box<Sleep>>>,
    /// What the last call sent and got, hop by hop, when tracing.
    hops: Vec<Hop>,
}

impl HttpTransport {
    pub(crate) fn new(scenario: &Scenario, base: &BaseUrl) -> Result<HttpTransport, TargetError> {
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
            max_body: scenario.target.max_body,
            trace: false,
        })
    }

    /// Keeps what each call sent and got (`Transport::take_hops`).
    pub(crate) fn traced(mut self) -> HttpTransport {
        self.trace = true;
        self
    }

    /// Connections come from `local` (addresses of this host) in turn,
    /// beginning with the one at `first`.
    pub(crate) fn with_local_addresses(
        mut self,
        local: Vec<IpAddr>,
        first: usize,
    ) -> HttpTransport {
        self.next_local = std::cell::Cell::new(first);
        self.local = local;
        self
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Opens and closes one connection (with its TLS handshake), so a run
    /// against a dead target, or one whose certificate will not verify,
    /// fails at once with a clear message instead of counting errors.
    pub(crate) async fn probe(&self) -> Result<(), TargetError> {
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
            hops: Vec::new(),
        }
    }

    fn take_hops(&self, session: &mut HttpSession) -> Vec<Hop> {
        std::mem::take(&mut session.hops)
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
        let decodes = self.plans[id.index()].decodes;
        // A compressed answer is read whole to be decoded, even when the
        // caller keeps nothing of it: its decoded size is reported.
        let mut own = None;
        let (response, reads) = match response {
            Some(r) => {
                r.max_body = self.max_body;
                (r, true)
            }
            None if decodes => {
                let r = own.insert(std::mem::take(&mut session.kept));
                r.max_body = encoding::MAX_DECODED as usize;
                (r, false)
            }
            None => return self.follow(session, id, bindings, None).await,
        };
        let mut outcome = self
            .follow(session, id, bindings, Some(&mut *response))
            .await;
        let cut = response.cut(outcome.body_bytes);
        if outcome.status != 0 && decodes && !cut {
            decode_body(response, &mut session.decoded, &mut outcome);
        }
        // What checks and extraction would read is not all there.
        if reads && (cut || response.body.len() > response.max_body) {
            response.body.truncate(response.max_body);
            if outcome.result.is_ok() {
                outcome.result = Err(ErrorKind::BodyTooLarge);
            }
        }
        if let Some(own) = own {
            session.kept = own;
        }
        outcome
    }
}
