//! Memory per user: the testbed's web tier holding a known 4 MiB for each
//! open session (a closed user keeps one connection), a capacity analysis
//! at a few users fits each tier's memory as a line in the users, and
//! `predict` at ten times the users it measured says what a run there
//! then measures. 4 MiB a session, mapped straight from the kernel (what
//! an allocator keeps of freed sessions bent the line), and levels 2 to
//! 10 users apart.

use crate::support;

const SESSION: f64 = 4.0 * 1_048_576.0;

#[test]
fn memory_per_user_is_fitted_and_predicted_ten_times_out() {
    let tb = support::testbed_with(autoperf_testbed::TestbedOptions {
        web_workers: 2,
        session_memory: 4 << 20,
        ..Default::default()
    });
    let agent = support::agent();
    let dir = support::scratch_dir("memory");
    let s = dir.join("s.yaml");
    std::fs::write(
        &s,
        format!(
            "target: {{base_url: \"{}\"}}\nthink_time: 100ms\nrequests:\n  h: {{path: \"/cpu?ms=0.5\"}}\nservers:\n  - {{tier: web, agent: \"{}\", processes: [{}]}}\n",
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
        "2,5,10",
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
    // What each level held, and the connections its users opened (one a
    // user, unless some were closed and opened again): said when the fit
    // is off.
    let run = support::run_json(&out);
    let levels: Vec<String> = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} users: {} bytes mean, {} max, {} connects",
                l["users"],
                l["servers"]["web"]["memory_mean_bytes"],
                l["servers"]["web"]["memory_max_bytes"],
                l["client"]["connects"]
            )
        })
        .collect();
    assert!(
        (per_user - SESSION).abs() <= 0.10 * SESSION,
        "{per_user} bytes a user, the testbed holds {SESSION}: {fit}\n{}",
        levels.join("\n")
    );
    assert_eq!(fit["levels"], 3, "{fit}");

    // Ten times the users profiled: predicted, then measured.
    let (code, stdout, stderr) = support::autoperf(&[
        "predict",
        out_s,
        "--users",
        "100",
        "--json",
        "--out",
        dir.join("what-if").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let what_if: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let predicted = what_if["points"][0]["memory_bytes"]["web"]
        .as_f64()
        .unwrap();
    let measured_out = dir.join("at-100");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        s,
        "--users",
        "100",
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
    eprintln!("at 100 users: predicted {predicted} bytes, measured {measured}");
    assert!(
        (predicted - measured).abs() <= 0.15 * measured,
        "predicted {predicted} bytes at 100 users, measured {measured}"
    );
    // The text table says it too.
    let (_, text, _) = support::autoperf(&[
        "predict",
        out_s,
        "--users",
        "100",
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
