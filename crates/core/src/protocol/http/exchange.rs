//! One request on the user's connection, opened (or re-opened) as
//! needed: its redirects followed on the target's own origin, its cookies
//! sent and kept, its body decoded, all timed as one exchange under the
//! user's one request timer.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::{HttpSession, HttpTransport};
use crate::measure::ErrorKind;
use crate::protocol::{encoding, failed, http1, redirect, CallOutcome, Hop, Opened, Response};
use crate::scenario::template::Bindings;
use crate::scenario::{CookiePolicy, RequestId};

/// Undoes the response's content coding in place; a body that will not
/// decode makes the request `malformed`.
pub(super) fn decode_body(
    response: &mut Response,
    decoded: &mut Vec<u8>,
    outcome: &mut CallOutcome,
) {
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
    pub(super) async fn follow(
        &self,
        session: &mut HttpSession,
        id: RequestId,
        bindings: &mut impl Bindings,
        mut response: Option<&mut Response>,
    ) -> CallOutcome {
        // What a failure leaves is not the last request's answer.
        if let Some(r) = response.as_deref_mut() {
            r.head.clear();
            r.body.clear();
        }
        let plan = &self.plans[id.index()];
        if let Err(kind) = plan.render(bindings, &mut session.out, &mut session.scratch) {
            return failed(kind, Duration::ZERO, None);
        }
        self.add_cookies(session);
        session.hops.clear();
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
            if self.trace {
                let head = match (&exchanged, response.as_deref()) {
                    (Ok(_), Some(r)) => r.head.clone(),
                    (Ok(_), None) => session.notable.clone(),
                    (Err(_), _) => Vec::new(),
                };
                session.hops.push(Hop {
                    request: session.out.clone(),
                    head,
                });
            }
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
            let location = crate::protocol::header_value(head, "location");
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
                        retries: 0,
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
