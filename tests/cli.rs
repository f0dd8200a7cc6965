//! The built binary as a user runs it: `run` against the testbed writes the
//! results directory with the contract's keys; `check` and `run` reject bad
//! input with exit 2 and a located message; a dead target is exit 3.

mod support;

use std::process::Command;

fn autoperf() -> Command {
    Command::new(support::autoperf_exe())
}

#[test]
fn run_writes_the_results_directory_with_the_contract_keys() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-run");
    let scenario = dir.join("shop.yaml");
    std::fs::write(
        &dir.join("actors.csv"),
        "name,id\nTom Hanks,1\nMeryl Streep,2\n",
    )
    .unwrap();
    std::fs::write(
        &scenario,
        format!(
            r#"
name: shop
target: {{base_url: "{}", timeout: 5s}}
think_time: {{exponential: 50ms}}
data:
  actors: {{csv: actors.csv}}
requests:
  login:
    method: POST
    path: /ingest
    json: {{user: "user${{random(1,5000)}}", qty: 1}}
  search:
    path: "/bytes?n=100&actor=${{actors.name}}"
  page:
    path: /static/index.html
session:
  start: login
  transitions:
    login: {{search: 0.7, page: 0.2}}
    search: {{search: 0.3, page: 0.3}}
"#,
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("results");
    let output = autoperf()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--users",
            "8",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The summary table names every request and the total.
    for name in ["login", "search", "page", "total", "p99 ms"] {
        assert!(stdout.contains(name), "summary lacks {name}:\n{stdout}");
    }
    // Not a terminal: no progress line.
    assert!(
        !stderr.contains("req/s"),
        "progress leaked off a terminal:\n{stderr}"
    );

    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["tool"]["name"], "autoperf");
    assert_eq!(run["mode"], "run");
    assert_eq!(run["analysis"]["stop_reason"], "completed");
    let level = &run["levels"][0];
    for key in [
        "users",
        "rate_rps",
        "duration_s",
        "requests",
        "errors",
        "throughput_rps",
        "response_time_ms",
        "think_time_s",
        "client_bottleneck",
        "steady_state",
        "per_request",
        "servers",
    ] {
        assert!(level.get(key).is_some(), "level lacks {key}: {level}");
    }
    for key in ["mean", "p50", "p90", "p99", "max"] {
        assert!(level["response_time_ms"][key].is_number());
    }
    assert_eq!(level["users"], 8);
    assert_eq!(level["errors"], 0, "{level}");
    assert!(level["requests"].as_u64().unwrap() > 50);
    assert!(level["per_request"]["login"]["response_time_ms"]["p99"].is_number());

    let levels = std::fs::read_to_string(out.join("levels.jsonl")).unwrap();
    assert_eq!(levels.lines().count(), 1);
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let mut lines = series.lines();
    assert_eq!(
        lines.next(),
        Some("t_s,level,requests,errors,throughput_rps,p50_ms,p99_ms,active_users")
    );
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 3, "{series}");
    assert!(rows.iter().all(|r| r.split(',').count() == 8));
}

#[test]
fn check_reports_every_problem_with_its_place_and_exits_2() {
    let dir = support::scratch_dir("cli-check");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "target:\n  base_url: http://127.0.0.1:1\n  timout: 5s\nrequests:\n  a: {path: /a}\n  b: {path: /b}\nsession:\n  start: a\n  transitions:\n    a: {c: 0.5}\n",
    )
    .unwrap();
    let output = autoperf().arg("check").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.yaml:3:"), "{stderr}");
    assert!(stderr.contains("timeout"), "no did-you-mean:\n{stderr}");
    assert!(
        stderr.contains("bad.yaml:10:"),
        "unknown transition target not located:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn check_accepts_the_bundled_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = autoperf()
        .arg("check")
        .arg(root.join("examples/testbed.yaml"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_unreachable_target_is_exit_3_with_the_address() {
    // Bind then drop: a loopback port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = support::scratch_dir("cli-dead");
    let path = dir.join("dead.yaml");
    std::fs::write(
        &path,
        format!("target: {{base_url: \"http://127.0.0.1:{port}\"}}\nrequests:\n  a: {{path: /}}\n"),
    )
    .unwrap();
    let output = autoperf()
        .args([
            "run",
            path.to_str().unwrap(),
            "--users",
            "1",
            "--duration",
            "1s",
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
}

#[test]
fn usage_errors_are_exit_2() {
    let output = autoperf().args(["run"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}
