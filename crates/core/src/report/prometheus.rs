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
pub const BUCKETS_S: [f64; 13] = [
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
}

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
        registry.register(
            "autoperf_requests",
            "Requests finished, by request and status (ok or the error kind)",
            requests.clone(),
        );
        registry.register(
            "autoperf_errors",
            "Failed requests, by request and error kind",
            errors.clone(),
        );
        registry.register(
            "autoperf_response_time_seconds",
            "Response time of complete responses (including 4xx/5xx), by request",
            response_time.clone(),
        );
        registry.register(
            "autoperf_active_users",
            "Virtual users currently running",
            active_users.clone(),
        );
        registry.register(
            "autoperf_target_rate",
            "Target arrival rate in requests per second (0 in the closed model)",
            target_rate.clone(),
        );
        registry.register(
            "autoperf_server_cpu_cores",
            "CPU used by a tier's process, in busy cores",
            server_cpu.clone(),
        );
        // Known requests show from the first scrape, at zero.
        for name in &request_names {
            requests
                .get_or_create(&RequestStatus {
                    request: name.clone(),
                    status: "ok".into(),
                })
                .inc_by(0);
            drop(response_time.get_or_create(&RequestLabel {
                request: name.clone(),
            }));
        }
        MetricsRegistry {
            registry,
            request_names,
            requests,
            errors,
            response_time,
            active_users,
            target_rate,
            server_cpu,
        }
    }

    pub fn set_target_rate(&self, rps: f64) {
        self.target_rate.set(rps);
    }

    pub fn set_active_users(&self, users: u32) {
        self.active_users.set(i64::from(users));
    }

    /// Records a tier process's latest CPU use, in busy cores.
    pub fn set_server_cpu_cores(&self, tier: &str, process: &str, cores: f64) {
        self.server_cpu
            .get_or_create(&TierProcess {
                tier: tier.into(),
                process: process.into(),
            })
            .set(cores);
    }

    /// The metrics in the OpenMetrics text format (ending in `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    fn add_tick(&self, tick: &Tick) {
        for (name, stats) in self.request_names.iter().zip(&tick.stats.per_request) {
            let errors = stats.errors.total();
            let ok = stats.requests.saturating_sub(errors);
            let count = |status: &str, n: u64| {
                self.requests
                    .get_or_create(&RequestStatus {
                        request: name.clone(),
                        status: status.into(),
                    })
                    .inc_by(n);
            };
            if ok > 0 {
                count("ok", ok);
            }
            for kind in ErrorKind::ALL {
                let n = stats.errors.get(kind);
                if n > 0 {
                    count(kind.name(), n);
                    self.errors
                        .get_or_create(&RequestKind {
                            request: name.clone(),
                            kind: kind.name().into(),
                        })
                        .inc_by(n);
                }
            }
            self.response_time
                .get_or_create(&RequestLabel {
                    request: name.clone(),
                })
                .add(&stats.response_time);
        }
        self.set_active_users(tick.active_users);
    }
}

impl TickSink for MetricsRegistry {
    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick) {
        self.add_tick(tick);
    }
}

/// The registry as the server shares it; the runner passes it as a sink.
pub type SharedMetrics = Arc<Mutex<MetricsRegistry>>;

impl TickSink for SharedMetrics {
    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick) {
        self.lock()
            .unwrap_or_else(|e| e.into_inner())
            .add_tick(tick);
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
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::measure::IntervalStats;

    fn tick(users: u32) -> Tick {
        let mut stats = IntervalStats::new(2);
        for ms in [0.5, 2.0, 2.0, 40.0, 20_000.0] {
            stats.per_request[0].record_response(Duration::from_secs_f64(ms / 1e3));
        }
        stats.per_request[1].record_error(ErrorKind::Http5xx, Duration::from_millis(3));
        stats.per_request[1].record_error(ErrorKind::ConnectRefused, Duration::ZERO);
        stats.per_request[1].record_response(Duration::from_millis(1));
        Tick {
            seq: 0,
            length: Duration::from_secs(1),
            end: Instant::now(),
            warmup: false,
            stats,
            active_users: users,
        }
    }

    fn level() -> LevelInfo {
        LevelInfo {
            index: 1,
            users: 7,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(10),
        }
    }

    fn scrape(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    fn sample<'a>(
        scrape: &'a prometheus_parse::Scrape,
        name: &str,
        labels: &[(&str, &str)],
    ) -> &'a prometheus_parse::Value {
        &scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no {name} {labels:?}"))
            .value
    }

    #[test]
    fn scraped_metrics_parse_and_add_up() {
        let shared: SharedMetrics = Arc::new(Mutex::new(MetricsRegistry::new(vec![
            "home".into(),
            "login".into(),
        ])));
        let server = serve_metrics("127.0.0.1:0".parse().unwrap(), shared.clone()).unwrap();
        let mut sink = shared.clone();
        sink.on_tick(&level(), &tick(7));
        sink.on_tick(&level(), &tick(9));
        {
            let m = shared.lock().unwrap();
            m.set_target_rate(12.5);
            m.set_server_cpu_cores("web", "tb-web", 0.75);
        }

        let (head, body) = scrape(server.local_addr(), "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("application/openmetrics-text"), "{head}");
        assert!(body.ends_with("# EOF\n"));
        let lines = body.lines().map(|l| Ok(l.to_string()));
        let parsed = prometheus_parse::Scrape::parse(lines).expect("parses as Prometheus text");

        use prometheus_parse::Value;
        let counter = |name, labels: &[(&str, &str)]| match sample(&parsed, name, labels) {
            Value::Counter(v) | Value::Untyped(v) => *v,
            other => panic!("{name} is {other:?}"),
        };
        let home_ok = [("request", "home"), ("status", "ok")];
        assert_eq!(counter("autoperf_requests_total", &home_ok), 10.0);
        let login_5xx = [("request", "login"), ("status", "http_5xx")];
        assert_eq!(counter("autoperf_requests_total", &login_5xx), 2.0);
        let login_refused = [("request", "login"), ("kind", "connect_refused")];
        assert_eq!(counter("autoperf_errors_total", &login_refused), 2.0);
        let gauge = |name, labels: &[(&str, &str)]| match sample(&parsed, name, labels) {
            Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{name} is {other:?}"),
        };
        assert_eq!(gauge("autoperf_active_users", &[]), 9.0);
        assert_eq!(gauge("autoperf_target_rate", &[]), 12.5);
        let web = [("tier", "web"), ("process", "tb-web")];
        assert_eq!(gauge("autoperf_server_cpu_cores", &web), 0.75);

        match sample(
            &parsed,
            "autoperf_response_time_seconds",
            &[("request", "home")],
        ) {
            Value::Histogram(buckets) => {
                let at = |le: f64| {
                    buckets
                        .iter()
                        .find(|b| b.less_than == le || (b.less_than - le).abs() < 1e-12)
                        .unwrap_or_else(|| panic!("bucket {le}"))
                        .count
                };
                assert_eq!(at(0.001), 2.0, "0.5 ms twice");
                assert_eq!(at(0.0025), 6.0, "plus 2 ms four times");
                assert_eq!(at(0.05), 8.0, "plus 40 ms twice");
                assert_eq!(at(10.0), 8.0, "20 s is past the last bound");
                assert_eq!(at(f64::INFINITY), 10.0);
            }
            other => panic!("histogram is {other:?}"),
        }
        assert!(body.contains("autoperf_response_time_seconds_count{request=\"home\"} 10\n"));

        let (head, _) = scrape(server.local_addr(), "/other");
        assert!(head.starts_with("HTTP/1.1 404"), "{head}");
        drop(server);
    }
}
