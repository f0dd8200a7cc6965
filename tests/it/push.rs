//! Push exporters against receivers of the test's own on loopback: during
//! a run against the testbed, autoperf posts Prometheus remote-write
//! (snappy protobuf) and OTLP/HTTP metrics every second and once at the
//! end; the last of each carries the run's final counts, labelled with the
//! job, scenario and run. An endpoint that answers nothing is reported in
//! the run's warnings and does not stop it.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use autoperf_core::report::push::WriteRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message;

/// A request the receiver got: its head (lower-cased) and body.
struct Received {
    head: String,
    body: Vec<u8>,
}

/// An HTTP/1.1 server on 127.0.0.1:0 that answers every POST 200 and keeps
/// what it got; its thread ends with the test process.
fn receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < end + 4 + length {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body = buf[end + 4..end + 4 + length].to_vec();
                    buf.drain(..end + 4 + length);
                    keep.lock().unwrap().push(Received { head, body });
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    (url, got)
}

#[test]
fn remote_write_and_otlp_get_the_runs_metrics_and_a_dead_endpoint_is_a_warning() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("push");
    let scenario = dir.join("push.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: pushed\ntarget: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  home: {{path: /health}}\nsession: {{start: home, transitions: {{home: {{home: 0.9}}}}}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let (prom, prom_got) = receiver();
    let (otel, otel_got) = receiver();
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/api/v1/write", l.local_addr().unwrap())
    };
    let out = dir.join("run-1");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "--no-agents",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--push-remote-write",
        &format!("{prom}/api/v1/write"),
        "--push-remote-write",
        &dead,
        "--push-otlp",
        &otel,
        "--push-interval",
        "1s",
        "--push-header",
        "Authorization: Bearer sesame",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let record = support::run_json(&out);
    let requests = record["levels"][0]["per_request"]["home"]["requests"]
        .as_u64()
        .unwrap();
    assert!(requests > 0);
    let warnings = record["warnings"].to_string();
    assert!(
        warnings.contains(&format!("pushing metrics to {dead}")),
        "{warnings}"
    );
    // Even with --quiet, a failing push is on the screen.
    assert!(
        stderr.contains(&format!("warning: pushing metrics to {dead}")),
        "{stderr}"
    );

    let prom_got = prom_got.lock().unwrap();
    assert!(
        prom_got.len() >= 3,
        "{} remote writes in a 3 s run",
        prom_got.len()
    );
    let last = prom_got.last().unwrap();
    assert!(
        last.head.starts_with("post /api/v1/write http/1.1"),
        "{}",
        last.head
    );
    for header in [
        "content-encoding: snappy",
        "content-type: application/x-protobuf",
        "x-prometheus-remote-write-version: 0.1.0",
        "authorization: bearer sesame",
    ] {
        assert!(last.head.contains(header), "`{header}` in {}", last.head);
    }
    let raw = snap::raw::Decoder::new()
        .decompress_vec(&last.body)
        .unwrap();
    let write = WriteRequest::decode(&raw[..]).unwrap();
    let label = |t: &autoperf_core::report::push::TimeSeries, name: &str| {
        t.labels
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.clone())
    };
    let ok = write
        .timeseries
        .iter()
        .find(|t| {
            label(t, "__name__").as_deref() == Some("autoperf_requests_total")
                && label(t, "status").as_deref() == Some("ok")
        })
        .expect("the requests counter");
    assert_eq!(ok.samples[0].value, requests as f64, "the final count");
    assert_eq!(label(ok, "scenario").as_deref(), Some("pushed"));
    assert_eq!(label(ok, "run").as_deref(), Some("run-1"));
    assert_eq!(label(ok, "job").as_deref(), Some("autoperf"));
    assert!(write
        .timeseries
        .iter()
        .any(|t| label(t, "__name__").as_deref() == Some("autoperf_response_time_seconds_bucket")));

    let otel_got = otel_got.lock().unwrap();
    assert!(otel_got.len() >= 3, "{} OTLP exports", otel_got.len());
    let last = otel_got.last().unwrap();
    assert!(
        last.head.starts_with("post /v1/metrics http/1.1"),
        "{}",
        last.head
    );
    let export = ExportMetricsServiceRequest::decode(&last.body[..]).unwrap();
    let metrics = &export.resource_metrics[0].scope_metrics[0].metrics;
    let sum = metrics
        .iter()
        .find(|m| m.name == "autoperf_requests")
        .and_then(|m| match &m.data {
            Some(metric::Data::Sum(s)) => Some(s),
            _ => None,
        })
        .expect("a cumulative sum of requests");
    let point = sum
        .data_points
        .iter()
        .find(|p| {
            p.attributes
                .iter()
                .any(|kv| kv.key == "status" && format!("{:?}", kv.value).contains("\"ok\""))
        })
        .expect("the ok requests");
    assert_eq!(
        point.value,
        Some(number_data_point::Value::AsDouble(requests as f64))
    );
    assert!(metrics
        .iter()
        .any(|m| matches!(m.data, Some(metric::Data::Histogram(_)))));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_push_url_or_header_is_refused_before_any_load() {
    let (code, _, stderr) =
        support::autoperf(&["run", "x.yaml", "--users", "1", "--push-otlp", "ftp://h/x"]);
    // The scenario is read first: a missing file is named, exit 2.
    assert_eq!(code, Some(2), "{stderr}");
    let dir = support::scratch_dir("push-bad");
    let scenario = dir.join("s.yaml");
    std::fs::write(&scenario, "target: {base_url: \"http://127.0.0.1:9\"}\nrequests: {a: {path: /}}\nsession: {start: a}\n").unwrap();
    let s = scenario.to_str().unwrap();
    let (code, _, stderr) =
        support::autoperf(&["run", s, "--users", "1", "--push-otlp", "ftp://h/x"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--push-otlp ftp://h/x: expected an http:// or https:// URL"),
        "{stderr}"
    );
    let (code, _, stderr) = support::autoperf(&[
        "run",
        s,
        "--users",
        "1",
        "--push-otlp",
        "http://127.0.0.1:9",
        "--push-header",
        "nocolon",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--push-header `nocolon`: expected NAME: VALUE"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An endpoint that accepts and never answers holds no finished run: a
/// 4 s run exits within a few seconds of its end (it once took 21 s,
/// the stuck push's timeout and then the last push's own), and says so.
#[test]
fn a_push_endpoint_that_never_answers_does_not_hold_the_end_of_the_run() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("push-stuck");
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: push-stuck\ntarget: {{base_url: \"{}\"}}\nthink_time: 50ms\nrequests:\n  home: {{path: /health}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    // Accepts, reads, never answers; holds every connection.
    let stuck = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", stuck.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in stuck.incoming().flatten() {
            held.push(conn);
        }
    });
    let out = dir.join("out");
    let began = std::time::Instant::now();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "2",
        "--duration",
        "4s",
        "--warmup",
        "0s",
        "--no-agents",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--push-remote-write",
        &url,
        "--push-interval",
        "1s",
    ]);
    let took = began.elapsed();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // 4 s of load, the final wait of 2.5 s at most, and a start and a
    // finish that take well under a second each (6.6 s on a quiet
    // machine): 12 s leaves room for a busy one, and not for waiting out
    // a push's own 10 s timeout.
    assert!(took < std::time::Duration::from_secs(12), "took {took:?}");
    assert!(
        stderr.contains(&format!("pushing metrics to {url}")),
        "{stderr}"
    );
    let warnings = support::run_json(&out)["warnings"].to_string();
    assert!(warnings.contains("no answer"), "{warnings}");
    let _ = std::fs::remove_dir_all(&dir);
}
