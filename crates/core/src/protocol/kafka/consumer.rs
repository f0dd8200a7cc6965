//! A stream processor to test against: a consumer group of `workers`
//! threads that read one topic (worker i takes the partitions p with
//! p mod workers = i), hand each fetch's record count to `process` (the
//! testbed pays a known CPU time per record there), and commit their
//! offsets every second, as Java's `assign()` + `commitSync()` consumer
//! does (generation -1, no group membership). Its lag is what autoperf's
//! lag SLOs judge, and its CPU per record what the agent profiles.
//!
//! ```text
//!  worker i ── Metadata ──▶ its partitions and their leaders
//!           ── OffsetFetch (coordinator) ──▶ where the group stopped
//!              (none: ListOffsets earliest)
//!           ┌▶ Fetch v4 (each leader, ≤ 200 ms wait) ─▶ process(records)
//!           └─ every second: OffsetCommit v2 (coordinator)
//! ```
//!
//! A worker whose broker fails (a leader moved, a connection dropped)
//! commits nothing it has not processed, waits a second and starts its
//! session again from the group's committed offsets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lag::find_coordinator;
use super::producer::{fetch_metadata, open, round_trip, Config, Conn};
use super::wire::{self, Commit, FetchFrom};

/// How long a fetch waits at the broker for a record to arrive.
const FETCH_WAIT_MS: i32 = 200;
/// Bytes a fetch takes per partition at most: about the records a fetch
/// hands on (a batch larger than this still comes whole, KIP-74).
const FETCH_BYTES: i32 = 64 << 10;
/// Records a fetch hands on per partition at most (Java's
/// `max.poll.records` is 500 for all): processing what one fetch brought
/// must not hold the next commit back for seconds.
const MAX_RECORDS: u64 = 100;
/// How often offsets are committed.
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// How often the topic's partitions are looked at again (it may grow).
const METADATA_EVERY: Duration = Duration::from_secs(10);
/// A fetch's error for an offset the partition no longer holds.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// The pause before a failed session starts again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What to consume, and as which group.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub config: Arc<Config>,
    pub topic: String,
    pub group: String,
    /// Threads, each with its share of the partitions.
    pub workers: usize,
}

/// What a worker does with a fetch's records: their count.
pub(crate) type Process = Arc<dyn Fn(u64) + Send + Sync>;

/// Runs the group's workers until `stop` is set; each commits what it
/// processed before it returns.
pub fn run(spec: &ConsumerSpec, process: Process, stop: Arc<AtomicBool>) {
    let workers = spec.workers.max(1);
    let threads: Vec<_> = (0..workers)
        .map(|index| {
            let (spec, process, stop) = (spec.clone(), process.clone(), stop.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread runtime builds");
                runtime.block_on(worker(&spec, index, workers, &process, &stop));
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
}

/// One worker: sessions, one after another, until stopped.
async fn worker(
    spec: &ConsumerSpec,
    index: usize,
    of: usize,
    process: &Process,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        if let Err(why) = session(spec, index, of, process, stop).await {
            eprintln!(
                "consumer {index}: {why}; again in {} s",
                RETRY_AFTER.as_secs()
            );
            tokio::time::sleep(RETRY_AFTER).await;
        }
    }
}

/// A partition this worker reads: where it is, and its leader.
struct Position {
    offset: i64,
    /// The offset last committed (nothing to commit while it is current).
    committed: i64,
    leader: String,
}

/// Reads the worker's partitions from where the group stopped until it is
/// stopped (`Ok`), the topic's partitions change (`Ok`, a new session
/// takes them), or a broker fails (`Err`, why).
async fn session(
    spec: &ConsumerSpec,
    index: usize,
    of: usize,
    process: &Process,
    stop: &AtomicBool,
) -> Result<(), String> {
    let config = &spec.config;
    let client = &config.client_id;
    let topic = spec.topic.as_str();
    let meta = fetch_metadata(config, topic)
        .await
        .map_err(|e| format!("metadata of `{topic}`: {}", e.kind.name()))?;
    let all: Vec<(i32, String)> = meta
        .topics
        .iter()
        .filter(|t| t.name == topic && t.error == 0)
        .flat_map(|t| t.partitions.iter())
        .filter_map(|&(id, leader, _)| {
            let addr = meta.brokers.iter().find(|(node, _)| *node == leader)?;
            Some((id, addr.1.clone()))
        })
        .collect();
    let partition_count: usize = meta
        .topics
        .iter()
        .filter(|t| t.name == topic)
        .map(|t| t.partitions.len())
        .sum();
    let mine: Vec<(i32, String)> = all
        .into_iter()
        .filter(|(id, _)| (*id as usize) % of == index)
        .collect();
    if mine.is_empty() {
        // No topic yet, or fewer partitions than workers: look again.
        tokio::time::sleep(RETRY_AFTER).await;
        return Ok(());
    }
    let coordinator = find_coordinator(config, &spec.group)
        .await
        .map_err(|e| format!("the coordinator of group `{}`: {e}", spec.group))?;
    let mut coordinator = open(&coordinator, config)
        .await
        .map_err(|e| format!("its coordinator {coordinator}: {}", e.kind.name()))?
        .conn;
    let mut request = Vec::new();
    wire::offset_fetch_request(&mut request, 1, client, &spec.group);
    let body = round_trip(&mut coordinator, &request)
        .await
        .map_err(|k| format!("the group's offsets: {}", k.name()))?;
    let committed: BTreeMap<i32, i64> = match wire::offset_fetch_response(&body) {
        Ok(Ok(all)) => all
            .into_iter()
            .filter(|c| c.topic == topic)
            .map(|c| (c.partition, c.offset))
            .collect(),
        Ok(Err(code)) => return Err(format!("the group's offsets: Kafka error {code}")),
        Err(_) => return Err("the group's offsets: a malformed answer".into()),
    };
    let mut positions: BTreeMap<i32, Position> = BTreeMap::new();
    let mut conns = BTreeMap::new();
    for (id, leader) in mine {
        let offset = match committed.get(&id) {
            Some(&offset) => offset,
            None => earliest(config, &leader, topic, id).await?,
        };
        if !conns.contains_key(&leader) {
            let conn = open(&leader, config)
                .await
                .map_err(|e| format!("leader {leader}: {}", e.kind.name()))?
                .conn;
            conns.insert(leader.clone(), conn);
        }
        positions.insert(
            id,
            Position {
                offset,
                committed: committed.get(&id).copied().unwrap_or(-1),
                leader,
            },
        );
    }
    let mut looked = Instant::now();
    let mut last_commit = Instant::now();
    let mut correlation = 1;
    let outcome = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        if looked.elapsed() >= METADATA_EVERY {
            looked = Instant::now();
            if grown(config, topic, partition_count).await {
                break Ok(());
            }
        }
        let mut failed = None;
        for (leader, conn) in conns.iter_mut() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let from: Vec<FetchFrom> = positions
                .iter()
                .filter(|(_, p)| p.leader == *leader)
                .map(|(&partition, p)| FetchFrom {
                    partition,
                    offset: p.offset,
                })
                .collect();
            correlation += 1;
            request.clear();
            wire::fetch_request(
                &mut request,
                correlation,
                client,
                topic,
                &from,
                FETCH_WAIT_MS,
                FETCH_BYTES,
            );
            // The broker waits FETCH_WAIT_MS at most; one that hangs past
            // the timeout fails the session rather than holding the worker.
            let answered = tokio::time::timeout(config.timeout, round_trip(conn, &request)).await;
            let answer = answered
                .map_err(|_| format!("fetching from {leader}: no answer in {:?}", config.timeout))
                .and_then(|body| body.map_err(|k| format!("fetching from {leader}: {}", k.name())))
                .and_then(|body| {
                    wire::fetch_response(&body, &from, MAX_RECORDS)
                        .map_err(|_| format!("fetching from {leader}: a malformed answer"))
                });
            let fetched = match answer {
                Ok(fetched) => fetched,
                Err(why) => {
                    failed = Some(why);
                    break;
                }
            };
            for f in fetched {
                // Stopping: what is not processed is not committed, and the
                // next session reads it again.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if f.error == OFFSET_OUT_OF_RANGE {
                    // Its records were deleted (retention) under it: on
                    // from the oldest kept, as `auto.offset.reset=earliest`.
                    match earliest(config, leader, topic, f.partition).await {
                        Ok(start) => {
                            if let Some(p) = positions.get_mut(&f.partition) {
                                p.offset = start;
                            }
                        }
                        Err(why) => failed = Some(why),
                    }
                    continue;
                }
                if f.error != 0 {
                    failed = Some(format!(
                        "partition {} of `{topic}`: Kafka error {}",
                        f.partition, f.error
                    ));
                    continue;
                }
                if f.records > 0 {
                    process(f.records);
                }
                if let Some(p) = positions.get_mut(&f.partition) {
                    p.offset = f.next_offset;
                }
            }
        }
        if let Some(why) = failed {
            break Err(why);
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            commit(spec, &mut coordinator, &mut positions, &mut correlation).await?;
            last_commit = Instant::now();
        }
    };
    // What was processed is committed, whatever ended the session.
    let committed = commit(spec, &mut coordinator, &mut positions, &mut correlation).await;
    outcome.and(committed)
}

/// Commits each position that moved since its last commit.
async fn commit(
    spec: &ConsumerSpec,
    coordinator: &mut Conn,
    positions: &mut BTreeMap<i32, Position>,
    correlation: &mut i32,
) -> Result<(), String> {
    let offsets: Vec<Commit> = positions
        .iter()
        .filter(|(_, p)| p.offset != p.committed)
        .map(|(&partition, p)| Commit {
            partition,
            offset: p.offset,
        })
        .collect();
    if offsets.is_empty() {
        return Ok(());
    }
    *correlation += 1;
    let mut request = Vec::new();
    wire::offset_commit_request(
        &mut request,
        *correlation,
        &spec.config.client_id,
        &spec.group,
        &spec.topic,
        &offsets,
    );
    let body = round_trip(coordinator, &request)
        .await
        .map_err(|k| format!("committing offsets: {}", k.name()))?;
    match wire::offset_commit_response(&body) {
        Ok(0) => {}
        Ok(code) => return Err(format!("committing offsets: Kafka error {code}")),
        Err(_) => return Err("committing offsets: a malformed answer".into()),
    }
    for c in offsets {
        if let Some(p) = positions.get_mut(&c.partition) {
            p.committed = c.offset;
        }
    }
    Ok(())
}

/// The oldest offset `partition` keeps, from its leader.
async fn earliest(
    config: &Config,
    leader: &str,
    topic: &str,
    partition: i32,
) -> Result<i64, String> {
    let mut conn = open(leader, config)
        .await
        .map_err(|e| format!("leader {leader}: {}", e.kind.name()))?
        .conn;
    let mut request = Vec::new();
    wire::list_offsets_at(
        &mut request,
        1,
        &config.client_id,
        &[(topic, vec![partition])],
        wire::EARLIEST,
    );
    let body = round_trip(&mut conn, &request)
        .await
        .map_err(|k| format!("the start of `{topic}` partition {partition}: {}", k.name()))?;
    let starts = wire::list_offsets_response(&body)
        .map_err(|_| format!("the start of `{topic}` partition {partition}: a malformed answer"))?;
    match starts.into_iter().find(|(_, id, _)| *id == partition) {
        Some((_, _, Ok(offset))) => Ok(offset),
        Some((_, _, Err(code))) => Err(format!(
            "the start of `{topic}` partition {partition}: Kafka error {code}"
        )),
        None => Err(format!(
            "the start of `{topic}` partition {partition}: not in the answer"
        )),
    }
}

/// Whether `topic` has more partitions than `known` now.
async fn grown(config: &Config, topic: &str, known: usize) -> bool {
    match fetch_metadata(config, topic).await {
        Ok(meta) => meta
            .topics
            .iter()
            .filter(|t| t.name == topic)
            .any(|t| t.partitions.len() > known),
        Err(_) => false,
    }
}
