//! Measurement: what a request came to (`outcome`), the mergeable interval
//! statistics a shard fills without locks (`stats`), and the collector that
//! merges shards into per-second ticks and level totals (`collector`);
//! how precise a level's figures are (`precision`, batch means);
//! `wire`: snapshots across a process or host boundary; `cgroup`: the CPU
//! quota this process runs under and how often it held the process back.

pub(crate) mod cgroup;
pub(crate) mod collector;
pub(crate) mod outcome;
pub(crate) mod precision;
pub(crate) mod stats;
pub(crate) mod wire;

use std::time::Instant;

pub use collector::warmup_ticks;

pub use collector::Collector;

pub use collector::GroupLateness;

pub use collector::LevelInfo;

pub use collector::LevelTotals;

pub use collector::QuotaUse;

pub use collector::Tick;

pub use collector::TickSink;
pub(crate) use outcome::ErrorKind;
pub use precision::Batches;
pub(crate) use precision::Ci95;
pub use stats::TimerLateness;
#[cfg(test)]
pub(crate) use stats::UserTally;
pub use stats::{round3, round6};
pub(crate) use stats::{round_to, IntervalStats, RequestStats};

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
    /// What a CPU quota did to such a process's cgroup since its previous
    /// snapshot (None for this process's shards, and without a quota).
    pub remote_quota: Option<cgroup::Throttling>,
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with every control character but line feed and tab written as
/// an escape (`\u{1b}`): text from elsewhere (a worker's name, a path from
/// an imported log, a server's words) must not drive a terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped_and_lines_kept() {
        assert_eq!(super::printable("a\tb\nc"), "a\tb\nc");
        assert_eq!(super::printable("w\u{1b}[2Jx\u{7}"), "w\\u{1b}[2Jx\\u{7}");
        assert_eq!(super::printable("é ok"), "é ok");
    }
}
