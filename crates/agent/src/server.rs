//! The HTTP server: routing, authentication, the background sampler, and
//! a clean stop on the shutdown signal.
//!
//! ```text
//!   accept → pending (admission.rs) ─first authorised request→ a served slot
//!   request → auth (bearer, constant time) → route → /v1/counters: touch groups,
//!             scan /proc, update registry, read host files → JSON
//!   sampler ─200 ms→ scan /proc for tracked groups → update registry
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admission::{Admission, Ticket, AUTH_DEADLINE};
use crate::api::{self, AgentInfo, Counters, ErrorBody, Health, MatchMode};
use crate::groups::{GroupKey, Registry};
use crate::options::Access;
use crate::scan::{self, ProcFs};

/// How often tracked groups are sampled between requests: what a process
/// burns between its last sample and its exit is lost, so this bounds it.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(200);

/// Authorised connections served at once. The controller needs one per
/// agent; the bound keeps a misbehaving client cheap.
const MAX_CONNECTIONS: usize = 64;

/// A client has this long to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open connections get to finish after the shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

struct State {
    registry: Mutex<Registry>,
    procfs: ProcFs,
    clk_tck: u64,
    access: Access,
}

impl State {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        // The registry stays consistent even if a holder panicked: every
        // update replaces whole values.
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Scans /proc and feeds the registry under one lock, so scans are
    /// applied in the order they were taken and none is applied twice.
    /// The scan is a few small reads of generated files: it never waits on
    /// a disk, so doing it inline on the runtime thread is fine.
    fn sample(&self, registry: &mut Registry) {
        let samples = self.procfs.scan(&registry.keys());
        registry.update(samples);
    }
}

/// Serves the agent's API on `listener` until `shutdown` completes.
///
/// With `access.token`, every request must carry `Authorization: Bearer
/// <token>`; the caller decides when one is needed (see
/// [`crate::resolve_token`]), so tests can require one on loopback.
pub async fn serve(
    listener: TcpListener,
    access: Access,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    AgentInfo::this(); // fixes started_ms now, not at the first request
    let procfs = match &access.cgroup_root {
        Some(root) => ProcFs::system().with_cgroups(crate::cgroups::Hierarchies::under(root)),
        None => ProcFs::system(),
    };
    let state = Arc::new(State {
        registry: Mutex::new(Registry::default()),
        procfs,
        clk_tck: scan::clk_tck(),
        access,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler = tokio::spawn(sample_periodically(state.clone(), stop_rx.clone()));
    let admission = Admission::new(MAX_CONNECTIONS);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Usually out of file descriptors: back off, don't spin.
                    eprintln!("autoperf agent: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let ticket = admission.arrive();
        let state = state.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let service = service_fn({
                let ticket = ticket.clone();
                move |req| {
                    let reply = handle(&state, &ticket, &req);
                    async move { Ok::<_, Infallible>(reply) }
                }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let deadline = tokio::time::sleep(AUTH_DEADLINE);
            tokio::pin!(deadline);
            // Until its first authorised request the connection may be
            // pushed out by a newer one or run out of time.
            let mut pending = true;
            loop {
                tokio::select! {
                    _ = conn.as_mut() => break,
                    _ = ticket.evicted(), if pending => {
                        if !ticket.admitted() { break }
                        pending = false;
                    }
                    _ = &mut deadline, if pending => {
                        if !ticket.admitted() { break }
                        pending = false;
                    }
                    _ = stop.changed() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                        break;
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.shutdown().await;
    }
    let _ = sampler.await;
    Ok(())
}

async fn sample_periodically(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let mut registry = state.registry();
        if !registry.is_empty() {
            state.sample(&mut registry);
        }
    }
}

type Reply = Response<Full<Bytes>>;

fn handle(state: &State, ticket: &Ticket, req: &Request<Incoming>) -> Reply {
    if let Some(token) = &state.access.token {
        if !authorized(req, token) {
            let mut reply = json(StatusCode::UNAUTHORIZED, &error_body("unauthorized"));
            reply
                .headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            return reply;
        }
    }
    if !ticket.admit() {
        return json(
            StatusCode::SERVICE_UNAVAILABLE,
            &error_body(&format!(
                "busy: {MAX_CONNECTIONS} clients are connected; retry when one leaves"
            )),
        );
    }
    let path = req.uri().path();
    if path != "/v1/counters" && path != "/v1/health" {
        return json(StatusCode::NOT_FOUND, &error_body("not found"));
    }
    if req.method() != Method::GET {
        let mut reply = json(
            StatusCode::METHOD_NOT_ALLOWED,
            &error_body("method not allowed"),
        );
        reply
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return reply;
    }
    if path == "/v1/health" {
        let health = Health {
            status: "ok".to_string(),
            version: AgentInfo::this().version,
        };
        return json(StatusCode::OK, &health);
    }
    let query = match api::parse_counters_query(req.uri().query()) {
        Ok(q) => q,
        Err(e) => return json(StatusCode::BAD_REQUEST, &error_body(&e.to_string())),
    };
    if query.mode == MatchMode::Cmdline {
        if let Some(name) = query
            .names
            .iter()
            .find(|n| !state.access.cmdline.contains(n))
        {
            return json(
                StatusCode::FORBIDDEN,
                &error_body(&format!(
                    "match=cmdline is not allowed for `{name}`: command lines hold other \
                     programs' arguments; start the agent with --allow-cmdline '{name}' to allow it"
                )),
            );
        }
    }
    match counters(state, &query) {
        Ok(c) => json(StatusCode::OK, &c),
        Err(e) => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_body(&format!("reading /proc: {e}")),
        ),
    }
}

fn counters(state: &State, query: &api::CountersQuery) -> std::io::Result<Counters> {
    let key = |mode: MatchMode, name: &String| GroupKey {
        mode,
        name: name.clone(),
    };
    let keys: Vec<GroupKey> = query
        .names
        .iter()
        .map(|name| key(query.mode, name))
        .chain(
            query
                .cgroups
                .iter()
                .map(|glob| key(MatchMode::Cgroup, glob)),
        )
        .collect();
    let (processes, cgroups, monotonic_s, timestamp_ms) = {
        let mut registry = state.registry();
        registry.touch(&keys);
        state.sample(&mut registry);
        let monotonic_s = scan::monotonic_s();
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let processes = registry.counters(&query.names, query.mode, state.clk_tck);
        let cgroups = registry.counters(&query.cgroups, MatchMode::Cgroup, state.clk_tck);
        (processes, cgroups, monotonic_s, timestamp_ms)
    };
    let unmatched_cgroups = cgroups
        .iter()
        .filter(|(_, c)| c.processes == 0)
        .map(|(glob, _)| (glob.clone(), state.procfs.nearest_cgroups(glob)))
        .collect();
    Ok(Counters {
        agent: AgentInfo::this(),
        timestamp_ms,
        monotonic_s,
        host: state.procfs.host(state.clk_tck)?,
        processes,
        cgroups,
        unmatched_cgroups,
    })
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    let Some(value) = req.headers().get(AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let scheme = b"bearer ";
    if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return false;
    }
    constant_time_eq(&value[scheme.len()..], token.as_bytes())
}

/// Compares without an early exit, so the time taken does not tell an
/// attacker how many leading bytes were right. (The length still shows,
/// which reveals nothing useful about a random token.)
fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = (given.len() != expected.len()) as u8;
    for (i, &e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(!e);
    }
    std::hint::black_box(diff) == 0
}

fn error_body(message: &str) -> ErrorBody {
    ErrorBody {
        error: message.to_string(),
    }
}

fn json(status: StatusCode, body: &impl Serialize) -> Reply {
    let mut text = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    text.push(b'\n');
    let mut reply = Response::new(Full::new(Bytes::from(text)));
    *reply.status_mut() = status;
    let headers = reply.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"0123456789abcdeX", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"0123456789abcde", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"0123456789abcdef0", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"", b"0123456789abcdef"));
    }
}
