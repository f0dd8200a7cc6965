//! `autoperf capacity` against the testbed, with costs known by
//! construction: it must find the saturation throughput and `N*` of a CPU
//! bottleneck by itself, find a non-CPU bottleneck's knee, refuse to
//! take a starved generator for the server's limit, and resume.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `autoperf capacity` of a non-CPU bottleneck: a global lock held 5 ms
/// per request, X_max = 200/s whatever the CPU, the knee near 41 users.
/// The testbed, stdout, the results directory and run.json.
pub(crate) fn lock_bottleneck_analysis(
    name: &str,
) -> (
    autoperf_testbed::Testbed,
    String,
    PathBuf,
    serde_json::Value,
) {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir(name);
    let s = write(
        &dir,
        "lock.yaml",
        &format!(
            r#"
name: lock-bottleneck
target: {{base_url: "{}", timeout: 30s}}
think_time: 200ms
requests:
  lock: {{method: POST, path: "/lock?ms=5"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}]}}
capacity: {{min_duration: 5s, window: 2s, max_duration: 8s, p_max: 5}}
"#,
            tb.web_url,
            a = agent.url(),
            web = tb.web_process,
        ),
    );
    let out = dir.join("out");
    let (code, stdout, stderr) =
        support::autoperf(&["capacity", &s, "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}");
    let run = support::run_json(&out);
    (tb, stdout, out, run)
}

#[test]
fn a_non_cpu_bottleneck_is_found_and_the_cpu_model_disowns_it() {
    let (_tb, stdout, out, run) = lock_bottleneck_analysis("cap-lock");
    let a = &run["analysis"];
    // The paper's overload machine may confirm overload past the knee, or
    // the model's search confirm the plateau first. Beside other tests the
    // generator may also be flagged — rightly — at a level past the knee
    // (CI: at 130 users, think time 3.5% long, the plateau of 191/s found
    // at 100): the analysis still measured the knee before it.
    // (CI, beside the others: flagged at 48 users after levels 1, 198 and
    // 38 — past the knee of 41, which 38 had measured.)
    const KNEE_USERS: u64 = (200 + 5) / 5;
    let generator_after_knee = a["stop_reason"] == "client_bottleneck"
        && a["first_client_bottleneck_users"]
            .as_u64()
            .is_some_and(|u| u > KNEE_USERS);
    // A failure shows each level's witnesses of its generator.
    let client_figures: Vec<String> = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} users: {} req, think {}, client {}",
                l["users"], l["requests"], l["think_time_s"], l["client"]
            )
        })
        .collect();
    assert!(
        a["stop_reason"] == "overload" || a["stop_reason"] == "completed" || generator_after_knee,
        "{a}\n{}",
        client_figures.join("\n")
    );
    let x = a["max_throughput_rps"].as_f64().unwrap();
    // Nothing beats the lock's 200/s. Each hand-over of the lock from one
    // request to the next adds to the 5 ms, more on a busy machine (the
    // tests beside this one): the knee is reached at 60% of it anywhere.
    assert!(
        (120.0..=210.0).contains(&x),
        "max throughput {x}, true 200/s less the lock's hand-overs"
    );
    // The knee (about 41 users) is measured, not jumped over.
    let levels: Vec<u64> = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert!(levels.iter().any(|&u| (25..=60).contains(&u)), "{levels:?}");
    // Named for what it is: not the web tier's CPU (nearly idle) but a
    // station the agents do not see, fitted to the curve: its bound is the
    // plateau measured, and its N* near the knee, not the CPUs' thousands.
    if let Some(h) = a.get("hidden_bottleneck") {
        let bound = h["max_throughput_rps"].as_f64().unwrap();
        assert!((bound - x).abs() <= 0.15 * x, "{h} vs {x} req/s");
        let n_star = a["n_star"].as_f64().unwrap();
        assert!((20.0..=80.0).contains(&n_star), "N* {n_star}: {h}");
        // (The CPUs' own N*, when their demands converged.)
        assert!(
            h["cpu_n_star"].as_f64().is_none_or(|c| c > 4.0 * n_star),
            "{h}"
        );
        assert!(
            h["busiest_cpu"]["utilisation"].as_f64().unwrap() < 0.5,
            "{h}"
        );
        assert!(stdout.contains("bottleneck: not a CPU"), "{stdout}");
    } else {
        // Only when the levels past the knee were too few to show the bend.
        let past = levels.iter().filter(|&&u| u > 60).count();
        assert!(
            past < 2,
            "levels {levels:?} past the knee, no hidden station named: {a}"
        );
    }
    let p = support::json_file(&out.join("prediction.json"));
    let untrusted = p["measured"]
        .as_array()
        .unwrap()
        .iter()
        // A level whose server waited for a CPU (a neighbour had it: CI
        // beside a busy loop per core, web waiting 96% at 436 users) is
        // not the model's to describe.
        .filter(|c| c["model_untrusted"] == true && c.get("short_of_cpu").is_none())
        .count();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    if a.get("hidden_bottleneck").is_some() {
        // The model carries the fitted station: its curve follows the
        // plateau, and it describes every level.
        assert_eq!(
            p["bounds"]["bottleneck"], "hidden station",
            "{}",
            p["bounds"]
        );
        let bound = p["bounds"]["max_throughput_rps"].as_f64().unwrap();
        assert!((bound - x).abs() <= 0.15 * x, "{} vs {x}", p["bounds"]);
        assert_eq!(untrusted, 0, "{}", p["measured"]);
        assert!(stdout.contains("bottleneck hidden station"), "{stdout}");
    } else {
        // The model sees CPU only: where the lock limits throughput, it
        // says it does not describe the system.
        assert!(untrusted > 0, "{p}");
        assert!(stdout.contains("model does not describe"), "{stdout}");
        assert!(html.contains("something the model does not see"));
    }
}

/// Tiers on one host, each free to use all its cores, take turns on the
/// same CPUs: the analysis and the model name one station (`web+db`) and
/// one N*, the host's.
#[test]
fn tiers_sharing_a_hosts_cores_have_one_n_star_and_one_bottleneck() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("cap-shared");
    // Each tier may use every core the agent sees, as an unconfined
    // process may: together they want twice the host.
    let cores = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    let s = write(
        &dir,
        "shared.yaml",
        &format!(
            r#"
target: {{base_url: "{}"}}
think_time: 20ms
requests:
  db: {{path: "/db?web_ms=2&db_ms=1"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}], cores: {cores}}}
  - {{tier: db, agent: "{a}", processes: [{db}], cores: {cores}}}
"#,
            tb.web_url,
            a = agent.url(),
            web = tb.web_process,
            db = tb.db_process,
        ),
    );
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "capacity",
        &s,
        "--levels",
        "2,4",
        "--duration",
        "3s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    let a = &run["analysis"];
    assert_eq!(a["bottleneck"]["tier"], "web+db", "{a}");
    assert!(
        stdout.contains("bottleneck: tiers web+db together"),
        "{stdout}"
    );
    let p = support::json_file(&out.join("prediction.json"));
    assert_eq!(
        p["model"]["shared_hosts"],
        serde_json::json!([["web", "db"]]),
        "{p}"
    );
    assert_eq!(p["bounds"]["bottleneck"], "web+db", "{p}");
    // One N*: the analysis's, from the last level's demands, and the
    // model's, from their median over the levels, agree to their noise.
    let (analysis, model) = (
        a["n_star"].as_f64().unwrap(),
        p["bounds"]["n_star"].as_f64().unwrap(),
    );
    assert!(
        (analysis - model).abs() <= 0.15 * model,
        "N* {analysis} vs the model's {model}"
    );
}

#[test]
fn manual_levels_resume_after_an_interruption_without_repeating_levels() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("cap-resume");
    let s = write(
        &dir,
        "r.yaml",
        &format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  a: {{path: \"/cpu?ms=0.2\"}}\n",
            tb.web_url
        ),
    );
    let out = dir.join("out");
    let out_s = out.to_str().unwrap().to_string();
    // Start 4 levels of 2 s and interrupt (SIGINT, as Ctrl-C) once two are on disk.
    let mut child = std::process::Command::new(support::autoperf_exe())
        .args([
            "capacity",
            &s,
            "--levels",
            "2,4,6,8",
            "--duration",
            "2s",
            "--no-agents",
            "--out",
            &out_s,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = std::fs::read_to_string(out.join("levels.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "levels never appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = support::interrupt(&mut child, Duration::from_secs(60));
    // A clean stop that a script can tell from a finished analysis.
    assert_eq!(status.code(), Some(130), "Ctrl-C exits 130: {status:?}");
    let run = support::run_json(&out);
    assert_eq!(run["analysis"]["stop_reason"], "interrupted");
    let done: Vec<u64> = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["interrupted"] == false)
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert!(done.len() >= 2 && done.len() < 4, "{done:?}");

    // A flag asking for another analysis is refused, naming the plan.
    let (code, _, stderr) = support::autoperf(&[
        "capacity",
        &s,
        "--levels",
        "3,5",
        "--duration",
        "2s",
        "--resume",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--levels 2,4,6,8 --duration 2s --no-agents"),
        "{stderr}"
    );
    // --resume alone continues the plan kept in run.json.
    let (code, _, stderr) = support::autoperf(&["capacity", &s, "--resume", &out_s]);
    assert_eq!(code, Some(0), "{stderr}");
    let run = support::run_json(&out);
    assert_eq!(run["analysis"]["stop_reason"], "completed");
    let mut users: Vec<u64> = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    users.sort();
    assert_eq!(users, [2, 4, 6, 8], "each level once");
}

#[test]
fn a_starved_generator_is_a_client_bottleneck_not_the_servers_capacity() {
    // autoperf held to a tenth of a core; the testbed's /health costs
    // microseconds, so the server has far more capacity than a starved
    // generator can use, on any machine.
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("cap-starved");
    let s = write(
        &dir,
        "starved.yaml",
        &format!(
            r#"
name: starved
target: {{base_url: "{}"}}
think_time: 5ms
requests:
  health: {{path: /health}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}]}}
capacity: {{min_duration: 4s, window: 2s, max_duration: 10s, p_max: 6}}
"#,
            tb.web_url,
            a = agent.url(),
            web = tb.web_process,
        ),
    );
    let out = dir.join("out");
    let output = support::quota::CpuQuota::new(0.1)
        .command(&support::autoperf_exe())
        .args(["capacity", &s, "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    eprintln!("{stdout}");
    let a = &support::run_json(&out)["analysis"];
    assert_eq!(a["stop_reason"], "client_bottleneck", "{a}");
    assert!(a["first_client_bottleneck_users"].is_u64(), "{a}");
    // No saturation point is claimed for the server.
    assert!(a["saturation_users"].is_null(), "{a}");
    assert!(stderr.contains("client bottleneck"), "{stderr}");
    assert!(
        stdout.contains("load generator became the bottleneck"),
        "{stdout}"
    );
}

/// `autoperf capacity` of the testbed's CPU bottleneck: one web worker,
/// 4 ms of web CPU per request, 1 ms on db, Z = 0.5 s, so X_max = 1/4 ms
/// = 250/s and N* = (0.5 + 0.005)/0.004 ≈ 126. The testbed (which must
/// outlive the reading of its process names), stdout, the results
/// directory and run.json.
pub(crate) fn cpu_bottleneck_analysis(
    name: &str,
) -> (
    autoperf_testbed::Testbed,
    String,
    PathBuf,
    serde_json::Value,
) {
    let tb = support::testbed(1);
    let agent = support::agent();
    let dir = support::scratch_dir(name);
    let s = write(
        &dir,
        "cpu.yaml",
        &format!(
            r#"
name: cpu-bottleneck
target: {{base_url: "{}"}}
think_time: 500ms
requests:
  db: {{path: "/db?web_ms=4&db_ms=1"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}], cores: 1}}
  - {{tier: db, agent: "{a}", processes: [{db}], cores: 1}}
capacity: {{min_duration: 4s, window: 2s, max_duration: 9s, p_max: 10, precision: 5%}}
"#,
            tb.web_url,
            a = agent.url(),
            web = tb.web_process,
            db = tb.db_process,
        ),
    );
    let out = dir.join("out");
    let begin = Instant::now();
    let (code, stdout, stderr) =
        support::autoperf(&["capacity", &s, "--out", out.to_str().unwrap()]);
    let took = begin.elapsed();
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}\ntook {took:?}");
    let run = support::run_json(&out);
    (tb, stdout, out, run)
}

/// Tests that measure a CPU limit: `scripts/test.sh` runs them one at a
/// time, with nothing beside them.
mod alone {
    use super::*;

    /// A busy loop pinned to `cpu`, bounded (~30 s) should its guard not
    /// kill it first.
    fn busy_loop_on(cpu: u32) -> support::ChildGuard {
        let child = std::process::Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c"])
            .arg("i=0; while [ $i -lt 20000000 ]; do i=$((i+1)); done")
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("taskset (util-linux)");
        support::ChildGuard(child)
    }

    #[test]
    fn a_web_tier_sharing_its_core_with_a_busy_loop_is_called_short_of_cpu() {
        let _alone = support::alone();
        let tb = support::testbed(1);
        let agent = support::agent();
        let dir = support::scratch_dir("short-of-cpu");
        // Every thread of the web tier on CPU 0, and a busy loop beside it:
        // with its 8 users it always has work, so whenever the loop runs
        // it waits.
        let pinned = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &tb.web_pid.to_string()])
            .output()
            .unwrap();
        assert!(pinned.status.success(), "{pinned:?}");
        let _loop = busy_loop_on(0);
        let s = write(
            &dir,
            "short.yaml",
            &format!(
                r#"
name: short-of-cpu
target: {{base_url: "{}"}}
think_time: 0s
requests:
  db: {{path: "/db?web_ms=4&db_ms=0"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}]}}
"#,
                tb.web_url,
                a = agent.url(),
                web = tb.web_process,
            ),
        );
        let out = dir.join("out");
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            &s,
            "--users",
            "8",
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        let run = support::run_json(&out);
        let web = &run["levels"][0]["servers"]["web"];
        let share = web["cpu_wait_share_per_process"][&tb.web_process]
            .as_f64()
            .unwrap();
        // Two threads wanting one CPU: each waits about half its ready time.
        assert!(share >= 0.3, "{web}");
        assert!(
            stderr.contains("the servers were short of CPU")
                && stderr.contains(&format!("{} waited for a CPU", tb.web_process)),
            "{stderr}"
        );
        assert!(
            run["warnings"].to_string().contains("short of CPU"),
            "{}",
            run["warnings"]
        );
    }

    #[test]
    fn finds_the_cpu_bottleneck_by_itself() {
        let _alone = support::alone();
        let (tb, stdout, out, run) = cpu_bottleneck_analysis("cap-cpu");
        let a = &run["analysis"];
        assert_eq!(a["stop_reason"], "completed", "{a}");
        assert_eq!(a["bottleneck"]["tier"], "web", "{a}");
        assert_eq!(a["bottleneck"]["process"], tb.web_process.as_str(), "{a}");
        // N* comes from the measured demands, CPU time per request: the same
        // on any machine, however busy (4 ms burned, plus the tier's own work).
        let n_star = a["n_star"].as_f64().unwrap();
        assert!(
            (n_star - 126.0).abs() <= 0.2 * 126.0,
            "N* {n_star}, true ≈ 126"
        );
        // The throughput the web tier allows is 1/D of the demand this run
        // measured there. Nothing beats it; and the analysis reached it: at
        // the best level the tier's worker was ready to run (running, or
        // waiting for a CPU the machine gave another) at least 60% of the
        // time. Its busy share alone is no measure beside a neighbour: a busy
        // loop on each core held it to 58% of its core (148 req/s for 257)
        // while it was never idle (bench/capacity-vs-sweep.sh records how
        // close to 250/s a quiet machine comes).
        let levels = run["levels"].as_array().unwrap();
        let x = a["max_throughput_rps"].as_f64().unwrap();
        let best = levels
            .iter()
            .find(|l| l["throughput_rps"].as_f64() == Some(x))
            .expect("the level of the highest throughput");
        let web = &best["servers"]["web"];
        let d_ms = web["cpu_ms_per_request"][&tb.web_process].as_f64().unwrap();
        let limit = 1000.0 / d_ms;
        let busy = web["cpu_util_cores_per_process"][&tb.web_process]
            .as_f64()
            .unwrap();
        let waiting = web["cpu_wait_share_per_process"][&tb.web_process]
            .as_f64()
            .unwrap_or(0.0);
        let ready = busy / (1.0 - waiting).max(0.05);
        assert!(
            x <= 1.05 * limit && ready >= 0.6,
            "max throughput {x} req/s, the web tier's 1 core allows {limit} at {d_ms} ms; its worker was busy {busy} of its core and waited for a CPU {waiting} of its ready time: ready {ready}"
        );
        // A level ends early only once steady; one the machine kept from
        // settling runs to max_duration and says so.
        for l in levels {
            let ran = l["warmup_s"].as_f64().unwrap() + l["duration_s"].as_f64().unwrap();
            assert!(l["steady_state"] == true || ran >= 9.0, "{l}");
            // And only once its figure is precise (`capacity.precision`,
            // 3% by default, 5% here to keep the suite short): its
            // throughput's 95% interval, or with fewer than 5 users its
            // mean cycle's (R + Z).
            if l["duration_s"].as_f64().unwrap() < 9.0 - 0.5 {
                let ci = &l["ci95"];
                let precision = if l["users"].as_u64().unwrap() >= 5 {
                    ci["throughput_rps"].as_f64().unwrap() / l["throughput_rps"].as_f64().unwrap()
                } else {
                    let r = l["response_time_ms"]["mean"].as_f64().unwrap();
                    ci["response_time_ms"]["mean"].as_f64().unwrap() / (r + 500.0)
                };
                assert!(
                    precision <= 0.0501,
                    "ended at ±{precision} before max_duration: {l}"
                );
            }
        }
        assert!(stdout.contains("saturation point") && stdout.contains("bottleneck: tier web"));
        // levels.jsonl holds the same levels, one per line.
        let lines = std::fs::read_to_string(out.join("levels.jsonl")).unwrap();
        assert_eq!(lines.lines().count(), levels.len());
        // The queueing model of the measured demands, set against the curve
        // (on by default when the agents measured demands).
        let p = support::json_file(&out.join("prediction.json"));
        assert_eq!(p["bounds"]["bottleneck"], "web", "{p}");
        let measured = p["measured"].as_array().unwrap();
        assert_eq!(measured.len(), levels.len());
        // Below N*, on the levels whose servers had their CPU, the model
        // fits: the median level within 10%. A neighbour can only take
        // throughput away, so a level it disturbed without the agent seeing
        // it (the generator's CPU, the cache) measures below the model, never
        // above: the median leaves such a level out, and no level may beat
        // the model by more than a level's noise.
        let below_n_star: Vec<&serde_json::Value> = measured
            .iter()
            .filter(|c| c["users"].as_f64().unwrap() < 0.9 * n_star)
            .collect();
        assert!(below_n_star.len() >= 2, "too few levels below N*: {p}");
        let below: Vec<f64> = below_n_star
            .iter()
            .filter(|c| c.get("short_of_cpu").is_none())
            .map(|c| c["throughput_error"].as_f64().unwrap())
            .collect();
        if below.is_empty() {
            // Beside a busy loop on each core (CI), every level but the
            // first user's waited for its CPU (web 42% of its ready time):
            // nothing to judge the model on, and the summary says why.
            assert!(
                run["warnings"].to_string().contains("waited for a CPU"),
                "{}",
                run["warnings"]
            );
        } else {
            let mut sizes: Vec<f64> = below.iter().map(|e| e.abs()).collect();
            sizes.sort_by(f64::total_cmp);
            let median = sizes[(sizes.len() - 1) / 2];
            assert!(
                median < 0.10,
                "median throughput error {median} below N*: {p}"
            );
            assert!(
                below.iter().all(|&e| e > -0.10),
                "a level beat the model by more than 10%: {p}"
            );
        }
        assert!(stdout.contains("model vs measured: RMS error"), "{stdout}");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<h2>Queueing model</h2>") && html.contains("line s3 dashed"));
    }
}
