//! Load from workers on other hosts (`autoperf worker`, `--workers`).
//! Network namespaces play the hosts — the target, the controller and each
//! worker in a namespace of its own, joined by a bridge (see
//! support/netns.rs) — and every merged figure is held against what the
//! target itself counted. Bounded levels of a few seconds; nothing leaves
//! the namespaces and loopback.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::counting::{counting_server_on, Seen};
use support::netns::Hosts;

const TOKEN: &str = "workers-test-token-0123456789abcdef";
const PORT: u16 = 7420;

fn write_token(dir: &Path) -> PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    path
}

/// Starts `autoperf worker` in `host`, named after it, and waits until it
/// listens; returns its address.
fn start_worker(hosts: &mut Hosts, host: &str, token: &Path) -> String {
    let addr = format!("{}:{PORT}", hosts.addr(host));
    // CI runs this once more with the static binary the image ships.
    let exe = std::env::var_os("AUTOPERF_WORKER_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(support::autoperf_exe);
    let child = hosts.spawn(
        host,
        &exe,
        &[
            "worker",
            "--listen",
            &addr,
            "--token-file",
            token.to_str().unwrap(),
            "--name",
            host,
        ],
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "worker {host} said {line:?}");
    addr
}

/// The counting server inside `host`, on port 8080.
fn target(hosts: &Hosts, host: &str) -> (String, Arc<Seen>) {
    let listen = format!("{}:8080", hosts.addr(host));
    let (addr, seen) = hosts
        .enter(host, move || counting_server_on(&listen))
        .join()
        .unwrap();
    (format!("http://{addr}"), seen)
}

fn scenario(dir: &Path, base_url: &str, think: &str) -> String {
    let path = dir.join("workers.yaml");
    std::fs::write(
        &path,
        format!(
            "name: workers\ntarget: {{base_url: \"{base_url}\", timeout: 5s}}\nthink_time: {{exponential: {think}}}\n\
             requests:\n  hello: {{path: /hello}}\n\
             session: {{start: hello, transitions: {{hello: {{hello: 0.9}}}}}}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// Requests the run counted in every second of every level (warm-up
/// included): all it saw answered.
fn counted(out: &Path) -> u64 {
    let text = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "requests").unwrap();
    lines
        .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn three_workers_deliver_a_closed_and_an_open_level_the_target_counts_exactly() {
    let dir = support::scratch_dir("workers-three");
    let token = write_token(&dir);
    let mut hosts = Hosts::new("w3", &["target", "ctl", "w1", "w2", "w3"]);
    let (url, seen) = target(&hosts, "target");
    let workers: Vec<String> = ["w1", "w2", "w3"]
        .iter()
        .map(|w| start_worker(&mut hosts, w, &token))
        .collect();
    let scenario = scenario(&dir, &url, "50ms");
    let exe = support::autoperf_exe();
    // Open: 150 sessions a second of ten requests on average.
    for (i, load) in [["--users", "300"], ["--rate", "150/s"]].iter().enumerate() {
        let out = dir.join(format!("out{i}"));
        let before = seen.requests.load(Ordering::Relaxed);
        let (code, stdout, stderr) = hosts.run(
            "ctl",
            &exe,
            &[
                "run",
                &scenario,
                load[0],
                load[1],
                "--duration",
                "5s",
                "--warmup",
                "1s",
                "--workers",
                &workers.join(","),
                "--worker-token-file",
                token.to_str().unwrap(),
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(
            code,
            Some(0),
            "{load:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let run = support::run_json(&out);
        let level = &run["levels"][0];
        assert_eq!(level["errors"], 0, "{level:#}");
        let shares = level["workers"].as_array().unwrap();
        let names: Vec<&str> = shares.iter().map(|w| w["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["w1", "w2", "w3"], "{level:#}");
        if i == 0 {
            let users: u64 = shares
                .iter()
                .map(|w| w["connections"].as_u64().unwrap())
                .sum();
            assert_eq!(users, 300, "{shares:?}");
        }
        for w in shares {
            // One machine, one monotonic clock: the true offset is 0, and
            // the estimate (the worker read its clock halfway through the
            // fastest round trip) is off by at most half that trip.
            let offset = w["clock_offset_ms"].as_f64().unwrap();
            let rtt = w["rtt_ms"].as_f64().unwrap();
            assert!(offset.abs() <= rtt / 2.0 + 0.001, "{w}");
        }
        // Each worker's timer lateness is kept apart, and the level's is
        // their merge: its latest timer is one of theirs.
        let kind = ["timer_lateness_ms", "arrival_lateness_ms"][i];
        let latest = shares
            .iter()
            .map(|w| w[kind]["max"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert_eq!(
            level["client"][kind]["max"].as_f64(),
            Some(latest),
            "{level:#}"
        );
        // What the target answered is what the run counted, give or take
        // the requests still in flight when the level ended.
        let served = seen.requests.load(Ordering::Relaxed) - before;
        let counted = counted(&out);
        let in_flight = 300;
        assert!(
            counted <= served && served <= counted + in_flight,
            "{load:?}: target served {served}, run counted {counted}"
        );
        assert!(counted > 1000, "{load:?}: {counted}");
        // The p99 comes from the merged histograms: it is one of them.
        assert!(level["response_time_ms"]["p99"].as_f64().unwrap() > 0.0);
        // The closed users' tallies of their completions came from every
        // worker and merged (they give the throughput's interval); an open
        // level's arrivals are no users', its interval is by batches.
        let ci = &level["ci95"];
        assert_eq!(ci["throughput_from"], ["users", "batches"][i], "{ci}");
        assert!(ci["throughput_rps"].as_f64().unwrap() > 0.0, "{ci}");
    }
    // Only the workers loaded the target; the controller sent it nothing.
    let peers = seen.peers.lock().unwrap().clone();
    let want: std::collections::BTreeSet<std::net::IpAddr> = ["w1", "w2", "w3"]
        .iter()
        .map(|w| std::net::IpAddr::V4(hosts.addr(w)))
        .collect();
    assert_eq!(peers, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_worker_killed_mid_level_is_named_and_its_level_runs_again_when_it_is_back_or_ends_the_analysis(
) {
    let dir = support::scratch_dir("workers-kill");
    let token = write_token(&dir);
    let mut hosts = Hosts::new("wk", &["target", "ctl", "w1", "w2"]);
    let (url, _seen) = target(&hosts, "target");
    let workers: Vec<String> = ["w1", "w2"]
        .iter()
        .map(|w| start_worker(&mut hosts, w, &token))
        .collect();
    let scenario = scenario(&dir, &url, "50ms");
    let out = dir.join("out");
    let exe = support::autoperf_exe();
    let began = Instant::now();
    let out_arg = out.to_str().unwrap().to_string();
    let token_arg = token.to_str().unwrap().to_string();
    let list = workers.join(",");
    hosts.spawn(
        "ctl",
        &exe,
        &[
            "capacity",
            &scenario,
            "--levels",
            "20,40,60",
            "--duration",
            "6s",
            "--workers",
            &list,
            "--start-workers",
            "2",
            "--worker-token-file",
            &token_arg,
            "--no-agents",
            "--quiet",
            "--out",
            &out_arg,
        ],
    );
    // Waits until `kept` levels are on disk and a few seconds of the next
    // have run.
    let levels = out.join("levels.jsonl");
    let into_level_after = |kept: usize| {
        while std::fs::read_to_string(&levels)
            .map(|t| t.lines().count())
            .unwrap_or(0)
            < kept
        {
            assert!(
                began.elapsed() < Duration::from_secs(120),
                "level {kept} never ended"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(4));
    };
    // SAFETY: kill(2) on a worker process this test started.
    let kill = |pid: u32| unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // w2 dies in the second level and comes back on its address, as a
    // StatefulSet's pod does: the level runs again on both.
    into_level_after(1);
    kill(hosts.pid("w2"));
    std::thread::sleep(Duration::from_secs(1));
    start_worker(&mut hosts, "w2", &token);
    // w1 dies in the third and stays away: a level on w2 alone is fewer
    // workers than --min-workers (every one listed), so that level stands
    // incomplete and ends the analysis.
    into_level_after(2);
    kill(hosts.pid("w1"));
    let status = hosts.wait("ctl", Duration::from_secs(90));
    assert!(began.elapsed() < Duration::from_secs(180));
    let run = support::run_json(&out);
    assert_eq!(
        status,
        Some(4),
        "measured nothing trustworthy at the end: {run:#}"
    );
    let levels = run["levels"].as_array().unwrap();
    let users: Vec<u64> = levels
        .iter()
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, [20, 40, 60], "{run:#}");
    // The first two stand, the second measured again on both workers.
    for l in &levels[..2] {
        assert!(l["incomplete"].is_null() && l["invalid"].is_null(), "{l}");
    }
    assert_eq!(levels[1]["level"], 3, "{run:#}");
    let on: Vec<&str> = levels[1]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(on, ["w1", "w2"], "{run:#}");
    assert!(levels[1]["capacity"]["reason"]
        .as_str()
        .unwrap()
        .contains("worker was lost"));
    // The level that lost w2 is kept, superseded, and says what it lost.
    let superseded = run["superseded"].as_array().unwrap();
    assert_eq!(superseded.len(), 1, "{run:#}");
    assert_eq!(superseded[0]["users"], 40);
    let lost = superseded[0]["incomplete"].as_str().unwrap();
    assert!(
        lost.contains("worker w2") && lost.contains("lost"),
        "{lost}"
    );
    assert!(!superseded[0]["invalid"].is_null());
    // The last loss left too few workers to run it again: incomplete,
    // invalid, and the warnings say why and the fix.
    let lost = levels[2]["incomplete"].as_str().unwrap();
    assert!(
        lost.contains("worker w1") && lost.contains("lost"),
        "{lost}"
    );
    assert_eq!(run["analysis"]["stop_reason"], "invalid_level");
    let warnings = run["warnings"].to_string();
    for want in [
        "running it again as level 3",
        "not run again: 1 worker answered within 30 s, --min-workers asks for 2",
        "NOT TRUSTWORTHY — incomplete",
    ] {
        assert!(warnings.contains(want), "{want:?} not in {warnings}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_worker_refuses_a_controller_without_its_token_or_of_another_protocol() {
    let dir = support::scratch_dir("workers-refuse");
    let token = write_token(&dir);
    let (addr, _seen) = support::counting::counting_server();
    let scenario = scenario(&dir, &format!("http://{addr}"), "50ms");
    let (worker, listening) = loopback_worker(&["--token-file", token.to_str().unwrap()]);
    // A short run into `out`, through `extra` workers.
    let args = |out: &Path, extra: &[&str]| {
        let mut args: Vec<String> = ["run", &scenario, "--users", "2", "--duration", "1s"]
            .map(String::from)
            .into();
        args.extend(["--quiet".into(), "--out".into(), out.display().to_string()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let run = |extra: &[&str]| {
        let args = args(&dir.join("out"), extra);
        support::autoperf(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (code, _, e) = run(&["--workers", &listening]);
    assert_eq!(code, Some(3), "{e}");
    assert!(
        e.contains("requires a token") && e.contains("--worker-token-file"),
        "{e}"
    );
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "not-the-workers-token-at-all\n").unwrap();
    let (code, _, e) = run(&[
        "--workers",
        &listening,
        "--worker-token-file",
        wrong.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{e}");
    assert!(e.contains("does not match"), "{e}");
    drop(worker);
    // A "worker" of a later release: the controller names both versions.
    let future = TcpListener::bind("127.0.0.1:0").unwrap();
    let future_addr = future.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in future.incoming() {
            let mut stream = stream.unwrap();
            let _ = std::io::Write::write_all(
                &mut stream,
                b"{\"type\":\"greeting\",\"protocol\":\"autoperf-worker\",\"version\":99,\"release\":\"9.9.9\",\"name\":\"future\",\"nonce\":\"00\"}\n",
            );
        }
    });
    let (code, _, e) = run(&["--workers", &future_addr]);
    assert_eq!(code, Some(3), "{e}");
    assert!(e.contains("protocol 99") && e.contains("9.9.9"), "{e}");
    // Ctrl-C while the controller still waits for a worker that has not
    // come up: exit 130, no load sent, no results directory left behind.
    let absent = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = dir.join("never");
    let mut child = std::process::Command::new(support::autoperf_exe())
        .args(args(&out, &["--workers", &absent.to_string()]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let status = support::interrupt(&mut child, Duration::from_secs(20));
    let mut e = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
    assert_eq!(status.code(), Some(130), "{e}");
    assert!(e.contains("interrupted while waiting for workers"), "{e}");
    assert!(!out.join("run.json").exists());
    // Off loopback, a worker will not listen without a token, nor with
    // one too short to be a secret: bad input, exit 2.
    let (code, _, e) = support::autoperf(&["worker", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("--token-file"), "{e}");
    let short = dir.join("short-token");
    std::fs::write(&short, "short\n").unwrap();
    let (code, _, e) = support::autoperf(&["worker", "--token-file", short.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("16"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Strangers trickling one byte every second over 200 connections (and
/// reconnecting when the worker closes one) held every slot before the
/// hello, and a controller with the token was locked out for as long as
/// the trickle lasted. Now each has a deadline from its first moment and a
/// newcomer takes the place of the oldest stranger: the controller gets
/// in while the trickle goes on. (When a stranger's newcomer took the
/// controller's own place mid-handshake, it failed the level: it tries
/// again now, `pool.rs`.)
#[test]
fn strangers_trickling_bytes_cannot_keep_a_controller_with_the_token_out() {
    let dir = support::scratch_dir("workers-slowloris");
    let token = write_token(&dir);
    let (addr, seen) = support::counting::counting_server();
    let scenario = scenario(&dir, &format!("http://{addr}"), "50ms");
    let (_worker, listening) = loopback_worker(&["--token-file", token.to_str().unwrap()]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let (stop, listening) = (stop.clone(), listening.clone());
        std::thread::spawn(move || {
            let connect = || std::net::TcpStream::connect(&listening).ok();
            let mut strangers: Vec<_> = (0..200).filter_map(|_| connect()).collect();
            let mut reconnects = 0u32;
            // Bounded: at most two minutes, however the test goes.
            let until = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                for s in strangers.iter_mut() {
                    if std::io::Write::write_all(s, b"{").is_err() {
                        if let Some(fresh) = connect() {
                            *s = fresh;
                            reconnects += 1;
                        }
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            reconnects
        })
    };
    // The strangers are in before the controller comes.
    std::thread::sleep(Duration::from_secs(2));
    let out = dir.join("out");
    let began = Instant::now();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &scenario,
        "--users",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--quiet",
        "--workers",
        &listening,
        "--worker-token-file",
        token.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    let reconnects = trickler.join().unwrap();
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(seen.requests.load(Ordering::Relaxed) > 0);
    // Locked out, it would have waited out the whole trickle (two
    // minutes) and then its own 120 s; admitted, it ran its 1 s level.
    assert!(took < Duration::from_secs(60), "took {took:?}");
    // The door was full: strangers were closed to make room.
    assert!(reconnects > 0, "no stranger was ever closed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CA named `ca` and, signed by it, a certificate for 127.0.0.1 and its
/// key: PEM.
fn worker_pki(ca: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.distinguished_name.push(DnType::CommonName, ca);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// A child process killed when the test ends, passed or not.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a loopback worker with `extra` arguments; returns it and its
/// address.
fn loopback_worker(extra: &[&str]) -> (Reaped, String) {
    let mut worker = std::process::Command::new(support::autoperf_exe())
        .args(["worker", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(worker.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let listening = line
        .split_whitespace()
        .nth(4)
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (Reaped(worker), listening)
}

#[test]
fn a_worker_with_a_certificate_speaks_tls_and_a_controller_without_its_ca_is_told() {
    let dir = support::scratch_dir("workers-tls");
    let token = write_token(&dir);
    let (ca, cert, key) = worker_pki("autoperf workers CA");
    let (other_ca, _, _) = worker_pki("another CA");
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (ca, cert, key, other_ca) = (
        file("ca.pem", &ca),
        file("cert.pem", &cert),
        file("key.pem", &key),
        file("other-ca.pem", &other_ca),
    );
    let (addr, seen) = support::counting::counting_server();
    let scenario = scenario(&dir, &format!("http://{addr}"), "50ms");
    let token = token.to_str().unwrap();
    let (_worker, tls_worker) = loopback_worker(&[
        "--token-file",
        token,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    let (_plain, plain_worker) = loopback_worker(&["--token-file", token]);
    let out = dir.join("out");
    let run = |worker: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            &scenario,
            "--users",
            "5",
            "--duration",
            "2s",
            "--warmup",
            "0s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
            "--workers",
            worker,
            "--worker-token-file",
            token,
        ];
        args.extend_from_slice(extra);
        support::autoperf(&args)
    };
    // With the CA: the level runs over TLS and is counted as ever.
    let before = seen.requests.load(Ordering::Relaxed);
    let (code, o, e) = run(&tls_worker, &["--worker-ca-file", &ca]);
    assert_eq!(code, Some(0), "{o}{e}");
    let served = seen.requests.load(Ordering::Relaxed) - before;
    let counted = counted(&out);
    assert!(
        counted > 50 && counted <= served && served <= counted + 5,
        "target served {served}, run counted {counted}"
    );
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["workers"].as_array().unwrap().len(), 1, "{level:#}");
    // A CA that did not sign the worker's certificate.
    let (code, _, e) = run(&tls_worker, &["--worker-ca-file", &other_ca]);
    assert_eq!(code, Some(3), "{e}");
    assert!(
        e.contains("not signed by a trusted CA") && e.contains("--worker-ca-file"),
        "{e}"
    );
    // TLS to a worker that does not speak it.
    let (code, _, e) = run(&plain_worker, &["--worker-ca-file", &ca]);
    assert_eq!(code, Some(3), "{e}");
    assert!(
        e.contains("does not speak TLS") && e.contains("--tls-cert"),
        "{e}"
    );
    // No TLS to a worker that speaks only TLS: it says nothing, and the
    // controller says why (after its 10 s handshake timeout).
    let (code, _, e) = run(&tls_worker, &[]);
    assert_eq!(code, Some(3), "{e}");
    assert!(
        e.contains("sent no greeting") && e.contains("--worker-ca-file"),
        "{e}"
    );
    // Half a certificate is refused before it listens.
    let (code, _, e) = support::autoperf(&["worker", "--tls-cert", &cert]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("--tls-key"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tests that measure a CPU limit: `scripts/test.sh` runs them one at a
/// time, with nothing beside them.
mod alone {
    use super::*;

    #[test]
    fn a_capacity_analysis_whose_worker_is_the_bottleneck_scales_out_to_another() {
        let _alone = support::alone();
        let dir = support::scratch_dir("workers-scale");
        let token = write_token(&dir);
        let mut hosts = Hosts::new("ws", &["target", "ctl", "w1", "w2"]);
        let (url, _seen) = target(&hosts, "target");
        let workers: Vec<String> = ["w1", "w2"]
            .iter()
            .map(|w| start_worker(&mut hosts, w, &token))
            .collect();
        let scenario = scenario(&dir, &url, "100ms");
        let exe = support::autoperf_exe();
        let common = |out: &Path| -> Vec<String> {
            [
                "--worker-token-file",
                token.to_str().unwrap(),
                "--no-agents",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ]
            .map(String::from)
            .into()
        };
        // What the generator costs on this machine, measured on w1 before it
        // is throttled: machines of this kind differ threefold in speed (300
        // users took 0.33 cores on one, under 0.1 on another), so no fixed
        // number of users starves a fixed quota everywhere.
        let calibration = dir.join("calibration");
        let mut args: Vec<String> = [
            "run",
            &scenario,
            "--users",
            "300",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--workers",
            &workers[0],
        ]
        .map(String::from)
        .into();
        args.extend(common(&calibration));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, o, e) = hosts.run("ctl", &exe, &args);
        assert_eq!(code, Some(0), "{o}{e}");
        let level = &support::run_json(&calibration)["levels"][0];
        let cpu_300 = level["client"]["cpu_util_cores"].as_f64().unwrap();
        assert!(cpu_300 > 0.0, "{level:#}");
        // w1 gets a tenth of a core (a CPU limit of 100m, the least a 10 ms
        // period grants), and the analysis a level that needs three times
        // that: the users that cost 0.3 cores here, at least 300.
        let quota = 0.1;
        let users = ((300.0 * 3.0 * quota / cpu_300).ceil() as u32).clamp(300, 3000);
        eprintln!("300 users took {cpu_300:.3} cores of w1: {users} users need 3 × {quota}");
        let throttle = support::quota::CpuQuota::new(quota);
        throttle.add(hosts.pid("w1"));
        let levels_arg = format!("5,{users}");
        let analysis = |list: &str, out: &Path| {
            let mut args: Vec<String> = [
                "capacity",
                &scenario,
                "--levels",
                &levels_arg,
                "--duration",
                "4s",
                "--workers",
                list,
            ]
            .map(String::from)
            .into();
            args.extend(common(out));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            hosts.run("ctl", &exe, &args)
        };
        // On w1 alone the generator limits the analysis: at the big level
        // surely (a third of the CPU it needs), and a throttled worker's first
        // level is sometimes flagged already (its quota's stalls make a few
        // timers late). Either way the analysis stops at a level it could not
        // load.
        let alone = dir.join("alone");
        let (code, o, e) = analysis(&workers[0], &alone);
        assert_eq!(code, Some(0), "{o}{e}");
        let run = support::run_json(&alone);
        let levels = run["levels"].as_array().unwrap();
        let limited = levels.last().unwrap();
        assert_eq!(limited["client_bottleneck"], true, "{run:#}");
        assert!(run["superseded"].as_array().is_none_or(|s| s.is_empty()));
        // On one worker, its lateness is the level's; when its timers were
        // late past scheduling noise, the warning names it.
        let own = &limited["workers"][0]["timer_lateness_ms"];
        assert_eq!(own, &limited["client"]["timer_lateness_ms"], "{limited:#}");
        if own["p99"].as_f64().unwrap() > 10.0 {
            assert!(
                run["warnings"]
                    .to_string()
                    .contains("timers late on w1 (p99"),
                "{:#}",
                run["warnings"]
            );
        }
        // Its quota held it back, and the warning says so by name: the
        // response times of a held-back worker count time it could not run.
        let w1 = &limited["workers"][0];
        assert!(w1["quota_throttled_periods"].as_u64() > Some(0), "{w1:#}");
        assert!(
            run["warnings"]
                .to_string()
                .contains("w1 held back by its CPU quota in"),
            "{:#}",
            run["warnings"]
        );
        // With w2 in the pool, the limited level runs again on both, and the
        // analysis goes on to complete with nothing limited.
        let out = dir.join("pool");
        let (code, o, e) = analysis(&workers.join(","), &out);
        assert_eq!(code, Some(0), "{o}{e}");
        let run = support::run_json(&out);
        let superseded = run["superseded"].as_array().unwrap();
        assert_eq!(superseded.len(), 1, "{run:#}");
        assert_eq!(superseded[0]["client_bottleneck"], true);
        assert_eq!(superseded[0]["workers"].as_array().unwrap().len(), 1);
        let levels = run["levels"].as_array().unwrap();
        assert_eq!(levels.len(), 2, "{run:#}");
        let ran: Vec<u64> = levels
            .iter()
            .map(|l| l["users"].as_u64().unwrap())
            .collect();
        assert_eq!(ran, [5, u64::from(users)], "{run:#}");
        let again = levels
            .iter()
            .find(|l| l["users"] == superseded[0]["users"])
            .unwrap();
        assert!(
            again["level"].as_u64() > superseded[0]["level"].as_u64(),
            "a new index for the re-run: {run:#}"
        );
        // The throttled worker's share follows its CPU (a tenth of a core
        // beside w2's two), not its cores (which would give it half).
        let last = &levels[1];
        let shares = last["workers"].as_array().unwrap();
        assert_eq!(shares.len(), 2, "{last:#}");
        assert!(shares[0]["cpu"].as_f64().unwrap() < 0.15, "{shares:?}");
        assert!(shares[0]["quota_periods"].as_u64() > Some(0), "{shares:?}");
        assert!(shares[1]["quota_periods"].is_null(), "{shares:?}");
        assert!(
            shares[0]["connections"].as_u64().unwrap() < u64::from(users) / 10,
            "{shares:?}"
        );
        assert_eq!(last["client_bottleneck"], false, "{last:#}");
        assert_eq!(run["analysis"]["stop_reason"], "completed");
        assert!(run["warnings"]
            .to_string()
            .contains("running it again on 2"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
