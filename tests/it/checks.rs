//! Checks, raw paths and the all-failed alarm, through `autoperf run` as a
//! user runs it, against a small HTTP/1.1 server written here on
//! 127.0.0.1:0 that records the request lines it received.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

/// Answers by path: `/json` a JSON user, `/missing` a 404, anything else a
/// page that says hello. Keeps every request line.
fn server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(10_000) {
            let Ok(stream) = stream else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                for _ in 0..100_000 {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header == "\r\n" {
                            break;
                        }
                    }
                    let path = line.split(' ').nth(1).unwrap_or("").to_string();
                    seen.lock().unwrap().push(line.trim_end().to_string());
                    let (status, kind, body) = match path.as_str() {
                        "/json" => ("200 OK", "application/json", r#"{"user": {"id": 7}}"#),
                        "/missing" => ("404 Not Found", "text/plain", "not here"),
                        _ => ("200 OK", "text/html", "hello world"),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if out.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, lines)
}

fn run(dir: &std::path::Path, yaml: &str) -> (Option<i32>, serde_json::Value, String) {
    let path = dir.join("s.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::run_briefly(path.to_str().unwrap(), "2", &out);
    let json = std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, json, format!("{stdout}{stderr}"))
}

#[test]
fn checks_are_counted_and_decide_success() {
    let (addr, lines) = server();
    let dir = support::scratch_dir("checks");
    std::fs::write(dir.join("pages.csv"), "path\n2023/05/post/\n").unwrap();
    let yaml = format!(
        r#"
name: checks
target: {{base_url: "http://{addr}"}}
think_time: 5ms
data:
  pages: {{csv: pages.csv}}
requests:
  user:
    path: /json
    check: {{status: [200], json: {{"$.user.id": 7}}, header: {{Content-Type: "json$"}}}}
  gone: {{path: /missing, check: {{status: 404}}}}
  wrong: {{path: /page, check: {{body_contains: goodbye}}}}
  page: {{path: "/${{raw(pages.path)}}", check: {{body_regex: "hel+o"}}}}
session:
  start: user
  transitions:
    user: {{gone: 1}}
    gone: {{wrong: 1}}
    wrong: {{page: 1}}
thresholds: ["checks > 99%", "user.checks > 99%"]
"#
    );
    let (code, run, output) = run(&dir, &yaml);
    // `wrong` fails its one check every time: checks pass 5 of 6.
    assert_eq!(code, Some(1), "{output}");
    let level = &run["levels"][0];
    let per = &level["per_request"];
    let user = &per["user"];
    assert!(user["requests"].as_u64().unwrap() > 5, "{user}");
    assert_eq!(user["errors"], 0, "{user}");
    for name in ["status", "json $.user.id", "header Content-Type"] {
        assert_eq!(
            user["checks"][name]["passed"], user["requests"],
            "{name}: {user}"
        );
        assert_eq!(user["checks"][name]["failed"], 0, "{name}: {user}");
    }
    // An expected 404 is a success.
    assert_eq!(per["gone"]["errors"], 0, "{}", per["gone"]);
    let wrong = &per["wrong"];
    assert_eq!(wrong["errors"], wrong["requests"], "{wrong}");
    assert_eq!(wrong["errors_by_kind"]["check_failed"], wrong["requests"]);
    assert_eq!(wrong["checks"]["body_contains"]["passed"], 0);
    assert_eq!(per["page"]["checks"]["body_regex"]["failed"], 0);
    let thresholds = run["analysis"]["thresholds"].as_array().unwrap();
    assert_eq!(thresholds[0]["passed"], false, "{thresholds:?}");
    let share = thresholds[0]["actual"].as_f64().unwrap();
    assert!((share - 5.0 / 6.0).abs() < 0.05, "{share}");
    assert_eq!(thresholds[1]["passed"], true, "{thresholds:?}");
    // The raw path went out as written.
    let lines = lines.lock().unwrap();
    assert!(
        lines.iter().any(|l| l == "GET /2023/05/post/ HTTP/1.1"),
        "{:?}",
        &lines[..lines.len().min(8)]
    );
}

#[test]
fn a_run_whose_every_request_failed_says_so_even_when_quiet() {
    let (addr, _) = server();
    let dir = support::scratch_dir("all-failed");
    let yaml = format!(
        "name: failing\ntarget: {{base_url: \"http://{addr}\"}}\nthink_time: 5ms\nrequests:\n  home: {{path: /, check: {{status: 201}}}}\n"
    );
    let (code, run, output) = run(&dir, &yaml);
    // No thresholds, but nothing trustworthy was measured: exit 4, and
    // nobody can miss it.
    assert_eq!(code, Some(4), "{output}");
    assert!(output.contains("NOT TRUSTWORTHY"), "{output}");
    assert!(output.contains("EVERY request failed"), "{output}");
    let warnings = run["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("EVERY request failed")),
        "{warnings:?}"
    );
}

/// A body kept for checks is capped at `target.max_body`: one longer is
/// read to its end (counted in `body_bytes`), kept no further, and counted
/// `body_too_large` with a warning naming the setting; its checks count
/// neither way. Raised past the body, the same answers pass.
#[test]
fn a_body_past_max_body_is_counted_not_kept() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("max-body");
    let scenario = |max_body: &str| {
        format!(
            r#"
name: max-body
target: {{base_url: "{}", max_body: {max_body}}}
think_time: 5ms
requests:
  big: {{path: "/bytes?n=300000", check: {{body_contains: "xxx"}}}}
  small: {{path: "/bytes?n=1000", check: {{body_contains: "xxx"}}}}
  other: {{path: "/bytes?n=10"}}
session: {{start: small, transitions: {{small: {{other: 1}}, other: {{big: 1}}}}}}
"#,
            tb.web_url
        )
    };
    let (code, record, output) = run(&dir, &scenario("64KiB"));
    assert_eq!(code, Some(0), "{output}");
    let per = &record["levels"][0]["per_request"];
    let (big, small) = (&per["big"], &per["small"]);
    assert!(big["requests"].as_u64().unwrap() > 0, "{big}");
    assert_eq!(big["errors"], big["requests"], "{big}");
    assert_eq!(big["errors_by_kind"]["body_too_large"], big["requests"]);
    assert_eq!(
        big["body_bytes"].as_u64(),
        Some(300_000 * big["requests"].as_u64().unwrap())
    );
    let judged =
        |r: &serde_json::Value, how: &str| r["checks"]["body_contains"][how].as_u64().unwrap_or(0);
    assert_eq!(judged(big, "passed") + judged(big, "failed"), 0, "{big}");
    assert_eq!(small["errors"], 0, "{small}");
    let warnings = record["warnings"].to_string();
    assert!(
        warnings.contains("larger than `target.max_body` (64.0 KiB)"),
        "{warnings}"
    );
    let (code, record, output) = run(&dir, &scenario("1MB"));
    assert_eq!(code, Some(0), "{output}");
    let big = &record["levels"][0]["per_request"]["big"];
    assert_eq!(big["errors"], 0, "{big}");
    assert_eq!(judged(big, "failed"), 0, "{big}");
    assert!(judged(big, "passed") > 0, "{big}");
}

/// A size that is no size names the key and the units.
#[test]
fn max_body_that_is_no_size_is_refused_with_the_units() {
    let dir = support::scratch_dir("max-body-bad");
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        "name: x\ntarget: {base_url: \"http://127.0.0.1:9\", max_body: lots}\nrequests:\n  a: {path: /}\n",
    )
    .unwrap();
    let (code, _, stderr) = support::autoperf(&["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("expected a size like `4MiB`") && stderr.contains("KiB, MiB, GiB"),
        "{stderr}"
    );
}
