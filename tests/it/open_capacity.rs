//! `autoperf capacity` on an open workload, end to end against the testbed:
//! the highest arrival rate meeting the SLOs, the generator's own limit
//! told apart from the system's, and Theodolite's scalability benchmark
//! with `--vary` restarting the testbed between series.

use crate::support;

use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// The levels' rates and verdicts, for messages.
pub(crate) fn levels(run: &serde_json::Value) -> String {
    run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            // The generator's side too: a verdict that surprises on CI is
            // read from what the client saw there.
            let c = &l["client"];
            format!(
                "{}/s {} (p99 {} ms, delivered {}/s; generator {} cores, \
                 late max {} ms, quota held {} of {} periods for {} ms)",
                l["rate_rps"],
                l["rate_search"]["verdict"],
                l["response_time_ms"]["p99"],
                l["rate_search"]["delivered_rps"],
                c["cpu_util_cores"],
                c["arrival_lateness_ms"]["max"],
                c["cpu_quota"]["throttled_periods"],
                c["cpu_quota"]["periods"],
                c["cpu_quota"]["throttled_ms"],
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_failing_apply_command_ends_with_exit_3_and_says_why() {
    let dir = support::scratch_dir("open-apply-fails");
    let s = write(
        &dir,
        "s.yaml",
        "name: s\ntarget: {base_url: \"http://127.0.0.1:9\"}\narrivals: {rate: 10/s}\nrequests: {a: {path: /}}\n",
    );
    let (code, _, stderr) = support::autoperf(&[
        "capacity",
        &s,
        "--vary",
        "w=1,2",
        "--apply",
        "echo no such system >&2; exit 4",
        "--quiet",
    ]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("w=1") && stderr.contains("failed"),
        "{stderr}"
    );
    // --vary without --apply is a usage error.
    let (code, _, stderr) = support::autoperf(&["capacity", &s, "--vary", "w=1,2"]);
    assert_eq!(code, Some(2), "{stderr}");
}

#[test]
fn an_interrupted_open_search_resumes_where_it_stopped() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("open-resume");
    let s = write(
        &dir,
        "r.yaml",
        &format!(
            r#"
name: open-resume
target: {{base_url: "{}"}}
arrivals: {{rate: 50/s, spacing: even}}
requests:
  lock: {{method: POST, path: "/lock?ms=4"}}
thresholds: ["p99 < 100ms"]
capacity: {{min_duration: 3s, window: 1s, max_duration: 8s, rate_precision: 5%}}
"#,
            tb.web_url
        ),
    );
    let out = dir.join("out");
    let out_s = out.to_str().unwrap().to_string();
    let mut child = std::process::Command::new(support::autoperf_exe())
        .args(["capacity", &s, "--quiet", "--out", &out_s])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt (SIGINT, as Ctrl-C) once three levels are on disk.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let n = std::fs::read_to_string(out.join("levels.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "levels never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = support::interrupt(&mut child, std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    let run = support::run_json(&out);
    assert_eq!(run["analysis"]["stop_reason"], "interrupted");
    let rates = |run: &serde_json::Value| -> Vec<f64> {
        run["levels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["interrupted"] == false)
            .map(|l| l["rate_rps"].as_f64().unwrap())
            .collect()
    };
    let before = rates(&run);
    assert!(before.len() >= 3, "{before:?}");

    // --resume alone: the search is replayed from the levels on disk.
    let (code, stdout, stderr) = support::autoperf(&["capacity", &s, "--resume", &out_s]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    assert_eq!(
        run["analysis"]["stop_reason"],
        "completed",
        "{}",
        levels(&run)
    );
    let after = rates(&run);
    assert_eq!(after[..before.len()], before[..], "{after:?}");
    // No finished level is run again.
    let mut sorted = after.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    assert_eq!(sorted.len(), after.len(), "{after:?}");
    // The lock held 4 ms allows 250/s at most, and the resumed search
    // bracketed its limit to the precision asked.
    let pass = run["analysis"]["max_passing_rate_rps"].as_f64().unwrap();
    let fail = run["analysis"]["first_failing_rate_rps"].as_f64().unwrap();
    assert!(pass <= 262.5, "{pass}\n{}", levels(&run));
    assert!(
        fail > pass && fail - pass <= 0.05 * fail + 1e-9,
        "{pass} {fail}"
    );
}

/// `autoperf capacity` of an open workload on one web worker burning 4 ms
/// per request (at most 250 requests/s; evenly spaced arrivals queue only
/// past that) held to `p99 < 100ms`. The testbed, stdout, the results
/// directory and run.json.
pub(crate) fn open_cpu_search(
    name: &str,
) -> (
    autoperf_testbed::Testbed,
    String,
    std::path::PathBuf,
    serde_json::Value,
) {
    open_cpu_search_held_to(name, "p99 < 100ms")
}

/// `open_cpu_search` held to the SLO `slo` instead.
fn open_cpu_search_held_to(
    name: &str,
    slo: &str,
) -> (
    autoperf_testbed::Testbed,
    String,
    std::path::PathBuf,
    serde_json::Value,
) {
    let tb = support::testbed(1);
    let agent = support::agent();
    let dir = support::scratch_dir(name);
    let s = write(
        &dir,
        "open.yaml",
        &format!(
            r#"
name: open-cpu
target: {{base_url: "{}"}}
arrivals: {{rate: 50/s, spacing: even}}
requests:
  cpu: {{path: "/cpu?ms=4"}}
thresholds: ["{slo}"]
servers:
  - {{tier: web, agent: "{}", processes: [{}], cores: 1}}
capacity: {{min_duration: 3s, window: 1s, max_duration: 12s}}
"#,
            tb.web_url,
            agent.url(),
            tb.web_process
        ),
    );
    let out = dir.join("out");
    let (code, stdout, stderr) =
        support::autoperf(&["capacity", &s, "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    (tb, stdout, out, run)
}

/// Tests that measure a CPU limit: `scripts/test.sh` runs them one at a
/// time, with nothing beside them.
mod alone {
    use super::*;

    #[test]
    fn a_starved_generator_ends_the_open_search_without_a_system_limit() {
        // Its generator is held to a tenth of a core: beside other tests,
        // the testbed they slow failed p99 at 4,400/s before the generator
        // gave out (CI, 9caa61b). Alone, only the generator limits it.
        let _alone = support::alone();
        // autoperf held to a tenth of a core, against /health (microseconds):
        // the generator gives out first, on any machine. The SLO is loose
        // enough that one stall of a fifth of a second (CI, aa07c45: a p99
        // of 227 ms at 162/s between passes at 0.5 ms) is not a failure of
        // the system's: a generator whose CPU is spent is hundreds of
        // milliseconds late, and is judged by its CPU.
        let tb = support::testbed(2);
        let dir = support::scratch_dir("open-starved");
        let s = write(
            &dir,
            "starved.yaml",
            &format!(
                r#"
    name: starved-open
    target: {{base_url: "{}"}}
    arrivals: {{rate: 800/s, spacing: even}}
    requests:
      health: {{path: /health}}
    thresholds: ["p99 < 500ms"]
    capacity: {{min_duration: 2s, window: 1s, max_duration: 4s, rate_factor: 4, rate_precision: 10%}}
    "#,
                tb.web_url
            ),
        );
        let out = dir.join("out");
        let output = support::quota::CpuQuota::new(0.1)
            .command(&support::autoperf_exe())
            .args(["capacity", &s, "--quiet", "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        let run = support::run_json(&out);
        let a = &run["analysis"];
        assert_eq!(
            a["stop_reason"],
            "client_bottleneck",
            "{a}\n{}",
            levels(&run)
        );
        // No limit of the system is claimed.
        assert!(a["first_failing_rate_rps"].is_null(), "{a}");
        assert!(a["failed_slo"].is_null(), "{a}");
        // The generator's limit is bracketed, and reported as its own.
        let limit = a["generator_limit_rps"]
            .as_f64()
            .expect("the generator's limit");
        let pass = a["max_passing_rate_rps"].as_f64().expect("a passing rate");
        assert!(pass < limit, "{a}");
        let bound = run["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["rate_search"]["verdict"] == "generator_bound");
        assert!(bound.is_some(), "{}", levels(&run));
        assert!(stdout.contains("load generator could not keep"), "{stdout}");
        // Every level knows the quota it ran under, and the level the
        // generator could not keep saw the quota hold it back (its
        // responses, read late, would otherwise pass for the system's
        // latency: 139 ms p99 at 50/s beside arrivals on time, CI 0fbe022).
        for level in run["levels"].as_array().unwrap() {
            assert_eq!(level["client"]["cpu_quota"]["cores"], 0.1, "{level:#}");
        }
        let quota = &bound.unwrap()["client"]["cpu_quota"];
        assert!(quota["throttled_periods"].as_u64().unwrap() > 0, "{quota}");
    }

    #[test]
    fn finds_the_highest_rate_meeting_a_p99_slo_on_one_web_worker() {
        let _alone = support::alone();
        let (tb, stdout, out, run) = open_cpu_search("open-cap");
        let a = &run["analysis"];
        let all = levels(&run);
        assert_eq!(a["stop_reason"], "completed", "{a}\n{all}");
        let pass = a["max_passing_rate_rps"].as_f64().expect("a passing rate");
        let fail = a["first_failing_rate_rps"]
            .as_f64()
            .expect("a failing rate");
        // The web tier's one core allows 1/D of the demand this run measured
        // there (4 ms burned, plus the tier's own work): no rate past it
        // passes, and the search gets within 60% of it however busy the
        // machine (bench/open-rate.sh records how close a quiet one comes).
        let passing = run["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["rate_rps"].as_f64() == Some(pass))
            .expect("the highest passing level");
        let d_ms = passing["servers"]["web"]["cpu_ms_per_request"][&tb.web_process]
            .as_f64()
            .unwrap();
        let limit = 1000.0 / d_ms;
        assert!(
            pass <= 1.05 * limit && pass >= 0.6 * limit,
            "passing {pass}/s, the web tier's core allows {limit}/s at {d_ms} ms\n{all}"
        );
        assert!(
            fail > pass && fail - pass <= 0.02 * fail + 1e-9,
            "{pass} {fail}\n{all}"
        );
        assert_eq!(a["failed_slo"]["source"], "p99 < 100ms", "{a}");
        assert!(a["failed_slo"]["actual"].as_f64().unwrap() >= 100.0, "{a}");
        let n = run["levels"].as_array().unwrap().len();
        assert!(n < 12, "{n} levels:\n{all}");
        // Every level carries its verdict and the SLOs it was held to.
        for l in run["levels"].as_array().unwrap() {
            let slos = l["rate_search"]["slos"].as_array().unwrap();
            assert_eq!(slos.len(), 2, "{l}");
            assert_eq!(slos[1]["source"], "achieved >= 95% of the rate");
        }
        assert!(stdout.contains("highest passing rate"), "{stdout}");
        assert!(stdout.contains("p99 < 100ms failed"), "{stdout}");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("Highest rate meeting the SLOs"));
        assert!(html.contains("First failing rate"));
    }

    /// A server-side SLO: the highest rate at which the web tier stays
    /// under 60% of its core. With the demand D this run measured, that is
    /// 0.6 / D (150/s at 4 ms); the search ends within its precision of it.
    #[test]
    fn finds_the_highest_rate_keeping_the_web_tier_under_60_percent_busy() {
        let _alone = support::alone();
        let (tb, stdout, _, run) = open_cpu_search_held_to("open-util", "web.util < 60%");
        let a = &run["analysis"];
        let all = levels(&run);
        assert_eq!(a["stop_reason"], "completed", "{a}\n{all}");
        assert_eq!(a["failed_slo"]["source"], "web.util < 60%", "{a}");
        assert!(a["failed_slo"]["actual"].as_f64().unwrap() >= 0.6, "{a}");
        let pass = a["max_passing_rate_rps"].as_f64().expect("a passing rate");
        let passing = run["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["rate_rps"].as_f64() == Some(pass))
            .expect("the highest passing level");
        let d_ms = passing["servers"]["web"]["cpu_ms_per_request"][&tb.web_process]
            .as_f64()
            .unwrap();
        let bound = 600.0 / d_ms;
        assert!(
            (pass - bound).abs() <= 0.1 * bound,
            "passing {pass}/s; 60% of the core is {bound}/s at {d_ms} ms\n{all}"
        );
        let slo = &passing["rate_search"]["slos"][0];
        assert_eq!(slo["source"], "web.util < 60%", "{slo}");
        assert!(slo["actual"].as_f64().unwrap() < 0.6, "{slo}");
        assert!(stdout.contains("web.util < 60% failed"), "{stdout}");
    }

    #[test]
    fn vary_restarts_the_testbed_per_value_and_gives_the_demand() {
        let _alone = support::alone();
        let dir = support::scratch_dir("open-vary");
        // The script restarts the testbed at one address, which cannot be
        // 127.0.0.1:0: a loopback address of this test's own (nothing else
        // here binds 127.77/16), so no other server takes the port between
        // restarts.
        let pid = std::process::id();
        let addr = format!("127.77.{}.{}:8080", (pid >> 8) & 0xff, (pid & 0xff).max(1));
        let s = write(
            &dir,
            "vary.yaml",
            &format!(
                r#"
name: open-vary
target: {{base_url: "http://{addr}"}}
arrivals: {{rate: 200/s, spacing: even}}
requests:
  cpu: {{path: "/cpu?ms=4"}}
thresholds: ["p99 < 100ms"]
capacity: {{min_duration: 3s, window: 1s, max_duration: 8s, rate_precision: 10%}}
"#
            ),
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/testbed-restart.sh");
        let apply = format!(
            "TMPDIR={} {} {addr} {{web_workers}} {}",
            dir.display(),
            script.display(),
            support::autoperf_exe().display()
        );
        let out = dir.join("out");
        let ready = format!("http://{addr}/health");
        let result = support::autoperf(&[
            "capacity",
            &s,
            "--vary",
            "web_workers=1,2",
            "--apply",
            &apply,
            "--ready",
            &ready,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        let stop = format!("TMPDIR={} {} {addr} stop", dir.display(), script.display());
        let _ = std::process::Command::new("sh")
            .args(["-c", &stop])
            .status();
        let (code, stdout, stderr) = result;
        assert_eq!(code, Some(0), "{stdout}\n{stderr}");
        let run = support::run_json(&out);
        let a = &run["analysis"];
        let all = levels(&run);
        let series = a["series"].as_array().expect("one result per value");
        assert_eq!(series.len(), 2, "{a}");
        assert_eq!(series[0]["value"], "1");
        assert_eq!(series[1]["value"], "2");
        let one = series[0]["max_passing_rate_rps"].as_f64().unwrap();
        let two = series[1]["max_passing_rate_rps"].as_f64().unwrap();
        // A second worker adds capacity past the search's 10% precision.
        // How much depends on the machine: on 2 cores shared with the
        // generator, 1.5× on a quiet one, 1.21× beside a busy loop at nice
        // 10 on each core (the demand below holds either way).
        assert!(two > one * 1.1, "{one} {two}\n{all}");
        // Every level says which value it ran under.
        for l in run["levels"].as_array().unwrap() {
            assert!(l["rate_search"]["series"]["web_workers"].is_string(), "{l}");
        }
        // Theodolite's demand: the lower load needs one worker, the higher two.
        let demand = a["demand"].as_array().unwrap();
        assert_eq!(demand.len(), 2, "{a}");
        assert_eq!(demand[0]["resource"], "1");
        assert_eq!(demand[1]["resource"], "2");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("Capacity per resource value"));
        assert!(
            stdout.contains("web_workers=2: highest passing rate"),
            "{stdout}"
        );
    }
}
