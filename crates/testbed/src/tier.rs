//! One tier process: the body of the hidden `autoperf tier
//! web|db|consumer`, which the launcher (`process.rs`) starts as a named
//! child. It names the process (agents find tiers by name), binds, prints
//! the line the launcher waits for (`listening http://…`, or `consuming
//! TOPIC as GROUP`), and serves until SIGTERM or SIGINT — or until its
//! launcher dies.

use std::ffi::CString;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::db::{serve_db, DbConfig};
use crate::web::{serve_web_and_https, WebConfig};

/// Set in a tier's environment to the launcher's pid; see [`die_with_parent`].
pub(crate) const PARENT_ENV: &str = "AUTOPERF_TESTBED_PARENT";

/// Which tier a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Web,
    Db,
    /// A stream processor: a Kafka consumer group paying a known CPU time
    /// per record (`autoperf tier consumer`, run by the CLI, which has the
    /// Kafka client).
    Consumer,
}

impl Tier {
    /// The process name, as `ps -C` and /proc/PID/comm show it.
    pub fn process_name(self) -> &'static str {
        match self {
            Tier::Web => "tb-web",
            Tier::Db => "tb-db",
            Tier::Consumer => "tb-con",
        }
    }

    /// The process name with `tag` appended (`tb-web-TAG`), or the plain
    /// name without one.
    pub fn tagged_name(self, tag: Option<&str>) -> String {
        match tag {
            Some(tag) => format!("{}-{tag}", self.process_name()),
            None => self.process_name().to_owned(),
        }
    }

    /// The word of `autoperf tier web|db`.
    pub fn arg(self) -> &'static str {
        match self {
            Tier::Web => "web",
            Tier::Db => "db",
            Tier::Consumer => "consumer",
        }
    }
}

/// Arguments of the hidden subcommand `autoperf tier web|db`.
#[derive(Debug, Clone)]
pub struct TierArgs {
    pub tier: Tier,
    pub listen: SocketAddr,
    pub workers: usize,
    /// The db tier's address; only the web tier uses it.
    pub db: Option<SocketAddr>,
    /// Appended to the process name (`tb-web-TAG`): see
    /// [`crate::TestbedOptions::name_tag`].
    pub name_tag: Option<String>,
    /// Bytes the web tier holds for each open connection: see
    /// [`crate::TestbedOptions::session_memory`].
    pub session_memory: usize,
    /// The consumer tier's topic and group (consumer only).
    pub consume: Option<ConsumerOptions>,
}

/// The consumer tier: what it reads, as which group, and what a record
/// costs it.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// `host:port` of a Kafka broker (plaintext).
    pub bootstrap: String,
    pub topic: String,
    pub group: String,
    /// CPU time burned per record, in thread CPU time (see burn.rs): the
    /// tier's demand per record, known by construction.
    pub record_cost: Duration,
}

/// The body of `autoperf tier web|db`: names the process, binds, prints
/// `listening http://IP:PORT`, serves until SIGTERM or SIGINT.
pub fn tier_main(args: TierArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.tier != Tier::Consumer,
        "the consumer tier runs through consumer_tier_main"
    );
    // Before any thread exists: threads copy the name of the thread that
    // starts them, so every thread of the process reads tb-web/tb-db too.
    set_process_name(&args.tier.tagged_name(args.name_tag.as_deref()))?;
    die_with_parent();
    // The main thread only accepts connections and waits for a signal; the
    // tier serves them on its own workers (see burn.rs).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tier's runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        // The web tier also serves HTTPS, on another port of the same
        // address: `listening http://A https://B ca=PEM`.
        let https = match args.tier {
            Tier::Web => {
                let tls = crate::tls::SelfSigned::make()?;
                let tls_listener = TcpListener::bind(SocketAddr::new(addr.ip(), 0))
                    .await
                    .context("binding the HTTPS port")?;
                Some((tls, tls_listener))
            }
            Tier::Db | Tier::Consumer => None,
        };
        {
            let mut out = std::io::stdout().lock();
            match &https {
                Some((tls, l)) => writeln!(
                    out,
                    "listening http://{addr} https://{} ca={}",
                    l.local_addr()?,
                    tls.file.display()
                )?,
                None => writeln!(out, "listening http://{addr}")?,
            }
            out.flush()?;
        }
        let shutdown = termination()?;
        match args.tier {
            Tier::Web => {
                let config = WebConfig {
                    workers: args.workers,
                    db: args.db,
                    session_memory: args.session_memory,
                };
                let (tls, listener_tls) = https.expect("made for the web tier");
                let https = crate::http::TlsListener {
                    listener: listener_tls,
                    acceptor: tls.acceptor.clone(),
                };
                // `tls` lives until the tier stops; its file goes with it.
                serve_web_and_https(listener, Some(https), config, shutdown).await
            }
            Tier::Db | Tier::Consumer => {
                let config = DbConfig {
                    workers: args.workers,
                };
                serve_db(listener, config, shutdown).await
            }
        }
    })
}

/// What a consumer tier does with a fetch's records: pays for them.
pub type PayForRecords = Arc<dyn Fn(u64) + Send + Sync>;

/// The body of `autoperf tier consumer`: names the process, prints
/// `consuming TOPIC as GROUP`, and runs `consume` until it returns — with
/// what each fetch's records cost (a burn of `record_cost` each, the
/// handling of the fetch included, as the other tiers' burns include
/// theirs) and a flag SIGTERM or SIGINT sets.
pub fn consumer_tier_main(
    args: TierArgs,
    consume: impl FnOnce(&ConsumerOptions, PayForRecords, Arc<AtomicBool>),
) -> anyhow::Result<()> {
    let options = args
        .consume
        .clone()
        .context("the consumer tier needs a topic and a group")?;
    set_process_name(&args.tier.tagged_name(args.name_tag.as_deref()))?;
    die_with_parent();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tier's runtime")?;
    let shutdown = runtime.block_on(async { termination() })?;
    thread::spawn(move || {
        runtime.block_on(shutdown);
        stopping.store(true, Ordering::Relaxed);
    });
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "consuming {} as {} from {}",
            options.topic, options.group, options.bootstrap
        )?;
        out.flush()?;
    }
    let cost = options.record_cost;
    let pay: PayForRecords = Arc::new(move |records| {
        crate::burn::request_started();
        crate::burn::burn(cost * records.min(u64::from(u32::MAX)) as u32);
    });
    consume(&options, pay, stop);
    Ok(())
}

/// Sets the name of the calling thread, which for the main thread is the
/// process name of /proc/PID/comm (at most 15 bytes).
fn set_process_name(name: &str) -> anyhow::Result<()> {
    let name = CString::new(name)?;
    // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        bail!("prctl(PR_SET_NAME): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Asks for SIGTERM when the launcher dies, so a crashed `autoperf` leaves no
/// tiers behind; exits at once if the launcher died before this ran.
fn die_with_parent() {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and nothing else.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if let Some(parent) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
    {
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } as u32 != parent {
            std::process::exit(1);
        }
    }
}

/// Completes on the first SIGTERM or SIGINT.
pub(crate) fn termination() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
