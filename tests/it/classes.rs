//! Workload classes (`classes:`) against the testbed, as a user runs them:
//! browsers and buyers dealt 70 : 30, each class's figures in run.json and
//! the summary, and `predict`'s multi-class model of a profile set against
//! a run with twice the buyers.

use crate::support;

use std::path::Path;

/// Browsers read pages (3 ms of web CPU a page) and think 100 ms; buyers
/// search and order (web and db CPU) and think 40 ms.
fn scenario(dir: &Path, web: &str, agent: &str, tb: &autoperf_testbed::Testbed) -> String {
    let path = dir.join("classes.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
name: classes
target: {{base_url: "{web}"}}
requests:
  home: {{path: /static/index.html}}
  browse: {{path: "/cpu?ms=3"}}
  search: {{path: "/db?web_ms=2&db_ms=2"}}
  order: {{path: "/db?web_ms=1&db_ms=4"}}
classes:
  browser:
    share: 70%
    think_time: {{exponential: 100ms}}
    session: {{start: home, transitions: {{home: {{browse: 0.9}}, browse: {{browse: 0.5}}}}}}
  buyer:
    share: 30%
    think_time: {{exponential: 40ms}}
    session:
      start: search
      transitions: {{search: {{search: 0.3, order: 0.6}}, order: {{search: 0.4}}}}
servers:
  - {{tier: web, agent: "{agent}", processes: [{web_process}], cores: 1}}
  - {{tier: db, agent: "{agent}", processes: [{db_process}], cores: 1}}
thresholds: ["buyer.p99 < 5s", "browser.error_rate < 1%"]
"#,
            web_process = tb.web_process,
            db_process = tb.db_process,
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn classes_are_dealt_by_share_and_reported_apart() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("classes-run");
    let scenario = scenario(&dir, &tb.web_url, "http://127.0.0.1:1", &tb);
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &scenario,
        "--users",
        "10",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--no-agents",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("class browser (7 users)"), "{stdout}");
    assert!(stdout.contains("class buyer (3 users)"), "{stdout}");
    assert!(stdout.contains("pass  buyer.p99 < 5s"), "{stdout}");
    let level = &support::run_json(&out)["levels"][0];
    let (browser, buyer) = (&level["per_class"]["browser"], &level["per_class"]["buyer"]);
    assert_eq!(browser["users"], 7, "{level}");
    assert_eq!(buyer["users"], 3, "{level}");
    // Each class sends only its own requests, and together all of them.
    let requests = |r: &str| level["per_request"][r]["requests"].as_u64().unwrap();
    assert_eq!(
        browser["requests"].as_u64().unwrap(),
        requests("home") + requests("browse")
    );
    assert_eq!(
        buyer["requests"].as_u64().unwrap(),
        requests("search") + requests("order")
    );
    assert_eq!(level["errors"], 0, "{level}");
    // Browsers send a page every ~0.1 s, buyers every ~0.05 s: the mix of
    // requests is not the mix of users.
    let per_user = |c: &serde_json::Value| {
        c["throughput_rps"].as_f64().unwrap() / c["users"].as_f64().unwrap()
    };
    assert!(per_user(buyer) > 1.3 * per_user(browser), "{level}");
    // What the users thought, by their classes' requests, is what they
    // were set to think: no client bottleneck.
    let configured = level["think_time_s"]["configured"].as_f64().unwrap();
    let achieved = level["think_time_s"]["achieved"].as_f64().unwrap();
    assert!((achieved - configured).abs() < 0.25 * configured, "{level}");
    assert_eq!(level["client_bottleneck"], false, "{level}");
    // A trace of one user still shows a user of every class.
    let (code, stdout, stderr) = support::autoperf(&["run", &scenario, "--trace"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("== user 1 (browser), session 1"),
        "{stdout}"
    );
    assert!(stdout.contains("== user 2 (buyer), session 1"), "{stdout}");
    assert!(stdout.contains("-- search"), "{stdout}");
}

/// Machine-timed: the model is set against a run's throughput, which a
/// busy machine would hold back, so these run alone.
mod alone {
    use super::*;

    #[test]
    fn predict_solves_the_classes_apart_and_meets_twice_the_buyers() {
        let tb = support::testbed(1);
        let agent = support::agent();
        let dir = support::scratch_dir("classes-predict");
        let scenario = scenario(&dir, &tb.web_url, &agent.url(), &tb);
        // Demands per request, loaded without thinking.
        let profile = dir.join("profile");
        let (code, stdout, stderr) = support::autoperf(&[
            "profile",
            &scenario,
            "--users",
            "4",
            "--warmup",
            "1s",
            "--set",
            "classes.browser.think_time=2ms",
            "--set",
            "classes.buyer.think_time=2ms",
            "--set",
            "capacity={min_duration: 2s, max_duration: 5s}",
            "--quiet",
            "--out",
            profile.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stdout.contains("class buyer: cpu ms per request"),
            "{stdout}"
        );
        // Twice the buyers of 70 : 30 at 20 users: 14 browsers, 12 buyers.
        let run = dir.join("run");
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            &scenario,
            "--users",
            "26",
            "--duration",
            "10s",
            "--warmup",
            "2s",
            "--set",
            "classes.browser.share=53.85%",
            "--set",
            "classes.buyer.share=46.15%",
            "--no-agents",
            "--quiet",
            "--out",
            run.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        let measured = &support::run_json(&run)["levels"][0]["per_class"];
        assert_eq!(measured["buyer"]["users"], 12, "{measured}");
        // The what-if, from the profile alone (its scenario's think times,
        // not the profile's).
        let what_if = dir.join("what-if");
        let (code, stdout, stderr) = support::autoperf(&[
            "predict",
            profile.to_str().unwrap(),
            "--scenario",
            &scenario,
            "--class-users",
            "browser=14,buyer=12",
            "--out",
            what_if.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        let p = support::json_file(&what_if.join("prediction.json"));
        for class in ["browser", "buyer"] {
            let model = p["points"][0]["per_class"][class]["throughput_rps"]
                .as_f64()
                .unwrap();
            let x = measured[class]["throughput_rps"].as_f64().unwrap();
            eprintln!("{class}: model {model} req/s, measured {x}");
            assert!(
                (model - x).abs() <= 0.10 * x,
                "{class}: model {model} req/s, measured {x}\n{stdout}"
            );
        }
        // The same comparison, made by predict against the run.
        let against = dir.join("against");
        let (code, stdout, stderr) = support::autoperf(&[
            "predict",
            profile.to_str().unwrap(),
            "--scenario",
            &scenario,
            "--measured",
            run.to_str().unwrap(),
            "--out",
            against.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(stdout.contains("class buyer"), "{stdout}");
        let p = support::json_file(&against.join("prediction.json"));
        let buyers = &p["measured"][0]["per_class"]["buyer"];
        assert_eq!(buyers["users"], 12, "{p}");
        assert!(
            buyers["throughput_error"].as_f64().unwrap().abs() <= 0.10,
            "{buyers}"
        );
    }
}
