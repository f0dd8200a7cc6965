//! Verdicts on the data, not only on thresholds: a run that measured only
//! errors says so first and exits 4, and a capacity analysis whose target
//! dies stops there, keeping the levels measured before.

use crate::support;

use std::time::{Duration, Instant};

use support::Misbehaviour;

#[test]
fn a_run_against_a_server_answering_503_to_everything_is_not_trustworthy() {
    let (addr, _) = support::misbehaving_server(Misbehaviour::Unavailable);
    let dir = support::scratch_dir("trust-503");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "name: lb\ntarget: {{base_url: \"http://{addr}\"}}\nrequests: {{a: {{path: /}}}}\n"
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--users",
        "4",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    // The reason comes first, before any figure.
    assert!(
        stdout.starts_with("NOT TRUSTWORTHY: level 1: every request failed (http_5xx"),
        "{stdout}"
    );
    let run = support::run_json(&out);
    let invalid = run["levels"][0]["invalid"]
        .as_str()
        .expect("marked invalid");
    assert!(invalid.contains("not the system working"), "{invalid}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Not trustworthy: 1 of 1 levels"),
        "report says so"
    );
    // A healthy run keeps `invalid` null.
    let tb = support::testbed(1);
    let ok = dir.join("ok.yaml");
    std::fs::write(
        &ok,
        format!(
            "name: ok\ntarget: {{base_url: \"{}\"}}\nrequests: {{a: {{path: /health}}}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("ok-out");
    let (code, stdout, _) = support::autoperf(&[
        "run",
        ok.to_str().unwrap(),
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
    assert_eq!(code, Some(0), "{stdout}");
    assert!(support::run_json(&out)["levels"][0]["invalid"].is_null());
}

/// A server that accepts and never answers, with a timeout longer than
/// the level: not one request completes, success or failure. That level
/// measured nothing and must not look like a clean run (it printed 0.00
/// everywhere and exited 0), whatever its thresholds.
#[test]
fn a_level_against_a_hung_server_that_completes_nothing_is_not_trustworthy() {
    let (hung, connections) = support::misbehaving_server(Misbehaviour::NeverAnswer);
    let dir = support::scratch_dir("trust-hung");
    for (name, thresholds) in [
        ("plain", ""),
        (
            "slo",
            "thresholds: [\"p99 < 250ms\", \"error_rate < 1%\"]\n",
        ),
    ] {
        let s = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &s,
            format!(
                "name: hung\ntarget: {{base_url: \"http://{hung}\", timeout: 3s}}\nrequests: {{a: {{path: /}}}}\n{thresholds}"
            ),
        )
        .unwrap();
        let out = dir.join(name);
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            s.to_str().unwrap(),
            "--users",
            "2",
            "--duration",
            "2s",
            "--warmup",
            "0s",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(4), "{name}: {stdout}\n{stderr}");
        assert!(
            stdout.starts_with("NOT TRUSTWORTHY: level 1: no request completed in 2.0 s"),
            "{name}: {stdout}"
        );
        let level = &support::run_json(&out)["levels"][0];
        assert_eq!(level["requests"], 0, "{level}");
        assert!(level["invalid"]
            .as_str()
            .is_some_and(|i| i.contains("answered none")));
        if !thresholds.is_empty() {
            // Every threshold on it fails, saying why.
            let checks = support::run_json(&out)["analysis"]["thresholds"].clone();
            let checks = checks.as_array().unwrap();
            assert_eq!(checks.len(), 2, "{checks:?}");
            assert!(
                checks
                    .iter()
                    .all(|c| c["passed"] == false && c["note"] == "no request completed"),
                "{checks:?}"
            );
        }
    }
    // The users did reach the server: it accepted and said nothing.
    assert!(connections.load(std::sync::atomic::Ordering::Relaxed) >= 2);
}

/// An h2c server that speaks just enough HTTP/2 to be one — its SETTINGS,
/// the acknowledgement of the client's PINGs — and answers each request
/// (a HEADERS frame) with `pings` PING frames instead of a response: the
/// client acknowledges them all, as HTTP/2 says it must, and no request
/// ever completes. Connections it accepted are counted.
fn ping_flood_server(
    pings: usize,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::spawn(move || {
                let mut preface = [0u8; 24];
                if stream.read_exact(&mut preface).is_err() {
                    return;
                }
                // An empty SETTINGS frame: length 0, type 4, stream 0.
                if stream.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).is_err() {
                    return;
                }
                let ping = [0u8, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
                let burst: Vec<u8> = ping.repeat(1000);
                // Frame by frame, at most 10,000 (the test's client sends
                // a handful, then acknowledgements).
                for _ in 0..10_000 + 2 * pings {
                    let mut head = [0u8; 9];
                    if stream.read_exact(&mut head).is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0u8; len.min(1 << 20)];
                    if stream.read_exact(&mut payload).is_err() {
                        return;
                    }
                    let (kind, flags) = (head[3], head[4]);
                    let answer = match (kind, flags & 1) {
                        // The client's PING: acknowledged, as a server must.
                        (6, 0) => {
                            let mut ack = head.to_vec();
                            ack[4] = 1;
                            ack.extend_from_slice(&payload);
                            stream.write_all(&ack)
                        }
                        // Its SETTINGS: acknowledged.
                        (4, 0) => stream.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]),
                        // A request: PINGs, never a response.
                        (1, _) => (0..pings / 1000).try_for_each(|_| stream.write_all(&burst)),
                        _ => Ok(()),
                    };
                    if answer.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// The probe's h2c server that answers with 200,000 PINGs and no response:
/// the level completes nothing, so it is invalid, exit 4, as against a
/// server that is silent.
#[test]
fn an_h2c_server_answering_only_pings_completes_nothing_and_is_not_trustworthy() {
    let (addr, accepted) = ping_flood_server(200_000);
    let dir = support::scratch_dir("trust-pings");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "name: pings\ntarget: {{base_url: \"http://{addr}\", http: \"2\", timeout: 3s}}\nrequests: {{a: {{path: /}}}}\n"
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let begin = Instant::now();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s.to_str().unwrap(),
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("NOT TRUSTWORTHY: level 1: no request completed in 2.0 s"),
        "{stdout}"
    );
    assert_eq!(support::run_json(&out)["levels"][0]["requests"], 0);
    assert!(accepted.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    // The flood does not hold the run past its level and the timeout.
    assert!(
        begin.elapsed() < Duration::from_secs(20),
        "{:?}",
        begin.elapsed()
    );
}

#[test]
fn a_target_killed_mid_analysis_stops_it_and_keeps_the_levels_before() {
    let mut tb = support::testbed(1);
    let dir = support::scratch_dir("trust-killed");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "name: killed\ntarget: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests: {{a: {{path: \"/cpu?ms=0.2\"}}}}\n",
            tb.web_url
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let child = std::process::Command::new(support::autoperf_exe())
        .args([
            "capacity",
            s.to_str().unwrap(),
            "--levels",
            "2,4,6,8",
            "--duration",
            "2s",
        ])
        .args(["--no-agents", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill the target once the first level is on disk.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(out.join("levels.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 1
    {
        assert!(Instant::now() < deadline, "the first level never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    tb.shutdown();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.trim_start().starts_with("NOT TRUSTWORTHY: level"),
        "{stdout}"
    );
    let run = support::run_json(&out);
    assert_eq!(
        run["analysis"]["stop_reason"], "target_down",
        "{}",
        run["analysis"]
    );
    let levels = run["levels"].as_array().unwrap();
    // The good level is kept; the analysis stopped at the first dead one,
    // not running the rest against a dead port.
    assert!(levels[0]["invalid"].is_null(), "{}", levels[0]);
    assert!(levels[0]["throughput_rps"].as_f64().unwrap() > 10.0);
    let dead: Vec<&serde_json::Value> = levels.iter().filter(|l| !l["invalid"].is_null()).collect();
    assert_eq!(dead.len(), 1, "{levels:?}");
    assert!(levels.len() <= 3, "{} levels", levels.len());
    let why = dead[0]["invalid"].as_str().unwrap();
    assert!(
        why.contains("connect_refused") && why.contains("down"),
        "{why}"
    );
    // The dead level is no curve point: levels.csv keeps it, marked.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("the target went down"),
        "report says why it stopped"
    );
}

/// `autoperf run … --out MOUNT/out` inside a mount namespace of its own
/// where MOUNT is a fresh tmpfs mounted with `options`; returns the exit
/// code, stdout (then what MOUNT holds afterwards) and stderr.
fn run_on_tmpfs(scenario: &std::path::Path, options: &str) -> (Option<i32>, String, String) {
    let mount = support::scratch_dir(&format!("tmpfs-{}", options.replace([',', '='], "-")));
    let script = format!(
        "mount -t tmpfs -o {options} autoperf-test {m} && {exe} run {s} --users 2 --duration 20s --warmup 0s --out {m}/out; \
         code=$?; echo; echo \"left: [$(ls -A {m})]\"; exit $code",
        m = mount.display(),
        exe = support::autoperf_exe().display(),
        s = scenario.display(),
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_results_directory_that_cannot_keep_the_results_is_refused_before_any_load() {
    // A tmpfs mounted in a mount namespace of the test's own: root only
    // (as CI runs); elsewhere there is no full or read-only disk to try.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a small or read-only tmpfs needs root");
        return;
    }
    let (addr, connections) = support::misbehaving_server(Misbehaviour::Unavailable);
    let dir = support::scratch_dir("trust-disk");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "name: disk\ntarget: {{base_url: \"http://{addr}\"}}\nrequests: {{a: {{path: /}}}}\n"
        ),
    )
    .unwrap();
    for (options, said) in [
        ("size=64k", "KiB free and a run needs at least 16 MiB"),
        ("ro", "read-only filesystem"),
    ] {
        let (code, stdout, stderr) = run_on_tmpfs(&s, options);
        assert_eq!(code, Some(3), "{options}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(said) && stderr.contains("--out"),
            "{options}: {stderr}"
        );
        // Nothing half-written, and not one request sent.
        assert!(stdout.contains("left: []"), "{options}: {stdout}");
    }
    assert_eq!(connections.load(std::sync::atomic::Ordering::Relaxed), 0);
}
