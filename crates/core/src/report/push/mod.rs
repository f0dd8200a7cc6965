//! Push exporters: the live metrics `/metrics` serves, sent during a run
//! to a Prometheus remote-write endpoint (`--push-remote-write URL`) or an
//! OpenTelemetry collector's OTLP/HTTP metrics endpoint (`--push-otlp
//! URL`), every `interval` and once more at the end, from a thread of
//! their own so the run never waits on them. An endpoint that fails is
//! reported (the first failure at once, the count at the end) and tried
//! again next time; it never stops the load.
//!
//! - `remote_write`: the WriteRequest, snappy-compressed.
//! - `otlp`: the ExportMetricsServiceRequest.

mod otlp;
mod remote_write;

use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::prometheus::SharedMetrics;
use crate::protocol::http1::Connection;
use crate::protocol::side;
use crate::protocol::tls::Tls;
use crate::scenario::{BaseUrl, TlsSettings};

pub use otlp::export_request;
pub use remote_write::{write_request, Label, Sample, TimeSeries, WriteRequest};

/// Which protocol an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushKind {
    RemoteWrite,
    Otlp,
}

impl PushKind {
    fn flag(self) -> &'static str {
        match self {
            PushKind::RemoteWrite => "--push-remote-write",
            PushKind::Otlp => "--push-otlp",
        }
    }
}

/// Labels every pushed series carries (resource attributes in OTLP): the
/// job, the scenario and the run (its results directory's name), so runs
/// can be told apart in one database.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLabels {
    pub scenario: String,
    pub run: String,
}

impl RunLabels {
    fn pairs(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        [
            ("job", "autoperf".to_string()),
            ("scenario", self.scenario.clone()),
            ("run", self.run.clone()),
        ]
        .into_iter()
    }
}

/// One endpoint to push to.
#[derive(Debug, Clone)]
pub struct PushTarget {
    pub kind: PushKind,
    base: BaseUrl,
    /// Path and query (`/api/v1/write`, `/v1/metrics`).
    target: String,
    /// Extra headers, e.g. `Authorization: Bearer …`.
    pub headers: Vec<(String, String)>,
}

impl PushTarget {
    /// An `http://` or `https://` URL; OTLP's path defaults to
    /// `/v1/metrics`, as the specification's does.
    pub fn parse(kind: PushKind, text: &str) -> Result<PushTarget, String> {
        let bad = |why: &str| format!("{} {text}: {why}", kind.flag());
        let url = url::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(bad(&format!(
                    "expected an http:// or https:// URL, found `{other}:`"
                )))
            }
        };
        let host = url
            .host_str()
            .ok_or_else(|| bad("no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = url
            .port_or_known_default()
            .unwrap_or(if tls { 443 } else { 80 });
        let mut target = match (kind, url.path()) {
            (PushKind::Otlp, "" | "/") => "/v1/metrics".to_string(),
            (_, path) => path.to_string(),
        };
        if let Some(q) = url.query() {
            target.push('?');
            target.push_str(q);
        }
        Ok(PushTarget {
            kind,
            base: BaseUrl {
                tls,
                host,
                port,
                path_prefix: String::new(),
            },
            target,
            headers: Vec::new(),
        })
    }

    pub(crate) fn url(&self) -> String {
        format!("{}{}", self.base.origin(), self.target)
    }

    /// The whole HTTP/1.1 request for one push.
    fn request(&self, content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: autoperf/{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
            self.target,
            self.base.authority(),
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        for (name, value) in extra {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        request
    }
}

/// What the pushes came to, for the run's warnings.
#[derive(Debug, Default, Clone)]
pub struct PushReport {
    /// Per endpoint: its URL, pushes that succeeded and failed, the first
    /// failure.
    pub endpoints: Vec<(String, u64, u64, Option<String>)>,
    /// The endpoint whose push had no answer `FINAL_WAIT` after the
    /// run's end, when one had not.
    pub unfinished: Option<String>,
}

impl PushReport {
    /// One warning per endpoint that failed at least once, and one when
    /// the last push was still going when the run ended.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self
            .endpoints
            .iter()
            .filter(|(_, _, failed, _)| *failed > 0)
            .map(|(url, ok, failed, first)| {
                format!(
                    "pushing metrics to {url}: {failed} of {} pushes failed (first: {})",
                    ok + failed,
                    first.as_deref().unwrap_or("?")
                )
            })
            .collect();
        if let Some(url) = &self.unfinished {
            warnings.push(format!(
                "pushing metrics to {url}: no answer to a push {} s after the run ended; it may lack the last values",
                FINAL_WAIT.as_secs()
            ));
        }
        warnings
    }
}

/// How long one push may take while the run goes on.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the run's end waits for the pushes: a stuck endpoint must not
/// hold a finished run (a 4 s run once took 21 s to exit).
const FINAL_WAIT: Duration = Duration::from_secs(2);

/// The pushing thread; `finish` pushes a last time and reports.
pub struct Pusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// The report, once the thread ends.
    done: mpsc::Receiver<PushReport>,
    /// The report as of the last round of pushes (what is known when the
    /// thread does not end in time).
    so_far: Arc<Mutex<PushReport>>,
}

impl Pusher {
    /// Starts pushing `metrics` to `targets` every `interval`; `quiet`
    /// keeps the first failure of each endpoint off stderr.
    pub fn start(
        targets: Vec<PushTarget>,
        metrics: SharedMetrics,
        run: RunLabels,
        interval: Duration,
        quiet: bool,
    ) -> std::io::Result<Pusher> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let so_far = Arc::new(Mutex::new(PushReport::default()));
        let progress = so_far.clone();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("autoperf-push".into())
            .spawn(move || {
                let report = push_loop(targets, metrics, run, interval, quiet, flag, &progress);
                let _ = tx.send(report);
            })?;
        Ok(Pusher {
            stop,
            thread: Some(thread),
            done,
            so_far,
        })
    }

    /// Pushes the final values, stops the thread and reports — within
    /// `FINAL_WAIT` (and a moment), whatever the endpoints do.
    pub fn finish(mut self) -> PushReport {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> PushReport {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        let Some(thread) = self.thread.take() else {
            return PushReport::default();
        };
        // A push in flight when the run ended may wait out its own
        // timeout: the thread is left to it (it ends with the process).
        match self
            .done
            .recv_timeout(FINAL_WAIT + Duration::from_millis(500))
        {
            Ok(report) => {
                let _ = thread.join();
                report
            }
            // `so_far.unfinished` names the endpoint of the push in flight.
            Err(_) => self
                .so_far
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let _ = self.stop_thread();
    }
}

struct Endpoint {
    target: PushTarget,
    /// `https://`: the client, or why there is none (then every push fails
    /// without connecting: nothing goes out in clear to a TLS port).
    tls: Option<Result<Tls, String>>,
    conn: Option<Connection>,
    ok: u64,
    failed: u64,
    first_failure: Option<String>,
}

fn push_loop(
    targets: Vec<PushTarget>,
    metrics: SharedMetrics,
    run: RunLabels,
    interval: Duration,
    quiet: bool,
    stop: Arc<(Mutex<bool>, Condvar)>,
    so_far: &Mutex<PushReport>,
) -> PushReport {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return PushReport::default();
    };
    let start_ns = unix_nanos();
    let mut endpoints: Vec<Endpoint> = targets
        .into_iter()
        .map(|target| Endpoint {
            tls: target.base.tls.then(|| {
                Tls::new(&target.base, &TlsSettings::default(), &[b"http/1.1"])
                    .map_err(|e| format!("TLS set-up: {e}"))
            }),
            target,
            conn: None,
            ok: 0,
            failed: 0,
            first_failure: None,
        })
        .collect();
    let (lock, wake) = &*stop;
    let mut next = Instant::now() + interval;
    loop {
        let stopping = {
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped && Instant::now() < next {
                let wait = next.saturating_duration_since(Instant::now());
                stopped = wake
                    .wait_timeout(stopped, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *stopped
        };
        // A push slower than the interval is not made up for in a burst.
        next = (next + interval).max(Instant::now());
        let points = metrics.lock().unwrap_or_else(|e| e.into_inner()).snapshot();
        let now_ns = unix_nanos();
        for e in &mut endpoints {
            let (content_type, extra, body): (&str, &[(&str, &str)], Vec<u8>) = match e.target.kind
            {
                PushKind::RemoteWrite => (
                    remote_write::CONTENT_TYPE,
                    remote_write::HEADERS,
                    remote_write::body(&write_request(&points, &run, (now_ns / 1_000_000) as i64)),
                ),
                PushKind::Otlp => (
                    otlp::CONTENT_TYPE,
                    &[],
                    otlp::body(&export_request(&points, &run, start_ns, now_ns)),
                ),
            };
            let request = e.target.request(content_type, extra, &body);
            let timeout = if stopping { FINAL_WAIT } else { PUSH_TIMEOUT };
            so_far.lock().unwrap_or_else(|e| e.into_inner()).unfinished = Some(e.target.url());
            match runtime.block_on(send(e, &request, timeout)) {
                Ok(()) => e.ok += 1,
                Err(why) => {
                    e.failed += 1;
                    e.conn = None;
                    if e.first_failure.is_none() {
                        if !quiet {
                            eprintln!(
                                "warning: pushing metrics to {}: {why} (the run goes on; retried every {:.0} s)",
                                e.target.url(),
                                interval.as_secs_f64()
                            );
                        }
                        e.first_failure = Some(why);
                    }
                }
            }
        }
        *so_far.lock().unwrap_or_else(|e| e.into_inner()) = report(&endpoints);
        if stopping {
            break;
        }
    }
    report(&endpoints)
}

fn report(endpoints: &[Endpoint]) -> PushReport {
    PushReport {
        endpoints: endpoints
            .iter()
            .map(|e| (e.target.url(), e.ok, e.failed, e.first_failure.clone()))
            .collect(),
        unfinished: None,
    }
}

/// One POST on the endpoint's kept-alive connection (opened when needed);
/// a 2xx answer is success.
async fn send(e: &mut Endpoint, request: &[u8], timeout: Duration) -> Result<(), String> {
    let attempt = async {
        let tls = match &e.tls {
            None => None,
            Some(Err(why)) => return Err(why.clone()),
            Some(Ok(tls)) => Some(tls),
        };
        // Only what an error quotes is kept of the answer.
        match side::exchange(&mut e.conn, &e.target.base, tls, request, QUOTED).await? {
            (200..=299, _) => Ok(()),
            (status, body) => Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body).trim()
            )),
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
}

/// The bytes of an endpoint's error answer quoted in its warning.
const QUOTED: usize = 200;

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
