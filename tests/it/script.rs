//! `script:` end to end: Lua hooks around every request, against the
//! testbed. examples/signed-api-lua.yaml signs each request in
//! `request(ctx)` (the testbed's `/signed/*` verifies method, path, time
//! and body) and judges each answer in `response(ctx)`; a variable the
//! hook sets reaches the next request's path. Wrong key: every answer is
//! refused, and the script's reason is counted. A hook's failure and a
//! script that will not load are reported with their reasons.

use crate::support;

use std::path::{Path, PathBuf};

/// examples/signed-api-lua.yaml and its hooks, aimed at `url`.
fn signed_example(url: &str, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let text = std::fs::read_to_string(root.join("signed-api-lua.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", url);
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::copy(root.join("hooks/sign.lua"), dir.join("hooks/sign.lua")).unwrap();
    let scenario = dir.join("signed-api-lua.yaml");
    std::fs::write(&scenario, text).unwrap();
    scenario
}

fn run(scenario: &Path, out: &Path, key: Option<&str>) -> serde_json::Value {
    let mut cmd = std::process::Command::new(support::autoperf_exe());
    cmd.args(["run", scenario.to_str().unwrap(), "--users", "4"])
        .args(["--duration", "2s", "--warmup", "0s", "--quiet"])
        .args(["--out", out.to_str().unwrap()])
        .env_remove("API_KEY");
    if let Some(key) = key {
        cmd.env("API_KEY", key);
    }
    let done = cmd.output().expect("autoperf runs");
    let output = String::from_utf8_lossy(&done.stdout) + String::from_utf8_lossy(&done.stderr);
    assert!(done.status.code().is_some(), "{output}");
    support::run_json(out)["levels"][0].clone()
}

#[test]
fn a_lua_hook_signs_every_request_and_judges_every_answer() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("script-signed");
    let scenario = signed_example(&tb.web_url, &dir);

    let level = run(&scenario, &dir.join("right"), None);
    let order = &level["per_request"]["order"];
    let requests = order["requests"].as_u64().unwrap();
    assert!(requests > 0, "{level}");
    assert_eq!(level["errors"], 0, "{level}");
    assert!(order.get("script_failures").is_none(), "{order}");

    // The variable response(ctx) sets is in the next request's path, and
    // request(ctx) signed that path: the testbed took it.
    let traced = std::process::Command::new(support::autoperf_exe())
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--trace",
            "--sessions",
            "3",
        ])
        .env_remove("API_KEY")
        .output()
        .expect("autoperf runs");
    let stdout = String::from_utf8_lossy(&traced.stdout);
    let stderr = String::from_utf8_lossy(&traced.stderr);
    assert_eq!(traced.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("> POST /signed/orders?in_session= HTTP/1.1"),
        "{stdout}"
    );
    let chained = stdout.contains("> POST /signed/orders?in_session=1 HTTP/1.1");
    // A session continues with probability 0.8: three sessions of one
    // order each (three orders in all) happen once in 125.
    let orders = stdout.matches("> POST /signed/orders").count();
    assert!(chained || orders == 3, "{stdout}");
    assert!(stdout.contains("> X-Signature: "), "{stdout}");

    let level = run(&scenario, &dir.join("wrong"), Some("not-the-key"));
    let order = &level["per_request"]["order"];
    let requests = order["requests"].as_u64().unwrap();
    assert!(requests > 0, "{level}");
    assert_eq!(
        order["errors_by_kind"]["http_4xx"].as_u64(),
        Some(requests),
        "{order}"
    );
    let reasons = &order["script_failures"];
    assert_eq!(
        reasons["refused: bad signature"].as_u64(),
        Some(requests),
        "{order}"
    );
}

/// A scenario of one GET of `/health` with `lua` as its hooks.
fn health_with(lua: &str, url: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("hooks.lua"), lua).unwrap();
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {{base_url: \"{url}\"}}\nscript: hooks.lua\nrequests:\n  health: {{path: /health}}\n"
        ),
    )
    .unwrap();
    scenario
}

#[test]
fn a_request_the_hook_fails_is_not_sent_and_its_reason_is_counted() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("script-fail");
    let scenario = health_with(
        "local n = 0\nfunction request(ctx)\n  n = n + 1\n  if n % 4 == 0 then ctx:fail('every fourth') end\nend\n",
        &tb.web_url,
        &dir,
    );
    let out = dir.join("out");
    let (code, stdout, stderr) = support::run_briefly(scenario.to_str().unwrap(), "1", &out);
    assert!(code.is_some(), "{stdout}{stderr}");
    let health = &support::run_json(&out)["levels"][0]["per_request"]["health"];
    let requests = health["requests"].as_u64().unwrap();
    let failed = health["errors_by_kind"]["script_request"].as_u64().unwrap();
    assert!(requests > 20, "{health}");
    // One user, one Lua state: one request in four, give or take those
    // on either side of the measured window.
    assert!(failed.abs_diff(requests / 4) <= 2, "{health}");
    assert_eq!(
        health["script_failures"]["every fourth"].as_u64(),
        Some(failed),
        "{health}"
    );
}

#[test]
fn check_names_the_scripts_line_and_the_scenarios_place() {
    let dir = support::scratch_dir("script-check");
    let scenario = health_with(
        "function request(ctx)\n  ctx:set_header('X', 1\nend\n",
        "http://127.0.0.1:1",
        &dir,
    );
    let (code, stdout, stderr) = support::autoperf(&["check", scenario.to_str().unwrap()]);
    let output = stdout + &stderr;
    // 2: the scenario is invalid (as for any other error `check` finds).
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("s.yaml:2:9"), "{output}");
    assert!(
        output.contains("script `hooks.lua` does not load: hooks.lua:3:"),
        "{output}"
    );
}
