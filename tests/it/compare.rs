//! `autoperf compare` and `--baseline` on real runs of the testbed: the
//! same scenario twice is no regression; the same scenario with every
//! request 30% costlier is, named request by request, with exit 1; and
//! compare.html renders in Chromium without fetching anything.

use crate::browser;
use crate::support;

use std::path::Path;

use support::{autoperf, json_file, scratch_dir, testbed};

/// Two request types the testbed answers after `ms` and `ms / 2`. Waits,
/// not CPU burns: a shared machine's other work stretches a burn's
/// response time by as much as the 30% the test looks for, while a
/// timer's wake-up is late by a fraction of a millisecond.
fn scenario(dir: &Path, name: &str, url: &str, ms: f64) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: compare-test\ntarget: {{base_url: \"{url}\"}}\nthink_time: 10ms\nrequests:\n  page: {{path: \"/sleep?ms={ms}\"}}\n  api: {{path: \"/sleep?ms={half}\"}}\nsession:\n  start: page\n  transitions:\n    page: {{api: 1.0}}\n    api: {{page: 0.95}}\n",
            half = ms / 2.0
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn run(scenario: &str, out: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "run",
        scenario,
        "--users",
        "4",
        "--duration",
        "8s",
        "--warmup",
        "1s",
        "--no-agents",
        "--quiet",
        "--out",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    autoperf(&args)
}

#[test]
fn the_same_scenario_is_no_regression_and_a_costlier_one_is_named_with_exit_1() {
    let tb = testbed(2);
    let dir = scratch_dir("compare");
    let plain = scenario(&dir, "plain", &tb.web_url, 20.0);
    let costlier = scenario(&dir, "costlier", &tb.web_url, 26.0);
    let (base, again, slower) = (dir.join("base"), dir.join("again"), dir.join("slower"));
    for (s, out) in [(&plain, &base), (&plain, &again)] {
        let (code, stdout, stderr) = run(s, out, &[]);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
    }
    let series = std::fs::read_to_string(base.join("request_series.csv")).unwrap();
    assert!(series.starts_with("t_s,level,request,requests,errors,throughput_rps,mean_ms"));
    // Eight measured seconds of each request and of all together (a ninth
    // when the level's last interval ends just past the eighth second).
    let rows = |name: &str| {
        series
            .lines()
            .filter(|l| l.split(',').nth(2) == Some(name))
            .count()
    };
    for name in ["page", "api", "*"] {
        assert!(
            (8..=9).contains(&rows(name)),
            "{} rows of {name}:\n{series}",
            rows(name)
        );
    }

    let (code, stdout, stderr) =
        autoperf(&["compare", base.to_str().unwrap(), again.to_str().unwrap()]);
    assert_eq!(code, Some(0), "the same scenario twice:\n{stdout}{stderr}");
    assert!(stdout.contains("\nno regression\n"), "{stdout}");
    let same = json_file(&again.join("compare.json"));
    assert_eq!(same["regressions"], 0);
    assert_eq!(same["levels"].as_array().unwrap().len(), 1);

    // The baseline applied at the end of the run itself.
    let (code, stdout, stderr) = run(&costlier, &slower, &["--baseline", base.to_str().unwrap()]);
    assert_eq!(code, Some(1), "30% costlier must fail:\n{stdout}{stderr}");
    for named in [
        "request `page`: p50",
        "request `api`: p50",
        "all requests: mean",
    ] {
        assert!(stdout.contains(named), "`{named}` not named:\n{stdout}");
    }
    let judged = json_file(&slower.join("compare.json"));
    let regressions = judged["regressions"].as_u64().unwrap();
    assert!(regressions >= 3, "{judged}");
    let p50 = judged["levels"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["request"] == "page" && c["metric"] == "p50")
        .expect("page's p50 compared");
    assert_eq!(p50["verdict"], "regression", "{p50}");
    let worse = p50["worsening"].as_f64().unwrap();
    assert!(
        (0.2..0.4).contains(&worse),
        "page p50 {worse:+} for a 30% longer wait"
    );

    // `compare` with limits of its own: a throughput drop of at most 30%
    // lets 30% slower responses of a closed load pass.
    let (code, stdout, _) = autoperf(&[
        "compare",
        base.to_str().unwrap(),
        slower.to_str().unwrap(),
        "--max-regression",
        "throughput=30%",
        "--out",
        dir.join("throughput-only").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}");

    let page = slower.join("compare.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("class=\"badge bad\""), "the verdict is shown");
    for bad in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import",
    ] {
        assert!(!html.contains(bad), "compare.html contains `{bad}`");
    }
    let test = "the_same_scenario_is_no_regression_and_a_costlier_one_is_named_with_exit_1";
    if let Some(chromium) = browser::chromium_or_skip(test) {
        let loaded = browser::load(&chromium, &page, &dir.join("browser"));
        assert!(loaded.console.is_empty(), "{:?}", loaded.console);
        assert!(
            loaded.page_requests.is_empty(),
            "{:?}",
            loaded.page_requests
        );
        assert_eq!(
            loaded.dom.matches("<svg class=\"chart\"").count(),
            2,
            "p99 and throughput per second"
        );
        assert!(loaded.dom.contains("data-verdict=\"REGRESSION\""));
    }
    drop(tb);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_limits_and_directories_are_refused_naming_the_fix() {
    let dir = scratch_dir("compare-bad");
    let d = dir.to_str().unwrap();
    let (code, _, stderr) = autoperf(&["compare", d, d, "--max-regression", "p98=10%"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unknown metric `p98`"), "{stderr}");
    let (code, _, stderr) = autoperf(&["compare", d, d]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("BASE") && stderr.contains("run.json"),
        "{stderr}"
    );
    let (code, _, stderr) = autoperf(&["run", "x.yaml", "--baseline", d]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--baseline") && stderr.contains("earlier run"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Results that no run wrote are refused, naming the file, the key and
/// what is wrong (exit 2), by `compare`, `report` and `predict` alike:
/// a negative throughput once came out as a −2664% change, and a run.json
/// linked to /dev/zero was read until memory ran out.
#[test]
fn tampered_or_broken_results_are_refused_naming_the_key() {
    let dir = scratch_dir("compare-tampered");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/report/html/testdata/run");
    let copy = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let out = dir.join(name);
        std::fs::create_dir_all(&out).unwrap();
        let mut run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixture.join("run.json")).unwrap()).unwrap();
        edit(&mut run);
        std::fs::write(out.join("run.json"), run.to_string()).unwrap();
        out.to_str().unwrap().to_string()
    };
    let good = copy("good", &|_| {});
    let negative = copy("negative", &|r| {
        r["levels"][0]["throughput_rps"] = (-26.6).into()
    });
    let future = copy("future", &|r| r["record_version"] = 999.into());
    let zero = dir.join("zero");
    std::fs::create_dir_all(&zero).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("run.json")).unwrap();
    let zero = zero.to_str().unwrap().to_string();
    let (code, _, e) = autoperf(&["compare", &good, &good]);
    assert_eq!(code, Some(0), "{e}");
    for (bad, said) in [
        (&negative, "levels[0].throughput_rps is -26.6"),
        (&future, "record_version is 999"),
        (&zero, "not a regular file"),
    ] {
        for args in [
            vec!["compare", good.as_str(), bad.as_str()],
            vec!["report", bad.as_str()],
            vec!["predict", bad.as_str()],
        ] {
            let (code, _, e) = autoperf(&args);
            assert_eq!(code, Some(2), "{args:?}: {e}");
            assert!(e.contains(said) && e.contains("run.json"), "{args:?}: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
