//! Template functions and `set:` end to end: examples/signed-api.yaml signs
//! every request (HMAC-SHA256 over method, path, timestamp and body) and
//! the testbed's `/signed/*` verifies each one; signed with a wrong key,
//! every request is refused.

use crate::support;

use std::path::Path;

fn run(scenario: &Path, out: &Path, key: Option<&str>) -> serde_json::Value {
    let mut cmd = std::process::Command::new(support::autoperf_exe());
    cmd.args([
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "4",
        "--duration",
        "2s",
    ])
    .args(["--warmup", "0s", "--quiet", "--out", out.to_str().unwrap()])
    .env_remove("API_KEY");
    if let Some(key) = key {
        cmd.env("API_KEY", key);
    }
    let done = cmd.output().expect("autoperf runs");
    let stdout = String::from_utf8_lossy(&done.stdout);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.code().is_some(), "{stdout}{stderr}");
    support::run_json(out)["levels"][0].clone()
}

#[test]
fn a_signed_api_takes_every_request_signed_with_its_key_and_none_with_another() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("signed-api");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/signed-api.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", &tb.web_url);
    let scenario = dir.join("signed-api.yaml");
    std::fs::write(&scenario, text).unwrap();

    let level = run(&scenario, &dir.join("right"), None);
    let order = &level["per_request"]["order"];
    let requests = order["requests"].as_u64().unwrap();
    assert!(requests > 0, "{level}");
    assert_eq!(level["errors"], 0, "{level}");
    for (check, count) in order["checks"].as_object().unwrap() {
        assert_eq!(count["passed"].as_u64(), Some(requests), "{check}: {count}");
    }

    let level = run(&scenario, &dir.join("wrong"), Some("not-the-key"));
    let order = &level["per_request"]["order"];
    let requests = order["requests"].as_u64().unwrap();
    assert!(requests > 0, "{level}");
    assert_eq!(level["errors"].as_u64(), Some(requests), "{level}");
    let status = &order["checks"]["status"];
    assert_eq!(status["failed"].as_u64(), Some(requests), "{order}");
}
