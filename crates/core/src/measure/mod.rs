//! Measurement: what a request came to (`outcome`), the mergeable interval
//! statistics a shard fills without locks (`stats`), and the collector that
//! merges shards into per-second ticks and level totals (`collector`);
//! `wire`: snapshots across a process or host boundary.

pub mod collector;
pub mod outcome;
pub mod stats;
pub mod wire;

use std::time::Instant;

pub use collector::{Collector, GroupLateness, LevelInfo, LevelTotals, Tick, TickSink};
pub use outcome::{ErrorCounts, ErrorKind};
pub use stats::{
    round3, round6, round_to, CheckCount, DurationSum, IntervalStats, RequestStats, TimerLateness,
};

/// One shard's statistics for one interval, sent to the collector.
#[derive(Debug)]
pub struct Snapshot {
    pub shard: usize,
    /// Interval index from the level's start (interval `seq` covers
    /// [seq s, seq+1 s)).
    pub seq: u64,
    /// The shard's final snapshot: it has stopped.
    pub last: bool,
    /// When the snapshot was taken.
    pub at: Instant,
    pub stats: IntervalStats,
    pub active_users: u32,
    /// CPU a generator process other than this one spent since its
    /// previous snapshot (zero for this process's own shards, which
    /// `getrusage` already covers).
    pub remote_cpu: std::time::Duration,
}
