//! Thresholds on what the system spends, not only on what the client
//! sees: a tier's CPU per request (`web.cpu_ms < 5`) and utilisation
//! (`web.util < 60%`), from the agents, judged like the client's SLOs.
//! (The open search held to `web.util` is in `open_capacity::alone`.)

use crate::support;

fn scenario(dir: &std::path::Path, tb: &autoperf_testbed::Testbed, agent: &str) -> String {
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
name: server-slos
target: {{base_url: "{}"}}
think_time: 20ms
requests:
  cpu: {{path: "/cpu?ms=4"}}
servers:
  - {{tier: web, agent: "{agent}", processes: [{}]}}
thresholds: ["web.cpu_ms < 50", "web.util < 100%", "web.cpu_ms < 1", "p99 < 10s", "web.memory < 64GiB", "web.memory < 1KiB"]
"#,
            tb.web_url, tb.web_process
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_tiers_cpu_per_request_and_utilisation_pass_or_fail_the_run() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("server-slos");
    let s = scenario(&dir, &tb, &agent.url());
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &s,
        "--users",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    // 4 ms of CPU a request: under 50, over 1.
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    let results = run["analysis"]["thresholds"].as_array().unwrap().clone();
    let result = |i: usize| &results[i];
    let cpu_ms = result(0)["actual"].as_f64().unwrap();
    assert!(
        result(0)["passed"] == true && (2.0..50.0).contains(&cpu_ms),
        "{results:?}"
    );
    assert_eq!(result(0)["unit"], "ms");
    // The same figure the level records for the tier.
    let recorded: f64 = run["levels"][0]["servers"]["web"]["cpu_ms_per_request"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((recorded - cpu_ms).abs() < 1e-9, "{recorded} vs {cpu_ms}");
    let util = result(1)["actual"].as_f64().unwrap();
    assert!(
        result(1)["passed"] == true && util > 0.0 && util < 1.0,
        "{results:?}"
    );
    assert_eq!(result(1)["unit"], "fraction");
    assert!(result(2)["passed"] == false, "{results:?}");
    assert!(result(3)["passed"] == true, "{results:?}");
    assert!(
        stdout.contains("FAIL  web.cpu_ms < 1  (measured"),
        "{stdout}"
    );
    // Memory: the tier's resident set at its highest, as the level keeps it.
    let memory = result(4)["actual"].as_f64().unwrap();
    let kept = run["levels"][0]["servers"]["web"]["memory_max_bytes"]
        .as_f64()
        .unwrap();
    assert!(
        result(4)["passed"] == true && memory == kept && memory > 1e6,
        "{results:?}"
    );
    assert_eq!(result(4)["unit"], "bytes");
    assert!(result(5)["passed"] == false, "{results:?}");
    let mean = run["levels"][0]["servers"]["web"]["memory_mean_bytes"]
        .as_f64()
        .unwrap();
    assert!(mean > 1e6 && mean <= kept, "{mean} {kept}");

    // Without the agents the tier is not measured: its thresholds fail,
    // saying why, never pass on nothing.
    let blind = dir.join("blind");
    let (code, stdout, _) = support::autoperf(&[
        "run",
        &s,
        "--users",
        "1",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--no-agents",
        "--out",
        blind.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    let results = support::run_json(&blind)["analysis"]["thresholds"].clone();
    assert_eq!(results[0]["passed"], false, "{results}");
    assert!(
        results[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("tier `web` was not measured")),
        "{results}"
    );
}

#[test]
fn a_tier_threshold_names_the_tiers_when_the_name_is_none() {
    let dir = support::scratch_dir("server-slos-bad");
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        "name: x\ntarget: {base_url: \"http://127.0.0.1:9\"}\nrequests:\n  a: {path: /}\nservers:\n  - {tier: web, agent: \"http://127.0.0.1:9\", processes: [w]}\nthresholds: [\"wbe.util < 60%\", \"cpu_ms < 5\"]\n",
    )
    .unwrap();
    let (code, _, stderr) = support::autoperf(&["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown tier `wbe` (the tiers of `servers:`: web)"),
        "{stderr}"
    );
    assert!(stderr.contains("like `web.cpu_ms`"), "{stderr}");
}

/// `compare` gates each tier's CPU per request: a request that costs 30%
/// more at 10 users is a regression named by tier, with its p-value from
/// the intervals in server_series.csv; the same build run twice is not.
#[test]
fn compare_flags_a_costlier_build_at_ten_users_and_not_the_same_one_twice() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let dir = support::scratch_dir("server-slos-compare");
    let run = |name: &str, ms: &str| {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                r#"
name: cost
target: {{base_url: "{}"}}
think_time: 50ms
requests:
  cpu: {{path: "/cpu?ms={ms}"}}
servers:
  - {{tier: web, agent: "{}", processes: [{}]}}
"#,
                tb.web_url,
                agent.url(),
                tb.web_process
            ),
        )
        .unwrap();
        let out = dir.join(name);
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            path.to_str().unwrap(),
            "--users",
            "10",
            "--duration",
            "8s",
            "--warmup",
            "1s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{stdout}\n{stderr}");
        let series = std::fs::read_to_string(out.join("server_series.csv")).unwrap();
        assert!(series.starts_with(
            "window_s,level,tier,requests,cpu_ms_per_request,cpu_util_cores,memory_bytes\n"
        ));
        assert!(series.lines().count() >= 6, "{series}");
        out
    };
    let base = run("base", "2");
    let same = run("same", "2");
    let costlier = run("costlier", "2.6");
    let compare = |new: &std::path::Path| {
        support::autoperf(&["compare", base.to_str().unwrap(), new.to_str().unwrap()])
    };
    // Latencies are not gated here: 30% more CPU makes them longer too.
    let (code, stdout, _) = compare(&same);
    let cpu_lines: Vec<&str> = stdout.lines().filter(|l| l.contains("cpu_ms")).collect();
    assert!(!cpu_lines.is_empty(), "{stdout}");
    assert!(
        cpu_lines.iter().all(|l| !l.contains("REGRESSION")),
        "the same build twice: {stdout}"
    );
    let _ = code;
    let (code, stdout, _) = compare(&costlier);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("tier `web`: cpu_ms"), "{stdout}");
    let json = support::json_file(&costlier.join("compare.json"));
    let web = json["levels"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tier"] == "web")
        .cloned()
        .unwrap();
    assert_eq!(web["verdict"], "regression", "{web}");
    assert!(web["p_value"].as_f64().unwrap() < 0.01, "{web}");
    let worse = web["worsening"].as_f64().unwrap();
    assert!((0.2..0.4).contains(&worse), "{web}");
}
