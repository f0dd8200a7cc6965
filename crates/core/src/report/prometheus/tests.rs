use std::time::Instant;

use super::*;
use crate::load::{RateShape, Stage};
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
        rate: None,
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
    // An open level asking 5/s for 1.5 s, then 15/s: the gauge shows
    // what the second the tick closes asked for, on average (10/s for the
    // second from 1 s to 2 s).
    let stages = [(5.0, 1500), (15.0, 60_000)].map(|(rate, ms)| Stage {
        rate,
        length: Duration::from_millis(ms),
    });
    let open = LevelInfo {
        rate: Some(RateShape::stages(stages.to_vec())),
        ..level()
    };
    let mut second = tick(9);
    second.seq = 1;
    sink.on_tick(&open, &second);
    shared
        .lock()
        .unwrap()
        .set_server_cpu_cores("web", "tb-web", 0.75);

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
    assert_eq!(gauge("autoperf_target_rate", &[]), 10.0);
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
