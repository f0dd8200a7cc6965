//! Profiling against the testbed, whose costs are known by construction,
//! with a real agent on loopback: `autoperf profile` as a user runs it, the
//! utilisation law in `run`'s server figures, and agents that go missing.

use crate::support;

use std::path::Path;
use std::time::Duration;

fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= expected * tolerance
}

#[test]
fn profile_measures_the_testbeds_known_costs() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("profile");
    let scenario = dir.join("costs.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name: costs
target: {{base_url: "{web}"}}
think_time: 10ms
requests:
  cpu: {{path: "/cpu?ms=2"}}
  db: {{path: "/db?web_ms=1&db_ms=3"}}
  bytes: {{path: "/bytes?n=200000"}}
  lock: {{method: POST, path: "/lock?ms=1&bytes=65536"}}
session:
  start: cpu
  transitions:
    cpu: {{db: 0.3, bytes: 0.3, lock: 0.3}}
servers:
  - {{tier: web, agent: "{agent}", processes: [{web_process}]}}
  - {{tier: db, agent: "{agent}", processes: [{db_process}]}}
capacity: {{p_max: 10}}
"#,
            web = tb.web_url,
            agent = agent.url(),
            web_process = tb.web_process,
            db_process = tb.db_process,
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "profile",
        scenario.to_str().unwrap(),
        "--users",
        "4",
        "--warmup",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}");
    assert!(
        stdout.contains(&tb.web_process) && stdout.contains("cpu ms"),
        "{stdout}"
    );
    let run = support::run_json(&out);
    assert_eq!(run["mode"], "profile");
    let d = &run["analysis"]["demands"];
    let cpu_ms = |req: &str, tier: &str, p: &str| {
        d[req][tier]["cpu_ms_per_process"][p]
            .as_f64()
            .unwrap_or_else(|| panic!("no {req}/{tier}/{p} in {d}"))
    };
    let (web, db) = (tb.web_process.as_str(), tb.db_process.as_str());
    let web_cpu = cpu_ms("cpu", "web", web);
    assert!(
        within(web_cpu, 2.0, 0.10),
        "/cpu?ms=2 on tb-web: {web_cpu} ms"
    );
    assert!(cpu_ms("cpu", "db", db) < 0.1, "{d}");
    let db_web = cpu_ms("db", "web", web);
    let db_db = cpu_ms("db", "db", db);
    // The web tier's share of /db includes its handling of two hops (the
    // HTTP request, the call to tb-db), 0.05-0.12 ms depending on the
    // machine; the testbed's burns take it off (crates/testbed/src/burn.rs).
    assert!(
        within(db_web, 1.0, 0.10),
        "/db web_ms=1 on tb-web: {db_web} ms"
    );
    assert!(within(db_db, 3.0, 0.10), "/db db_ms=3 on tb-db: {db_db} ms");
    let tx = d["bytes"]["web"]["net_tx_bytes"].as_f64().unwrap();
    assert!(
        tx >= 200_000.0,
        "/bytes?n=200000 wrote {tx} bytes per request"
    );
    let disk = d["lock"]["web"]["disk_write_bytes"].as_f64().unwrap();
    assert!(
        within(disk, 65_536.0, 0.10),
        "/lock bytes=65536 wrote {disk} disk bytes"
    );
    // One level per request type, in the record too.
    assert_eq!(run["levels"].as_array().unwrap().len(), 4);
}

#[test]
fn run_reports_utilisation_that_obeys_the_utilisation_law() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("ulaw");
    let s = dir.join("ulaw.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  cpu: {{path: \"/cpu?ms=2\"}}\nservers:\n  - {{tier: web, agent: \"{}\", processes: [{}]}}\n",
            tb.web_url,
            agent.url(),
            tb.web_process
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, _, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--users",
        "8",
        "--duration",
        "6s",
        "--warmup",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let level = &support::run_json(&out)["levels"][0];
    let x = level["throughput_rps"].as_f64().unwrap();
    let u = level["servers"]["web"]["cpu_util_cores"].as_f64().unwrap();
    // U = X × D with D = 2 ms by construction.
    let expected = x * 0.002;
    assert!(
        within(u, expected, 0.10),
        "U = {u} cores, X × D = {expected}"
    );
}

#[test]
fn a_run_survives_its_agent_being_killed() {
    let tb = support::testbed(2);
    let web = &tb.web_process;
    let (mut agent, url) = support::agent_process();
    let dir = support::scratch_dir("agent-dies");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  cpu: {{path: \"/cpu?ms=1\"}}\nservers:\n  - {{tier: web, agent: \"{url}\", processes: [{web}]}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        let _ = agent.kill();
        let _ = agent.wait();
    });
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--users",
        "4",
        "--duration",
        "5s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    killer.join().unwrap();
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let run = support::run_json(&out);
    assert!(run["levels"][0]["requests"].as_u64().unwrap() > 50);
    let warnings = run["warnings"].to_string();
    assert!(warnings.contains("stopped answering"), "{warnings}");
}

#[test]
fn an_agent_restarted_mid_level_is_measured_only_between_its_own_readings() {
    let tb = support::testbed(2);
    let web = &tb.web_process;
    let (mut agent, url) = support::agent_process();
    let listen = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let dir = support::scratch_dir("agent-restarts");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  cpu: {{path: \"/cpu?ms=2\"}}\nservers:\n  - {{tier: web, agent: \"{url}\", processes: [{web}]}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    // Down from 3 s to 4.5 s into the run, then back on the same address.
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        let _ = agent.kill();
        let _ = agent.wait();
        std::thread::sleep(Duration::from_millis(1500));
        support::agent_process_on(&listen, &[]).0
    });
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--users",
        "8",
        "--duration",
        "8s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut second = restarter.join().unwrap();
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let run = support::run_json(&out);
    let warnings = run["warnings"].to_string();
    for said in [
        "stopped answering",
        "answers again",
        "restarted during the level",
    ] {
        assert!(warnings.contains(said), "no {said:?} in {warnings}");
    }
    let level = &run["levels"][0];
    let web = &level["servers"]["web"];
    let window = web["window_s"].as_f64().unwrap();
    let measured = level["duration_s"].as_f64().unwrap();
    assert!(
        window > 2.0 && window < measured - 1.0,
        "window {window} s of {measured} s"
    );
    // D = 2 ms by construction: the CPU used between readings of one agent
    // process over the requests completed between the same instants.
    let d = web["cpu_ms_per_request"][&tb.web_process].as_f64().unwrap();
    assert!(within(d, 2.0, 0.15), "D = {d} ms: {web}");
}

#[test]
fn a_missing_agent_is_exit_3_unless_told_to_run_without() {
    let tb = support::testbed(1);
    let web = &tb.web_process;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = support::scratch_dir("no-agent");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nrequests:\n  a: {{path: /health}}\nservers:\n  - {{tier: web, agent: \"http://{dead}\", processes: [{web}]}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let args = |extra: &[&'static str]| {
        let mut v = vec![
            "run".to_string(),
            s.to_str().unwrap().to_string(),
            "--users".into(),
            "1".into(),
            "--duration".into(),
            "1s".into(),
            "--warmup".into(),
            "1s".into(),
            "--out".into(),
            dir.join("out").to_str().unwrap().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let a = args(&[]);
    let (code, _, stderr) = support::autoperf(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains(&dead.to_string()) && stderr.contains("--no-agents"),
        "{stderr}"
    );
    let a = args(&["--no-agents"]);
    let (code, _, stderr) = support::autoperf(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_token_protected_agent_is_used_with_the_token_file() {
    let tb = support::testbed(1);
    let web = &tb.web_process;
    let dir = support::scratch_dir("agent-token");
    let token = dir.join("agent.token");
    std::fs::write(&token, "a-secret-of-enough-characters\n").unwrap();
    let (mut agent, url) = support::agent_process_with(&["--token-file", token.to_str().unwrap()]);
    let scenario = |token_line: &str| {
        let s = dir.join(format!("s{}.yaml", token_line.len()));
        std::fs::write(
            &s,
            format!(
                "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  cpu: {{path: \"/cpu?ms=1\"}}\nservers:\n  - {{tier: web, agent: \"{url}\", processes: [{web}]{token_line}}}\n",
                tb.web_url
            ),
        )
        .unwrap();
        s
    };
    let run = |s: &Path, out: &str| {
        support::autoperf(&[
            "run",
            s.to_str().unwrap(),
            "--users",
            "2",
            // Long enough for the agent's once-a-second readings to span
            // the window on a busy machine (2 s once left none: no figures).
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--out",
            dir.join(out).to_str().unwrap(),
        ])
    };
    // Without the token: refused at the start, saying what to add.
    let (code, _, stderr) = run(&scenario(""), "without");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("requires a token") && stderr.contains("token_file"),
        "{stderr}"
    );
    // With it: the tier's figures are measured.
    let (code, _, stderr) = run(&scenario(", token_file: agent.token"), "with");
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(code, Some(0), "{stderr}");
    let level = &support::run_json(&dir.join("with"))["levels"][0];
    let u = level["servers"]["web"]["cpu_util_cores"].as_f64();
    assert!(u.is_some_and(|u| u > 0.0), "{level}");
}
