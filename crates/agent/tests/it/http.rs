//! The agent's HTTP API against a real server on 127.0.0.1:0: routing,
//! refusals, authentication, and live counters of a CPU-burning child
//! that then exits (departed accounting).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use autoperf_agent::{serve, Access, Counters, GroupCounters};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TOKEN: &str = "test-token-0123456789abcdef";

/// A running agent; dropping it without `stop` aborts it.
struct Agent {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Agent {
    async fn start(require_token: Option<&str>) -> Agent {
        Agent::start_with(Access {
            token: require_token.map(str::to_string),
            cmdline: Vec::new(),
            ..Access::default()
        })
        .await
    }

    async fn start_with(access: Access) -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, access, async move {
            let _ = rx.await;
        }));
        Agent {
            addr,
            stop: Some(tx),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let task = &mut self.task;
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("agent stops within 5 s")
            .unwrap()
            .unwrap();
    }

    async fn get(&self, target: &str) -> (u16, String) {
        self.request("GET", target, None).await
    }

    /// One HTTP/1.1 request on a fresh connection; the status and body.
    async fn request(&self, method: &str, target: &str, auth: Option<&str>) -> (u16, String) {
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request =
            format!("{method} {target} HTTP/1.1\r\nHost: agent\r\n{auth}Connection: close\r\n\r\n");
        let exchange = async {
            let mut stream = TcpStream::connect(self.addr).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await.unwrap();
            String::from_utf8(response).unwrap()
        };
        let response = tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .expect("response within 5 s");
        let status = response[9..12].parse().unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
        (status, body)
    }

    async fn counters(&self, query: &str) -> Counters {
        let (status, body) = self.get(&format!("/v1/counters?{query}")).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A child process that is killed and reaped however the test ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn clk_tck() -> f64 {
    // The test reads /proc itself to cross-check; clock ticks are 100 on
    // every Linux it runs on, but ask the agent's own helper to be sure.
    autoperf_agent::scan::clk_tck() as f64
}

/// utime + stime of one process, in seconds, straight from /proc.
fn proc_cpu_s(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let s = autoperf_agent::procfs::parse_pid_stat(&text).unwrap();
    (s.utime + s.stime) as f64 / clk_tck()
}

fn assert_error_json(body: &str) {
    assert_eq!(body.trim_end().lines().count(), 1, "one line: {body}");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(v["error"].is_string(), "{body}");
}

#[tokio::test]
async fn health_routing_and_refusals() {
    let agent = Agent::start(None).await;

    let (status, body) = agent.get("/v1/health").await;
    assert_eq!(status, 200);
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));

    let (status, body) = agent.get("/metrics").await;
    assert_eq!(status, 404);
    assert_error_json(&body);
    let (status, body) = agent.request("POST", "/v1/counters", None).await;
    assert_eq!(status, 405);
    assert_error_json(&body);

    let many: Vec<String> = (0..33).map(|i| format!("process=p{i}")).collect();
    let long = format!("process={}", "x".repeat(65));
    for query in [
        many.join("&"),
        long,
        "process=".to_string(),
        "process=a%01b".to_string(),
        "process=a&match=regex".to_string(),
        "process=a&pid=1".to_string(),
        "process=%E0%80".to_string(),
    ] {
        let (status, body) = agent.get(&format!("/v1/counters?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_error_json(&body);
    }
    // 32 names of 64 bytes are within the limits.
    let most: Vec<String> = (0..32).map(|i| format!("process={i:064}")).collect();
    let c = agent.counters(&most.join("&")).await;
    assert_eq!(c.processes.len(), 32);

    agent.stop().await;
}

#[tokio::test]
async fn host_counters_and_an_absent_name() {
    let agent = Agent::start(None).await;
    let name = "autoperf-no-such-process-anywhere";
    let first = agent.counters(&format!("process={name}")).await;
    assert_eq!(first.agent.name, "autoperf-agent");
    assert!(first.timestamp_ms > 1_600_000_000_000);
    let host = &first.host;
    assert!(host.cores >= 1 && host.available_parallelism >= 1);
    assert!(host.clk_tck > 0);
    assert!(host.cpu.total_s > host.cpu.busy_s && host.cpu.busy_s > 0.0);
    assert!(host.net.contains_key("lo"), "{:?}", host.net);
    let absent = &first.processes[name];
    assert_eq!(
        *absent,
        GroupCounters {
            cpu_s: 0.0,
            utime_s: 0.0,
            stime_s: 0.0,
            read_bytes: Some(0),
            write_bytes: Some(0),
            rchar: Some(0),
            wchar: Some(0),
            processes: 0,
            threads: 0,
            departed: 0,
            rss_bytes: 0,
            cpu_wait_s: Some(0.0),
            sched_cpu_s: Some(0.0),
            missing: Vec::new(),
            net: None,
            memory_anon_bytes: None,
            memory_file_bytes: None,
        }
    );
    assert!(host.cpu.steal_s >= 0.0 && host.cpu.steal_s <= host.cpu.busy_s);

    let second = agent.counters(&format!("process={name}")).await;
    assert!(second.monotonic_s >= first.monotonic_s);
    assert!(second.host.cpu.total_s >= first.host.cpu.total_s);
    agent.stop().await;
}

#[tokio::test]
async fn comm_match_finds_this_test_process() {
    let agent = Agent::start(None).await;
    let me = std::fs::read_to_string("/proc/self/stat").unwrap();
    let comm = autoperf_agent::procfs::parse_pid_stat(&me).unwrap().comm;
    let before = proc_cpu_s(std::process::id());
    let c = agent.counters(&format!("process={comm}")).await;
    let group = &c.processes[&comm];
    assert!(group.processes >= 1, "{group:?}");
    // The test runtime and the harness run threads of their own.
    assert!(group.threads >= 2, "{group:?}");
    assert!(group.cpu_s >= before, "{group:?} vs {before}");
    assert!(group.rchar.is_some(), "our own io is readable");
    // Our own resident set: more than a page, less than the machine.
    assert!(
        group.rss_bytes > 4096 && group.rss_bytes < 1 << 40,
        "{group:?}"
    );
    agent.stop().await;
}

#[tokio::test]
async fn live_cpu_grows_and_survives_the_process_exiting() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let marker = format!("autoperf-agent-live-{}-{nanos}", std::process::id());
    let agent = Agent::start_with(Access {
        token: None,
        cmdline: vec![marker.clone()],
        ..Access::default()
    })
    .await;
    // The marker is the shell's $0, so it is in its command line. The loop
    // count is a backstop (~30 s); the guard kills it well before.
    let child = Command::new("sh")
        .arg("-c")
        .arg("i=0; while [ $i -lt 20000000 ]; do i=$((i+1)); done")
        .arg(&marker)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = ChildGuard(child);
    let pid = child.0.id();
    let query = format!("process={marker}&match=cmdline");
    // The child may not show its new command line in /proc at the very
    // first scan after spawn: wait (bounded) until the agent sees it.
    let seen_by = Instant::now() + Duration::from_secs(3);
    while agent.counters(&query).await.processes[&marker].processes == 0 {
        assert!(Instant::now() < seen_by, "the agent never saw the child");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut last = 0.0f64;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let before = proc_cpu_s(pid);
        let c = agent.counters(&query).await;
        let after = proc_cpu_s(pid);
        let group = &c.processes[&marker];
        assert_eq!(group.processes, 1, "{group:?}");
        assert_eq!(group.departed, 0);
        assert!(
            group.cpu_s >= last,
            "cpu went back: {last} → {}",
            group.cpu_s
        );
        assert!(
            before - 1e-9 <= group.cpu_s && group.cpu_s <= after + 1e-9,
            "agent {} not within /proc's {before}..{after}",
            group.cpu_s
        );
        assert!((group.utime_s + group.stime_s - group.cpu_s).abs() < 1e-9);
        last = group.cpu_s;
        if last >= 0.3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "child burnt only {last} s of CPU"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    child.0.kill().unwrap();
    // Its final times, read from the zombie before reaping it.
    let final_cpu = proc_cpu_s(pid);
    child.0.wait().unwrap();

    let c = agent.counters(&query).await;
    let group = &c.processes[&marker];
    assert_eq!(group.processes, 0, "{group:?}");
    assert_eq!(group.departed, 1, "{group:?}");
    assert!(
        group.cpu_s >= last,
        "cpu dropped after exit: {last} → {}",
        group.cpu_s
    );
    assert!(group.cpu_s <= final_cpu + 1e-9);
    // And it stays put.
    let again = agent.counters(&query).await;
    assert_eq!(again.processes[&marker], *group);
    agent.stop().await;
}

#[tokio::test]
async fn two_loops_on_one_cpu_each_wait_for_it_about_half_the_time() {
    let marker = format!("autoperf-agent-wait-{}", std::process::id());
    let agent = Agent::start_with(Access {
        token: None,
        cmdline: vec![marker.clone()],
        ..Access::default()
    })
    .await;
    // Two busy shells pinned to the same CPU: whenever one runs the other
    // is ready and waits, so together they wait at least about as long as
    // they run (more if anything else wants that CPU). Each loop's count
    // is a backstop (~30 s); the guards kill them well before.
    let spin = || {
        let child = Command::new("taskset")
            .args(["-c", "0", "sh", "-c"])
            .arg("i=0; while [ $i -lt 20000000 ]; do i=$((i+1)); done")
            .arg(&marker)
            .stdin(Stdio::null())
            .spawn()
            .expect("taskset (util-linux)");
        ChildGuard(child)
    };
    let _loops = [spin(), spin()];
    let query = format!("process={marker}&match=cmdline");
    let seen_by = Instant::now() + Duration::from_secs(3);
    while agent.counters(&query).await.processes[&marker].processes < 2 {
        assert!(Instant::now() < seen_by, "the agent never saw both loops");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = agent.counters(&query).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let last = agent.counters(&query).await;
    let (a, b) = (&first.processes[&marker], &last.processes[&marker]);
    let wall = last.monotonic_s - first.monotonic_s;
    let ran = b.sched_cpu_s.unwrap() - a.sched_cpu_s.unwrap();
    let waited = b.cpu_wait_s.expect("schedstat readable") - a.cpu_wait_s.unwrap();
    let share = waited / (waited + ran);
    // Two threads ready the whole time: ran + waited ≈ 2 × wall.
    assert!(
        (0.35..=0.95).contains(&share) && waited + ran <= 2.0 * wall + 0.1,
        "ran {ran} s, waited {waited} s of {wall} s"
    );
    agent.stop().await;
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let agent = Agent::start(Some(TOKEN)).await;
    let good = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}x");
    let short = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    for auth in [
        None,
        Some(wrong.as_str()),
        Some(short.as_str()),
        Some(TOKEN),
        Some("Basic dXNlcjpwYXNz"),
    ] {
        for target in ["/v1/health", "/v1/counters?process=sh", "/nowhere"] {
            let (status, body) = agent.request("GET", target, auth).await;
            assert_eq!(status, 401, "{auth:?} {target}");
            assert!(!body.contains("host"), "nothing else: {body}");
        }
    }
    let (status, _) = agent.request("GET", "/v1/health", Some(&good)).await;
    assert_eq!(status, 200);
    let lower = format!("bearer {TOKEN}");
    let (status, body) = agent
        .request("GET", "/v1/counters?process=sh", Some(&lower))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = agent.request("GET", "/nowhere", Some(&good)).await;
    assert_eq!(status, 404);
    agent.stop().await;
}

#[tokio::test]
async fn command_lines_answer_only_for_allowed_names() {
    // Another program's secret on its command line.
    let secret = format!("--api-key=s3cr3t-{}", std::process::id());
    let child = Command::new("sh")
        .arg("-c")
        .arg("sleep 20")
        .arg(&secret)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let _child = ChildGuard(child);
    let agent = Agent::start_with(Access {
        token: None,
        cmdline: vec!["tb-web".into()],
        ..Access::default()
    })
    .await;
    // The oracle: does any command line hold `--api-key=s`? Refused, for
    // any prefix, with no count to learn from.
    for guess in ["--api-key=s", "--api-key=x", "sh"] {
        let (status, body) = agent
            .get(&format!("/v1/counters?match=cmdline&process={guess}"))
            .await;
        assert_eq!(status, 403, "{guess}: {body}");
        assert!(body.contains("--allow-cmdline"), "{body}");
        assert!(!body.contains("processes"), "{body}");
    }
    // A name the agent was started with is answered.
    let (status, body) = agent.get("/v1/counters?match=cmdline&process=tb-web").await;
    assert_eq!(status, 200, "{body}");
    agent.stop().await;
}

#[tokio::test]
async fn idle_connections_without_the_token_cannot_lock_out_the_controller() {
    let agent = Agent::start(Some(TOKEN)).await;
    // Far more idle connections than the agent serves, none sending a byte.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(agent.addr).await.unwrap());
    }
    let good = format!("Bearer {TOKEN}");
    let begin = Instant::now();
    let (status, body) = agent
        .request("GET", "/v1/counters?process=sh", Some(&good))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        begin.elapsed() < Duration::from_secs(2),
        "{:?}",
        begin.elapsed()
    );
    drop(idle);
    agent.stop().await;
}

#[tokio::test]
async fn shutdown_closes_idle_keep_alive_connections() {
    let agent = Agent::start(None).await;
    let mut stream = TcpStream::connect(agent.addr).await.unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: agent\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    // The connection stays open; stopping must not wait for the client.
    let started = Instant::now();
    agent.stop().await;
    assert!(started.elapsed() < Duration::from_secs(3));
}
