//! Live metrics for Prometheus: a tick sink that keeps cumulative counters
//! and a fixed-bucket response-time histogram per request, and a small
//! HTTP server on its own thread answering `GET /metrics` in the
//! OpenMetrics text format (encoded by the `prometheus-client` crate).
//!
//! The histogram is filled from each tick's HdrHistogram counts, not by
//! observing every sample, so the cost per tick is the number of distinct
//! recorded values, whatever the request rate.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::measure::{ErrorKind, LevelInfo, Tick, TickSink};

/// Upper bounds of the response-time buckets, in seconds (1 ms … 10 s).
pub(crate) const BUCKETS_S: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestStatus {
    request: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestKind {
    request: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabel {
    request: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TierProcess {
    tier: String,
    process: String,
}

/// Cumulative bucket counts (not yet cumulative across buckets: the
/// encoder sums them), the last one being `+Inf`.
#[derive(Debug, Default)]
struct Buckets {
    counts: [u64; BUCKETS_S.len() + 1],
    sum_s: f64,
    count: u64,
}

/// A histogram metric fed with whole HdrHistograms.
#[derive(Debug, Default, Clone)]
struct HdrBuckets(Arc<Mutex<Buckets>>);

impl HdrBuckets {
    fn add(&self, h: &Histogram<u64>) {
        if h.is_empty() {
            return;
        }
        let mut b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for v in h.iter_recorded() {
            let s = v.value_iterated_to() as f64 / 1e9;
            let i = BUCKETS_S.partition_point(|&le| le < s);
            b.counts[i] += v.count_at_value();
        }
        b.sum_s += h.mean() * h.len() as f64 / 1e9;
        b.count += h.len();
    }
}

impl TypedMetric for HdrBuckets {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for HdrBuckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let buckets: Vec<(f64, u64)> = BUCKETS_S
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(b.counts.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(b.sum_s, b.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The run's metrics, cumulative since the registry was made.
#[derive(Debug)]
pub struct MetricsRegistry {
    registry: Registry,
    request_names: Vec<String>,
    requests: Family<RequestStatus, Counter>,
    errors: Family<RequestKind, Counter>,
    response_time: Family<RequestLabel, HdrBuckets>,
    active_users: Gauge,
    target_rate: Gauge<f64, AtomicU64>,
    server_cpu: Family<TierProcess, Gauge<f64, AtomicU64>>,
    /// The same metrics' handles by label values (the families cannot be
    /// walked), for `snapshot`, which push exporters send.
    handles: Handles,
}

#[derive(Debug, Default)]
struct Handles {
    requests: std::collections::BTreeMap<(String, String), Counter>,
    errors: std::collections::BTreeMap<(String, String), Counter>,
    response_time: std::collections::BTreeMap<String, HdrBuckets>,
    server_cpu: std::collections::BTreeMap<(String, String), Gauge<f64, AtomicU64>>,
}

/// A metric's value at one moment, for push exporters.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    Counter(f64),
    Gauge(f64),
    /// Bucket upper bounds in seconds with the count of values up to each
    /// (not cumulative), the last bound `+Inf`; the sum and the count.
    Histogram {
        buckets: Vec<(f64, u64)>,
        sum: f64,
        count: u64,
    },
}

/// One metric series as push exporters send it: the name as `/metrics`
/// shows it (a counter's without `_total`), its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPoint {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: MetricValue,
}

const REQUESTS: (&str, &str) = (
    "autoperf_requests",
    "Requests finished, by request and status (ok or the error kind)",
);
const ERRORS: (&str, &str) = (
    "autoperf_errors",
    "Failed requests, by request and error kind",
);
const RESPONSE_TIME: (&str, &str) = (
    "autoperf_response_time_seconds",
    "Response time of complete responses (including 4xx/5xx), by request",
);
const ACTIVE_USERS: (&str, &str) = ("autoperf_active_users", "Virtual users currently running");
const TARGET_RATE: (&str, &str) = (
    "autoperf_target_rate",
    "Target arrival rate in requests per second (0 in the closed model)",
);
const SERVER_CPU: (&str, &str) = (
    "autoperf_server_cpu_cores",
    "CPU used by a tier's process, in busy cores",
);

impl MetricsRegistry {
    /// `request_names` are the scenario's requests, indexed like the ticks'
    /// per-request statistics (by `RequestId`).
    pub fn new(request_names: Vec<String>) -> MetricsRegistry {
        let mut registry = Registry::default();
        let requests = Family::<RequestStatus, Counter>::default();
        let errors = Family::<RequestKind, Counter>::default();
        let response_time = Family::<RequestLabel, HdrBuckets>::default();
        let active_users = Gauge::default();
        let target_rate = Gauge::<f64, AtomicU64>::default();
        let server_cpu = Family::<TierProcess, Gauge<f64, AtomicU64>>::default();
        // Counters get their `_total` suffix from the encoder.
        registry.register(REQUESTS.0, REQUESTS.1, requests.clone());
        registry.register(ERRORS.0, ERRORS.1, errors.clone());
        registry.register(RESPONSE_TIME.0, RESPONSE_TIME.1, response_time.clone());
        registry.register(ACTIVE_USERS.0, ACTIVE_USERS.1, active_users.clone());
        registry.register(TARGET_RATE.0, TARGET_RATE.1, target_rate.clone());
        registry.register(SERVER_CPU.0, SERVER_CPU.1, server_cpu.clone());
        let mut metrics = MetricsRegistry {
            registry,
            request_names: request_names.clone(),
            requests,
            errors,
            response_time,
            active_users,
            target_rate,
            server_cpu,
            handles: Handles::default(),
        };
        // Known requests show from the first scrape, at zero.
        for name in &request_names {
            metrics.request_counter(name, "ok").inc_by(0);
            metrics.buckets(name);
        }
        metrics
    }

    fn request_counter(&mut self, request: &str, status: &str) -> Counter {
        let key = (request.to_string(), status.to_string());
        let family = &self.requests;
        self.handles
            .requests
            .entry(key)
            .or_insert_with_key(|(request, status)| {
                family
                    .get_or_create(&RequestStatus {
                        request: request.clone(),
                        status: status.clone(),
                    })
                    .clone()
            })
            .clone()
    }

    fn error_counter(&mut self, request: &str, kind: &str) -> Counter {
        let key = (request.to_string(), kind.to_string());
        let family = &self.errors;
        self.handles
            .errors
            .entry(key)
            .or_insert_with_key(|(request, kind)| {
                family
                    .get_or_create(&RequestKind {
                        request: request.clone(),
                        kind: kind.clone(),
                    })
                    .clone()
            })
            .clone()
    }

    fn buckets(&mut self, request: &str) -> HdrBuckets {
        let family = &self.response_time;
        self.handles
            .response_time
            .entry(request.to_string())
            .or_insert_with_key(|request| {
                family
                    .get_or_create(&RequestLabel {
                        request: request.clone(),
                    })
                    .clone()
            })
            .clone()
    }

    /// Every series now, for push exporters: the same metrics and values
    /// `/metrics` shows.
    pub(crate) fn snapshot(&self) -> Vec<MetricPoint> {
        let mut points = Vec::new();
        let point = |(name, help): (&'static str, &'static str), labels, value| MetricPoint {
            name,
            help,
            labels,
            value,
        };
        for ((request, status), c) in &self.handles.requests {
            let labels = vec![("request", request.clone()), ("status", status.clone())];
            points.push(point(
                REQUESTS,
                labels,
                MetricValue::Counter(c.get() as f64),
            ));
        }
        for ((request, kind), c) in &self.handles.errors {
            let labels = vec![("request", request.clone()), ("kind", kind.clone())];
            points.push(point(ERRORS, labels, MetricValue::Counter(c.get() as f64)));
        }
        for (request, h) in &self.handles.response_time {
            let b = h.0.lock().unwrap_or_else(|e| e.into_inner());
            let buckets = BUCKETS_S
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(b.counts.iter().copied())
                .collect();
            let value = MetricValue::Histogram {
                buckets,
                sum: b.sum_s,
                count: b.count,
            };
            points.push(point(
                RESPONSE_TIME,
                vec![("request", request.clone())],
                value,
            ));
        }
        let users = MetricValue::Gauge(self.active_users.get() as f64);
        points.push(point(ACTIVE_USERS, Vec::new(), users));
        let rate = MetricValue::Gauge(self.target_rate.get());
        points.push(point(TARGET_RATE, Vec::new(), rate));
        for ((tier, process), g) in &self.handles.server_cpu {
            let labels = vec![("tier", tier.clone()), ("process", process.clone())];
            points.push(point(SERVER_CPU, labels, MetricValue::Gauge(g.get())));
        }
        points
    }

    fn set_target_rate(&self, rps: f64) {
        self.target_rate.set(rps);
    }

    pub(crate) fn set_active_users(&self, users: u32) {
        self.active_users.set(i64::from(users));
    }

    /// Records a tier process's latest CPU use, in busy cores.
    pub fn set_server_cpu_cores(&mut self, tier: &str, process: &str, cores: f64) {
        let family = &self.server_cpu;
        self.handles
            .server_cpu
            .entry((tier.to_string(), process.to_string()))
            .or_insert_with_key(|(tier, process)| {
                family
                    .get_or_create(&TierProcess {
                        tier: tier.clone(),
                        process: process.clone(),
                    })
                    .clone()
            })
            .set(cores);
    }

    /// The metrics in the OpenMetrics text format (ending in `# EOF`).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    fn add_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        let names = std::mem::take(&mut self.request_names);
        for (name, stats) in names.iter().zip(&tick.stats.per_request) {
            let errors = stats.errors.total();
            let ok = stats.requests.saturating_sub(errors);
            if ok > 0 {
                self.request_counter(name, "ok").inc_by(ok);
            }
            for kind in ErrorKind::ALL {
                let n = stats.errors.get(kind);
                if n > 0 {
                    self.request_counter(name, kind.name()).inc_by(n);
                    self.error_counter(name, kind.name()).inc_by(n);
                }
            }
            self.buckets(name).add(&stats.response_time);
        }
        self.request_names = names;
        self.set_active_users(tick.active_users);
        // The arrivals the interval just ended asked for, per second (0 for
        // users); the last interval of a level may be shorter than 1 s.
        let asked = level.rate.as_ref().map_or(0.0, |shape| {
            let start = Duration::from_secs(tick.seq);
            let length = tick.length.max(Duration::from_millis(1));
            (shape.count_at(start + length) - shape.count_at(start)) / length.as_secs_f64()
        });
        self.set_target_rate(asked);
    }
}

impl TickSink for MetricsRegistry {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        self.add_tick(level, tick);
    }
}

/// The registry as the server shares it; the runner passes it as a sink.
pub type SharedMetrics = Arc<Mutex<MetricsRegistry>>;

impl TickSink for SharedMetrics {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        self.lock()
            .unwrap_or_else(|e| e.into_inner())
            .add_tick(level, tick);
    }
}

/// The `/metrics` server; stops (and joins its thread) when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `GET /metrics` on `addr` from its own thread, one connection at a
/// time (scrapes are rare and tiny).
pub fn serve_metrics(addr: SocketAddr, registry: SharedMetrics) -> io::Result<MetricsServer> {
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("autoperf-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = conn {
                    // A client that misbehaves only loses its own answer.
                    let _ = answer(stream, &registry);
                }
            }
        })?;
    Ok(MetricsServer {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// Longest request head read; a scrape's is a few hundred bytes.
const MAX_HEAD: usize = 8192;

fn answer(mut stream: TcpStream, registry: &SharedMetrics) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next(), parts.next());
    let path = path.map(|p| p.split(|&b| b == b'?').next().unwrap_or_default());
    let (status, content_type, body) = match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            registry.lock().unwrap_or_else(|e| e.into_inner()).encode(),
        ),
        (Some(b"GET"), _) => ("404 Not Found", "text/plain", "try /metrics\n".into()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET /metrics\n".into(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[cfg(test)]
mod tests;
