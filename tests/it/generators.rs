//! A level spread over several generator processes (`--generators`) and
//! source addresses (`--local-addresses`): the processes' snapshots merge
//! into one level as exactly as one process's shards do, each address
//! carries connections, and a generator that dies leaves an incomplete
//! level (named, exit 4), not a hung run.

use crate::support;

use support::counting::counting_server;

use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn scenario(dir: &Path, addr: SocketAddr) -> String {
    let path = dir.join("spread.yaml");
    std::fs::write(
        &path,
        format!(
            "name: spread\ntarget: {{base_url: \"http://{addr}\", timeout: 5s}}\nthink_time: 50ms\n\
             requests:\n  hello: {{path: /hello}}\n\
             session: {{start: hello, transitions: {{hello: {{hello: 0.9}}}}}}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_level_spread_over_two_processes_and_two_addresses_is_one_exact_level() {
    let (addr, seen) = counting_server();
    let dir = support::scratch_dir("generators-spread");
    let scenario = scenario(&dir, addr);
    let out = dir.join("results");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &scenario,
        "--users",
        "40",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--generators",
        "2",
        "--local-addresses",
        "127.0.0.1,127.0.0.2",
        // Goes to the processes with their job.
        "--coalesce",
        "50us",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("2 generator processes") && stderr.contains("127.0.0.2"),
        "the spread is announced: {stderr}"
    );
    let run = support::run_json(&out);
    let level = &run["levels"][0];
    let requests = level["requests"].as_u64().unwrap();
    assert_eq!(level["errors"].as_u64(), Some(0), "{level:#}");
    assert_eq!(level["users"].as_u64(), Some(40));
    // The server answered at least what the level counts (the warm-up and
    // the requests in flight at the end come on top) and not wildly more.
    let served = seen.requests.load(Ordering::Relaxed);
    assert!(
        requests > 0 && served >= requests,
        "served {served}, counted {requests}"
    );
    assert!(served < requests * 2, "served {served}, counted {requests}");
    // Little's law over both processes: N = X (R + Z).
    let x = level["throughput_rps"].as_f64().unwrap();
    let r = level["response_time_ms"]["mean"].as_f64().unwrap() / 1000.0;
    let z = level["think_time_s"]["measured"]
        .as_f64()
        .or_else(|| level["think_time_s"]["achieved"].as_f64())
        .unwrap();
    let n = x * (r + z);
    assert!(
        (n - 40.0).abs() / 40.0 < 0.05,
        "X(R+Z) = {n:.2} for 40 users: {level:#}"
    );
    // Each process's CPU is counted.
    assert!(
        level["client"]["cpu_util_cores"].as_f64().unwrap() > 0.0,
        "{level:#}"
    );
    let peers = seen.peers.lock().unwrap().clone();
    let want: BTreeSet<IpAddr> = ["127.0.0.1", "127.0.0.2"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(peers, want, "connections came from both addresses");
}

/// `run` of 20 users over two generator processes, quiet, in the
/// background; its stderr is piped.
fn spread_in_background(scenario: &str, out: &Path, duration: &str) -> std::process::Child {
    Command::new(support::autoperf_exe())
        .args([
            "run",
            scenario,
            "--users",
            "20",
            "--duration",
            duration,
            "--warmup",
            "1s",
            "--generators",
            "2",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_generator_process_that_dies_leaves_an_incomplete_level_and_the_run_ends_on_time() {
    let (addr, _seen) = counting_server();
    let dir = support::scratch_dir("generators-die");
    let scenario = scenario(&dir, addr);
    let out = dir.join("results");
    let began = Instant::now();
    let mut run = spread_in_background(&scenario, &out, "6s");
    // Kill one generator process once the level is under way.
    let children = format!("/proc/{0}/task/{0}/children", run.id());
    let mut victim = None;
    let looking = Instant::now();
    while victim.is_none() && looking.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        let kids = std::fs::read_to_string(&children).unwrap_or_default();
        let pids: Vec<i32> = kids
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() == 2 && began.elapsed() > Duration::from_secs(3) {
            victim = Some(pids[0]);
        }
    }
    let victim = victim.expect("two generator processes ran");
    // SAFETY: kill(2) on a child of the process we started.
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let status = run.wait().unwrap();
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let elapsed = began.elapsed();
    // Its users' load went missing: the level is incomplete, so nothing
    // trustworthy was measured (exit 4), and the run still ended on time.
    assert_eq!(status.code(), Some(4), "{status}: {stderr}");
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    let run = support::run_json(&out);
    let level = &run["levels"][0];
    let incomplete = level["incomplete"].as_str().unwrap_or_default();
    assert!(
        incomplete.contains("generator process") && incomplete.contains("ended early"),
        "{level:#}\n{stderr}"
    );
    assert!(level["invalid"]
        .as_str()
        .unwrap_or_default()
        .contains("incomplete"));
    let warnings = run["warnings"].to_string();
    assert!(
        warnings.contains("NOT TRUSTWORTHY") && warnings.contains("incomplete"),
        "{warnings}\n{stderr}"
    );
    assert!(level["requests"].as_u64().unwrap() > 0);
}

#[test]
fn ctrl_c_stops_every_generator_process_cleanly_and_keeps_the_results() {
    let (addr, _seen) = counting_server();
    let dir = support::scratch_dir("generators-stop");
    let scenario = scenario(&dir, addr);
    let out = dir.join("results");
    let began = Instant::now();
    let run = spread_in_background(&scenario, &out, "30s");
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill(2) on the process we started; only it gets the signal,
    // as only it would from a terminal (generators have their own group).
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "took {:?}",
        began.elapsed()
    );
    let run = support::run_json(&out);
    assert_eq!(run["analysis"]["stop_reason"], "interrupted", "{stderr}");
    let level = &run["levels"][0];
    assert!(level["requests"].as_u64().unwrap() > 0, "{level:#}");
    let warnings = run["warnings"].to_string();
    assert!(!warnings.contains("ended early"), "{warnings}");
}

#[test]
fn generator_processes_apply_the_same_set_overrides_and_ramp_as_the_parent() {
    let (addr, seen) = counting_server();
    let dir = support::scratch_dir("generators-set");
    let scenario = dir.join("set.yaml");
    // As written, a 30 s think time: a few requests in 3 s at most.
    std::fs::write(
        &scenario,
        format!(
            "name: set\ntarget: {{base_url: \"http://{addr}\"}}\nthink_time: 30s\nusers: [{{to: 8, over: 1s}}, {{hold: 2s}}]\nrequests:\n  a: {{path: /}}\nsession: {{start: a, transitions: {{a: {{a: 0.99}}}}}}\n"
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--set",
        "think_time=20ms",
        "--generators",
        "2",
        "--warmup",
        "0s",
        "--no-agents",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let record = support::run_json(&out);
    let warnings = record["warnings"].to_string();
    assert!(!warnings.contains("ended early"), "{warnings}");
    let requests = record["levels"][0]["requests"].as_u64().unwrap();
    // 8 users at 20 ms for most of 3 s: hundreds, in both processes.
    assert!(requests > 300, "{requests} requests: {warnings}");
    assert!(seen.requests.load(Ordering::Relaxed) >= requests);
    let series = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let last_active: u32 = series
        .lines()
        .last()
        .and_then(|l| l.split(',').nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert_eq!(
        last_active, 8,
        "the ramp's top over both processes\n{series}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
