//! Theodolite's question, whether the stream processor under test keeps up:
//! a real consumer group (librdkafka, `kafka-client.py consume`) of known
//! capacity (a fixed time per record) reads the topic autoperf writes,
//! and the lag thresholds judge it by its lag, read from the broker.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{broker, python, root, run_ok, Admin};
use crate::support;

/// The stream processor: a consumer group member taking `per_record_us`
/// over each record, for at most `seconds`; killed when dropped.
struct Processor(Child);

impl Processor {
    fn start(
        bootstrap: &str,
        topic: &str,
        group: &str,
        per_record_us: u32,
        seconds: u32,
    ) -> Processor {
        let child = Command::new(python())
            .arg(root().join("scripts/kafka-client.py"))
            .args(["consume", bootstrap, topic, group])
            .args([per_record_us.to_string(), seconds.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .expect("the venv's Python runs");
        Processor(child)
    }
}

impl Drop for Processor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scenario(dir: &std::path::Path, bootstrap: &str, topic: &str, thresholds: &str) -> String {
    let path = dir.join(format!("lag-{}.yaml", thresholds.len()));
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
    // 2 ms a record: at most 500 records/s, however fast the machine.
    let processor = Processor::start(&bootstrap, &topic, &group, 2000, 90);

    // Records for the group to commit: before it has, its lag is unknown,
    // and a run that judges it refuses to start (exit 3, naming it).
    let unknown = scenario(
        &dir,
        &bootstrap,
        &topic,
        &format!("\"lag_trend({group}) < 50/s\""),
    );
    let priming = scenario(&dir, &bootstrap, &topic, "");
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

    // Four times its capacity: the lag grows by at least the difference.
    let out = dir.join("behind");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &unknown,
        "--rate",
        "2000/s",
        "--duration",
        "4s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "an SLO failed: {stdout}{stderr}");
    // Its backlog is no longer needed.
    drop(processor);
    let run = support::run_json(&out);
    let lag = &run["levels"][0]["kafka_lag"][&group];
    assert!(
        lag["trend_rps"].as_f64().is_some_and(|t| t > 1000.0),
        "{run:#}"
    );
    assert!(lag["last"].as_u64().is_some_and(|l| l > 2000), "{run:#}");
    let verdict = &run["analysis"]["thresholds"][0];
    assert_eq!(verdict["passed"], false, "{run:#}");
    assert!(stdout.contains(&format!("lag_trend({group})")), "{stdout}");

    // A group nobody runs stops the run before it starts, named.
    let nobody = scenario(
        &dir,
        &bootstrap,
        &topic,
        "\"lag(nobody-consumes-this) < 10000\"",
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
