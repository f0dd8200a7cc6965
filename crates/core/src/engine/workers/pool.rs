//! The workers a run may use: which ones (the controller's own options
//! first, then the scenario's `workers:`), their specs (addresses, or a
//! DNS name a Kubernetes service answers for), the token and TLS the
//! controller speaks to them with, waiting for enough of them to answer before the first
//! level, connecting to those a level runs on, and scaling out to more of
//! them when the generator was the bottleneck.

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::link::{self, Link, WorkerTls};
use super::WorkerSpec;
use crate::engine::error::EngineError;
use crate::engine::fleet::{Generators, ScenarioSource};
use crate::engine::stop::StopSignal;
use crate::scenario::{PemFile, Scenario, WorkerSettings};

/// How long a run waits for its workers to answer before the first level.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Tries again at a worker that closes the connection before welcoming
/// us (its door full of strangers) before it counts as not answering.
const SHUT_OUT_TRIES: u32 = 6;

/// The pause before the `try_`th try again (from 1): doubling from 50 ms,
/// at a random point of its upper half so that a stranger reconnecting on
/// a beat cannot meet every try (six pauses: 2.4 s on average, 3.2 s at
/// most).
fn shut_out_pause(try_: u32) -> Duration {
    let ceiling = 25u64 << try_.clamp(1, SHUT_OUT_TRIES);
    Duration::from_millis(fastrand::u64(ceiling / 2..=ceiling))
}

/// The name a worker's TLS certificate is checked against: the host as
/// `spec` writes it (a DNS name, or an address).
fn tls_name(spec: &WorkerSpec) -> String {
    match spec {
        WorkerSpec::Host(text) => {
            let host = text.rsplit_once(':').map_or(text.as_str(), |(h, _)| h);
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        }
        WorkerSpec::Dns { name, .. } => name.clone(),
    }
}

/// The addresses `spec` names now.
fn resolve(spec: &WorkerSpec) -> Result<Vec<SocketAddr>, String> {
    match spec {
        WorkerSpec::Host(text) => text
            .to_socket_addrs()
            .map_err(|e| format!("worker {text}: {e}"))?
            .next()
            .map(|a| vec![a])
            .ok_or_else(|| format!("worker {text}: the name has no address")),
        WorkerSpec::Dns { name, port } => Ok((name.as_str(), *port)
            .to_socket_addrs()
            .map(|a| a.collect())
            // No ready pod yet: no address, which waiting may change.
            .unwrap_or_default()),
    }
}

/// The first of `given`'s options that only means something with workers.
fn about_workers(given: &WorkerSettings) -> Option<&'static str> {
    [
        (given.token_file.is_some(), "--worker-token-file"),
        (given.ca_file.is_some(), "--worker-ca-file"),
        (given.min.is_some(), "--min-workers"),
        (given.start.is_some(), "--start-workers"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

/// A file option of the workers': `given`'s (named `flag` in messages),
/// else the scenario's (named `key`).
fn file_option<'a>(
    given: Option<&'a WorkerSettings>,
    scenario: Option<&'a WorkerSettings>,
    file: fn(&WorkerSettings) -> Option<&PathBuf>,
    (flag, key): (&'static str, &'static str),
) -> Option<(&'static str, &'a PathBuf)> {
    match given.and_then(file) {
        Some(path) => Some((flag, path)),
        None => scenario.and_then(file).map(|path| (key, path)),
    }
}

/// The workers' token: the first line of the file `name` (an option)
/// gives, checked as the workers check it.
fn read_token(name: &str, path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{name}: cannot read {}: {e}", path.display()))?;
    autoperf_agent::options::token_from_text(&text, path).map_err(|e| format!("{name}: {e}"))
}

/// Refuses this host's generator options when the levels run on workers.
fn refuse_here(here: &Generators) -> Result<(), String> {
    let flag = match (here.processes, here.local_addresses.is_empty()) {
        (Some(_), _) => "--generators",
        (None, false) => "--local-addresses",
        (None, true) => return Ok(()),
    };
    Err(format!(
        "{flag} is about this host's generator processes, but the levels run on workers: give each worker its own (`autoperf worker --local-addresses …`; workers start the processes they need by themselves)"
    ))
}

/// The workers a run may use, and how many its levels use now.
#[derive(Clone)]
pub struct WorkerPool {
    specs: Vec<WorkerSpec>,
    token: Option<String>,
    /// TLS to the workers (`--worker-ca-file`): the trust, and each
    /// address's name as its spec wrote it.
    tls: Option<Arc<rustls::ClientConfig>>,
    names: Arc<Mutex<HashMap<SocketAddr, String>>>,
    /// Workers that must answer before the first level.
    min: usize,
    /// Workers a level runs on now (`usize::MAX`: all there are).
    active: Arc<AtomicUsize>,
    /// The scenario's files and variables as shipped, read once per run.
    source: Arc<Mutex<Option<ScenarioSource>>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("WorkerPool")
            .field("specs", &self.specs)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("tls", &self.tls.is_some())
            .field("min", &self.min)
            .field("active", &self.active())
            .finish()
    }
}

impl WorkerPool {
    /// The workers a run uses: those `given` names (the controller's
    /// own options: `autoperf`'s `--workers`, `--worker-token-file`,
    /// `--worker-ca-file`, `--min-workers`, `--start-workers`), else those
    /// of the scenario's `workers:`, each option taken from `given` first;
    /// `None` when neither names any. `here`: this host's generator
    /// options, which mean nothing when the levels run on workers.
    /// `scale_out`: a capacity analysis, which starts on one worker unless
    /// told otherwise and adds more when the generator limits a level.
    /// Errors are sentences naming the option at fault.
    pub fn from_settings(
        given: Option<&WorkerSettings>,
        scenario: Option<&WorkerSettings>,
        here: &Generators,
        scale_out: bool,
    ) -> Result<Option<WorkerPool>, String> {
        let specs = match given.filter(|g| !g.addresses.is_empty()) {
            Some(g) => g.addresses.clone(),
            None => scenario.map(|s| s.addresses.clone()).unwrap_or_default(),
        };
        if specs.is_empty() {
            return match given.and_then(about_workers) {
                Some(flag) => Err(format!(
                    "{flag} is about workers, but none are named: give them with --workers host:port,… or `workers:` in the scenario"
                )),
                None => Ok(None),
            };
        }
        let token_file = file_option(
            given,
            scenario,
            |s| s.token_file.as_ref(),
            ("--worker-token-file", "workers.token_file"),
        );
        let token = match token_file {
            Some((name, path)) => Some(read_token(name, path)?),
            None => None,
        };
        let min = given
            .and_then(|g| g.min)
            .or(scenario.and_then(|s| s.min))
            .map(|n| n as usize);
        let start = given
            .and_then(|g| g.start)
            .or(scenario.and_then(|s| s.start))
            .map(|n| n as usize)
            .or(scale_out.then_some(1));
        refuse_here(here)?;
        let pool = WorkerPool::new(specs, token, min, start)?;
        let ca_file = file_option(
            given,
            scenario,
            |s| s.ca_file.as_ref(),
            ("--worker-ca-file", "workers.ca_file"),
        );
        let Some((name, path)) = ca_file else {
            return Ok(Some(pool));
        };
        let pem = std::fs::read(path)
            .map_err(|e| format!("{name}: cannot read {}: {e}", path.display()))?;
        let file = PemFile {
            path: path.clone(),
            pem,
        };
        pool.with_tls(file)
            .map(Some)
            .map_err(|e| format!("{name}: {e}"))
    }

    /// `min`: workers to wait for (default: every address listed, or one
    /// behind a DNS name); `start`: workers the first level runs on
    /// (default: all).
    pub(crate) fn new(
        specs: Vec<WorkerSpec>,
        token: Option<String>,
        min: Option<usize>,
        start: Option<usize>,
    ) -> Result<WorkerPool, String> {
        if specs.is_empty() {
            return Err("--workers names no worker".into());
        }
        let listed = specs
            .iter()
            .filter(|s| matches!(s, WorkerSpec::Host(_)))
            .count();
        let min = min.unwrap_or(listed.max(1));
        if min == 0 {
            return Err("--min-workers must be at least 1".into());
        }
        Ok(WorkerPool {
            specs,
            token,
            tls: None,
            names: Arc::new(Mutex::new(HashMap::new())),
            min,
            active: Arc::new(AtomicUsize::new(start.unwrap_or(usize::MAX).max(1))),
            source: Arc::new(Mutex::new(None)),
        })
    }

    /// Speaks TLS to the workers, trusting the CA certificates of
    /// `ca_file` (PEM; its path for messages) for their `--tls-cert`.
    pub(crate) fn with_tls(mut self, ca_file: PemFile) -> Result<WorkerPool, String> {
        let settings = crate::scenario::TlsSettings {
            ca_file: Some(ca_file),
            ..Default::default()
        };
        let config = crate::protocol::tls::client_config(&settings, &[], &link::WORKER_SETTINGS)?;
        self.tls = Some(Arc::new(config));
        Ok(self)
    }

    /// Workers a level runs on now, at most.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Every worker address the specs name now, sorted (so a level's
    /// first N are the same workers as the last level's, whatever order
    /// DNS answered in) and without repeats; and the specs that named
    /// none, each a sentence.
    pub(crate) fn addresses(&self) -> (Vec<SocketAddr>, Vec<String>) {
        let mut all = Vec::new();
        let mut troubles = Vec::new();
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        for spec in &self.specs {
            match resolve(spec) {
                Ok(addrs) => {
                    for &addr in &addrs {
                        names.entry(addr).or_insert_with(|| tls_name(spec));
                    }
                    all.extend(addrs)
                }
                Err(e) => troubles.push(e),
            }
        }
        all.sort();
        all.dedup();
        (all, troubles)
    }

    /// Runs the next levels on `n` workers at least (a resumed analysis
    /// goes on where it had scaled out to).
    pub(crate) fn use_at_least(&self, n: usize) {
        self.active.fetch_max(n.max(1), Ordering::Relaxed);
    }

    /// Whether a level could run on more workers than now.
    pub(crate) fn can_scale_out(&self) -> bool {
        self.active() < self.addresses().0.len()
    }

    /// More workers for the next level, because the generator was the
    /// bottleneck: twice as many, at most every worker there is. Returns
    /// (before, after), or `None` when every worker is in use already.
    pub(crate) fn scale_out(&self) -> Option<(usize, usize)> {
        let available = self.addresses().0.len();
        let before = self.active().min(available);
        if before >= available {
            return None;
        }
        let after = (before * 2).min(available);
        self.active.store(after, Ordering::Relaxed);
        Some((before, after))
    }

    /// Workers that must answer (`--min-workers`).
    pub(crate) fn min(&self) -> usize {
        self.min
    }

    /// How many workers answer now, counting up to `want`.
    pub(crate) fn answering(&self, want: usize) -> usize {
        let (addrs, _) = self.addresses();
        match self.connect_all(&addrs, want) {
            Ok((links, _)) => links.into_iter().map(Link::bye).count(),
            Err(_) => 0,
        }
    }

    /// Waits (up to `READY_TIMEOUT`, or until `stop`) for `min` workers to
    /// answer, checks each reaches the target, and describes them. A
    /// worker that refuses us (token, version) fails at once.
    pub(crate) fn wait_ready(
        &self,
        scenario: &Scenario,
        stop: &StopSignal,
    ) -> Result<String, EngineError> {
        let source = self.source(scenario)?;
        let give_up = Instant::now() + READY_TIMEOUT;
        let last = loop {
            let (addrs, mut troubles) = self.addresses();
            let (links, unreachable) = self.connect_all(&addrs, usize::MAX)?;
            troubles.extend(unreachable);
            if links.len() >= self.min {
                let mut described = Vec::new();
                for mut link in links {
                    link.probe(&source).map_err(EngineError::Workers)?;
                    described.push(format!(
                        "{} ({} cores, clock {:+.3} ms, round trip {:.3} ms)",
                        link.who(),
                        link.cores,
                        link.offset_ns as f64 / 1e6,
                        link.rtt.as_secs_f64() * 1e3
                    ));
                    link.bye();
                }
                return Ok(format!(
                    "{} worker{}: {}",
                    described.len(),
                    if described.len() == 1 { "" } else { "s" },
                    described.join(", ")
                ));
            }
            let answered = links.len();
            for link in links {
                link.bye();
            }
            if stop.wait(Duration::from_secs(1)) {
                return Err(EngineError::Interrupted(format!(
                    "interrupted while waiting for workers ({answered} of {} answered); no load was sent",
                    self.min
                )));
            }
            if Instant::now() >= give_up {
                break match troubles.first() {
                    Some(t) => t.clone(),
                    None => format!("{answered} of {} answered", self.min),
                };
            }
        };
        Err(EngineError::Workers(format!(
            "fewer than {} worker{} of {} answered within {} s ({last}); start them with `autoperf worker --listen ADDR`, or lower --min-workers",
            self.min,
            if self.min == 1 { "" } else { "s" },
            self.specs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            READY_TIMEOUT.as_secs()
        )))
    }

    /// Connects to the first `want` of `addrs` that answer; those that do
    /// not are described. A refusal (token, version) is an error.
    pub(super) fn connect_all(
        &self,
        addrs: &[SocketAddr],
        want: usize,
    ) -> Result<(Vec<Link>, Vec<String>), EngineError> {
        let mut links = Vec::new();
        let mut troubles = Vec::new();
        for &addr in addrs {
            if links.len() >= want {
                break;
            }
            let tls = self.tls_for(addr)?;
            let mut shut_out = 0;
            loop {
                match Link::connect(addr, self.token.as_deref(), tls.as_ref()) {
                    Ok(link) => links.push(link),
                    Err(e) if e.fatal => return Err(EngineError::Workers(e.message)),
                    Err(e) if e.shut_out && shut_out < SHUT_OUT_TRIES => {
                        shut_out += 1;
                        std::thread::sleep(shut_out_pause(shut_out));
                        continue;
                    }
                    Err(e) => troubles.push(e.message),
                }
                break;
            }
        }
        Ok((links, troubles))
    }

    /// TLS to the worker at `addr`, if the workers speak it.
    fn tls_for(&self, addr: SocketAddr) -> Result<Option<WorkerTls>, EngineError> {
        let Some(config) = &self.tls else {
            return Ok(None);
        };
        let name = self
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| addr.ip().to_string());
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|_| {
            EngineError::Workers(format!(
                "`{name}` is not a name a worker's TLS certificate can hold"
            ))
        })?;
        Ok(Some(WorkerTls {
            config: config.clone(),
            name,
        }))
    }

    /// The scenario's files and variables as shipped to the workers, read
    /// once per run.
    pub(super) fn source(&self, scenario: &Scenario) -> Result<ScenarioSource, EngineError> {
        let mut cached = self.source.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(source) = &*cached {
            return Ok(source.clone());
        }
        let source = ScenarioSource::shipping(scenario).map_err(EngineError::Workers)?;
        *cached = Some(source.clone());
        Ok(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_lists_take_addresses_and_dns_names() {
        assert_eq!(
            WorkerSpec::parse("10.0.0.5:7420").unwrap(),
            WorkerSpec::Host("10.0.0.5:7420".into())
        );
        assert_eq!(
            WorkerSpec::parse("dns:autoperf-workers.autoperf.svc:7420").unwrap(),
            WorkerSpec::Dns {
                name: "autoperf-workers.autoperf.svc".into(),
                port: 7420
            }
        );
        for bad in ["10.0.0.5", "dns:name", "dns::7420", ":7420", "host:99999"] {
            assert!(WorkerSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scaling_out_doubles_the_workers_up_to_the_pool() {
        let specs = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            .iter()
            .map(|s| WorkerSpec::parse(s).unwrap())
            .collect();
        let pool = WorkerPool::new(specs, None, None, Some(1)).unwrap();
        assert_eq!(pool.active(), 1);
        assert_eq!(pool.scale_out(), Some((1, 2)));
        assert_eq!(pool.scale_out(), Some((2, 3)));
        assert_eq!(pool.scale_out(), None);
    }

    fn settings(addresses: &[&str]) -> WorkerSettings {
        WorkerSettings {
            addresses: addresses
                .iter()
                .map(|a| WorkerSpec::parse(a).unwrap())
                .collect(),
            token_file: None,
            ca_file: None,
            min: None,
            start: None,
        }
    }

    #[test]
    fn workers_come_from_the_flags_before_the_scenario() {
        let here = Generators::default();
        let flags = settings(&["127.0.0.1:1", "127.0.0.1:2"]);
        let scenario = settings(&["127.0.0.1:3"]);
        let pool = WorkerPool::from_settings(Some(&flags), Some(&scenario), &here, false)
            .unwrap()
            .unwrap();
        assert_eq!(pool.specs, flags.addresses);
        assert_eq!((pool.min(), pool.active()), (2, usize::MAX));
        // No flags: the scenario's; a capacity analysis starts on one.
        let pool = WorkerPool::from_settings(None, Some(&scenario), &here, true)
            .unwrap()
            .unwrap();
        assert_eq!(pool.specs, scenario.addresses);
        assert_eq!(pool.active(), 1);
        // Neither: this host.
        assert!(WorkerPool::from_settings(None, None, &here, true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn worker_options_without_workers_and_host_options_with_them_are_refused() {
        let here = Generators::default();
        let mut flags = settings(&[]);
        flags.min = Some(2);
        let err = WorkerPool::from_settings(Some(&flags), None, &here, false).unwrap_err();
        assert!(err.starts_with("--min-workers is about workers"), "{err}");
        let generators = Generators {
            processes: Some(2),
            ..Generators::default()
        };
        let scenario = settings(&["127.0.0.1:1"]);
        let err = WorkerPool::from_settings(None, Some(&scenario), &generators, false).unwrap_err();
        assert!(err.starts_with("--generators is about this host"), "{err}");
        let mut scenario = scenario;
        scenario.token_file = Some("/nonexistent/autoperf-token".into());
        let err = WorkerPool::from_settings(None, Some(&scenario), &here, false).unwrap_err();
        assert!(
            err.starts_with("workers.token_file: cannot read /nonexistent/autoperf-token"),
            "{err}"
        );
    }
}
