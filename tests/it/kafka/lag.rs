//! Theodolite's question, whether the stream processor under test keeps up:
//! the testbed's consumer tier (`tb-con`, a consumer group of autoperf's
//! own) of known capacity (2 ms of CPU per record) reads the topic
//! autoperf writes, the lag thresholds judge it by its lag, read from the
//! broker, and the agent measures what a record costs it.

use std::time::{Duration, Instant};

use super::{broker, run_ok, Admin};
use crate::support;

/// The stream processor: the testbed with its consumer tier reading
/// `topic` as `group`, one thread at `record_cost` per record.
fn processor(
    bootstrap: &str,
    topic: &str,
    group: &str,
    record_cost: Duration,
) -> autoperf_testbed::Testbed {
    support::testbed_with(autoperf_testbed::TestbedOptions {
        web_workers: 1,
        db_workers: 1,
        consumer: Some(autoperf_testbed::ConsumerOptions {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            group: group.to_string(),
            record_cost,
        }),
        consumer_workers: 1,
        ..Default::default()
    })
}

fn scenario(
    dir: &std::path::Path,
    bootstrap: &str,
    topic: &str,
    thresholds: &str,
    servers: &str,
) -> String {
    let path = dir.join(format!("lag-{}-{}.yaml", thresholds.len(), servers.len()));
    std::fs::write(
        &path,
        format!(
            r#"name: stream-processor
target:
  kafka: {{bootstrap: "{bootstrap}", acks: 1}}
arrivals: {{rate: 100/s}}
requests:
  record:
    produce: {{topic: {topic}, value: {{raw: "a reading"}}}}
thresholds: [{thresholds}]
{servers}
"#
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_lag_slo_passes_while_the_consumers_keep_up_and_fails_when_they_fall_behind() {
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-lag");
    let topic = format!("autoperf-lag-{}", std::process::id());
    let group = format!("processor-{}", std::process::id());
    Admin::new(&bootstrap).create_topic(&topic, 2);
    // 2 ms of CPU a record: at most 500 records/s, however fast the machine.
    let cost_ms = 2.0;
    let mut processor = processor(&bootstrap, &topic, &group, Duration::from_millis(2));
    let consumer = processor.consumer_process.clone().expect("tb-con started");
    let agent = support::agent();

    // Records for the group to commit: before it has, its lag is unknown,
    // and a run that judges it refuses to start (exit 3, naming it).
    let unknown = scenario(
        &dir,
        &bootstrap,
        &topic,
        &format!("\"lag_trend({group}) < 50/s\""),
        &format!(
            "servers:\n  - {{tier: stream, agent: \"{}\", processes: [{consumer}]}}",
            agent.url()
        ),
    );
    let priming = scenario(&dir, &bootstrap, &topic, "", "");
    let committed_by = Instant::now() + Duration::from_secs(60);
    loop {
        run_ok(
            &priming,
            &["--duration", "1s", "--warmup", "0s", "--quiet"],
            &dir.join("priming"),
        );
        std::thread::sleep(Duration::from_secs(1));
        let (code, _, stderr) = support::autoperf(&["check", &unknown]);
        assert_eq!(code, Some(0), "{stderr}");
        let (code, _, stderr) = support::autoperf(&[
            "run",
            &unknown,
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--quiet",
            "--out",
            dir.join("keeps-up").to_str().unwrap(),
        ]);
        if code == Some(3) {
            assert!(stderr.contains(&format!("group `{group}`")), "{stderr}");
            assert!(
                Instant::now() < committed_by,
                "the group never committed: {stderr}"
            );
            continue;
        }
        // 100 records/s against 500 a second of capacity: it keeps up.
        assert_eq!(code, Some(0), "{stderr}");
        break;
    }
    let level = &support::run_json(&dir.join("keeps-up"))["levels"][0];
    let lag = &level["kafka_lag"][&group];
    assert!(lag["readings"].as_u64().unwrap() >= 2, "{level:#}");
    assert!(lag["trend_rps"].as_f64().unwrap() < 50.0, "{level:#}");
    // Keeping up, it processed each record written: the agent measures
    // the CPU it burned per record, the tier's demand, known by
    // construction (its fetches' handling is taken off the burn).
    let per_record = level["servers"]["stream"]["cpu_ms_per_request"][&consumer]
        .as_f64()
        .unwrap();
    assert!(
        (per_record - cost_ms).abs() <= 0.25 * cost_ms,
        "{per_record} ms of CPU per record for {cost_ms}: {level:#}"
    );

    // Four times its capacity: the lag grows by at least the difference.
    let out = dir.join("behind");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &unknown,
        "--rate",
        "2000/s",
        "--duration",
        "5s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "an SLO failed: {stdout}{stderr}");
    // Its backlog is no longer needed.
    processor.shutdown();
    let run = support::run_json(&out);
    let lag = &run["levels"][0]["kafka_lag"][&group];
    assert!(
        lag["trend_rps"].as_f64().is_some_and(|t| t > 1000.0),
        "{run:#}"
    );
    assert!(lag["last"].as_u64().is_some_and(|l| l > 2000), "{run:#}");
    // Read twice a second: the trend has its 95% interval, which the
    // verdict shows.
    assert!(lag["readings"].as_u64().unwrap() >= 6, "{run:#}");
    let ci = lag["trend_ci95_rps"]
        .as_f64()
        .expect("the trend's interval");
    assert!(
        ci >= 0.0 && ci < lag["trend_rps"].as_f64().unwrap(),
        "{run:#}"
    );
    assert!(stdout.contains("95% interval ±"), "{stdout}");
    let verdict = &run["analysis"]["thresholds"][0];
    assert_eq!(verdict["passed"], false, "{run:#}");
    assert!(stdout.contains(&format!("lag_trend({group})")), "{stdout}");

    // A group nobody runs stops the run before it starts, named.
    let nobody = scenario(
        &dir,
        &bootstrap,
        &topic,
        "\"lag(nobody-consumes-this) < 10000\"",
        "",
    );
    let (code, _, stderr) = support::autoperf(&[
        "run",
        &nobody,
        "--duration",
        "2s",
        "--quiet",
        "--out",
        dir.join("nobody").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("group `nobody-consumes-this`"), "{stderr}");
    assert!(stderr.contains("no committed offsets"), "{stderr}");
    // An HTTP target has no consumer groups: refused by the decoder.
    let http = dir.join("http.yaml");
    std::fs::write(&http, "target: {base_url: \"http://127.0.0.1:1\"}\nrequests: {a: {path: /}}\nthresholds: [\"lag(g) < 10\"]\n").unwrap();
    let (code, _, stderr) = support::autoperf(&["check", http.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("consumer group's lag"), "{stderr}");
}
