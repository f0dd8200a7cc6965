//! The controller's connection to one worker: connect, authenticate,
//! learn what the worker can hold, and measure its clock.

use std::io::BufReader;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use super::protocol::{self, FromWorker, Role, ToWorker, MAX_LINE};
use super::wire::Wire;
use crate::engine::fleet::{Limits, ScenarioSource};
use crate::measure::wire::to_monotonic_ns;
use crate::protocol::tls::{self as target_tls, SettingNames};

/// More cores than any host a worker runs on has.
const MAX_CORES: usize = 1 << 16;

/// How long connecting and each answer before a level may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Clock readings taken to estimate a worker's offset; the one with the
/// shortest round trip wins (NTP's rule: its midpoint is the tightest).
const CLOCK_SAMPLES: usize = 8;

/// Why a worker could not be linked. `fatal`: it answered and refused us
/// (a token or version mismatch), which waiting will not mend.
/// `shut_out`: it took the connection and closed it before welcoming us,
/// as a worker whose door is full of strangers does (`door.rs`): trying
/// again a moment later finds room.
#[derive(Debug)]
pub(crate) struct LinkError {
    pub message: String,
    pub fatal: bool,
    pub shut_out: bool,
}

impl LinkError {
    fn passing(message: String) -> LinkError {
        LinkError {
            message,
            fatal: false,
            shut_out: false,
        }
    }

    fn fatal(message: String) -> LinkError {
        LinkError {
            message,
            fatal: true,
            shut_out: false,
        }
    }

    /// A step of the handshake failed: shut out if the worker closed or
    /// reset the connection, passing otherwise.
    fn handshake(message: String, closed: bool) -> LinkError {
        LinkError {
            message,
            fatal: false,
            shut_out: closed,
        }
    }
}

/// One worker, connected and authenticated, ready for a job.
pub(crate) struct Link {
    pub name: String,
    pub addr: SocketAddr,
    pub cores: usize,
    /// Cores' worth of CPU (fractional under a quota).
    pub cpu: f64,
    pub limits: Limits,
    pub local_addresses: Vec<IpAddr>,
    /// The worker's CLOCK_MONOTONIC minus ours, in nanoseconds.
    pub offset_ns: i64,
    /// The round trip of the clock reading used.
    pub rtt: Duration,
    pub(super) reader: BufReader<Wire>,
    pub(super) writer: Wire,
}

/// TLS to the workers: the configuration that trusts their CA, and the
/// name their certificates hold.
#[derive(Clone)]
pub(crate) struct WorkerTls {
    pub config: Arc<rustls::ClientConfig>,
    pub name: ServerName<'static>,
}

/// The worker options' names, for TLS messages.
pub(crate) const WORKER_SETTINGS: SettingNames = SettingNames {
    ca_file: "--worker-ca-file",
    client_cert: "--worker-ca-file",
    untrusted: "give the CA that signed the workers' --tls-cert as --worker-ca-file",
    expired: "renew the workers' --tls-cert",
    wrong_name: "name the workers as their certificate does (--workers NAME:PORT or dns:NAME:PORT), or give the certificate that name",
};

impl Link {
    /// Connects to the worker at `addr` (over TLS with `tls`) and
    /// authenticates with `token`.
    pub(crate) fn connect(
        addr: SocketAddr,
        token: Option<&str>,
        tls: Option<&WorkerTls>,
    ) -> Result<Link, LinkError> {
        let stream = TcpStream::connect_timeout(&addr, HANDSHAKE_TIMEOUT)
            .map_err(|e| LinkError::passing(format!("worker {addr}: cannot connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
            .and_then(|_| stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
            .map_err(|e| LinkError::passing(format!("worker {addr}: {e}")))?;
        let stream = match tls {
            None => Wire::Plain(stream),
            Some(tls) => Wire::client(stream, tls.config.clone(), tls.name.clone()).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::InvalidData
                    && e.get_ref().is_some_and(|e| {
                        matches!(
                            e.downcast_ref::<rustls::Error>(),
                            Some(rustls::Error::InvalidMessage(_))
                        )
                    }) {
                    format!("worker {addr} does not speak TLS: start it with --tls-cert and --tls-key, or leave out --worker-ca-file")
                } else if closed(&e) {
                    // The worker's door closes connections before their
                    // TLS handshake too: that one is worth another try.
                    return LinkError::handshake(
                        format!("worker {addr}: closed the connection during the TLS handshake"),
                        true,
                    );
                } else {
                    target_tls::explain(&e, &format!("worker {addr}"), &WORKER_SETTINGS)
                };
                // A certificate the controller cannot trust will not mend.
                LinkError::fatal(why)
            })?,
        };
        let writer = stream
            .try_clone()
            .map_err(|e| LinkError::passing(format!("worker {addr}: {e}")))?;
        let mut link = Link {
            name: addr.to_string(),
            addr,
            cores: 1,
            cpu: 1.0,
            limits: Limits {
                open_files: 1024,
                ports: 28_232,
            },
            local_addresses: Vec::new(),
            offset_ns: 0,
            rtt: Duration::ZERO,
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = link.handshake_recv().map_err(|e| match tls {
            // A worker greets at once; one that took the connection and
            // said nothing waits for a TLS handshake (or is no worker).
            None if e.message.ends_with("no answer") => LinkError::fatal(format!(
                "worker {addr} took the connection but sent no greeting in {} s: a worker started with --tls-cert needs the controller's --worker-ca-file",
                HANDSHAKE_TIMEOUT.as_secs()
            )),
            _ => e,
        })?;
        let (name, nonce) = match greeting {
            FromWorker::Greeting {
                protocol,
                version,
                release,
                name,
                nonce,
            } => {
                if protocol != protocol::PROTOCOL {
                    return Err(LinkError::fatal(format!(
                        "{addr} is no autoperf worker (it speaks `{protocol}`)"
                    )));
                }
                if version != protocol::VERSION {
                    return Err(LinkError::fatal(format!(
                        "worker {name} ({addr}) speaks worker protocol {version} (autoperf {release}), this controller {} (autoperf {}): run the same autoperf release on both",
                        protocol::VERSION,
                        protocol::release()
                    )));
                }
                (name, nonce)
            }
            other => return Err(LinkError::fatal(link.unexpected("a greeting", &other))),
        };
        // A name from the wire is shown on terminals: no escapes in it.
        link.name = crate::measure::printable(&name).into_owned();
        let ours = protocol::nonce();
        let hello = ToWorker::Hello {
            version: protocol::VERSION,
            release: protocol::release(),
            proof: token.map(|t| protocol::proof(t, &nonce, Role::Controller)),
            nonce: ours.clone(),
        };
        protocol::write(&mut link.writer, &hello).map_err(|e| {
            LinkError::handshake(
                format!("worker {}: cannot send: {e}", link.who()),
                closed(&e),
            )
        })?;
        match link.handshake_recv()? {
            FromWorker::Welcome {
                proof,
                cores,
                cpu,
                limits,
                local_addresses,
            } => {
                // The job carries the scenario's files and variables: only
                // for a worker that holds the token too.
                if let Some(token) = token {
                    let proven =
                        proof.is_some_and(|p| protocol::verify(token, &ours, Role::Worker, &p));
                    if !proven {
                        return Err(LinkError::fatal(format!(
                            "{} did not prove it holds the workers' token (a worker started without --token-file, or not a worker of ours)",
                            link.who()
                        )));
                    }
                }
                // A worker's figures decide its share: they must be a
                // host's (a CPU of 1e308 reached run.json as null).
                if !((1..=MAX_CORES).contains(&cores) && cpu.is_finite() && cpu >= 0.0) {
                    return Err(LinkError::fatal(format!(
                        "{} announced {cores} cores and {cpu} CPUs: not a host's figures",
                        link.who()
                    )));
                }
                link.cores = cores;
                // Zero: its CPU is not known; at most its cores.
                link.cpu = if cpu > 0.0 {
                    cpu.min(cores as f64)
                } else {
                    cores as f64
                };
                link.limits = limits;
                link.local_addresses = local_addresses;
            }
            FromWorker::Refused { reason } => {
                return Err(LinkError::fatal(format!(
                    "worker {} refused this controller: {reason}",
                    link.who()
                )))
            }
            other => return Err(LinkError::fatal(link.unexpected("a welcome", &other))),
        }
        link.measure_clock().map_err(LinkError::passing)?;
        Ok(link)
    }

    /// `name (address)`, for messages.
    pub(crate) fn who(&self) -> String {
        if self.name == self.addr.to_string() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.addr)
        }
    }

    /// Asks the worker whether it reaches the scenario's target.
    pub(crate) fn probe(&mut self, scenario: &ScenarioSource) -> Result<(), String> {
        self.send(&ToWorker::Probe {
            scenario: scenario.clone(),
        })?;
        // Decoding a large data file and connecting take a while.
        self.set_timeout(Some(HANDSHAKE_TIMEOUT * 6))?;
        let answer = self.recv();
        self.set_timeout(Some(HANDSHAKE_TIMEOUT))?;
        match answer? {
            FromWorker::Probed { error: None } => Ok(()),
            FromWorker::Probed { error: Some(e) } => Err(format!("worker {}: {e}", self.who())),
            other => Err(self.unexpected("the probe's answer", &other)),
        }
    }

    /// Ends the connection politely (a probe's or a refused level's).
    pub(crate) fn bye(mut self) {
        let _ = protocol::write(&mut self.writer, &ToWorker::Bye);
    }

    /// This host's CLOCK_MONOTONIC reading `ns` on the worker's clock.
    pub(crate) fn on_worker_clock(&self, ns: u64) -> u64 {
        (ns as i64).saturating_add(self.offset_ns).max(0) as u64
    }

    /// The worker's reading `ns` on this host's clock.
    pub(crate) fn on_our_clock(&self, ns: u64) -> u64 {
        (ns as i64).saturating_sub(self.offset_ns).max(0) as u64
    }

    /// NTP's estimate: the worker read its clock halfway through the round
    /// trip of the fastest exchange.
    fn measure_clock(&mut self) -> Result<(), String> {
        let mut best: Option<(Duration, i64)> = None;
        for _ in 0..CLOCK_SAMPLES {
            let sent = Instant::now();
            self.send(&ToWorker::Ping)?;
            let theirs = match self.recv()? {
                FromWorker::Pong { now_ns } => now_ns,
                other => return Err(self.unexpected("a clock reading", &other)),
            };
            let back = Instant::now();
            let rtt = back - sent;
            let offset = clock_offset(theirs, to_monotonic_ns(sent + rtt / 2));
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, offset));
            }
        }
        let (rtt, offset) = best.expect("at least one sample");
        self.rtt = rtt;
        self.offset_ns = offset;
        Ok(())
    }

    pub(super) fn send(&mut self, message: &ToWorker) -> Result<(), String> {
        protocol::write(&mut self.writer, message)
            .map_err(|e| format!("worker {}: cannot send: {e}", self.who()))
    }

    pub(super) fn recv(&mut self) -> Result<FromWorker, String> {
        match protocol::read(&mut self.reader, MAX_LINE) {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err(format!("worker {}: closed the connection", self.who())),
            Err(e) if is_timeout(&e) => Err(format!("worker {}: no answer", self.who())),
            Err(e) => Err(format!("worker {}: {e}", self.who())),
        }
    }

    /// `recv` during the handshake, telling a connection the worker
    /// closed from one that failed otherwise.
    fn handshake_recv(&mut self) -> Result<FromWorker, LinkError> {
        match protocol::read(&mut self.reader, MAX_LINE) {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err(LinkError::handshake(
                format!("worker {}: closed the connection", self.who()),
                true,
            )),
            Err(e) if is_timeout(&e) => Err(LinkError::passing(format!(
                "worker {}: no answer",
                self.who()
            ))),
            Err(e) => Err(LinkError::handshake(
                format!("worker {}: {e}", self.who()),
                closed(&e),
            )),
        }
    }

    pub(super) fn set_timeout(&self, timeout: Option<Duration>) -> Result<(), String> {
        self.writer
            .set_read_timeout(timeout)
            .map_err(|e| format!("worker {}: {e}", self.who()))
    }

    fn unexpected(&self, wanted: &str, got: &FromWorker) -> String {
        let said = match got {
            FromWorker::Refused { reason } | FromWorker::Failed { reason } => reason.clone(),
            other => format!("{other:?}").chars().take(120).collect(),
        };
        format!("worker {}: expected {wanted}, got: {said}", self.who())
    }
}

/// The worker's clock minus ours: it read `theirs` when ours read `mid`.
/// Any reading is a difference, saturated (a reading of 2^63 ns made
/// `theirs as i64 - mid` overflow).
pub(super) fn clock_offset(theirs: u64, mid: u64) -> i64 {
    (i128::from(theirs) - i128::from(mid)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// Whether `e` says the other end closed or reset the connection.
fn closed(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::UnexpectedEof
    )
}

pub(super) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::workers::{worker_main, WorkerOptions};

    /// A reading of 2^63 ns overflowed (fuzz/regressions/worker_protocol).
    #[test]
    fn any_clock_reading_makes_an_offset() {
        assert_eq!(clock_offset(5, 7), -2);
        assert_eq!(clock_offset(1 << 63, 1_000), i64::MAX - 999);
        assert_eq!(clock_offset(u64::MAX, 0), i64::MAX);
        assert_eq!(clock_offset(0, u64::MAX), i64::MIN);
    }

    /// A worker named `name` in this process, on a loopback port; its
    /// address once it listens.
    fn worker_here(name: &str, token_file: Option<std::path::PathBuf>) -> SocketAddr {
        let (tx, rx) = std::sync::mpsc::channel();
        let options = WorkerOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            token_file,
            name: Some(name.into()),
            local_addresses: Vec::new(),
            program: None,
            tls_cert: None,
            tls_key: None,
        };
        std::thread::spawn(move || worker_main(options, |a| tx.send(a).unwrap()));
        rx.recv_timeout(Duration::from_secs(5)).unwrap()
    }

    #[test]
    fn a_controller_links_to_a_worker_with_its_token_and_reads_its_clock() {
        const TOKEN: &str = "link-test-token-0123456789";
        let dir = std::env::temp_dir().join(format!("autoperf-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let addr = worker_here("w-test", Some(token));
        let link =
            Link::connect(addr, Some(TOKEN), None).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(link.name, "w-test");
        assert!(link.cores >= 1);
        // One host, one clock: the offset is the measurement's error.
        assert!(link.offset_ns.abs() < 5_000_000, "{} ns", link.offset_ns);
        assert!(link.rtt < Duration::from_millis(100));
        link.bye();
        let e = Link::connect(addr, None, None).err().unwrap();
        assert!(
            e.fatal && e.message.contains("requires a token"),
            "{}",
            e.message
        );
        let e = Link::connect(addr, Some("another-token-0123456789"), None)
            .err()
            .unwrap();
        assert!(
            e.fatal && e.message.contains("does not match"),
            "{}",
            e.message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A worker whose door is full closes a newcomer's connection before
    /// the welcome: that is worth trying again soon, unlike a refusal.
    #[test]
    fn a_connection_closed_before_the_welcome_is_shut_out_not_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let door = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let e = Link::connect(addr, Some("a-token-0123456789"), None)
            .err()
            .unwrap();
        door.join().unwrap();
        assert!(e.shut_out && !e.fatal, "{e:?}");
        assert!(e.message.contains("closed the connection"), "{}", e.message);
    }

    /// A job past what the worker's host holds (10^9 users made a worker
    /// abort out of memory) is refused before anything of it runs, with a
    /// reason the controller shows.
    #[test]
    fn a_worker_refuses_a_job_past_its_hosts_limits_saying_why() {
        use crate::engine::fleet::{Job, ScenarioSource};
        use crate::engine::level::Workload;
        use crate::engine::split::{Load, ShardRange};
        use crate::engine::start::Clock;
        use crate::engine::workers::protocol::{self, FromWorker, MAX_LINE};

        let addr = worker_here("w-limits", None);
        let mut link = Link::connect(addr, None, None).unwrap_or_else(|e| panic!("{}", e.message));
        let job = Job::new(
            ScenarioSource {
                path: "s.yaml".into(),
                text: "requests: {a: {path: /}}\n".into(),
                overrides: Vec::new(),
                base_url: None,
                shipped: None,
            },
            &Workload::Session,
            &Load::Closed {
                users: 1_000_000_000,
                ramp: None,
            },
            ShardRange::whole(2),
            Vec::new(),
            Clock {
                start: Instant::now(),
                deadline: Instant::now(),
                seed: 0,
                nap: Duration::ZERO,
                measured_from: 0,
            },
        );
        link.send(&ToWorker::Run {
            job,
            process_shards: vec![2],
        })
        .unwrap();
        match protocol::read::<FromWorker>(&mut link.reader, MAX_LINE) {
            Ok(Some(FromWorker::Failed { reason })) => assert!(
                reason.starts_with(
                    "worker w-limits refused the job: the job asks for 1000000000 connections"
                ),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
