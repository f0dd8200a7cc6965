//! The built binary as a user runs it: `run` against the testbed writes the
//! results directory with the contract's keys; `check` and `run` reject bad
//! input with exit 2 and a located message; a dead target is exit 3.

use crate::support;

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
        dir.join("actors.csv"),
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

fn threshold_scenario(dir: &std::path::Path, web: &str, thresholds: &[&str]) -> String {
    let list: String = thresholds
        .iter()
        .map(|t| format!("  - \"{t}\"\n"))
        .collect();
    let path = dir.join("slo.yaml");
    std::fs::write(
        &path,
        format!(
            "target: {{base_url: \"{web}\"}}\nthink_time: 20ms\nrequests:\n  cpu: {{path: \"/cpu?ms=1\"}}\nthresholds:\n{list}"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn thresholds_decide_the_exit_code_and_land_in_run_json() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-slo");
    let out = dir.join("pass");
    let pass = threshold_scenario(
        &dir,
        &tb.web_url,
        &[
            "p99 < 2s",
            "error_rate < 1%",
            "cpu.mean < 1s",
            "throughput > 10/s",
        ],
    );
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &pass,
        "--users",
        "4",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("pass  p99 < 2s"), "{stdout}");
    let run = support::run_json(&out);
    assert_eq!(run["analysis"]["thresholds"].as_array().unwrap().len(), 4);
    assert!(out.join("report.html").exists() && out.join("levels.csv").exists());

    let out = dir.join("fail");
    let fail = threshold_scenario(&dir, &tb.web_url, &["p99 < 1ms", "throughput > 100000/s"]);
    let (code, stdout, _) = support::autoperf(&[
        "run",
        &fail,
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "a failed SLO is exit 1");
    // --json: stdout is run.json and nothing else.
    let printed: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    let checks = printed["analysis"]["thresholds"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["passed"] == false), "{checks:?}");

    // A server that never answers passes no latency threshold: nothing
    // was measured (latency read 0 ms and passed).
    let (hung, _) = support::misbehaving_server(support::Misbehaviour::NeverAnswer);
    let path = dir.join("hung.yaml");
    std::fs::write(
        &path,
        format!(
            "target: {{base_url: \"http://{hung}\", timeout: 300ms}}\nthink_time: 20ms\nrequests:\n  a: {{path: /}}\nthresholds: [\"p99 < 250ms\"]\n"
        ),
    )
    .unwrap();
    let out = dir.join("hung");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        path.to_str().unwrap(),
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--out",
        out.to_str().unwrap(),
    ]);
    // Every request failed: exit 4 (nothing trustworthy) wins over 1, said
    // first; the threshold still says why it failed.
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("NOT TRUSTWORTHY: level 1: every request failed (timeout"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL  p99 < 250ms") && stdout.contains("no successful requests"),
        "{stdout}"
    );

    // A bad expression is caught by check, with its place.
    let bad = threshold_scenario(&dir, &tb.web_url, &["p99 < fast"]);
    let (code, _, stderr) = support::autoperf(&["check", &bad]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("slo.yaml:") && stderr.contains("p99 < fast"),
        "{stderr}"
    );
}

#[test]
fn metrics_are_served_in_prometheus_format_during_a_run() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-metrics");
    let s = threshold_scenario(&dir, &tb.web_url, &[]);
    // Port 0: autoperf binds a free port and says which on stderr.
    let mut child = Command::new(support::autoperf_exe())
        .args([
            "run",
            &s,
            "--users",
            "4",
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--metrics-listen",
            "127.0.0.1:0",
            "--out",
        ])
        .arg(dir.join("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said, heard) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr).map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("metrics: http://") {
                let _ = said.send(url.trim_end_matches("/metrics").to_string());
            }
        }
    });
    let addr = heard
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("autoperf names the address it serves metrics on");
    // Scrape once the run has measured something (bounded wait).
    let mut body = String::new();
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Ok(mut conn) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read, Write};
            let _ =
                conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut text = String::new();
            let _ = conn.read_to_string(&mut text);
            if text.contains("autoperf_requests_total{") {
                body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(!body.is_empty(), "no metrics with requests were served");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format");
    let names: Vec<&str> = scrape.samples.iter().map(|s| s.metric.as_str()).collect();
    for want in [
        "autoperf_requests_total",
        "autoperf_response_time_seconds",
        "autoperf_active_users",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(want)),
            "{want} missing from {names:?}"
        );
    }
}

#[test]
fn report_rerenders_from_a_results_directory() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-report");
    let s = threshold_scenario(&dir, &tb.web_url, &[]);
    let out = dir.join("out");
    let (code, _, stderr) = support::autoperf(&[
        "run",
        &s,
        "--users",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "1s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::remove_file(out.join("report.html")).unwrap();
    let (code, stdout, _) = support::autoperf(&["report", out.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("report.html"));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("<script src"));
}

#[test]
fn the_scenarios_arrival_stages_run_as_an_open_workload() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-arrivals");
    let s = dir.join("stages.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nrequests:\n  a: {{path: /health}}\narrivals:\n  stages: [{{rate: 100/s, for: 2s}}, {{rate: 300/s, for: 2s}}]\n  spacing: even\n",
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let level = &support::run_json(&out)["levels"][0];
    // Measured window: 1 s at 100/s then 2 s at 300/s.
    let target = level["rate_rps"].as_f64().unwrap();
    assert!((target - 233.3).abs() < 5.0, "target {target}");
    let achieved = level["achieved_rate_rps"].as_f64().unwrap();
    assert!(
        (achieved - target).abs() / target < 0.05,
        "achieved {achieved} vs {target}"
    );
    assert!(level["users"].is_null());
    assert_eq!(level["arrivals"]["unstarted"], 0);
    assert!(stdout.contains("open workload: target"), "{stdout}");
}

#[test]
fn rate_on_the_command_line_keeps_the_scenarios_spacing_and_cap() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-rate-override");
    let s = dir.join("even.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nrequests:\n  a: {{path: /health}}\narrivals:\n  rate: 50/s\n  spacing: even\n  max_in_flight: 77\n",
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--rate",
        "400/s",
        "--warmup",
        "1s",
        "--duration",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let level = &support::run_json(&out)["levels"][0];
    // Evenly spaced, every arrival counted in the second it was due in:
    // exactly 800 in the 2 s window (Poisson arrivals would vary by ~28).
    assert_eq!(level["arrivals"]["due"], 800, "{level}");
    assert_eq!(level["arrivals"]["max_in_flight"], 77, "{level}");
    assert_eq!(level["rate_rps"], 400.0, "{level}");
}

#[test]
fn env_variables_and_set_overrides_run_and_an_unset_variable_is_located_by_check() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("cli-env");
    let scenario = dir.join("env.yaml");
    std::fs::write(
        &scenario,
        "name: env\ntarget: {base_url: \"http://${env.TARGET}\"}\nthink_time: 1s\nrequests:\n  home: {path: \"/cpu?ms=0.1&who=${env.WHO:-anon}\"}\nsession: {start: home}\n",
    )
    .unwrap();
    let unset = autoperf()
        .arg("check")
        .arg(&scenario)
        .env_remove("TARGET")
        .output()
        .unwrap();
    assert_eq!(unset.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2:28: error: environment variable `TARGET` is not set",
            scenario.display()
        )),
        "{stderr}"
    );
    let target = tb.web_url.trim_start_matches("http://");
    let out = dir.join("out");
    let run = autoperf()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--set",
            "think_time=200ms",
            "--users",
            "2",
        ])
        .args([
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .env("TARGET", target)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let record = support::run_json(&out);
    assert_eq!(record["scenario"]["overrides"][0], "think_time=200ms");
    assert_eq!(record["scenario"]["target"], tb.web_url.as_str());
    let level = &record["levels"][0];
    assert_eq!(level["think_time_s"]["configured"], 0.2);
    assert!(
        level["requests"].as_u64().unwrap() > 0 && level["errors"] == 0,
        "{level}"
    );
    // A --set value is checked like the file's, and named in the message.
    let bad = autoperf()
        .args([
            "check",
            scenario.to_str().unwrap(),
            "--set",
            "think_time=fast",
        ])
        .env("TARGET", target)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("--set think_time=fast: expected a duration"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ramp_of_users_holds_each_seconds_active_users_within_one_percent_of_the_plan() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-ramp");
    let yaml = format!(
        "name: ramp\ntarget: {{base_url: \"{}\"}}\nthink_time: {{exponential: 2s}}\nusers: [{{to: 2000, over: 20s}}, {{hold: 2s}}]\nrequests:\n  home: {{path: /health}}\nsession: {{start: home, transitions: {{home: {{home: 0.99}}}}}}\n",
        tb.web_url
    );
    let (out, record) = run_ok(&dir, "ramp", &yaml, &["--warmup", "0s"]);
    let level = &record["levels"][0];
    assert_eq!(level["users"], 2000, "the ramp's most");
    assert_eq!(level["duration_s"].as_f64().map(f64::round), Some(22.0));
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let active: Vec<f64> = series
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(7).unwrap().parse().unwrap())
        .collect();
    assert!(active.len() >= 22, "{series}");
    // Second k ends k s after the start: the plan is then 100·k users (2000
    // from the 20th on). A generator the machine stalls starts its users
    // late (beside a busy loop on each core: 1,212 at second 13, 0.9 s
    // behind): a second may trail the plan by what the run measured of its
    // own stalls, its timers' largest lateness, never more.
    let stalled_s = level["client"]["timer_lateness_ms"]["max"]
        .as_f64()
        .unwrap()
        / 1e3;
    for (i, &users) in active.iter().take(22).enumerate() {
        let plan = (100.0 * (i + 1) as f64).min(2000.0);
        let behind_s = (plan - users) / 100.0;
        assert!(
            (users - plan).abs() <= plan * 0.01 || (users < plan && behind_s <= stalled_s + 0.1),
            "second {}: {users} active users, the plan {plan} (timers late by {stalled_s} s at most)\n{series}",
            i + 1
        );
    }
    assert_eq!(level["errors"], 0, "{level}");
    // Little's law is taken over the users' mean, not the ramp's most
    // (the seconds' ends: 1,136 for a true mean of 1,091).
    let mean = level["little"]["users"].as_f64().unwrap();
    assert!((1000.0..1200.0).contains(&mean), "{}", level["little"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn think_time_per_request_is_slept_after_that_request() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("cli-think");
    let yaml = format!(
        "name: think\ntarget: {{base_url: \"{}\"}}\nthink_time: 0s\nrequests:\n  a: {{path: /health, think_time: 200ms}}\n  b: {{path: /health}}\nsession:\n  start: a\n  transitions: {{a: {{b: 1.0}}, b: {{a: 0.98}}}}\n",
        tb.web_url
    );
    let args = ["--users", "2", "--duration", "3s", "--warmup", "1s"];
    let (_, record) = run_ok(&dir, "think", &yaml, &args);
    let think = &record["levels"][0]["think_time_s"];
    assert!(
        (think["configured"].as_f64().unwrap() - 0.1).abs() < 1e-6,
        "{think}"
    );
    // Half the pauses are 200 ms, half none.
    let measured = think["measured"].as_f64().unwrap();
    assert!((0.09..0.13).contains(&measured), "{think}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_unique_feeder_serves_each_row_once_then_stops_its_users_with_a_clear_warning() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("cli-unique");
    let yaml = format!(
        "name: unique\ntarget: {{base_url: \"{}\"}}\nthink_time: 10ms\ndata: {{accounts: {{range: [1, 20], mode: unique}}}}\nrequests:\n  signup: {{path: \"/health?account=${{accounts.n}}\"}}\n  home: {{path: /health}}\nsession: {{start: signup, transitions: {{signup: {{home: 1.0}}}}}}\n",
        tb.web_url
    );
    let args = ["--users", "4", "--duration", "3s", "--warmup", "0s"];
    let (_, record) = run_ok(&dir, "unique", &yaml, &args);
    let signup = &record["levels"][0]["per_request"]["signup"];
    // Twenty rows, twenty signups sent; then each of the 4 users found none.
    assert_eq!(signup["requests"], 24, "{signup}");
    assert_eq!(signup["errors_by_kind"]["data_exhausted"], 4, "{signup}");
    assert_eq!(record["levels"][0]["per_request"]["home"]["requests"], 20);
    let warnings = record["warnings"].to_string();
    assert!(
        warnings
            .contains("4 requests found no row left in a unique data feeder (`accounts`, 20 rows)"),
        "{warnings}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `yaml` to `dir/name.yaml`, runs `autoperf run` on it with `args`
/// (and `--no-agents --quiet --out dir/out`), expects exit 0 and returns
/// the results directory with its run.json.
fn run_ok(
    dir: &std::path::Path,
    name: &str,
    yaml: &str,
    args: &[&str],
) -> (std::path::PathBuf, serde_json::Value) {
    let scenario = dir.join(format!("{name}.yaml"));
    std::fs::write(&scenario, yaml).unwrap();
    let out = dir.join("out");
    let run = autoperf()
        .arg("run")
        .arg(&scenario)
        .args(args)
        .args(["--no-agents", "--quiet", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let record = support::run_json(&out);
    (out, record)
}

#[test]
fn a_starved_generator_is_reported_as_a_client_bottleneck() {
    // autoperf held to a tenth of a core, against a testbed with far more
    // capacity than is asked of it.
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cli-starved");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 5ms\nrequests:\n  a: {{path: /health}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let output = support::quota::CpuQuota::new(0.1)
        .command(&support::autoperf_exe())
        .args([
            "run",
            s.to_str().unwrap(),
            "--users",
            "1500",
            "--duration",
            "4s",
            "--warmup",
            "2s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["client_bottleneck"], true, "{level}");
    // The screen says so.
    assert!(stderr.contains("client bottleneck"), "{stderr}");
}
