//! Memory per user: the testbed's web tier holding a known 1 MiB for each
//! open session (a closed user keeps one connection), a capacity analysis
//! at a few users fits each tier's memory as a line in the users, and
//! `predict` at ten times the users it measured says what a run there
//! then measures.

use crate::support;

const MIB: f64 = 1_048_576.0;

#[test]
fn memory_per_user_is_fitted_and_predicted_ten_times_out() {
    let tb = support::testbed_with(autoperf_testbed::TestbedOptions {
        web_workers: 2,
        session_memory: 1 << 20,
        ..Default::default()
    });
    let agent = support::agent();
    let dir = support::scratch_dir("memory");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  h: {{path: /health}}\nservers:\n  - {{tier: web, agent: \"{}\", processes: [{}]}}\n",
            tb.web_url,
            agent.url(),
            tb.web_process
        ),
    )
    .unwrap();
    let s = s.to_str().unwrap();
    let out = dir.join("out");
    let out_s = out.to_str().unwrap();
    let (code, stdout, stderr) = support::autoperf(&[
        "capacity",
        s,
        "--levels",
        "1,2,4",
        "--duration",
        "3s",
        "--out",
        out_s,
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let p = support::json_file(&out.join("prediction.json"));
    let fit = &p["memory"]["web"];
    let per_user = fit["per_user_bytes"].as_f64().unwrap();
    eprintln!("fitted: {fit}");
    assert!(
        (per_user - MIB).abs() <= 0.10 * MIB,
        "{per_user} bytes a user, the testbed holds {MIB}: {fit}"
    );
    assert_eq!(fit["levels"], 3, "{fit}");

    // Ten times the users profiled: predicted, then measured.
    let (code, stdout, stderr) = support::autoperf(&[
        "predict",
        out_s,
        "--users",
        "40",
        "--json",
        "--out",
        dir.join("what-if").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let what_if: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let predicted = what_if["points"][0]["memory_bytes"]["web"]
        .as_f64()
        .unwrap();
    let measured_out = dir.join("at-40");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s,
        "--users",
        "40",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--out",
        measured_out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = support::run_json(&measured_out);
    let measured = run["levels"][0]["servers"]["web"]["memory_mean_bytes"]
        .as_f64()
        .unwrap();
    eprintln!("at 40 users: predicted {predicted} bytes, measured {measured}");
    assert!(
        (predicted - measured).abs() <= 0.15 * measured,
        "predicted {predicted} bytes at 40 users, measured {measured}"
    );
    // The text table says it too.
    let (_, text, _) = support::autoperf(&[
        "predict",
        out_s,
        "--users",
        "40",
        "--out",
        dir.join("t").to_str().unwrap(),
    ]);
    assert!(
        text.contains("web: memory") && text.contains("a user"),
        "{text}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Memory per tier vs users"));
}
