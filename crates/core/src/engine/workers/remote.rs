//! One level on the linked workers: each gets its job and decodes it,
//! then all start on one clock; their snapshots reach the collector as the
//! controller's own shards' do. A worker that dies, disconnects or goes
//! silent mid-level is named, and its shards end there, so the level
//! still ends on time — marked incomplete by the caller.

use std::collections::BTreeSet;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::link::{is_timeout, Link};
use super::plausible::Expected;
use super::protocol::{self, FromWorker, ToWorker, MAX_LINE};
use super::wire::Wire;
use crate::engine::error::EngineError;
use crate::engine::fleet::{end_shards, HostPlan, Job, ScenarioSource};
use crate::engine::level::Workload;
use crate::engine::split::Load;
use crate::engine::start::Clock;
use crate::engine::stop::StopSignal;
use crate::measure::wire::to_monotonic_ns;
use crate::measure::Snapshot;

/// How long a worker may take to decode its job (a large data file).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A worker that sends nothing for this long mid-level is lost: its
/// shards report every second.
const SILENCE: Duration = Duration::from_secs(10);

/// Before its first snapshot a worker may take longer: generator
/// processes it starts read and decode the job (data files) first.
const FIRST_SILENCE: Duration = Duration::from_secs(60);

/// How long after the deadline (or a stop) workers may take to send their
/// last snapshots before their connections are cut.
const GRACE: Duration = Duration::from_secs(5);

/// Workers that have their jobs, waiting for the clock.
pub(super) struct Prepared {
    links: Vec<(Link, BTreeSet<usize>)>,
}

/// Workers that did not take their job (busy with another controller,
/// cannot decode the scenario, gone), each a sentence, by address.
pub(super) struct Unready(pub Vec<(std::net::SocketAddr, String)>);

/// Sends each worker its job and waits until every one has decoded it;
/// the workers that did not are named (the caller plans without them).
pub(super) fn prepare(
    links: Vec<Link>,
    hosts: &[HostPlan],
    source: &ScenarioSource,
    workload: &Workload,
    load: &Load,
    provisional: Clock,
) -> Result<Prepared, Unready> {
    let provisional = Clock {
        start: Instant::now(),
        deadline: Instant::now(),
        ..provisional
    };
    let mut sent = Vec::with_capacity(links.len());
    let mut unready = Vec::new();
    for (mut link, host) in links.into_iter().zip(hosts) {
        let job = Job::new(
            source.clone(),
            workload,
            load,
            host.range,
            host.addresses.clone(),
            provisional,
        );
        let message = ToWorker::Run {
            job,
            process_shards: host.process_shards.clone(),
        };
        match link.send(&message) {
            Ok(()) => sent.push((link, host.range.globals().collect::<BTreeSet<usize>>())),
            Err(e) => unready.push((link.addr, e)),
        }
    }
    // Sent to all first: they decode side by side.
    let mut ready = Vec::with_capacity(sent.len());
    for (mut link, shards) in sent {
        let answer = link
            .set_timeout(Some(READY_TIMEOUT))
            .and_then(|_| link.recv());
        match answer {
            Ok(FromWorker::Ready) => ready.push((link, shards)),
            Ok(FromWorker::Failed { reason }) => unready.push((
                link.addr,
                format!("worker {} cannot run the level: {reason}", link.who()),
            )),
            Ok(other) => unready.push((
                link.addr,
                format!("worker {}: expected ready, got {other:?}", link.who()),
            )),
            Err(e) => unready.push((link.addr, e)),
        }
    }
    // Those that are ready see their connection close, and wait for the
    // next level.
    match unready.is_empty() {
        true => Ok(Prepared { links: ready }),
        false => Err(Unready(unready)),
    }
}

impl Prepared {
    /// The longest round trip to any worker: `Go` must reach all before
    /// the start.
    pub(super) fn slowest_rtt(&self) -> Duration {
        self.links
            .iter()
            .map(|(l, _)| l.rtt)
            .max()
            .unwrap_or_default()
    }

    /// Starts every worker on `clock` (each on its own clock reading) and
    /// forwards their snapshots to `tx`.
    pub(super) fn go(
        self,
        clock: Clock,
        tx: Sender<Snapshot>,
        stop: &StopSignal,
    ) -> Result<RemoteFleet, EngineError> {
        let mut fleet = RemoteFleet {
            sockets: Arc::new(Mutex::new(Vec::new())),
            lost: Vec::new(),
            readers: Vec::new(),
            watchdog: None,
            done: Arc::new(AtomicBool::new(false)),
        };
        let (start_ns, deadline_ns) = (
            to_monotonic_ns(clock.start),
            to_monotonic_ns(clock.deadline),
        );
        for (mut link, shards) in self.links {
            let go = link.send(&ToWorker::Go {
                start_ns: link.on_worker_clock(start_ns),
                deadline_ns: link.on_worker_clock(deadline_ns),
            });
            if let Err(e) = go {
                // Gone since it said ready: the others run; its part is lost.
                end_shards(shards, clock.start, &tx);
                fleet.lost.push(format!(
                    "worker {} was lost before the level started ({e}); its share of the load is missing from the level",
                    link.who()
                ));
                continue;
            }
            link.set_timeout(Some(FIRST_SILENCE))
                .map_err(EngineError::Workers)?;
            let socket = link
                .writer
                .try_clone()
                .map_err(|e| EngineError::Workers(format!("worker {}: {e}", link.who())))?;
            lock(&fleet.sockets).push(socket);
            let reader = Reader {
                link,
                expected: Expected::new(shards.clone(), clock.start, clock.deadline + GRACE),
                shards,
                start: clock.start,
                tx: tx.clone(),
            };
            fleet.readers.push(
                std::thread::Builder::new()
                    .name("autoperf-worker-link".into())
                    .spawn(move || reader.run())
                    .map_err(|e| EngineError::Start(e.to_string()))?,
            );
        }
        // Ctrl-C and a controller's stop reach the workers as `Stop`; a
        // connection still open GRACE after that, or after the deadline,
        // is cut, which ends its reader and so its part of the level.
        let (sockets, done, stop) = (fleet.sockets.clone(), fleet.done.clone(), stop.clone());
        let mut cut_at = clock.deadline + GRACE;
        let mut told = false;
        fleet.watchdog = Some(std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if stop.is_stopped() && !told {
                    told = true;
                    cut_at = cut_at.min(Instant::now() + GRACE);
                    for socket in lock(&sockets).iter_mut() {
                        let _ = protocol::write(socket, &ToWorker::Stop);
                    }
                }
                if Instant::now() >= cut_at {
                    for socket in lock(&sockets).iter() {
                        let _ = socket.shutdown(Shutdown::Both);
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
        Ok(fleet)
    }
}

/// The workers running one level.
pub(super) struct RemoteFleet {
    sockets: Arc<Mutex<Vec<Wire>>>,
    /// Workers lost before they started.
    lost: Vec<String>,
    /// One per worker: the load it lost, if any.
    readers: Vec<JoinHandle<Vec<String>>>,
    watchdog: Option<JoinHandle<()>>,
    done: Arc<AtomicBool>,
}

impl RemoteFleet {
    /// Once the collector has heard every shard end: what load was lost,
    /// a sentence per worker (or generator process of one) naming it.
    pub(super) fn finish(mut self) -> Vec<String> {
        self.done.store(true, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
        let mut lost = std::mem::take(&mut self.lost);
        lost.extend(self.readers.drain(..).flat_map(|r| {
            r.join()
                .unwrap_or_else(|_| vec!["a worker's reader failed".to_string()])
        }));
        lost
    }
}

impl Drop for RemoteFleet {
    fn drop(&mut self) {
        // Whatever happened, no worker goes on with this level.
        self.done.store(true, Ordering::Relaxed);
        for socket in lock(&self.sockets).iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forwards one worker's snapshots to the collector.
struct Reader {
    link: Link,
    /// Its shards that have not ended yet.
    shards: BTreeSet<usize>,
    start: Instant,
    /// What its snapshots can be.
    expected: Expected,
    tx: Sender<Snapshot>,
}

impl Reader {
    /// Forwards until the worker is done or lost; returns what was lost.
    fn run(mut self) -> Vec<String> {
        let mut lost = Vec::new();
        let mut heard = false;
        let why = loop {
            match protocol::read::<FromWorker>(&mut self.link.reader, MAX_LINE) {
                Ok(Some(FromWorker::Snapshot { mut snapshot })) => {
                    if !heard {
                        heard = true;
                        let _ = self.link.set_timeout(Some(SILENCE));
                    }
                    snapshot.at_ns = self.link.on_our_clock(snapshot.at_ns);
                    match snapshot.into_snapshot() {
                        Ok(snapshot) => {
                            if let Err(why) = self.expected.check(&snapshot, self.link.cores) {
                                break why;
                            }
                            if snapshot.last {
                                self.shards.remove(&snapshot.shard);
                            }
                            let _ = self.tx.send(snapshot);
                        }
                        Err(e) => break format!("sent {e}"),
                    }
                }
                Ok(Some(FromWorker::Done { trouble })) => {
                    lost.extend(
                        trouble
                            .into_iter()
                            .map(|t| format!("worker {}: {t}", self.link.who())),
                    );
                    if self.shards.is_empty() {
                        return lost;
                    }
                    break "ended its job before all its shards had".to_string();
                }
                Ok(Some(FromWorker::Failed { reason })) => break format!("failed: {reason}"),
                Ok(Some(other)) => break format!("sent {other:?} mid-level"),
                Ok(None) => break "closed the connection".to_string(),
                Err(e) if is_timeout(&e) => {
                    let silence = if heard { SILENCE } else { FIRST_SILENCE };
                    break format!("sent nothing for {} s", silence.as_secs());
                }
                Err(e) => break format!("connection failed: {e}"),
            }
        };
        // Given up on: it stops loading the target now, and is free for
        // the next level.
        let _ = protocol::write(&mut self.link.writer, &ToWorker::Stop);
        let _ = self.link.writer.shutdown(Shutdown::Both);
        let at = self.start.elapsed().as_secs_f64();
        let shards = std::mem::take(&mut self.shards);
        if !shards.is_empty() {
            end_shards(shards, self.start, &self.tx);
            lost.push(format!(
                "worker {} was lost {at:.1} s into the level ({why}); its share of the load is missing from the rest of the level",
                self.link.who()
            ));
        }
        lost
    }
}
