//! The worker's side (`autoperf worker`): a long-lived generator that takes
//! one level at a time from a controller, runs its range of the level's
//! shards — in its own process, or over generator processes of its own
//! when its share needs more connections than one process may hold — and
//! streams their snapshots back.
//!
//! Off loopback it requires a token (the controller proves it holds it,
//! see `protocol`); with a certificate (`--tls-cert`, `--tls-key`) it
//! speaks TLS only. One level runs at a time, and a second controller is
//! told who holds the worker.

use std::io::{BufReader, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoperf_agent::options::{is_loopback, token_from_text, MIN_TOKEN_CHARS};

use super::door::{Door, HELLO_DEADLINE};
use super::job_limits;
use super::protocol::{self, FromWorker, Role, ToWorker, MAX_HELLO, MAX_JOB_LINE, MAX_LINE};
use super::wire::Wire;
use crate::engine::fleet::{self, raise_open_file_limit, run_host_share, HostPlan, Job, Limits};
use crate::engine::split::cores;
use crate::engine::start::LevelContext;
use crate::engine::stop::StopSignal;
use crate::measure::wire::to_monotonic_ns;

/// A write to the controller that makes no progress this long means it
/// is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Between levels a connection may sit idle this long (a controller
/// between its readiness check and its first level, say).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub listen: SocketAddr,
    /// A file whose first line is the token controllers must prove they
    /// hold; required off loopback.
    pub token_file: Option<PathBuf>,
    /// The name controllers report it by (default: the host name).
    pub name: Option<String>,
    /// Source addresses its connections come from (default: any).
    pub local_addresses: Vec<IpAddr>,
    /// The autoperf binary its generator processes run.
    pub program: Option<PathBuf>,
    /// PEM files of its TLS certificate (chain) and private key: with
    /// both, controllers must speak TLS.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

struct State {
    token: Option<String>,
    tls: Option<Arc<rustls::ServerConfig>>,
    name: String,
    local_addresses: Vec<IpAddr>,
    program: Option<PathBuf>,
    /// The controller whose level runs now.
    busy: Mutex<Option<SocketAddr>>,
    /// Connections that have not proven the token yet.
    door: Arc<Door>,
}

/// Why a worker did not start: what it was given (exit 2), or what this
/// host would not do (exit 3).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkerError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    CannotStart(String),
}

/// Serves controllers until the process ends. `bound` hears the address
/// it listens on (a port of 0 becomes a real one) before the first accept.
pub fn worker_main(
    options: WorkerOptions,
    bound: impl FnOnce(SocketAddr),
) -> Result<(), WorkerError> {
    let token = match &options.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| {
                    WorkerError::BadInput(format!("cannot read token file {}: {e}", path.display()))
                })?;
            Some(token_from_text(&text, path).map_err(|e| WorkerError::BadInput(e.to_string()))?)
        }
        None if is_loopback(&options.listen) => None,
        None => {
            return Err(WorkerError::BadInput(format!(
                "refusing to listen on {} without a token: off loopback a worker requires --token-file FILE (its first line: a secret of at least {MIN_TOKEN_CHARS} characters, the same file the controller gets with --worker-token-file)",
                options.listen
            )))
        }
    };
    for &ip in &options.local_addresses {
        std::net::TcpListener::bind((ip, 0)).map_err(|e| {
            WorkerError::BadInput(format!(
                "cannot connect from {ip}: {e} (--local-addresses takes addresses of this host)"
            ))
        })?;
    }
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(Arc::new(
            server_tls(cert, key).map_err(WorkerError::BadInput)?,
        )),
        (None, None) => None,
        _ => {
            return Err(WorkerError::BadInput(
                "--tls-cert and --tls-key go together: give both, or neither".into(),
            ))
        }
    };
    raise_open_file_limit();
    let listener = TcpListener::bind(options.listen).map_err(|e| {
        WorkerError::CannotStart(format!("cannot listen on {}: {e}", options.listen))
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| WorkerError::CannotStart(e.to_string()))?;
    let state = Arc::new(State {
        token,
        tls,
        name: options.name.clone().unwrap_or_else(hostname),
        local_addresses: options.local_addresses.clone(),
        program: options.program.clone(),
        busy: Mutex::new(None),
        door: Door::open(),
    });
    bound(addr);
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            // Out of file descriptors, say: a moment, then on.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let state = state.clone();
        let _ = std::thread::Builder::new()
            .name("autoperf-worker-conn".into())
            .spawn(move || {
                let peer = stream
                    .peer_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string());
                if let Err(e) = serve_connection(stream, &state) {
                    eprintln!("worker {}: controller {peer}: {e}", state.name);
                }
            });
    }
    Ok(())
}

/// The worker's TLS configuration from its PEM certificate chain and key.
fn server_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {} holds no PEM certificate",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: no usable private key ({e})", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert and --tls-key: {e}"))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "worker".into())
}

/// One controller's connection: greeting, authentication, then clock
/// readings, probes and at most one level.
fn serve_connection(stream: TcpStream, state: &State) -> Result<(), String> {
    let peer = stream.peer_addr().map_err(|e| e.to_string())?;
    let ticket = state.door.enter(&stream).map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    // A controller that vanished without closing (its host gone) must not
    // hold the worker: writes give up, and the level stops.
    stream
        .set_read_timeout(Some(HELLO_DEADLINE))
        .and_then(|_| stream.set_write_timeout(Some(WRITE_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let stream = match &state.tls {
        None => Wire::Plain(stream),
        Some(config) => match Wire::server(stream, config.clone()) {
            Ok(wire) => wire,
            // A readiness probe (a Kubernetes TCP check) connects and goes.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("TLS handshake failed: {e}")),
        },
    };
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let nonce = protocol::nonce();
    let greeting = FromWorker::Greeting {
        protocol: protocol::PROTOCOL.into(),
        version: protocol::VERSION,
        release: protocol::release(),
        name: state.name.clone(),
        nonce: nonce.clone(),
    };
    // A readiness probe connects and goes: no news.
    let hello = match protocol::write(&mut writer, &greeting)
        .and_then(|_| protocol::read::<ToWorker>(&mut reader, MAX_HELLO))
    {
        Ok(hello) => hello,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(format!("no hello: {e}")),
    };
    let controller_nonce;
    let refuse = |writer: &mut Wire, reason: String| -> Result<(), String> {
        let _ = protocol::write(
            writer,
            &FromWorker::Refused {
                reason: reason.clone(),
            },
        );
        Err(reason)
    };
    match hello {
        Some(ToWorker::Hello {
            version, release, ..
        }) if version != protocol::VERSION => {
            return refuse(
                &mut writer,
                format!(
                    "the controller speaks worker protocol {version} (autoperf {release}), this worker {} (autoperf {}): run the same autoperf release on both",
                    protocol::VERSION,
                    protocol::release()
                ),
            )
        }
        Some(ToWorker::Hello {
            proof,
            nonce: theirs,
            ..
        }) => match (&state.token, proof) {
            (None, _) => controller_nonce = theirs,
            (Some(token), Some(proof))
                if protocol::verify(token, &nonce, Role::Controller, &proof) =>
            {
                controller_nonce = theirs
            }
            (Some(_), Some(_)) => {
                return refuse(
                    &mut writer,
                    "the token does not match this worker's (--worker-token-file must hold the worker's --token-file secret)".into(),
                )
            }
            (Some(_), None) => {
                return refuse(
                    &mut writer,
                    "this worker requires a token: give the controller --worker-token-file FILE with the worker's secret".into(),
                )
            }
        },
        Some(_) => return refuse(&mut writer, "expected a hello first".into()),
        None => return Ok(()),
    }
    ticket.admitted();
    send(
        &mut writer,
        &FromWorker::Welcome {
            proof: state
                .token
                .as_ref()
                .map(|t| protocol::proof(t, &controller_nonce, Role::Worker)),
            cores: cores(),
            cpu: super::cpu::capacity(),
            limits: Limits::here(),
            local_addresses: state.local_addresses.clone(),
        },
    )?;
    reader
        .get_ref()
        .set_read_timeout(Some(IDLE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    loop {
        let message = protocol::read::<ToWorker>(&mut reader, MAX_JOB_LINE)
            .map_err(|e| format!("bad message: {e}"))?;
        match message {
            None | Some(ToWorker::Bye) => return Ok(()),
            Some(ToWorker::Ping) => send(
                &mut writer,
                &FromWorker::Pong {
                    now_ns: to_monotonic_ns(Instant::now()),
                },
            )?,
            Some(ToWorker::Probe { scenario }) => {
                let error = match scenario.decode() {
                    Err(e) => Some(format!("cannot decode the scenario here: {e}")),
                    Ok(s) => crate::engine::probe_target(&s)
                        .err()
                        .map(|e| format!("cannot reach the target from here: {e}")),
                };
                send(&mut writer, &FromWorker::Probed { error })?;
            }
            Some(ToWorker::Run {
                job,
                process_shards,
            }) => return run_level(reader, writer, state, peer, job, process_shards),
            Some(other) => {
                let reason = format!("unexpected {other:?} outside a level");
                send(
                    &mut writer,
                    &FromWorker::Failed {
                        reason: reason.clone(),
                    },
                )?;
                return Err(reason);
            }
        }
    }
}

/// Takes the worker for this controller's level, or says who has it.
struct Claim<'a>(&'a State);

impl<'a> Claim<'a> {
    fn take(state: &'a State, peer: SocketAddr) -> Result<Claim<'a>, String> {
        // A controller that dropped a prepared level (another worker was
        // not ready) comes back at once: its old connection's thread may
        // not have let go yet.
        let patience = Instant::now() + Duration::from_secs(2);
        loop {
            let mut busy = state.busy.lock().unwrap_or_else(|e| e.into_inner());
            match *busy {
                None => {
                    *busy = Some(peer);
                    return Ok(Claim(state));
                }
                Some(other) if Instant::now() >= patience => {
                    return Err(format!(
                        "busy with a level of the controller at {other}; one controller at a time"
                    ))
                }
                Some(_) => {
                    drop(busy);
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Runs one level's share: decode, say ready, wait for the clock, run the
/// shards while a watcher listens for `Stop` (or the controller going
/// away), stream every snapshot, then say done.
fn run_level(
    mut reader: BufReader<Wire>,
    mut writer: Wire,
    state: &State,
    peer: SocketAddr,
    job: Job,
    process_shards: Vec<usize>,
) -> Result<(), String> {
    let fail = |writer: &mut Wire, reason: String| -> Result<(), String> {
        let _ = protocol::write(
            writer,
            &FromWorker::Failed {
                reason: reason.clone(),
            },
        );
        Err(reason)
    };
    let _claim = match Claim::take(state, peer) {
        Ok(claim) => claim,
        Err(reason) => return fail(&mut writer, reason),
    };
    if process_shards.iter().sum::<usize>() != job.range.count || process_shards.is_empty() {
        return fail(
            &mut writer,
            "the job's processes do not add up to its shards".into(),
        );
    }
    let limits = Limits::here();
    if let Some(why) = job_limits::refuse(
        &job,
        &process_shards,
        &limits,
        job_limits::available_memory(),
    ) {
        return fail(
            &mut writer,
            format!("worker {} refused the job: {why}", state.name),
        );
    }
    let scenario = match job.scenario.decode() {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(&mut writer, e),
    };
    send(&mut writer, &FromWorker::Ready)?;
    let (start_ns, deadline_ns) = match protocol::read::<ToWorker>(&mut reader, MAX_LINE) {
        Ok(Some(ToWorker::Go {
            start_ns,
            deadline_ns,
        })) => (start_ns, deadline_ns),
        // The level did not start (another worker failed): nothing to do.
        Ok(_) | Err(_) => return Ok(()),
    };
    let job = Job {
        start_ns,
        deadline_ns,
        ..job
    };
    let clock = job.clock();
    let host = HostPlan {
        range: job.range,
        process_shards,
        addresses: job.addresses.clone(),
        program: state.program.clone(),
        shipped: job.scenario.shipped.clone(),
    };
    let stop = StopSignal::default();
    let watcher = stop.clone();
    // The controller's `Stop`, or its going away, ends the level early.
    let listening = std::thread::spawn(move || {
        let _ = reader.get_ref().set_read_timeout(None);
        loop {
            match protocol::read::<ToWorker>(&mut reader, MAX_LINE) {
                Ok(Some(ToWorker::Stop)) | Ok(None) | Err(_) => break,
                Ok(Some(_)) => {}
            }
        }
        watcher.stop();
    });
    let began = Instant::now();
    eprintln!(
        "worker {}: level from {peer} against {}: shards {}..{} of {}, {} process{}",
        state.name,
        scenario.target.endpoint,
        job.range.first,
        job.range.first + job.range.count,
        job.range.total,
        host.process_shards.len(),
        if host.process_shards.len() == 1 {
            ""
        } else {
            "es"
        }
    );
    let mut out = writer.try_clone().map_err(|e| e.to_string())?;
    let stopper = stop.clone();
    let level = LevelContext {
        scenario: &scenario,
        workload: &job.workload,
        load: &job.load,
        clock,
    };
    let ran = run_host_share(level, &host, &stop, |rx| {
        let sent = fleet::forward(rx, |snapshot| {
            protocol::write(
                &mut out,
                &FromWorker::Snapshot {
                    snapshot: Box::new(snapshot),
                },
            )
        });
        // The controller is gone: no one would count what the shards do.
        if sent.is_err() {
            stopper.stop();
        }
        sent
    });
    let result = match ran {
        Ok((Ok(()), trouble)) => {
            eprintln!(
                "worker {}: level from {peer} done in {:.1} s{}",
                state.name,
                began.elapsed().as_secs_f64(),
                if trouble.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", trouble.join("; "))
                }
            );
            send(&mut writer, &FromWorker::Done { trouble })
        }
        Ok((Err(e), _)) => Err(format!("lost the controller: {e}")),
        Err(e) => fail(&mut writer, e.to_string()),
    };
    let _ = writer.shutdown(Shutdown::Both);
    let _ = listening.join();
    result
}

fn send(writer: &mut impl Write, message: &FromWorker) -> Result<(), String> {
    protocol::write(writer, message).map_err(|e| format!("cannot answer: {e}"))
}
