//! Topic metadata: partitions and their leaders, asked of the cluster when
//! a topic is first used, when a broker says they moved, and when they are
//! older than `metadata.max.age.ms`.

use super::connection::{open, round_trip, OpenError};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::super::wire;
use crate::measure::ErrorKind;

use super::config::Config;
use super::state::*;

/// Asks the cluster about `topic` until its partitions all have a leader
/// (a topic being auto-created has none for a moment), or the timeout.
pub(super) async fn load_metadata(producer: Producer, topic: usize) {
    let config = producer.0.config.clone();
    let name = producer.0.names[topic].clone();
    let give_up = Instant::now() + config.timeout;
    let outcome = loop {
        let result = fetch_metadata(&config, &name).await;
        let ready = match &result {
            Ok(meta) => meta.topics.iter().find(|t| t.name == name).filter(|t| {
                let known = |leader: i32| meta.brokers.iter().any(|&(node, _)| node == leader);
                t.error == 0
                    && !t.partitions.is_empty()
                    && t.partitions.iter().all(|&(_, leader, _)| known(leader))
            }),
            Err(_) => None,
        };
        if let (Some(t), Ok(meta)) = (ready, &result) {
            break Ok((meta.brokers.clone(), t.partitions.clone()));
        }
        if Instant::now() >= give_up {
            break Err(result.err().map_or(ErrorKind::KafkaBroker, |e| e.kind));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut st = producer.state();
    let State {
        topics, brokers, ..
    } = &mut *st;
    let t = &mut topics[topic];
    match outcome {
        Ok((nodes, partitions)) => {
            for (node, addr) in nodes {
                match brokers.iter_mut().find(|b| b.node == node) {
                    Some(b) => b.addr = addr,
                    None => brokers.push(Broker {
                        node,
                        addr,
                        open: Vec::new(),
                        oldest: None,
                        full: false,
                        in_flight: VecDeque::new(),
                        wake: Rc::new(Notify::new()),
                        running: false,
                        idempotent: None,
                        retiring: false,
                        bump_epoch: false,
                        requeues_pending: 0,
                    }),
                }
            }
            let index = |node: i32| brokers.iter().position(|b| b.node == node);
            let fresh: Vec<(i32, usize)> = partitions
                .iter()
                .filter_map(|&(id, leader, _)| Some((id, index(leader)?)))
                .collect();
            // Partitions come sorted by id, and a topic's only ever grow. On a
            // refresh, batches already queued stay with the broker that holds
            // them (`queued_at`) and go out from there; new ones go to the new
            // leader; added partitions start empty.
            for (i, (id, leader)) in fresh.into_iter().enumerate() {
                match t.partitions.get_mut(i) {
                    Some(p) => {
                        p.id = id;
                        p.leader = leader;
                    }
                    None => t.partitions.push(Partition {
                        id,
                        leader,
                        batch: Batch::default(),
                        retries: VecDeque::new(),
                        drained: Rc::new(Notify::new()),
                    }),
                }
            }
            t.stale_at = Instant::now() + config.metadata_max_age;
            t.meta = if t.partitions.is_empty() {
                Meta::Failed {
                    kind: ErrorKind::KafkaBroker,
                    until: Instant::now() + METADATA_RETRY,
                }
            } else {
                Meta::Ready
            };
        }
        Err(kind) if t.meta != Meta::Ready => {
            t.meta = Meta::Failed {
                kind,
                until: Instant::now() + METADATA_RETRY,
            };
        }
        Err(_) => {}
    }
    t.loaded.notify_waiters();
}

/// One Metadata request, to each bootstrap broker in turn until one answers.
pub(in crate::protocol::kafka) async fn fetch_metadata(
    config: &Config,
    topic: &str,
) -> Result<wire::Metadata, OpenError> {
    let mut last = OpenError::from(ErrorKind::Connect);
    for addr in &config.bootstrap {
        let asked = async {
            let mut opened = open(addr, config).await?;
            let mut request = Vec::new();
            wire::metadata_request(&mut request, 1, &config.client_id, &[topic]);
            let body = round_trip(&mut opened.conn, &request).await?;
            wire::metadata_response(&body).map_err(|_| OpenError::from(ErrorKind::Malformed))
        };
        match tokio::time::timeout(config.timeout, asked).await {
            Ok(Ok(meta)) => return Ok(meta),
            // TLS or SASL refused: the other brokers share the settings.
            Ok(Err(e)) if e.reason.is_some() => return Err(e),
            Ok(Err(e)) => last = e,
            Err(_) => last = ErrorKind::Timeout.into(),
        }
    }
    Err(last)
}
