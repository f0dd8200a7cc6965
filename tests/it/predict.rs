//! `autoperf predict` as a user runs it, on results directories recorded
//! from the testbed (the report fixtures): a capacity analysis of
//! `/db?web_ms=4&db_ms=1` at Z = 0.5 s (true saturation 250/s on one web
//! core) and a profile of four request types.

use crate::support;

use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/core/src/report/html/testdata")
        .join(name)
}

fn predict(results: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut args = vec![
        "predict",
        results.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let (code, stdout, stderr) = support::autoperf(&args);
    let json = std::fs::read_to_string(out.join("prediction.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, json, format!("{stdout}{stderr}"))
}

#[test]
fn a_capacity_analysis_predicts_its_own_curve_and_what_ifs() {
    let dir = support::scratch_dir("predict-capacity");
    let (code, p, out) = predict(&fixture("capacity"), &dir, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("model against the measured levels"), "{out}");
    let x_max = p["bounds"]["max_throughput_rps"].as_f64().unwrap();
    assert!((x_max - 250.0).abs() <= 25.0, "X bound {x_max}, true 250/s");
    assert_eq!(p["bounds"]["bottleneck"], "web");
    // Below saturation (N* ≈ 126) the model follows the measured points.
    let n_star = p["bounds"]["n_star"].as_f64().unwrap();
    let below: Vec<f64> = p["measured"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["users"].as_f64().unwrap() < n_star)
        .map(|c| c["throughput_error"].as_f64().unwrap())
        .collect();
    assert!(below.len() >= 2, "{p}");
    let rms = (below.iter().map(|e| e * e).sum::<f64>() / below.len() as f64).sqrt();
    assert!(rms < 0.10, "throughput RMS error {rms} below N*");
    let points = p["points"].as_array().unwrap();
    assert!(points.len() > 10);
    for w in points.windows(2) {
        // More users never lower the throughput of a product-form network.
        assert!(w[1]["throughput_rps"].as_f64() >= w[0]["throughput_rps"].as_f64());
    }

    // Twice the web cores: the db tier (1 ms on 1 core) is next, at 500/s
    // from web's 2 cores / 4 ms.
    let (code, p, out) = predict(
        &fixture("capacity"),
        &dir,
        &["--cores", "web=2", "--users", "400"],
    );
    assert_eq!(code, Some(0), "{out}");
    let x = p["bounds"]["max_throughput_rps"].as_f64().unwrap();
    assert!((x - 2.0 * x_max).abs() < 1e-6 * x, "{x} against {x_max}");
    assert!(
        p["measured"].is_null(),
        "a what-if is not compared with the measured levels"
    );
    assert_eq!(p["points"][0]["users"], 400);

    // An open what-if: utilisation is X·D at any rate below the bound.
    let (code, p, out) = predict(&fixture("capacity"), &dir, &["--rate", "100/s"]);
    assert_eq!(code, Some(0), "{out}");
    let point = &p["points"][0];
    assert_eq!(point["rate_rps"], 100.0);
    let web_ms = p["model"]["tiers"]["web"]["cpu_ms_per_request"]
        .as_f64()
        .unwrap();
    let u = point["utilization"]["web"].as_f64().unwrap();
    assert!((u - 100.0 * web_ms / 1e3).abs() < 1e-3, "{u}");
}

#[test]
fn a_profile_predicts_other_mixes_and_refuses_unknown_ones() {
    let dir = support::scratch_dir("predict-profile");
    let (code, p, out) = predict(
        &fixture("profile"),
        &dir,
        &["--mix", "cpu=1", "--users", "1,10"],
    );
    assert_eq!(code, Some(0), "{out}");
    // /cpu?ms=2 costs 2 ms on the web tier and nothing on db.
    let web = p["model"]["tiers"]["web"]["cpu_ms_per_request"]
        .as_f64()
        .unwrap();
    assert!((web - 2.0).abs() < 0.2, "web {web} ms");
    assert_eq!(p["model"]["mix"]["cpu"], 1.0);
    assert_eq!(p["model"]["mix"]["db"], 0.0);
    let one = &p["points"][0];
    // One user: no queueing, R is the demand.
    let r = one["response_time_ms"].as_f64().unwrap();
    let total: f64 = p["model"]["tiers"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["cpu_ms_per_request"].as_f64().unwrap())
        .sum();
    assert!((r - total).abs() < 1e-3, "R {r} against ΣD {total}");

    let (code, _, out) = predict(&fixture("profile"), &dir, &["--mix", "checkout=1"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("checkout") && out.contains("cpu, db, bytes, lock"),
        "{out}"
    );
    let (code, _, out) = predict(&fixture("profile"), &dir, &["--cores", "cache=2"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("`cache` is not a tier"), "{out}");
}

#[test]
fn predict_in_a_results_directory_adds_the_model_to_its_report() {
    let dir = support::scratch_dir("predict-report");
    for f in ["run.json", "timeseries.csv"] {
        std::fs::copy(fixture("capacity").join(f), dir.join(f)).unwrap();
    }
    let (code, stdout, stderr) = support::autoperf(&["predict", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("report: "), "{stdout}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Queueing model</h2>"));
    assert!(html.contains("Model against the measured levels"));
    // `autoperf report` renders it again from prediction.json.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let (code, ..) = support::autoperf(&["report", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(std::fs::read_to_string(dir.join("report.html"))
        .unwrap()
        .contains("Queueing model"));
}
