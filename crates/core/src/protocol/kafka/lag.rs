//! A consumer group's lag, read from the brokers as Kafka's own
//! `kafka-consumer-groups --describe` reads it: the offsets the group
//! committed (from its coordinator) against the partitions' end offsets
//! (from each partition's leader), summed over the partitions it
//! committed. With the target's security settings (TLS, SASL).

use std::collections::BTreeMap;

use super::producer::{fetch_metadata, open, round_trip, Config, OpenError};
use super::wire;

/// A group's lag at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupLag {
    /// Records written and not yet committed, over its partitions.
    pub records: u64,
    /// Partitions with a committed offset.
    pub partitions: usize,
}

/// Why a group's lag could not be read: worded for a warning or an error
/// that names the group and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LagError {
    /// The group has committed no offset (it does not exist, or its
    /// consumers have not committed yet).
    NoCommits,
    /// A broker did not answer, or answered with an error.
    Unreadable(String),
}

impl std::fmt::Display for LagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LagError::NoCommits => write!(
                f,
                "it has no committed offsets (no such group, or its consumers have not committed yet)"
            ),
            LagError::Unreadable(why) => f.write_str(why),
        }
    }
}

fn unreadable(what: &str, e: impl std::fmt::Display) -> LagError {
    LagError::Unreadable(format!("{what}: {e}"))
}

fn open_failed(addr: &str, e: OpenError) -> LagError {
    match e.reason {
        Some(reason) => LagError::Unreadable(format!("broker {addr}: {reason}")),
        None => LagError::Unreadable(format!("broker {addr}: {}", e.kind.name())),
    }
}

/// Reads `group`'s lag once.
pub(crate) async fn read_lag(config: &Config, group: &str) -> Result<GroupLag, LagError> {
    let client = &config.client_id;
    let coordinator = find_coordinator(config, group).await?;
    let mut conn = open(&coordinator, config)
        .await
        .map_err(|e| open_failed(&coordinator, e))?
        .conn;
    let mut request = Vec::new();
    wire::offset_fetch_request(&mut request, 1, client, group);
    let body = round_trip(&mut conn, &request)
        .await
        .map_err(|k| unreadable("its coordinator's offsets", k.name()))?;
    let committed = match wire::offset_fetch_response(&body) {
        Ok(Ok(committed)) if committed.is_empty() => return Err(LagError::NoCommits),
        Ok(Ok(committed)) => committed,
        Ok(Err(code)) => {
            return Err(unreadable(
                "its coordinator refused its offsets",
                code_name(code),
            ))
        }
        Err(_) => {
            return Err(unreadable(
                "its coordinator's offsets",
                "a malformed answer",
            ))
        }
    };
    // By topic: each partition's committed offset.
    let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for c in &committed {
        by_topic
            .entry(&c.topic)
            .or_default()
            .push((c.partition, c.offset));
    }
    let mut records = 0u64;
    for (topic, partitions) in &by_topic {
        let meta = fetch_metadata(config, topic)
            .await
            .map_err(|e| open_failed(&config.bootstrap.join(","), e))?;
        let leaders: BTreeMap<i32, &str> = meta
            .topics
            .iter()
            .filter(|t| t.name == *topic)
            .flat_map(|t| t.partitions.iter())
            .filter_map(|&(id, leader, _)| {
                let addr = meta.brokers.iter().find(|(node, _)| *node == leader)?;
                Some((id, addr.1.as_str()))
            })
            .collect();
        // One ListOffsets per leader, for its partitions.
        let mut per_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for &(id, _) in partitions {
            let leader = leaders.get(&id).ok_or_else(|| {
                unreadable(&format!("partition {id} of `{topic}`"), "no leader known")
            })?;
            per_leader.entry(leader).or_default().push(id);
        }
        for (leader, ids) in per_leader {
            let mut conn = open(leader, config)
                .await
                .map_err(|e| open_failed(leader, e))?
                .conn;
            let mut request = Vec::new();
            wire::list_offsets_request(&mut request, 1, client, &[(topic, ids)]);
            let body = round_trip(&mut conn, &request)
                .await
                .map_err(|k| unreadable(&format!("end offsets of `{topic}`"), k.name()))?;
            let ends = wire::list_offsets_response(&body).map_err(|_| {
                unreadable(&format!("end offsets of `{topic}`"), "a malformed answer")
            })?;
            for (_, id, end) in ends {
                let end = end.map_err(|code| {
                    unreadable(
                        &format!("end offset of `{topic}` partition {id}"),
                        code_name(code),
                    )
                })?;
                if let Some(&(_, offset)) = partitions.iter().find(|(p, _)| *p == id) {
                    records += end.saturating_sub(offset).max(0) as u64;
                }
            }
        }
    }
    Ok(GroupLag {
        records,
        partitions: committed.len(),
    })
}

/// The group's coordinator, asked of each bootstrap broker in turn.
pub(in crate::protocol::kafka) async fn find_coordinator(
    config: &Config,
    group: &str,
) -> Result<String, LagError> {
    let mut last = LagError::Unreadable("no bootstrap broker".into());
    for addr in &config.bootstrap {
        let asked = async {
            let mut conn = open(addr, config)
                .await
                .map_err(|e| open_failed(addr, e))?
                .conn;
            let mut request = Vec::new();
            wire::find_coordinator_request(&mut request, 1, &config.client_id, group);
            let body = round_trip(&mut conn, &request)
                .await
                .map_err(|k| unreadable(&format!("broker {addr}"), k.name()))?;
            match wire::find_coordinator_response(&body) {
                Ok(Ok(coordinator)) => Ok(coordinator),
                Ok(Err(code)) => Err(unreadable("its coordinator", code_name(code))),
                Err(_) => Err(unreadable(&format!("broker {addr}"), "a malformed answer")),
            }
        };
        match tokio::time::timeout(config.timeout, asked).await {
            Ok(Ok(coordinator)) => return Ok(coordinator),
            Ok(Err(e)) => last = e,
            Err(_) => last = unreadable(&format!("broker {addr}"), "no answer in time"),
        }
    }
    Err(last)
}

/// The Kafka error codes a lag read may meet, by name.
fn code_name(code: i16) -> String {
    match code {
        3 => "UNKNOWN_TOPIC_OR_PARTITION".into(),
        5 => "LEADER_NOT_AVAILABLE".into(),
        6 => "NOT_LEADER_OR_FOLLOWER".into(),
        14 => "COORDINATOR_LOAD_IN_PROGRESS".into(),
        15 => "COORDINATOR_NOT_AVAILABLE".into(),
        16 => "NOT_COORDINATOR".into(),
        29 => "TOPIC_AUTHORIZATION_FAILED (the user may not describe the topic)".into(),
        30 => "GROUP_AUTHORIZATION_FAILED (the user may not describe the group)".into(),
        code => format!("Kafka error {code}"),
    }
}
