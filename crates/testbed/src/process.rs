//! The testbed as operating-system processes: the launcher that starts the
//! tiers (each the body in `tier.rs`, `autoperf tier web|db|consumer`) as
//! named children of the `autoperf` binary, waits for their addresses and
//! stops them.
//!
//! ```text
//!   autoperf testbed ──spawn──▶ tb-db  (tier db --listen 127.0.0.1:0)     ─┐ each prints
//!                    ──spawn──▶ tb-web (tier web --listen ADDR --db DBADDR) ─┘ "listening http://…"
//!                    ◀─SIGTERM/SIGINT── user;  SIGTERM ─▶ both, SIGKILL after 3 s
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::tier::{termination, ConsumerOptions, Tier, TierArgs, PARENT_ENV};

/// How long a tier may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a tier may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(3);
/// The tail of a tier's stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// Options of `autoperf testbed`.
#[derive(Debug, Clone)]
pub struct TestbedOptions {
    /// The web tier's address; port 0 picks a free one.
    pub listen: SocketAddr,
    pub web_workers: usize,
    pub db_workers: usize,
    /// Where [`testbed_main`] also serves a stub schema registry (see
    /// [`crate::registry`]), in its own process; [`Testbed::spawn`] ignores it.
    pub schema_registry: Option<SocketAddr>,
    /// Appended to both tiers' process names (`tb-web-TAG`, `tb-db-TAG`),
    /// so that agents, which find processes by name, tell apart testbeds
    /// running side by side on one host. Process names hold 15 bytes:
    /// at most 8 here.
    pub name_tag: Option<String>,
    /// Bytes the web tier allocates and touches for each open connection
    /// and frees when it closes: a known memory per session (a closed
    /// user keeps one connection), for the memory model's tests.
    pub session_memory: usize,
    /// Also start the consumer tier (`tb-con`) with `consumer_workers`
    /// threads.
    pub consumer: Option<ConsumerOptions>,
    pub consumer_workers: usize,
}

impl Default for TestbedOptions {
    fn default() -> Self {
        TestbedOptions {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            web_workers: 2,
            db_workers: 2,
            schema_registry: None,
            name_tag: None,
            session_memory: 0,
            consumer: None,
            consumer_workers: 1,
        }
    }
}

/// A running testbed: the two tier processes.
#[derive(Debug)]
pub struct Testbed {
    /// `http://IP:PORT` of the web tier.
    pub web_url: String,
    pub web_addr: SocketAddr,
    pub web_pid: u32,
    pub db_pid: u32,
    pub db_addr: SocketAddr,
    /// The tiers' process names, as agents find them (`tb-web`, or
    /// `tb-web-TAG` with [`TestbedOptions::name_tag`]).
    pub web_process: String,
    pub db_process: String,
    /// The web tier's HTTPS port (`https://IP:PORT`, h2 and HTTP/1.1 by
    /// ALPN), and the PEM of its self-signed certificate to trust.
    pub https_url: Option<String>,
    pub https_addr: Option<SocketAddr>,
    pub ca_file: Option<PathBuf>,
    /// The consumer tier, when started: its pid and process name.
    pub consumer_pid: Option<u32>,
    pub consumer_process: Option<String>,
    web: Option<TierProcess>,
    db: Option<TierProcess>,
    consumer: Option<TierProcess>,
}

impl Testbed {
    /// Starts tb-db, then tb-web pointed at it, as children of `exe` (the
    /// autoperf binary, which must accept `tier web|db --listen ADDR
    /// --workers N [--db ADDR]`).
    ///
    /// The tiers get SIGTERM when *the thread* that calls this exits (that is
    /// how PR_SET_PDEATHSIG counts a parent): call it from a thread that
    /// outlives the testbed, such as the main thread.
    pub fn spawn(exe: &Path, options: &TestbedOptions) -> anyhow::Result<Testbed> {
        if let Some(tag) = &options.name_tag {
            anyhow::ensure!(
                tag.len() <= 8,
                "testbed name tag {tag:?}: at most 8 bytes (process names hold 15)"
            );
        }
        let localhost = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut db = TierProcess::spawn(
            exe,
            &TierArgs {
                tier: Tier::Db,
                listen: localhost,
                workers: options.db_workers,
                db: None,
                name_tag: options.name_tag.clone(),
                session_memory: 0,
                consume: None,
            },
        )?;
        let web = TierProcess::spawn(
            exe,
            &TierArgs {
                tier: Tier::Web,
                listen: options.listen,
                workers: options.web_workers,
                db: Some(db.addr),
                name_tag: options.name_tag.clone(),
                session_memory: options.session_memory,
                consume: None,
            },
        );
        let mut web = match web {
            Ok(web) => web,
            Err(e) => {
                db.signal(libc::SIGTERM);
                db.stop(Instant::now() + STOP_TIMEOUT);
                return Err(e);
            }
        };
        let consumer = match &options.consumer {
            Some(consume) => {
                let spawned = TierProcess::spawn(
                    exe,
                    &TierArgs {
                        tier: Tier::Consumer,
                        listen: localhost,
                        workers: options.consumer_workers,
                        db: None,
                        name_tag: options.name_tag.clone(),
                        session_memory: 0,
                        consume: Some(consume.clone()),
                    },
                );
                match spawned {
                    Ok(consumer) => Some(consumer),
                    Err(e) => {
                        for tier in [&mut web, &mut db] {
                            tier.signal(libc::SIGTERM);
                            tier.stop(Instant::now() + STOP_TIMEOUT);
                        }
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        // A tier bound to 0.0.0.0 is reached through loopback from here.
        let reachable = |mut addr: SocketAddr| {
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr {
                    SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            addr
        };
        let https_addr = web.https.map(reachable);
        let reachable = reachable(web.addr);
        Ok(Testbed {
            web_url: format!("http://{reachable}"),
            web_addr: reachable,
            web_pid: web.child.id(),
            db_pid: db.child.id(),
            db_addr: db.addr,
            web_process: Tier::Web.tagged_name(options.name_tag.as_deref()),
            db_process: Tier::Db.tagged_name(options.name_tag.as_deref()),
            https_url: https_addr.map(|a| format!("https://{a}")),
            https_addr,
            ca_file: web.ca_file.clone(),
            consumer_pid: consumer.as_ref().map(|c| c.child.id()),
            consumer_process: consumer
                .as_ref()
                .map(|_| Tier::Consumer.tagged_name(options.name_tag.as_deref())),
            web: Some(web),
            db: Some(db),
            consumer,
        })
    }

    /// SIGTERM to both tiers, then up to 3 s for them to exit, then SIGKILL.
    /// Idempotent.
    pub fn shutdown(&mut self) {
        let deadline = Instant::now() + STOP_TIMEOUT;
        // Web first: it is the db tier's only client.
        for tier in [&mut self.web, &mut self.db, &mut self.consumer] {
            if let Some(process) = tier.as_mut() {
                process.signal(libc::SIGTERM);
            }
        }
        for tier in [&mut self.web, &mut self.db, &mut self.consumer] {
            if let Some(mut process) = tier.take() {
                process.stop(deadline);
            }
        }
    }

    /// A tier that exited on its own (crashed, or was killed from outside).
    pub fn exited(&mut self) -> Option<(Tier, ExitStatus)> {
        for process in [&mut self.web, &mut self.db, &mut self.consumer]
            .into_iter()
            .flatten()
        {
            if let Ok(Some(status)) = process.child.try_wait() {
                return Some((process.tier, status));
            }
        }
        None
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One tier's child process.
#[derive(Debug)]
struct TierProcess {
    tier: Tier,
    child: Child,
    addr: SocketAddr,
    https: Option<SocketAddr>,
    ca_file: Option<PathBuf>,
}

impl TierProcess {
    fn spawn(exe: &Path, args: &TierArgs) -> anyhow::Result<TierProcess> {
        use std::os::unix::process::CommandExt;
        let name = args.tier.tagged_name(args.name_tag.as_deref());
        let mut cmd = Command::new(exe);
        cmd.arg0(&name)
            .args(["tier", args.tier.arg(), "--listen"])
            .arg(args.listen.to_string())
            .arg("--workers")
            .arg(args.workers.to_string());
        if let Some(db) = args.db {
            cmd.arg("--db").arg(db.to_string());
        }
        if let Some(tag) = &args.name_tag {
            cmd.arg("--name-tag").arg(tag);
        }
        if args.session_memory > 0 {
            cmd.arg("--session-memory")
                .arg(args.session_memory.to_string());
        }
        if let Some(c) = &args.consume {
            cmd.args([
                "--kafka",
                &c.bootstrap,
                "--topic",
                &c.topic,
                "--group",
                &c.group,
            ])
            .arg("--record-cost-us")
            .arg(c.record_cost.as_micros().to_string());
        }
        cmd.env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({})", exe.display()))?;
        let stderr = drain_stderr(name.clone(), child.stderr.take().expect("stderr is piped"));
        let first_line = first_line(child.stdout.take().expect("stdout is piped"));

        let failure = match first_line.recv_timeout(START_TIMEOUT) {
            Ok(line) => match parse_ready(args.tier, &line) {
                Some(said) => {
                    stderr.forward.store(true, Ordering::Relaxed);
                    return Ok(TierProcess {
                        tier: args.tier,
                        child,
                        addr: said.addr,
                        https: said.https,
                        ca_file: said.ca_file,
                    });
                }
                None => format!(
                    "printed {line:?} instead of \"{}\"",
                    match args.tier {
                        Tier::Consumer => "consuming TOPIC as GROUP",
                        _ => "listening http://IP:PORT",
                    }
                ),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                format!("did not print its address within {START_TIMEOUT:?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => "exited before listening".to_owned(),
        };
        let mut process = TierProcess {
            tier: args.tier,
            child,
            addr: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            https: None,
            ca_file: None,
        };
        process.signal(libc::SIGTERM);
        let status = process.stop(Instant::now() + STOP_TIMEOUT);
        // The drain thread sees end-of-file once the child is gone.
        let _ = stderr.done.recv_timeout(Duration::from_secs(1));
        let tail = String::from_utf8_lossy(&stderr.tail.lock().unwrap_or_else(|e| e.into_inner()))
            .into_owned();
        let status = status.map_or_else(|| "still running".to_owned(), |s| s.to_string());
        bail!(
            "{name} {failure} ({status}); its stderr:\n{}",
            if tail.trim().is_empty() {
                "(empty)"
            } else {
                tail.trim_end()
            }
        )
    }

    fn signal(&mut self, signal: libc::c_int) {
        // Once reaped, the pid may belong to another process: never signal it.
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        // SAFETY: kill() with the pid of a child that is not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// Waits for the child to exit until `deadline`, then kills it.
    fn stop(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = self.child.kill();
                    return self.child.wait().ok();
                }
                Err(_) => return None,
            }
        }
    }
}

/// A tier's first line: where it listens, or (the consumer tier, which
/// listens nowhere) that it consumes.
fn parse_ready(tier: Tier, line: &str) -> Option<Listening> {
    match tier {
        Tier::Consumer => line.starts_with("consuming ").then(|| Listening {
            addr: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            https: None,
            ca_file: None,
        }),
        _ => parse_listening(line),
    }
}

/// `listening http://127.0.0.1:PORT` → the address.
/// `listening http://A [https://B ca=PEM]`.
fn parse_listening(line: &str) -> Option<Listening> {
    let mut words = line.trim().strip_prefix("listening ")?.split(' ');
    let addr = words.next()?.strip_prefix("http://")?.parse().ok()?;
    let https = match words.next() {
        Some(w) => Some(w.strip_prefix("https://")?.parse().ok()?),
        None => None,
    };
    let ca_file = words
        .next()
        .and_then(|w| w.strip_prefix("ca="))
        .map(PathBuf::from);
    Some(Listening {
        addr,
        https,
        ca_file,
    })
}

/// Where a tier said it listens.
#[derive(Debug)]
struct Listening {
    addr: SocketAddr,
    https: Option<SocketAddr>,
    ca_file: Option<PathBuf>,
}

/// Sends the child's first stdout line, then keeps reading so that the child
/// never blocks on a full pipe.
fn first_line(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        if matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
            let _ = tx.send(line);
        }
        drop(tx);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx
}

/// A child's stderr, read by a thread: until the tier is listening it is
/// kept (its last [`STDERR_TAIL`] bytes) for the error message of a failed
/// start; afterwards each line goes to this process's stderr, prefixed with
/// the tier's name. `done` fires at end-of-file.
struct StderrTail {
    tail: Arc<Mutex<Vec<u8>>>,
    forward: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
}

fn drain_stderr(name: String, stderr: ChildStderr) -> StderrTail {
    let tail = Arc::new(Mutex::new(Vec::new()));
    let forward = Arc::new(AtomicBool::new(false));
    let (done_tx, done) = mpsc::channel();
    let (kept, forwarding) = (Arc::clone(&tail), Arc::clone(&forward));
    thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            if forwarding.load(Ordering::Relaxed) {
                let _ = write!(
                    std::io::stderr(),
                    "{name}: {}",
                    String::from_utf8_lossy(&line)
                );
            } else {
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&line);
                let excess = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..excess);
            }
            line.clear();
        }
        let _ = done_tx.send(());
    });
    StderrTail {
        tail,
        forward,
        done,
    }
}

/// The body of `autoperf testbed`: starts both tiers, says where they are,
/// and stops them on SIGINT or SIGTERM. Fails if a tier dies on its own.
pub fn testbed_main(exe: &Path, options: TestbedOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Handlers first, so a Ctrl-C during start-up is not lost.
    let stop = runtime.block_on(async { termination() })?;
    // Bound before the tiers start, so a taken port fails at once. The
    // registry runs on this runtime until it is dropped on return: it keeps
    // nothing worth a graceful stop.
    let registry = match options.schema_registry {
        Some(addr) => {
            let listener = runtime
                .block_on(TcpListener::bind(addr))
                .with_context(|| format!("schema registry: binding {addr}"))?;
            let bound = listener.local_addr()?;
            runtime.spawn(crate::registry::serve(listener, std::future::pending()));
            format!(", schema registry http://{bound}")
        }
        None => String::new(),
    };
    let mut testbed = Testbed::spawn(exe, &options)?;
    // A closed stdout (`autoperf testbed | head -1`) is no reason to stop.
    let _ = writeln!(
        std::io::stdout(),
        "testbed: web {} and {} (CA {}; {} pid {}), db {} ({} pid {}){registry}; Ctrl-C stops",
        testbed.web_url,
        testbed.https_url.as_deref().unwrap_or("-"),
        testbed
            .ca_file
            .as_deref()
            .map_or("-".into(), |p| p.display().to_string()),
        testbed.web_process,
        testbed.web_pid,
        testbed.db_addr,
        testbed.db_process,
        testbed.db_pid
    );
    if let (Some(name), Some(pid), Some(c)) = (
        &testbed.consumer_process,
        testbed.consumer_pid,
        &options.consumer,
    ) {
        let _ = writeln!(
            std::io::stdout(),
            "testbed: {name} pid {pid} consumes `{}` from {} as group `{}` ({} µs of CPU per record)",
            c.topic,
            c.bootstrap,
            c.group,
            c.record_cost.as_micros()
        );
    }
    let died = runtime.block_on(async {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                () = &mut stop => return None,
                _ = tick.tick() => {
                    if let Some(exit) = testbed.exited() {
                        return Some(exit);
                    }
                }
            }
        }
    });
    testbed.shutdown();
    match died {
        None => Ok(()),
        Some((tier, status)) => bail!("{} exited on its own ({status})", tier.process_name()),
    }
}
