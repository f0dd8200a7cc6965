//! Shared test helpers: scenarios from text, the testbed, and small raw TCP
//! servers that misbehave on purpose. Everything binds 127.0.0.1:0.

#![allow(dead_code)]

pub mod balancer;
pub mod counting;
pub mod netns;
pub mod prometheus;
pub mod quota;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use autoperf_core::scenario::{self, Scenario};

pub fn autoperf_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_autoperf"))
}

/// A fresh directory under the target dir, removed first if it exists.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autoperf-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `yaml` to `dir/name.yaml` and loads it, panicking with the
/// diagnostics if it does not validate.
pub fn scenario(dir: &Path, name: &str, yaml: &str) -> Arc<Scenario> {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    match scenario::load(&path) {
        Ok(s) => Arc::new(s),
        Err(d) => panic!("test scenario does not validate:\n{d}"),
    }
}

/// The testbed as child processes of this test's thread. Its tiers are
/// named apart from every other testbed's (`tb-web-TAG`, in
/// `web_process`), so tests run side by side and each agent-reading test
/// measures its own tiers alone.
pub fn testbed(web_workers: usize) -> autoperf_testbed::Testbed {
    testbed_with(autoperf_testbed::TestbedOptions {
        web_workers,
        ..Default::default()
    })
}

/// [`testbed`] with other options (its name tag is set here).
pub fn testbed_with(options: autoperf_testbed::TestbedOptions) -> autoperf_testbed::Testbed {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let options = autoperf_testbed::TestbedOptions {
        name_tag: Some(format!("{:x}{:02x}", std::process::id(), n % 256)),
        ..options
    };
    autoperf_testbed::Testbed::spawn(&autoperf_exe(), &options).expect("testbed starts")
}

/// How a raw test server treats each connection.
#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Reads a request, then closes without a byte of answer.
    CloseWithoutAnswer,
    /// Reads a request and never answers (but keeps the connection open).
    NeverAnswer,
    /// Answers one request correctly, then closes the connection silently
    /// (no `Connection: close`), as servers with short keep-alive do.
    AnswerOnceThenClose,
    /// Answers `100 Continue` and `103 Early Hints` before the real `200`,
    /// in one write, then closes.
    InterimThenOk,
    /// Answers with status 999, which no HTTP server sends.
    Status999,
    /// Answers `503 Service Unavailable` to every request, keeping the
    /// connection: a load balancer with no backend.
    Unavailable,
}

/// A raw TCP server on 127.0.0.1:0 running on its own thread until the
/// process exits; counts accepted connections.
pub fn misbehaving_server(kind: Misbehaviour) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    continue;
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = vec![0u8; 4096];
                    let mut seen = Vec::new();
                    // Read one request head.
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    match kind {
                        Misbehaviour::CloseWithoutAnswer => drop(sock),
                        Misbehaviour::NeverAnswer => {
                            // Hold the connection far longer than any test runs.
                            tokio::time::sleep(Duration::from_secs(600)).await;
                        }
                        Misbehaviour::InterimThenOk => {
                            let _ = sock
                                .write_all(
                                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                                )
                                .await;
                            let _ = sock.shutdown().await;
                        }
                        Misbehaviour::Status999 => {
                            let _ = sock
                                .write_all(b"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok")
                                .await;
                            let _ = sock.shutdown().await;
                        }
                        Misbehaviour::Unavailable => loop {
                            let answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
                            if sock.write_all(answer).await.is_err() {
                                return;
                            }
                            seen.clear();
                            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                                match sock.read(&mut buf).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                                }
                            }
                        },
                        Misbehaviour::AnswerOnceThenClose => {
                            let _ = sock
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .await;
                            let _ = sock.shutdown().await;
                        }
                    }
                });
            }
        });
    });
    (addr, accepted)
}

/// A profiler agent serving from this test process on 127.0.0.1:0.
pub fn agent() -> autoperf_agent::BackgroundAgent {
    autoperf_agent::BackgroundAgent::start(([127, 0, 0, 1], 0).into()).expect("agent starts")
}

/// `autoperf agent --listen 127.0.0.1:0` as a child process (so a test can
/// kill it), with the URL it printed.
pub fn agent_process() -> (std::process::Child, String) {
    agent_process_with(&[])
}

/// `autoperf agent --listen 127.0.0.1:0 ARGS…` as a child process.
pub fn agent_process_with(args: &[&str]) -> (std::process::Child, String) {
    agent_process_on("127.0.0.1:0", args)
}

/// `autoperf agent --listen LISTEN ARGS…` as a child process, and its URL.
pub fn agent_process_on(listen: &str, args: &[&str]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(autoperf_exe())
        .args(["agent", "--listen", listen])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("agent process starts");
    let url = printed_url(child.stdout.take().unwrap());
    (child, url)
}

/// The URL a process (an agent, a testbed) printed on its first line.
pub fn printed_url(stdout: std::process::ChildStdout) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("it printed {line:?}"))
        .to_string()
}

/// Reads `run.json` from a results directory.
pub fn run_json(dir: &Path) -> serde_json::Value {
    json_file(&dir.join("run.json"))
}

/// A JSON file the run wrote (`run.json`, `prediction.json`).
pub fn json_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

/// Runs the binary with `args`, returning (exit code, stdout, stderr).
pub fn autoperf(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(autoperf_exe())
        .args(args)
        .output()
        .expect("autoperf runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `autoperf run SCENARIO --users N` for 2 s without a warm-up, quietly,
/// into `out`: the short closed level most tests measure.
pub fn run_briefly(scenario: &str, users: &str, out: &Path) -> (Option<i32>, String, String) {
    autoperf(&[
        "run",
        scenario,
        "--users",
        users,
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
}

/// Sends Ctrl-C (SIGINT) to `child`, a process the test started, and waits
/// at most `within` for it to end: one that does not is killed and fails
/// the test.
pub fn interrupt(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    // SAFETY: kill(2) on the child this test started; only it gets the
    // signal, as only it would from a terminal.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running {within:?} after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Held by the tests that measure a CPU limit or a process's CPU (they
/// live in modules named `alone`): run by hand with `cargo test`, they
/// never overlap one another; `scripts/test.sh` runs them one at a time
/// after every other test, with nothing beside them.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A child process killed and reaped when the guard drops, so a failing
/// test leaves no busy loop behind.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
