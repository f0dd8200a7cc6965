//! Kafka end to end against a real broker (`scripts/kafka.sh start`, on
//! loopback): the bundled Theodolite example at a fixed rate delivers what
//! it should, and a consumer reads back records in the schema-registry wire
//! format whose Avro decodes to the expected fields, keyed by sensor id on
//! the partition a Java client would choose — also over SASL_SSL with
//! SCRAM-SHA-512 and zstd at 20,000 records/s. Every security protocol and
//! codec delivers records a consumer reads back; the idempotent producer's
//! sequence numbers add up to what the broker kept. A bad bootstrap
//! address, an untrusted certificate, wrong credentials or a mechanism the
//! listener does not take fail at once with exit 3.

use crate::support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apache_avro::types::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Starts the broker (idempotent) and returns its bootstrap address.
fn broker() -> String {
    kafka_sh("start", None)
}

/// `scripts/kafka.sh COMMAND`, on `port` instead of the shared broker's.
fn kafka_sh(command: &str, port: Option<u16>) -> String {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("scripts/kafka.sh")).arg(command);
    if let Some(port) = port {
        cmd.env("KAFKA_PORT", port.to_string());
    }
    let out = cmd.output().expect("bash runs scripts/kafka.sh");
    assert!(
        out.status.success(),
        "scripts/kafka.sh {command} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().last().unwrap_or_default().trim().to_string()
}

/// A broker of the test's own (so stopping it disturbs no other test),
/// stopped when dropped.
struct OwnBroker(u16);

impl Drop for OwnBroker {
    fn drop(&mut self) {
        kafka_sh("stop", Some(self.0));
    }
}

/// `autoperf run SCENARIO ARGS… --out OUT`, which must exit 0; returns
/// what it printed on stderr.
fn run_ok(scenario: &str, args: &[&str], out: &Path) -> String {
    let mut all = vec!["run", scenario];
    all.extend_from_slice(args);
    all.extend(["--out", out.to_str().unwrap()]);
    let (code, stdout, stderr) = support::autoperf(&all);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    stderr
}

/// Held by the tests whose figures depend on the rate they reach, so
/// they do not load the shared broker at the same time.
fn rate_sensitive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bundled example, pointed at `bootstrap`, writing to `topic`, with a
/// fixed schema id instead of a registry.
fn theodolite(dir: &Path, bootstrap: &str, topic: &str, schema_id: u32) -> PathBuf {
    let text = std::fs::read_to_string(root().join("examples/theodolite-kafka.yaml")).unwrap();
    let registry = r#"registry: {url: "http://127.0.0.1:18081", subject: input-value}"#;
    assert!(text.contains(registry) && text.contains("topic: input\n"));
    let text = text
        .replace("127.0.0.1:19092", bootstrap)
        .replace("topic: input\n", &format!("topic: {topic}\n"))
        .replace(registry, &format!("schema_id: {schema_id}"));
    let path = dir.join("theodolite-kafka.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

const SCHEMA: &str = r#"{"type": "record", "name": "ActivePowerRecord", "namespace": "titan.ccp.model.records",
  "fields": [{"name": "identifier", "type": "string"}, {"name": "timestamp", "type": "long"},
             {"name": "valueInW", "type": "double"}]}"#;

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The bundled example at `rate` through `listener` (with `settings` and
/// the password in KAFKA_PASSWORD, if given) for 5 s after 2 s of warm-up:
/// no error, the rate achieved, and every record read back over the
/// plaintext listener in the registry wire format, its Avro decoding to the
/// fields written, keyed by sensor id on the partition a Java client would
/// choose.
fn theodolite_delivers(label: &str, listener: &str, secured: Option<(&str, &str)>, rate: u32) {
    let bootstrap = broker();
    let dir = support::scratch_dir(&format!("kafka-theodolite-{label}"));
    let topic = format!("autoperf-test-{label}-{}", std::process::id());
    let scenario = theodolite(&dir, listener, &topic, 42);
    if let Some((settings, _)) = secured {
        set_settings(&scenario, settings);
    }
    // Made first, its leaders elected (CI beside a busy loop per core: a
    // topic the first records made answered none of them in 5 s).
    Admin::new(&bootstrap).create_topic(&topic, 4);
    let out = dir.join("results");
    let began = epoch_ms();
    let mut run = Command::new(support::autoperf_exe());
    run.args([
        "run",
        scenario.to_str().unwrap(),
        "--rate",
        &format!("{rate}/s"),
    ])
    .args([
        "--duration",
        "5s",
        "--warmup",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    if let Some((_, password)) = secured {
        run.env("KAFKA_PASSWORD", password);
    }
    let done = run.output().unwrap();
    let ended = epoch_ms();
    assert!(
        done.status.success(),
        "{label}: {}\n{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    let rate = f64::from(rate);
    let run = support::run_json(&out);
    let level = &run["levels"][0];
    let requests = level["requests"].as_u64().unwrap();
    assert_eq!(level["errors"], 0, "{level}");
    // Acknowledged inside the 5 s window: the records still in flight at
    // its end (a few ms' worth) fall outside it, so the topic below is the
    // exact count.
    assert!(
        requests as f64 >= 0.97 * rate * 5.0,
        "{requests} records in 5 s at {rate}/s"
    );
    assert!(
        level["achieved_rate_rps"].as_f64().unwrap() >= 0.99 * rate,
        "{level}"
    );

    // Read everything back.
    let (records, partitions, total) = read_all(&bootstrap, &topic);
    assert!(partitions >= 1);
    // Every arrival of the level, warm-up included (7 s at the rate), is
    // delivered: at least 99% of them are in the topic.
    assert!(
        total >= requests && total as f64 >= 0.99 * rate * 7.0,
        "{total} records in the topic, {requests} measured"
    );

    let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
    let mut sensors = HashSet::new();
    let read = read_back(&records, |message| {
        let key = std::str::from_utf8(message.key().expect("a key")).unwrap();
        let payload = message.payload().expect("a value");
        assert_eq!(payload[0], 0, "magic byte");
        assert_eq!(u32::from_be_bytes(payload[1..5].try_into().unwrap()), 42);
        let mut datum = &payload[5..];
        #[allow(deprecated)] // its replacement's builder is more than a test needs
        let value = apache_avro::from_avro_datum(&schema, &mut datum, None).unwrap();
        assert!(datum.is_empty(), "trailing bytes after the datum");
        let Value::Record(fields) = value else {
            panic!("a record: {value:?}")
        };
        let [(n1, Value::String(id)), (n2, Value::Long(ts)), (n3, Value::Double(w))] = &fields[..]
        else {
            panic!("identifier, timestamp, valueInW: {fields:?}")
        };
        assert_eq!(
            (n1.as_str(), n2.as_str(), n3.as_str()),
            ("identifier", "timestamp", "valueInW")
        );
        assert_eq!(id, key, "keyed by sensor id");
        let n: u32 = id.strip_prefix("s_").unwrap().parse().unwrap();
        assert!(n < 10_000, "{id}");
        assert!(
            (began..=ended).contains(ts),
            "timestamp {ts} outside the run"
        );
        assert!((0.0..100.0).contains(w), "valueInW {w}");
        // Java clients' default partitioner: murmur2 of the key.
        assert_eq!(
            message.partition(),
            (murmur2(key.as_bytes()) & 0x7fff_ffff) as i32 % partitions,
            "key {key} on the partition a Java client would choose"
        );
        sensors.insert(n);
    });
    assert_eq!(read, total, "read back all records");
    // More than 25,000 records, cycling over 10,000 sensors: every one sent.
    assert_eq!(sensors.len(), 10_000);
}

/// The stub registry of `autoperf testbed --schema-registry`, stopped
/// (with the testbed it comes with) when dropped.
struct Registry {
    child: std::process::Child,
    url: String,
}

impl Registry {
    fn start() -> Registry {
        use std::io::BufRead;
        let mut child = Command::new(support::autoperf_exe())
            .args(["testbed", "--listen", "127.0.0.1:0"])
            .args(["--schema-registry", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split("schema registry ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("testbed printed {line:?}"))
            .to_string();
        Registry { child, url }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // SIGTERM: the launcher stops its tiers and the registry with it.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

#[test]
fn registry_wire_format_decodes_with_confluents_deserializer() {
    let bootstrap = broker();
    let python = python();
    let registry = Registry::start();
    let dir = support::scratch_dir("kafka-registry");
    let topic = format!("autoperf-registry-{}", std::process::id());
    // The example as shipped, but for where the broker, registry and topic are.
    let text = std::fs::read_to_string(root().join("examples/theodolite-kafka.yaml"))
        .unwrap()
        .replace("127.0.0.1:19092", &bootstrap)
        .replace("http://127.0.0.1:18081", &registry.url)
        .replace("topic: input\n", &format!("topic: {topic}\n"))
        .replace("subject: input-value", &format!("subject: {topic}-value"));
    let scenario = dir.join("theodolite-kafka.yaml");
    std::fs::write(&scenario, text).unwrap();
    // Made first, its leaders elected: this test is about the records'
    // format. (A topic the first records create is refused until its
    // leaders are elected, seconds on a busy machine: CI beside a busy loop
    // per core failed 370 of 509 records so.)
    Admin::new(&bootstrap).create_topic(&topic, 4);
    let out = dir.join("results");
    run_ok(
        scenario.to_str().unwrap(),
        &["--rate", "2000/s", "--duration", "3s", "--warmup", "1s"],
        &out,
    );
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    let requests = level["requests"].as_u64().unwrap();

    let verify = Command::new(python)
        .arg(root().join("scripts/kafka-verify.py"))
        .args(["--bootstrap", &bootstrap, "--registry", &registry.url])
        .args(["--topic", &topic, "--min-count", &requests.to_string()])
        .args(["--fields", "identifier,timestamp,valueInW"])
        .args(["--key-field", "identifier", "--murmur2", "--timeout", "60"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap_or_else(|e| {
        panic!(
            "kafka-verify.py printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&verify.stderr)
        )
    });
    assert!(verify.status.success(), "{report}");
    assert_eq!(report["failures"], 0, "{report}");
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    assert!(report["count"].as_u64().unwrap() >= requests, "{report}");
    // 8,000 records over 10,000 sensors taken in order: all distinct.
    assert!(
        report["distinct_keys"].as_u64().unwrap() >= requests.min(10_000),
        "{report}"
    );
}

#[test]
fn bad_bootstrap_address_fails_fast_with_exit_3() {
    let dir = support::scratch_dir("kafka-bad-bootstrap");
    let scenario = theodolite(&dir, "127.0.0.1:1", "input", 1);
    let began = Instant::now();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--rate",
        "100/s",
        "--duration",
        "30s",
        "--out",
        dir.join("results").to_str().unwrap(),
    ]);
    let took = began.elapsed();
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn broker_going_away_mid_run_counts_errors_and_ends_on_time() {
    // Beside the shared broker's port (19092 unless KAFKA_PORT says), so
    // two checkouts' suites can run at once.
    let shared: u16 = std::env::var("KAFKA_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(19092);
    let port = shared + 300;
    let broker = OwnBroker(port);
    let bootstrap = kafka_sh("start", Some(port));
    let dir = support::scratch_dir("kafka-broker-gone");
    let scenario = theodolite(&dir, &bootstrap, "gone", 1);
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(&scenario, text.replace("timeout: 10s", "timeout: 2s")).unwrap();
    let out = dir.join("results");
    let run = Command::new(support::autoperf_exe())
        .args(["run", scenario.to_str().unwrap(), "--rate", "1000/s"])
        .args(["--duration", "10s", "--warmup", "1s", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once two seconds of the level are on disk: a busy machine takes a
    // while to start the run (a fixed sleep stopped the broker before the
    // run had reached it, and the run rightly said exit 3, unreachable).
    let series = out.join("timeseries.csv");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&series).map_or(0, |t| t.lines().count()) < 3 {
        assert!(Instant::now() < deadline, "the level never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let began = Instant::now();
    drop(broker); // a controlled shutdown, a few seconds
    let done = run.wait_with_output().unwrap();
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&done.stderr);
    // Most records of the level failed, refused: measured nothing
    // trustworthy, and says so with exit 4.
    assert_eq!(done.status.code(), Some(4), "{stderr}");
    // At most the 9 s of load left, and a moment to write the results.
    assert!(took < Duration::from_secs(13), "took {took:?}");
    let level = &support::run_json(&out)["levels"][0];
    let errors = level["errors"].as_u64().unwrap();
    assert!(errors > 1000, "{level}");
    // While no broker is up, the records waiting for it fail as the
    // reconnects do: refused (or `connect`, where the port just hangs).
    let kinds = &level["errors_by_kind"];
    let unreachable =
        kinds["connect_refused"].as_u64().unwrap_or(0) + kinds["connect"].as_u64().unwrap_or(0);
    assert!(unreachable > 0, "{level}");
    assert!(
        level["requests"].as_u64().unwrap() > errors,
        "some records went through first"
    );
    assert!(
        level["invalid"].as_str().unwrap().contains("connect"),
        "{level}"
    );
}

/// Kafka's `Utils.murmur2` (the Java client's key hash).
fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[test]
fn a_kafka_level_spread_over_two_generator_processes_is_one_level() {
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-spread");
    let topic = format!("autoperf-test-spread-{}", std::process::id());
    let scenario = theodolite(&dir, &bootstrap, &topic, 7);
    let out = dir.join("results");
    let stderr = run_ok(
        scenario.to_str().unwrap(),
        &[
            "--rate",
            "2000/s",
            "--duration",
            "3s",
            "--warmup",
            "2s",
            "--generators",
            "2",
        ],
        &out,
    );
    assert!(stderr.contains("2 generator processes"), "{stderr}");
    let run = support::run_json(&out);
    let level = &run["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    // The two processes split the arrivals between them (every other
    // one): together they keep the rate, neither half of it nor twice.
    // Arrivals count in the second they fire, so a late burst at the end of
    // the warm-up (a cold broker on a busy machine) shifts a few percent.
    let achieved = level["achieved_rate_rps"].as_f64().unwrap();
    assert!((achieved - 2000.0).abs() <= 100.0, "{level}");
    let warnings = run["warnings"].to_string();
    assert!(!warnings.contains("generator process"), "{warnings}");
}

/// The Python of the venv with confluent-kafka (librdkafka), made once by
/// scripts/pyenv.sh (which does nothing when it is there).
fn python() -> PathBuf {
    static MADE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let made = MADE.get_or_init(|| {
        Command::new("bash")
            .arg(root().join("scripts/pyenv.sh"))
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(made, "scripts/pyenv.sh failed");
    root().join("target/pyenv/bin/python")
}

/// `scripts/kafka-client.py ARGS…` (librdkafka through confluent-kafka's
/// Python binding): the JSON it printed.
fn kafka_client(args: &[&str]) -> serde_json::Value {
    let out = Command::new(python())
        .arg(root().join("scripts/kafka-client.py"))
        .args(args)
        .output()
        .expect("the venv's Python runs");
    assert!(
        out.status.success(),
        "kafka-client.py {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kafka-client.py prints JSON")
}

/// A record as an independent consumer read it back.
struct Record {
    partition: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

impl Record {
    fn partition(&self) -> i32 {
        self.partition
    }

    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    fn payload(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

/// Every record of `topic` present now, read from the beginning of each
/// partition by librdkafka; the number of partitions, and how many records
/// the partitions held (all of which must have been read).
fn read_all(bootstrap: &str, topic: &str) -> (Vec<Record>, i32, u64) {
    use base64::Engine;
    let file = std::env::temp_dir().join(format!(
        "autoperf-kafka-{}-{topic}.jsonl",
        std::process::id()
    ));
    let said = kafka_client(&["dump", bootstrap, topic, file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    let bytes = |v: &serde_json::Value| {
        v.as_str()
            .map(|b| base64::engine::general_purpose::STANDARD.decode(b).unwrap())
    };
    let records = text
        .lines()
        .map(|line| {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            Record {
                partition: r["p"].as_i64().unwrap() as i32,
                key: bytes(&r["k"]),
                value: bytes(&r["v"]),
            }
        })
        .collect();
    (
        records,
        said["partitions"].as_i64().unwrap() as i32,
        said["total"].as_u64().unwrap(),
    )
}

/// Hands each record read back to `check`; returns how many there were.
fn read_back(records: &[Record], mut check: impl FnMut(&Record)) -> u64 {
    records.iter().for_each(&mut check);
    records.len() as u64
}

/// Records in `topic` on the broker: the sum of its partitions'.
fn records_in(bootstrap: &str, topic: &str) -> u64 {
    records_per_partition(bootstrap, topic).iter().sum()
}

/// Records in each partition of `topic`, by partition id.
fn records_per_partition(bootstrap: &str, topic: &str) -> Vec<u64> {
    kafka_client(&["counts", bootstrap, topic])["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
}

#[test]
fn closed_users_each_wait_for_their_acknowledgement() {
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-closed");
    let topic = format!("autoperf-closed-{}", std::process::id());
    let scenario = theodolite(&dir, &bootstrap, &topic, 7);
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(
        &scenario,
        text.replace("arrivals:", "think_time: 20ms\narrivals:"),
    )
    .unwrap();
    let out = dir.join("results");
    run_ok(
        scenario.to_str().unwrap(),
        &["--users", "40", "--duration", "3s", "--warmup", "1s"],
        &out,
    );
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    let requests = level["requests"].as_u64().unwrap();
    // 40 users, each one record per (20 ms think + its acknowledgement):
    // at most 2,000/s, however fast the broker, and Little's law holds for
    // the closed loop, however slow.
    let throughput = level["throughput_rps"].as_f64().unwrap();
    assert!(requests > 0 && throughput <= 2000.0, "{level}");
    // Little's law over a window of T seconds is off by the users whose
    // cycle straddles an end: at most the slowest acknowledgement's share
    // of the window at each end (a broker that stalls 600 ms just before
    // the window opens, as a busy machine's does, gives 10%). Users that
    // did not wait for their acknowledgements would be off by far more.
    // A generator short of CPU (beside a busy neighbour: timers 58 ms
    // late, users idle between their cycles) breaks the law too, and its
    // level says so: client_bottleneck.
    let gap = level["little"]["relative_gap"].as_f64().unwrap();
    let slowest_s = level["response_time_ms"]["max"].as_f64().unwrap() / 1000.0;
    let window_s = level["duration_s"].as_f64().unwrap();
    assert!(
        gap < 0.05 + 2.0 * slowest_s / window_s || level["client_bottleneck"] == true,
        "{level}"
    );
    // Every acknowledged record is on the broker (the warm-up's too).
    assert!(records_in(&bootstrap, &topic) >= requests, "{level}");
}

/// A fake broker on 127.0.0.1:0: answers Metadata truthfully (one
/// partition, led by itself) and every Produce request with the body
/// `produce` makes of its correlation id, its number among the Produce
/// requests (from 0) and its body past the client id.
fn fake_broker(
    produce: impl Fn(i32, usize, &[u8]) -> Vec<u8> + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let produce = std::sync::Arc::new(produce);
    let produced = std::sync::Arc::new(AtomicUsize::new(0));
    let ids = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(FIRST_PRODUCER_ID));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let (produce, produced, ids) = (produce.clone(), produced.clone(), ids.clone());
            std::thread::spawn(move || loop {
                let mut size = [0u8; 4];
                if conn.read_exact(&mut size).is_err() {
                    return;
                }
                let mut req = vec![0u8; i32::from_be_bytes(size) as usize];
                if conn.read_exact(&mut req).is_err() {
                    return;
                }
                let api = i16::from_be_bytes([req[0], req[1]]);
                let corr = i32::from_be_bytes(req[4..8].try_into().unwrap());
                let client = i16::from_be_bytes([req[8], req[9]]) as usize;
                let after_client = &req[10 + client..];
                let mut body = Vec::new();
                if api == 22 {
                    // InitProducerId v1: a new producer id each time.
                    let id = ids.fetch_add(1, Ordering::SeqCst);
                    body.extend_from_slice(&corr.to_be_bytes());
                    body.extend_from_slice(&0i32.to_be_bytes()); // throttle
                    body.extend_from_slice(&0i16.to_be_bytes()); // no error
                    body.extend_from_slice(&id.to_be_bytes());
                    body.extend_from_slice(&0i16.to_be_bytes()); // epoch
                } else if api == 3 {
                    let at = 4; // past the topic count
                    let len = i16::from_be_bytes([after_client[at], after_client[at + 1]]) as usize;
                    let topic = &after_client[at + 2..at + 2 + len];
                    body.extend_from_slice(&corr.to_be_bytes());
                    body.extend_from_slice(&0i32.to_be_bytes()); // throttle
                    body.extend_from_slice(&1i32.to_be_bytes()); // one broker
                    body.extend_from_slice(&1i32.to_be_bytes());
                    body.extend_from_slice(&9i16.to_be_bytes());
                    body.extend_from_slice(b"127.0.0.1");
                    body.extend_from_slice(&i32::from(addr.port()).to_be_bytes());
                    body.extend_from_slice(&(-1i16).to_be_bytes()); // rack
                    body.extend_from_slice(&(-1i16).to_be_bytes()); // cluster id
                    body.extend_from_slice(&1i32.to_be_bytes()); // controller
                    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
                    body.extend_from_slice(&0i16.to_be_bytes());
                    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
                    body.extend_from_slice(topic);
                    body.push(0); // not internal
                    body.extend_from_slice(&1i32.to_be_bytes()); // one partition
                    body.extend_from_slice(&0i16.to_be_bytes());
                    body.extend_from_slice(&0i32.to_be_bytes());
                    body.extend_from_slice(&1i32.to_be_bytes()); // leader: itself
                    body.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]); // replicas
                    body.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]); // in sync
                } else {
                    let nth = produced.fetch_add(1, Ordering::SeqCst);
                    body = produce(corr, nth, after_client);
                }
                let mut out = (body.len() as i32).to_be_bytes().to_vec();
                out.extend_from_slice(&body);
                if conn.write_all(&out).is_err() {
                    return;
                }
            });
        }
    });
    addr
}

/// The first producer id the fake brokers hand out.
const FIRST_PRODUCER_ID: i64 = 4242;

/// One Produce request's topic, partition and batch (after its size), as
/// the fake brokers read it.
fn produce_request_parts(request: &[u8]) -> (Vec<u8>, [u8; 4], &[u8]) {
    // transactional id (null), acks, timeout, one topic.
    let mut at = 2 + 2 + 4 + 4;
    let len = i16::from_be_bytes([request[at], request[at + 1]]) as usize;
    let topic = request[at + 2..at + 2 + len].to_vec();
    at += 2 + len + 4; // the topic, one partition
    let partition = request[at..at + 4].try_into().unwrap();
    (topic, partition, &request[at + 8..])
}

/// A Produce answer for one partition.
fn produce_answer(corr: i32, topic: &[u8], partition: [u8; 4], code: i16) -> Vec<u8> {
    let mut body = corr.to_be_bytes().to_vec();
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic);
    body.extend_from_slice(&1i32.to_be_bytes()); // one partition
    body.extend_from_slice(&partition);
    body.extend_from_slice(&code.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes()); // base offset
    body.extend_from_slice(&(-1i64).to_be_bytes()); // log append time
    body.extend_from_slice(&0i64.to_be_bytes()); // log start offset
    body.extend_from_slice(&0i32.to_be_bytes()); // throttle
    body
}

/// What a forgetful broker saw.
#[derive(Default)]
struct Forgetful {
    /// Records written, each once.
    written: u64,
    /// Epochs each producer id's writes came under.
    epochs: std::collections::BTreeMap<i64, std::collections::BTreeSet<i16>>,
    /// The producer id whose state it lost.
    forgotten: Option<i64>,
    /// The records of the batch it refused then, and of that id's first
    /// batch written after: the same, when the refused batch kept its place.
    refused_records: Option<Vec<u8>>,
    first_after: Option<Vec<u8>>,
    /// Batches refused for their numbers.
    refused: u64,
}

/// A fake broker that checks an idempotent producer's numbers as Kafka's
/// does (one partition; a producer per shard, each an id of its own), and
/// at the `forget_at`-th Produce request of the first producer to send
/// that many loses its state, as a broker does when it expired while the
/// producer was idle: that batch gets UNKNOWN_PRODUCER_ID, and the id's
/// batches after it are taken only under a higher epoch starting at
/// sequence 0.
fn forgetful_broker(forget_at: usize) -> (std::net::SocketAddr, Arc<std::sync::Mutex<Forgetful>>) {
    let seen = Arc::new(std::sync::Mutex::new(Forgetful::default()));
    // By producer id: (epoch, next sequence), and Produce requests seen.
    let states = std::sync::Mutex::new(std::collections::HashMap::<i64, (i16, i32)>::new());
    let sent = std::sync::Mutex::new(std::collections::HashMap::<i64, usize>::new());
    let log = seen.clone();
    let addr = fake_broker(move |corr, _, request| {
        let (topic, partition, batch) = produce_request_parts(request);
        let field = |at: usize, n: usize| &batch[at..at + n];
        let id = i64::from_be_bytes(field(43, 8).try_into().unwrap());
        let epoch = i16::from_be_bytes(field(51, 2).try_into().unwrap());
        let sequence = i32::from_be_bytes(field(53, 4).try_into().unwrap());
        let records = i32::from_be_bytes(field(57, 4).try_into().unwrap());
        let mut states = states.lock().unwrap();
        let mut seen = log.lock().unwrap();
        let nth = {
            let mut sent = sent.lock().unwrap();
            let n = sent.entry(id).or_default();
            *n += 1;
            *n - 1
        };
        if nth == forget_at && seen.forgotten.is_none() {
            states.remove(&id);
            seen.forgotten = Some(id);
            seen.refused_records = Some(batch[61..].to_vec());
            seen.refused += 1;
            return produce_answer(corr, &topic, partition, 59);
        }
        let state = states.get(&id).copied();
        let code = match state {
            Some((known, _)) if epoch < known => 47, // INVALID_PRODUCER_EPOCH
            Some((known, next)) if epoch == known && sequence < next => 46, // DUPLICATE
            Some((known, next)) if epoch == known && sequence > next => 45, // OUT_OF_ORDER
            Some((known, _)) if epoch == known => 0,
            // Unknown producer, or a new epoch: only from sequence 0.
            _ if sequence == 0 => 0,
            _ => 45,
        };
        if code == 0 {
            if seen.forgotten == Some(id) && seen.first_after.is_none() {
                seen.first_after = Some(batch[61..].to_vec());
            }
            states.insert(id, (epoch, sequence + records));
            seen.written += records as u64;
            seen.epochs.entry(id).or_default().insert(epoch);
        } else if code != 46 {
            seen.refused += 1;
        }
        produce_answer(corr, &topic, partition, code)
    });
    (addr, seen)
}

/// A fake broker that answers every Produce request with the wrong
/// correlation id, as a broken proxy or a protocol bug would.
fn out_of_step_broker() -> std::net::SocketAddr {
    fake_broker(|corr, _, _| {
        let mut body = corr.wrapping_add(1000).to_be_bytes().to_vec();
        body.extend_from_slice(&0i32.to_be_bytes()); // no topics
        body.extend_from_slice(&0i32.to_be_bytes()); // throttle
        body
    })
}

/// A fake broker whose partition's leader is "moving" for its first
/// `refusals` Produce requests (NOT_LEADER_OR_FOLLOWER, written nowhere),
/// then writes everything; it counts the records it wrote.
fn moving_leader_broker(refusals: usize) -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let written = Arc::new(AtomicU64::new(0));
    let count = written.clone();
    let addr = fake_broker(move |corr, nth, request| {
        let (topic, partition, batch) = produce_request_parts(request);
        // Its record count is at byte 57.
        let records = u32::from_be_bytes(batch[57..61].try_into().unwrap());
        let code: i16 = if nth < refusals { 6 } else { 0 };
        if code == 0 {
            count.fetch_add(u64::from(records), Ordering::SeqCst);
        }
        produce_answer(corr, &topic, partition, code)
    });
    (addr, written)
}

/// The Theodolite example against a fake broker: 500 records/s for 2 s,
/// no warm-up, retries after 20 ms. Its level and stderr.
fn two_seconds_at_500(
    addr: std::net::SocketAddr,
    name: &str,
    idempotence: bool,
) -> (serde_json::Value, String) {
    let dir = support::scratch_dir(name);
    let scenario = theodolite(&dir, &addr.to_string(), "t", 1);
    set_settings(
        &scenario,
        &format!("linger.ms: 5, enable.idempotence: {idempotence}, retry.backoff.ms: 20"),
    );
    let out = dir.join("results");
    let args = [
        "--rate",
        "500/s",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--quiet",
    ];
    let stderr = run_ok(scenario.to_str().unwrap(), &args, &out);
    (support::run_json(&out)["levels"][0].clone(), stderr)
}

/// Java's producer retries a batch refused for a passing reason (a leader
/// being elected, a topic being made) until `delivery.timeout.ms`: so does
/// autoperf's. Records refused then written are not errors; the level
/// counts their retries, and the broker holds every acknowledged record.
#[test]
fn batches_refused_while_a_leader_moves_are_retried_not_lost() {
    let (addr, written) = moving_leader_broker(6);
    // This broker gives no producer id.
    let (level, stderr) = two_seconds_at_500(addr, "kafka-moving-leader", false);
    let level = &level;
    assert_eq!(level["errors"], 0, "{level}\n{stderr}");
    let requests = level["requests"].as_u64().unwrap();
    assert!(requests > 500, "{level}");
    // The first six requests' batches went again (one or more times).
    let retries = level["per_request"]["record"]["retries"]
        .as_u64()
        .unwrap_or(0);
    assert!(retries >= 6, "{level}");
    assert!(written.load(Ordering::SeqCst) >= requests, "{level}");
}

/// A broker that lost the idempotent producer's state (it expired while
/// the producer was idle) refuses its numbers: as Java's producer does
/// since KIP-360, autoperf's waits for what is in flight, bumps its epoch,
/// numbers from 0 again and goes on over the same connection. Nothing is
/// lost, nothing written twice.
#[test]
fn a_broker_that_forgot_the_producer_gets_a_new_epoch_and_every_record_once() {
    let (addr, seen) = forgetful_broker(8);
    let (level, stderr) = two_seconds_at_500(addr, "kafka-forgetful", true);
    let level = &level;
    let seen = seen.lock().unwrap();
    assert_eq!(level["errors"], 0, "{level}\n{stderr}");
    let requests = level["requests"].as_u64().unwrap();
    assert!(requests > 500, "{level}");
    // Every record acknowledged was written, and none twice: a record
    // counts as written when the broker takes its numbers, and it refuses
    // numbers it has (DUPLICATE), so a record sent again under a new epoch
    // after its write would count twice. (A record fired in the level's
    // last milliseconds may end with it unsent.)
    let fired = level["sessions"].as_u64().unwrap();
    assert!(
        (requests..=fired).contains(&seen.written),
        "{} written: {level}",
        seen.written
    );
    // The producer it forgot went on under a new epoch of the same id
    // (a new connection would have asked for a new id instead).
    let forgotten = seen.forgotten.expect("the broker never forgot");
    // The refused batch went first: records keep their order.
    assert!(
        seen.refused_records == seen.first_after,
        "the batch written first after the bump is not the one refused: {level}"
    );
    assert_eq!(
        seen.epochs[&forgotten].iter().copied().collect::<Vec<_>>(),
        [0, 1],
        "{:?}: {level}",
        seen.epochs
    );
    let retries = level["per_request"]["record"]["retries"]
        .as_u64()
        .unwrap_or(0);
    assert!(retries >= 1, "{level}");
}

/// The epoch bump rests on what the real broker does: it takes a higher
/// epoch of a producer id from sequence 0 as a fresh start, and fences the
/// old epoch (INVALID_PRODUCER_EPOCH, 47), in its own words on the wire.
#[test]
fn the_broker_takes_a_bumped_epoch_from_sequence_zero_and_fences_the_old() {
    use autoperf_core::protocol::kafka::wire;
    use std::io::{Read, Write};
    let bootstrap = broker();
    let topic = format!("autoperf-test-epoch-{}", std::process::id());
    Admin::new(&bootstrap).create_topic(&topic, 1);
    let mut conn = std::net::TcpStream::connect(&bootstrap).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Sends a request; its answer past the correlation id.
    let mut ask = |request: &[u8]| {
        conn.write_all(request).unwrap();
        let mut size = [0u8; 4];
        conn.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        conn.read_exact(&mut body).unwrap();
        body.split_off(4)
    };
    // A broker just started hands out ids in a moment (COORDINATOR_LOAD_IN_PROGRESS,
    // COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), as the producer knows.
    let given_up = Instant::now() + Duration::from_secs(60);
    let (producer_id, epoch) = loop {
        let mut out = Vec::new();
        wire::init_producer_id_request(&mut out, 0, "autoperf-test");
        let (code, producer_id, epoch) = wire::init_producer_id_response(&ask(&out)).unwrap();
        match code {
            0 => break (producer_id, epoch),
            14..=16 if Instant::now() < given_up => std::thread::sleep(Duration::from_millis(200)),
            code => panic!("InitProducerId: Kafka error {code}"),
        }
    };
    // One record under (epoch, sequence); the broker's error code.
    let mut produce = |correlation: i32, epoch: i16, base_sequence: i32| {
        let mut records = Vec::new();
        wire::put_record(&mut records, 0, 0, None, b"x");
        let mut out = Vec::new();
        let start = wire::produce_begin(&mut out, correlation, "autoperf-test", -1, 30_000, 1);
        wire::produce_topic(&mut out, &topic, 1);
        wire::produce_batch(
            &mut out,
            &wire::BatchRef {
                partition: 0,
                records: &records,
                attributes: 0,
                count: 1,
                base_timestamp: epoch_ms(),
                max_timestamp: epoch_ms(),
                sequenced: Some(wire::Sequenced {
                    producer_id,
                    epoch,
                    base_sequence,
                }),
            },
        );
        wire::produce_end(&mut out, start);
        let mut code = None;
        wire::produce_response(&ask(&out), |_, _, c| code = Some(c)).unwrap();
        code.unwrap()
    };
    assert_eq!(produce(1, epoch, 0), 0);
    assert_eq!(produce(2, epoch, 1), 0);
    // A gap: out of order, as after a batch the broker did not write.
    assert_eq!(produce(3, epoch, 5), 45);
    // The bump: the same id, the next epoch, from 0.
    assert_eq!(produce(4, epoch + 1, 0), 0);
    assert_eq!(produce(5, epoch + 1, 1), 0);
    // The old epoch is fenced.
    assert_eq!(produce(6, epoch, 2), 47);
    assert_eq!(records_in(&bootstrap, &topic), 4);
}

#[test]
fn answers_out_of_step_fail_their_records_as_malformed_and_the_run_ends() {
    let addr = out_of_step_broker();
    let dir = support::scratch_dir("kafka-out-of-step");
    let scenario = theodolite(&dir, &addr.to_string(), "t", 1);
    // This broker answers only Metadata in step: no producer id to get.
    set_settings(&scenario, "linger.ms: 5, enable.idempotence: false");
    let out = dir.join("results");
    let began = Instant::now();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--rate",
        "500/s",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    // Not one record acknowledged: nothing trustworthy, exit 4.
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(began.elapsed() < Duration::from_secs(15));
    let level = &support::run_json(&out)["levels"][0];
    // Every record is accounted for, none acknowledged, none left hanging
    // (they would hold their room and leave arrivals unstarted).
    assert!(
        level["errors_by_kind"]["malformed"].as_u64().unwrap() > 500,
        "{level}"
    );
    assert_eq!(level["errors"], level["requests"], "{level}");
    assert_eq!(level["arrivals"]["unstarted"], 0, "{level}");
}

/// Topics made and grown by librdkafka's admin client, each operation
/// waited on until the broker has done it.
struct Admin(String);

impl Admin {
    fn new(bootstrap: &str) -> Admin {
        Admin(bootstrap.to_string())
    }

    fn create_topic(&self, topic: &str, partitions: i32) {
        kafka_client(&["create", &self.0, topic, &partitions.to_string()]);
    }

    fn grow_to(&self, topic: &str, partitions: usize) {
        kafka_client(&["grow", &self.0, topic, &partitions.to_string()]);
    }
}

/// Replaces the bundled example's `settings` by `settings` (a YAML flow
/// map's entries) in the scenario at `path`.
fn set_settings(path: &Path, settings: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let given = r#"settings: {linger.ms: "5"}"#;
    assert!(text.contains(given), "{text}");
    std::fs::write(
        path,
        text.replace(given, &format!("settings: {{{settings}}}")),
    )
    .unwrap();
}

#[test]
fn partitions_added_mid_run_get_records_after_the_metadata_ages() {
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-grow");
    let topic = format!("autoperf-grow-{}", std::process::id());
    let admin = Admin::new(&bootstrap);
    admin.create_topic(&topic, 1);
    let scenario = theodolite(&dir, &bootstrap, &topic, 9);
    set_settings(&scenario, "linger.ms: 5, metadata.max.age.ms: 500");
    let out = dir.join("results");
    let run = {
        let (scenario, out) = (scenario.clone(), out.clone());
        std::thread::spawn(move || {
            run_ok(
                scenario.to_str().unwrap(),
                &["--rate", "500/s", "--duration", "5s", "--warmup", "1s"],
                &out,
            )
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    admin.grow_to(&topic, 3);
    run.join().unwrap();

    let level = &support::run_json(&out)["levels"][0];
    // A record sent to a new partition in the instant its leader is still
    // being elected is refused, and retried as Java's producer does: none
    // is lost (CI saw 2 of 2,500 lost before retries).
    assert_eq!(level["errors"], 0, "{level}");
    // Keys are spread by murmur2 over the partitions there are: a few
    // seconds at 500/s over 3 partitions leave hundreds in each new one.
    let held = records_per_partition(&bootstrap, &topic);
    assert_eq!(held.len(), 3, "{held:?}");
    for (p, &records) in held.iter().enumerate().skip(1) {
        assert!(records > 100, "partition {p} holds {records} records");
    }
}

/// A topic the first records make, grown by two partitions mid-run, with
/// the idempotent producer: its first batches and those to each new
/// partition meet a leader not elected yet, and are retried. None is lost,
/// and none is written twice: every record carries a number of its own
/// (a `unique` feeder), and each number is read back once.
#[test]
fn a_topic_made_by_the_first_records_and_grown_mid_run_keeps_every_record_once() {
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-made-and-grown");
    let topic = format!("autoperf-made-{}", std::process::id());
    let scenario = dir.join("made.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"name: made-and-grown
target:
  kafka:
    bootstrap: "{bootstrap}"
    acks: all
    settings: {{linger.ms: 5, metadata.max.age.ms: 500}}
data:
  ids: {{range: [0, 999999], mode: unique}}
arrivals: {{rate: 500/s}}
requests:
  record:
    produce:
      topic: {topic}
      key: "k-${{ids.n}}"
      value: {{json: {{id: "${{ids.n}}"}}}}
"#
        ),
    )
    .unwrap();
    let out = dir.join("results");
    let run = {
        let (scenario, out) = (scenario.clone(), out.clone());
        std::thread::spawn(move || {
            run_ok(
                scenario.to_str().unwrap(),
                &["--duration", "5s", "--warmup", "1s", "--quiet"],
                &out,
            )
        })
    };
    // The run makes the topic with the broker's default partitions (4,
    // `num.partitions` in scripts/kafka.sh).
    let made = Instant::now() + Duration::from_secs(20);
    while kafka_client(&["exists", &bootstrap, &topic])["exists"] != true {
        assert!(Instant::now() < made, "the run did not make {topic}");
        std::thread::sleep(Duration::from_millis(200));
    }
    Admin::new(&bootstrap).grow_to(&topic, 6);
    let stderr = run.join().unwrap();

    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}\n{stderr}");
    let requests = level["requests"].as_u64().unwrap();
    assert!(requests >= 500, "{level}");
    let (records, partitions, total) = read_all(&bootstrap, &topic);
    assert_eq!(partitions, 6);
    let mut seen = HashSet::new();
    let read = read_back(&records, |message| {
        let value: serde_json::Value =
            serde_json::from_slice(message.payload().expect("a value")).unwrap();
        let id = value["id"].as_str().unwrap().to_string();
        assert!(seen.insert(id.clone()), "record {id} written twice");
    });
    assert_eq!(read, total);
    // Every acknowledged record is there (the warm-up's too).
    assert!(
        total >= requests,
        "{total} in the topic, {requests} acknowledged"
    );
}

/// Every codec: records produced with `compression.type` gzip, snappy, lz4
/// and zstd are read back by librdkafka (an independent consumer) whole,
/// each on its key's partition, and the level records the bytes sent
/// against the bytes written: the compression ratio.
#[test]
fn every_compression_codec_delivers_records_a_consumer_reads_back() {
    let _one_at_a_time = rate_sensitive();
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-codecs");
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let settings = format!("compression.type: {codec}, linger.ms: 20");
        let (sent, written) =
            deliver_and_read_back(&dir, codec, &bootstrap, &bootstrap, &settings, &[]);
        // Small batches (20 ms of 1,000 records/s over the partitions)
        // still shrink by a third or more (2.0-2.6x measured).
        assert!(
            written > 0 && sent * 3 < written * 2,
            "{codec}: {sent} bytes sent for {written} written"
        );
        eprintln!(
            "{codec}: {sent} bytes sent for {written} written ({:.2}x)",
            written as f64 / sent as f64
        );
    }
}

/// The secured listeners of the shared broker (`scripts/kafka.sh
/// security`): addresses, CA, client certificate, user.
fn broker_security() -> std::collections::HashMap<String, String> {
    broker();
    let out = Command::new("bash")
        .arg(root().join("scripts/kafka.sh"))
        .arg("security")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_security_protocol_delivers_and_refusals_name_the_setting() {
    let _one_at_a_time = rate_sensitive();
    let plain = broker();
    let sec = broker_security();
    let dir = support::scratch_dir("kafka-security");
    let (ca, cert, key, user) = (
        &sec["CA"],
        &sec["CLIENT_CERT"],
        &sec["CLIENT_KEY"],
        &sec["USER"],
    );
    // The password comes from the environment, as users are told to.
    let password = [("KAFKA_PASSWORD", sec["PASSWORD"].as_str())];
    // An unsigned token (the test listener's unsecured validator takes it).
    let token = unsigned_token("autoperf", 3600);
    let cases = [
        ("sasl-ssl-oauthbearer", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: OAUTHBEARER, sasl.oauthbearer.token: '{token}', compression.type: lz4")),
        // The SSL listener requires a client certificate.
        ("ssl", &sec["SSL"], format!("security.protocol: SSL, ssl.ca.location: '{ca}', ssl.certificate.location: '{cert}', ssl.key.location: '{key}', compression.type: lz4")),
        ("sasl-ssl-plain", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: PLAIN, sasl.username: {user}, sasl.password: '${{env.KAFKA_PASSWORD}}', compression.type: gzip")),
        ("sasl-ssl-scram256", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: SCRAM-SHA-256, sasl.username: {user}, sasl.password: '${{env.KAFKA_PASSWORD}}', compression.type: snappy")),
        ("sasl-ssl-scram512", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: SCRAM-SHA-512, sasl.username: {user}, sasl.password: '${{env.KAFKA_PASSWORD}}', compression.type: zstd")),
        ("sasl-plaintext-scram512", &sec["SASL_PLAINTEXT"], format!("security.protocol: SASL_PLAINTEXT, sasl.mechanism: SCRAM-SHA-512, sasl.username: {user}, sasl.password: '${{env.KAFKA_PASSWORD}}'")),
    ];
    for (label, listener, settings) in &cases {
        // Read back over the plaintext listener: the same topic, another door.
        deliver_and_read_back(
            &dir,
            label,
            listener,
            &plain,
            &format!("{settings}, linger.ms: 20"),
            &password,
        );
    }

    // Refused at the start, exit 3, the setting to fix named.
    let refusals = [
        ("wrong-password", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: SCRAM-SHA-512, sasl.username: {user}, sasl.password: not-the-password"), "sasl.password"),
        ("untrusted", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512, sasl.username: {user}, sasl.password: x"), "ssl.ca.location"),
        ("mechanism", &sec["SASL_PLAINTEXT"], format!("security.protocol: SASL_PLAINTEXT, sasl.mechanism: PLAIN, sasl.username: {user}, sasl.password: x"), "sasl.mechanism"),
        ("no-client-cert", &sec["SSL"], format!("security.protocol: SSL, ssl.ca.location: '{ca}'"), "ssl.certificate.location"),
        ("plaintext-to-tls", &sec["SSL"], "security.protocol: PLAINTEXT".to_string(), "security.protocol"),
        ("expired-token", &sec["SASL_SSL"], format!("security.protocol: SASL_SSL, ssl.ca.location: '{ca}', sasl.mechanism: OAUTHBEARER, sasl.oauthbearer.token: '{}'", unsigned_token("autoperf", -60)), "sasl.oauthbearer.token"),
        ("tls-to-plaintext", &plain, format!("security.protocol: SSL, ssl.ca.location: '{ca}'"), "security.protocol"),
    ];
    for (label, listener, settings, named) in &refusals {
        let scenario = security_scenario(&dir, label, listener, settings, "autoperf-refused");
        let began = Instant::now();
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            scenario.to_str().unwrap(),
            "--rate",
            "100/s",
            "--duration",
            "2s",
            "--out",
            dir.join(format!("{label}-results")).to_str().unwrap(),
        ]);
        assert_eq!(code, Some(3), "{label}: {stdout}\n{stderr}");
        assert!(stderr.contains(named), "{label}: names {named}: {stderr}");
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "{label}: took {:?}",
            began.elapsed()
        );
    }
}

/// An unsigned JWT (`alg: none`) for `subject`, expiring `lifetime_s`
/// seconds from now (negative: already expired).
fn unsigned_token(subject: &str, lifetime_s: i64) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use base64::Engine;
    let now = epoch_ms() / 1000;
    let header = B64.encode(r#"{"alg":"none"}"#);
    let claims = serde_json::json!({"sub": subject, "iat": now - 10, "exp": now + lifetime_s});
    format!("{header}.{}.", B64.encode(claims.to_string()))
}

/// A small keyed JSON workload to `topic` through `bootstrap` under
/// `settings` (a YAML flow map's entries).
fn security_scenario(
    dir: &Path,
    label: &str,
    bootstrap: &str,
    settings: &str,
    topic: &str,
) -> PathBuf {
    let scenario = dir.join(format!("{label}.yaml"));
    std::fs::write(
        &scenario,
        format!(
            r#"name: {label}
target:
  kafka:
    bootstrap: "{bootstrap}"
    acks: 1
    settings: {{{settings}}}
data:
  sensors: {{range: [0, 99]}}
arrivals: {{rate: 1000/s}}
requests:
  record:
    produce:
      topic: {topic}
      key: "sensor-${{sensors.n}}"
      value: {{json: {{sensor: "sensor-${{sensors.n}}", unit: watt, note: "a repetitive note that compresses well, as telemetry does"}}}}
"#
        ),
    )
    .unwrap();
    scenario
}

/// Runs 2 s of 1,000 keyed records/s through `bootstrap` under `settings`
/// with no error, then reads every record back through `plain` with
/// librdkafka: each a JSON value naming its key, on the partition a Java
/// client would choose. Returns the bytes sent and written.
fn deliver_and_read_back(
    dir: &Path,
    label: &str,
    bootstrap: &str,
    plain: &str,
    settings: &str,
    env: &[(&str, &str)],
) -> (u64, u64) {
    let topic = format!("autoperf-{label}-{}", std::process::id());
    let scenario = security_scenario(dir, label, bootstrap, settings, &topic);
    let out = dir.join(format!("{label}-results"));
    // Made first, its leader elected: the broker refuses a new topic's
    // first batches until then, which on a busy machine took longer than
    // the warm-up (a level of 63 records, each waiting 300 ms).
    Admin::new(plain).create_topic(&topic, 4);
    let mut run = Command::new(support::autoperf_exe());
    run.args([
        "run",
        scenario.to_str().unwrap(),
        "--rate",
        "1000/s",
        "--duration",
        "2s",
    ])
    .args(["--warmup", "1s", "--quiet", "--out", out.to_str().unwrap()])
    .envs(env.iter().copied());
    let done = run.output().unwrap();
    assert!(
        done.status.success(),
        "{label}: {}\n{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["errors"], 0, "{label}: {level}");
    // At 1000/s for 2 s, however slowly a busy machine's broker answers,
    // enough records to tell each codec's ratio.
    let requests = level["requests"].as_u64().unwrap();
    assert!(requests >= 200, "{label}: {level}");
    let per = &level["per_request"]["record"];

    let (records, partitions, total) = read_all(plain, &topic);
    assert!(
        total >= requests,
        "{label}: {total} in the topic, {requests} acknowledged"
    );
    let read = read_back(&records, |message| {
        let key = std::str::from_utf8(message.key().expect("a key")).unwrap();
        let value: serde_json::Value = serde_json::from_slice(message.payload().expect("a value"))
            .unwrap_or_else(|e| panic!("{label}: a record that is not the JSON written: {e}"));
        assert_eq!(value["sensor"], key, "{label}");
        assert_eq!(value["unit"], "watt", "{label}");
        let expected = (murmur2(key.as_bytes()) & 0x7fff_ffff) as i32 % partitions;
        assert_eq!(message.partition(), expected, "{label}: {key}");
    });
    assert_eq!(read, total, "{label}: every record read back");
    (
        per["body_bytes"].as_u64().unwrap(),
        per["decoded_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn the_idempotent_producer_numbers_every_record_the_broker_keeps() {
    let _one_at_a_time = rate_sensitive();
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-idempotent");
    // acks: all and 5 in flight: idempotent by default, as Java's producer.
    let settings = "linger.ms: 20, compression.type: lz4";
    let topic = format!("autoperf-idempotent-{}", std::process::id());
    // Made first: a topic the run creates refuses its first batches, whose
    // numbers the broker would then count as taken.
    Admin::new(&bootstrap).create_topic(&topic, 4);
    let path = security_scenario(&dir, "idempotent", &bootstrap, settings, &topic);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("acks: 1", "acks: all");
    std::fs::write(&path, text).unwrap();
    let out = dir.join("idempotent-results");
    run_ok(
        path.to_str().unwrap(),
        &[
            "--rate",
            "1000/s",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--quiet",
        ],
        &out,
    );
    let level = &support::run_json(&out)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");

    // The broker's own account (Kafka's describe-producers): per producer
    // id, the last sequence number it took. Each id numbers its records
    // from 0, so the last numbers + 1 add up to the partition's records.
    let classpath = kafka_sh("classpath", None);
    let per_partition = records_per_partition(&bootstrap, &topic);
    for (partition, &records) in per_partition.iter().enumerate() {
        let described = Command::new("java")
            .args([
                "-cp",
                &classpath,
                "org.apache.kafka.tools.TransactionsCommand",
            ])
            .args(["--bootstrap-server", &bootstrap, "describe-producers"])
            .args(["--topic", &topic, "--partition", &partition.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&described.stdout);
        assert!(
            described.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&described.stderr)
        );
        let numbered: u64 = text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
            .map(|last| last + 1)
            .sum();
        assert!(records > 0, "partition {partition} got records");
        assert_eq!(numbered, records, "partition {partition}: {text}");
    }
}

#[test]
fn the_theodolite_example_searches_its_highest_sustained_rate() {
    // `autoperf capacity` on the example (it has `arrivals:`): the open
    // search over a Kafka target, coarse (factor 8, 25%) to stay short.
    let _one_at_a_time = rate_sensitive();
    let bootstrap = broker();
    let dir = support::scratch_dir("kafka-open-search");
    let topic = format!("open-search-{}", epoch_ms());
    let scenario = theodolite(&dir, &bootstrap, &topic, 1);
    let mut text = std::fs::read_to_string(&scenario).unwrap();
    text.push_str(
        "capacity: {min_duration: 3s, window: 1s, max_duration: 10s, rate_factor: 8, rate_precision: 25%}\n",
    );
    std::fs::write(&scenario, text).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "capacity",
        scenario.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    let a = &run["analysis"];
    // How high it gets is this machine's figure, bench/README.md's (Kafka:
    // the SLO search); here, that it finds one and says why it stopped.
    let pass = a["max_passing_rate_rps"].as_f64().expect("a passing rate");
    // It ends on the broker's limit (a failed SLO) or on autoperf's own,
    // and says which.
    match a["stop_reason"].as_str() {
        Some("completed") => assert!(a["failed_slo"]["source"].is_string(), "{a}"),
        Some("client_bottleneck") => {
            assert!(a["generator_limit_rps"].as_f64() > Some(pass), "{a}")
        }
        other => panic!("stop_reason {other:?}: {a}"),
    }
    // What was acknowledged is on the broker.
    let acked: u64 = run["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["requests"].as_u64().unwrap() - l["errors"].as_u64().unwrap())
        .sum();
    assert!(records_in(&bootstrap, &topic) >= acked, "{acked}");
}

/// Tests of the rates the broker and the generator reach together, a CPU
/// limit of this machine: `scripts/test.sh` runs them one at a time, with
/// nothing beside them.
mod alone {
    use super::*;

    #[test]
    fn theodolite_example_delivers_the_rate_in_the_registry_wire_format() {
        let _alone = support::alone();
        let bootstrap = broker();
        theodolite_delivers("plaintext", &bootstrap, None, 5000);
    }

    #[test]
    fn theodolite_example_over_sasl_ssl_with_scram_512_and_zstd_delivers_20000_a_second() {
        let _alone = support::alone();
        let sec = broker_security();
        let settings = format!(
            "linger.ms: 5, compression.type: zstd, security.protocol: SASL_SSL, ssl.ca.location: '{}', \
             sasl.mechanism: SCRAM-SHA-512, sasl.username: {}, sasl.password: '${{env.KAFKA_PASSWORD}}'",
            sec["CA"], sec["USER"]
        );
        let secured = (settings.as_str(), sec["PASSWORD"].as_str());
        theodolite_delivers("sasl-ssl", &sec["SASL_SSL"], Some(secured), 20_000);
    }
}

mod lag;
