//! Process groups and their cumulative counters across process churn.
//!
//! A group's total is the sum over its live processes plus the last-seen
//! values of every process that has left it since tracking began:
//!
//! ```text
//!   sample k:    live {A: 3s, B: 1s}            departed 0     → 4s
//!   sample k+1:  live {A: 4s, C: 0.5s}          departed B=1s  → 5.5s
//! ```
//!
//! A process is identified by its PID *and* its start time, so a reused PID
//! is a new process and the old one departs. What a process burns between
//! its last sample and its exit is lost; the background sampler keeps that
//! window short. The scheduler's times (on a CPU, and ready to run but
//! waiting for one) are kept per thread in the kernel, so a process's are
//! the sums over its live threads plus the last-seen values of its threads
//! that exited.
//! This module is pure bookkeeping: samples come in from
//! [`crate::scan`], so it is tested with synthetic sequences.

use std::collections::{BTreeMap, HashMap};

use crate::api::{GroupCounters, MatchMode};
use crate::procfs::{IoCounters, NetBytes, SchedTimes};

/// At most this many groups are tracked; past it, the group requested least
/// recently is forgotten (its departed history with it). This bounds the
/// agent's memory and scan work whatever clients ask.
pub const MAX_GROUPS: usize = 128;

/// One matching process as read from /proc at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcSample {
    pub pid: u32,
    /// Start time after boot, in ticks: with `pid`, the process's identity.
    pub starttime: u64,
    /// In clock ticks, all threads of the process included.
    pub utime: u64,
    pub stime: u64,
    /// User and system CPU in ns, counted finer than ticks: a cgroup's
    /// (`crate::cgroups`); added to `utime`/`stime`.
    pub precise_ns: Option<(u64, u64)>,
    pub threads: u32,
    /// Resident set size now, in bytes.
    pub rss_bytes: u64,
    /// None when /proc/PID/io could not be read (another user's process).
    pub io: Option<IoCounters>,
    /// The scheduler's times by thread id; None when schedstat is
    /// unreadable.
    pub sched: Option<BTreeMap<u32, SchedTimes>>,
    /// Figures a cgroup could not give (none for a process).
    pub missing: Missing,
    /// A cgroup's: its memory as anonymous pages and page cache
    /// (`memory.stat`), whose sum the kernel may reclaim only in part.
    pub memory_split: Option<MemorySplit>,
    /// A cgroup's: the bytes through its network namespace (zero when
    /// another cgroup of the group already counts that namespace); none
    /// for a process, or a cgroup without a process to read it through.
    pub net: Option<NetBytes>,
}

/// A cgroup's memory by kind, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemorySplit {
    /// Anonymous pages: the heap and stacks, what the service holds.
    pub anon: u64,
    /// Page cache: files read and written, reclaimable when clean.
    pub file: u64,
}

/// Figures a cgroup could not give because no hierarchy mounted on this
/// host has their controller at its path: a v1 host without the memory
/// hierarchy, a v2 parent whose `cgroup.subtree_control` does not enable
/// `memory` or `io`. Told from the files being absent, never from a zero
/// (a v1 cgroup a process was moved into reads little or nothing: its
/// pages stay charged where they were touched).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Missing {
    /// No `memory.current` (v2) nor `memory.usage_in_bytes` (v1).
    pub memory: bool,
    /// No `io.stat` (v2) nor `blkio.throttle.io_service_bytes` (v1).
    pub io: bool,
}

impl Missing {
    fn or(self, other: Missing) -> Missing {
        Missing {
            memory: self.memory || other.memory,
            io: self.io || other.io,
        }
    }

    /// The controllers' names, as the agent reports them (`memory`, `io`).
    pub fn names(self) -> Vec<String> {
        [(self.memory, "memory"), (self.io, "io")]
            .into_iter()
            .filter(|&(lacks, _)| lacks)
            .map(|(_, name)| name.to_string())
            .collect()
    }
}

impl ProcSample {
    fn sched_sum(&self) -> Option<SchedTimes> {
        self.sched.as_ref().map(|threads| {
            let mut sum = SchedTimes::default();
            for t in threads.values() {
                sum.add(*t);
            }
            sum
        })
    }
}

/// What names a group: a name and how it matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub mode: MatchMode,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ProcId {
    pid: u32,
    starttime: u64,
}

/// The counters of one group.
#[derive(Debug, Default)]
pub struct Group {
    /// The last values seen for each live process.
    live: HashMap<ProcId, ProcSample>,
    departed_utime: u64,
    departed_stime: u64,
    /// User and system ns of departed cgroups.
    departed_precise_ns: (u64, u64),
    departed_io: IoCounters,
    departed_net: NetBytes,
    /// Some member ever gave network bytes: a cgroup group's.
    net_seen: bool,
    departed: u32,
    /// Per live process: the scheduler's times of its exited threads.
    exited_threads: HashMap<ProcId, SchedTimes>,
    departed_sched: SchedTimes,
}

impl Group {
    /// Replaces the live set with `samples`; processes no longer present
    /// move their last-seen values into the departed totals.
    pub fn update(&mut self, samples: Vec<ProcSample>) {
        let mut next = HashMap::with_capacity(samples.len());
        for mut sample in samples {
            let id = ProcId {
                pid: sample.pid,
                starttime: sample.starttime,
            };
            if let Some(old) = self.live.remove(&id) {
                // Per-process counters only grow; guard against a reading
                // that is momentarily lower, and keep the last readable io
                // should the file become unreadable (e.g. after a setuid exec).
                sample.utime = sample.utime.max(old.utime);
                sample.stime = sample.stime.max(old.stime);
                if let (Some(new), Some(old)) = (&mut sample.precise_ns, old.precise_ns) {
                    *new = (new.0.max(old.0), new.1.max(old.1));
                }
                sample.io = match (sample.io, old.io) {
                    (Some(new), Some(old)) => Some(max_io(&new, &old)),
                    (new, old) => new.or(old),
                };
                sample.net = match (sample.net, old.net) {
                    (Some(new), Some(old)) => Some(NetBytes {
                        rx_bytes: new.rx_bytes.max(old.rx_bytes),
                        tx_bytes: new.tx_bytes.max(old.tx_bytes),
                    }),
                    (new, old) => new.or(old),
                };
                if let (Some(new), Some(old)) = (&mut sample.sched, &old.sched) {
                    let exited = self.exited_threads.entry(id).or_default();
                    for (tid, then) in old {
                        match new.get_mut(tid) {
                            Some(now) => {
                                now.ran = now.ran.max(then.ran);
                                now.waited = now.waited.max(then.waited);
                            }
                            None => exited.add(*then),
                        }
                    }
                }
            }
            self.net_seen |= sample.net.is_some();
            next.insert(id, sample);
        }
        for (id, gone) in self.live.drain() {
            self.departed_utime += gone.utime;
            self.departed_stime += gone.stime;
            if let Some((user, sys)) = gone.precise_ns {
                self.departed_precise_ns.0 += user;
                self.departed_precise_ns.1 += sys;
            }
            if let Some(io) = &gone.io {
                self.departed_io.add(io);
            }
            if let Some(net) = gone.net {
                self.departed_net.add(net);
            }
            self.departed_sched
                .add(gone.sched_sum().unwrap_or_default());
            self.departed_sched
                .add(self.exited_threads.remove(&id).unwrap_or_default());
            self.departed += 1;
        }
        self.live = next;
    }

    /// The group's cumulative counters, CPU times converted with `clk_tck`.
    pub fn counters(&self, clk_tck: u64) -> GroupCounters {
        let mut utime = self.departed_utime;
        let mut stime = self.departed_stime;
        let (mut user_ns, mut sys_ns) = self.departed_precise_ns;
        let mut io = Some(self.departed_io);
        let mut threads = 0u32;
        let mut rss_bytes = 0u64;
        let mut sched = Some(self.departed_sched);
        let mut missing = Missing::default();
        let mut net = self.net_seen.then_some(self.departed_net);
        // A gauge: the live members' only, unknown when one lacks it.
        let mut split = (!self.live.is_empty()).then(MemorySplit::default);
        for (id, p) in &self.live {
            missing = missing.or(p.missing);
            split = split.zip(p.memory_split).map(|(sum, one)| MemorySplit {
                anon: sum.anon.saturating_add(one.anon),
                file: sum.file.saturating_add(one.file),
            });
            net = match (net, p.net) {
                (Some(mut sum), Some(one)) => {
                    sum.add(one);
                    Some(sum)
                }
                // A member whose namespace could not be read: unknown,
                // not a partial sum that drops when it leaves.
                _ => None,
            };
            sched = sched.zip(p.sched_sum()).map(|(mut sum, one)| {
                sum.add(one);
                sum.add(self.exited_threads.get(id).copied().unwrap_or_default());
                sum
            });
            utime += p.utime;
            stime += p.stime;
            if let Some((user, sys)) = p.precise_ns {
                user_ns += user;
                sys_ns += sys;
            }
            threads = threads.saturating_add(p.threads);
            rss_bytes = rss_bytes.saturating_add(p.rss_bytes);
            io = match (io, &p.io) {
                (Some(mut sum), Some(one)) => {
                    sum.add(one);
                    Some(sum)
                }
                // A partial sum would look like a drop once the unreadable
                // process exits; say "unknown" instead.
                _ => None,
            };
        }
        let ticks = clk_tck.max(1) as f64;
        let utime_s = utime as f64 / ticks + user_ns as f64 / 1e9;
        let stime_s = stime as f64 / ticks + sys_ns as f64 / 1e9;
        GroupCounters {
            cpu_s: utime_s + stime_s,
            utime_s,
            stime_s,
            read_bytes: io.map(|io| io.read_bytes),
            write_bytes: io.map(|io| io.write_bytes),
            rchar: io.map(|io| io.rchar),
            wchar: io.map(|io| io.wchar),
            processes: self.live.len() as u32,
            threads,
            departed: self.departed,
            rss_bytes,
            cpu_wait_s: sched.map(|t| t.waited as f64 / 1e9),
            sched_cpu_s: sched.map(|t| t.ran as f64 / 1e9),
            missing: missing.names(),
            memory_anon_bytes: split.map(|s| s.anon),
            memory_file_bytes: split.map(|s| s.file),
            net: net.map(|n| crate::api::NetCounters {
                rx_bytes: n.rx_bytes,
                tx_bytes: n.tx_bytes,
            }),
        }
    }
}

fn max_io(a: &IoCounters, b: &IoCounters) -> IoCounters {
    IoCounters {
        rchar: a.rchar.max(b.rchar),
        wchar: a.wchar.max(b.wchar),
        read_bytes: a.read_bytes.max(b.read_bytes),
        write_bytes: a.write_bytes.max(b.write_bytes),
    }
}

/// Every tracked group, with the recency used to evict.
#[derive(Debug, Default)]
pub struct Registry {
    groups: HashMap<GroupKey, Tracked>,
    requests: u64,
}

#[derive(Debug, Default)]
struct Tracked {
    group: Group,
    last_requested: u64,
}

impl Registry {
    /// Starts tracking `keys` (if not yet tracked) and marks them requested.
    pub fn touch(&mut self, keys: &[GroupKey]) {
        self.requests += 1;
        for key in keys {
            if !self.groups.contains_key(key) && self.groups.len() >= MAX_GROUPS {
                self.evict_one(keys);
            }
            let tracked = self.groups.entry(key.clone()).or_default();
            tracked.last_requested = self.requests;
        }
    }

    fn evict_one(&mut self, keep: &[GroupKey]) {
        let oldest = self
            .groups
            .iter()
            .filter(|(k, _)| !keep.contains(k))
            .min_by_key(|(_, t)| t.last_requested)
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.groups.remove(&key);
        }
    }

    pub fn keys(&self) -> Vec<GroupKey> {
        self.groups.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Feeds one scan's samples; a tracked group absent from `samples` has
    /// no live process.
    pub fn update(&mut self, mut samples: HashMap<GroupKey, Vec<ProcSample>>) {
        for (key, tracked) in &mut self.groups {
            tracked
                .group
                .update(samples.remove(key).unwrap_or_default());
        }
    }

    /// The counters of `names` under `mode`, zeros for an untracked name.
    pub fn counters(
        &self,
        names: &[String],
        mode: MatchMode,
        clk_tck: u64,
    ) -> BTreeMap<String, GroupCounters> {
        names
            .iter()
            .map(|name| {
                let key = GroupKey {
                    mode,
                    name: name.clone(),
                };
                let counters = match self.groups.get(&key) {
                    Some(t) => t.group.counters(clk_tck),
                    None => Group::default().counters(clk_tck),
                };
                (name.clone(), counters)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, starttime: u64, utime: u64, stime: u64) -> ProcSample {
        ProcSample {
            missing: Missing::default(),
            memory_split: None,
            net: None,
            pid,
            starttime,
            utime,
            stime,
            precise_ns: None,
            threads: 2,
            rss_bytes: 1 << 20,
            io: Some(IoCounters {
                rchar: utime,
                wchar: 0,
                read_bytes: 0,
                write_bytes: stime,
            }),
            sched: Some(BTreeMap::from([(
                pid,
                SchedTimes {
                    ran: utime * 1000,
                    waited: utime * 1000,
                },
            )])),
        }
    }

    fn threads(pid: u32, delays: &[(u32, u64)]) -> ProcSample {
        let times = |&(tid, waited): &(u32, u64)| {
            (
                tid,
                SchedTimes {
                    ran: 2 * waited,
                    waited,
                },
            )
        };
        ProcSample {
            sched: Some(delays.iter().map(times).collect()),
            ..p(pid, 1, 0, 0)
        }
    }

    fn ns(g: &Group) -> Option<u64> {
        g.counters(100).cpu_wait_s.map(|s| (s * 1e9).round() as u64)
    }

    #[test]
    fn run_delay_keeps_exited_threads_and_departed_processes() {
        let mut g = Group::default();
        g.update(vec![threads(1, &[(1, 100), (2, 50)])]);
        assert_eq!(ns(&g), Some(150));
        // Thread 2 exits, thread 3 starts: its 50 ns stay.
        g.update(vec![threads(1, &[(1, 120), (3, 10)])]);
        assert_eq!(ns(&g), Some(180));
        // The process leaves: all of it stays.
        g.update(vec![threads(9, &[(9, 5)])]);
        assert_eq!(ns(&g), Some(185));
        // An unreadable schedstat makes the sum unknown, not lower.
        assert_eq!(
            g.counters(100).sched_cpu_s.map(|s| (s * 1e9).round()),
            Some(370.0)
        );
        let mut blind = threads(9, &[]);
        blind.sched = None;
        g.update(vec![blind]);
        assert_eq!(g.counters(100).cpu_wait_s, None);
    }

    #[test]
    fn totals_survive_processes_leaving() {
        let mut g = Group::default();
        g.update(vec![p(1, 10, 300, 0), p(2, 10, 100, 0)]);
        assert_eq!(g.counters(100).cpu_s, 4.0);
        g.update(vec![p(1, 10, 400, 0), p(3, 20, 50, 0)]);
        let c = g.counters(100);
        assert_eq!(c.cpu_s, 5.5);
        assert_eq!((c.processes, c.threads, c.departed), (2, 4, 1));
        // Memory is what the live processes hold now, not a total.
        assert_eq!(c.rss_bytes, 2 << 20);
        assert_eq!(c.rchar, Some(550));
        g.update(vec![]);
        let c = g.counters(100);
        assert_eq!((c.cpu_s, c.processes, c.departed), (5.5, 0, 3));
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let mut g = Group::default();
        g.update(vec![p(7, 100, 200, 100)]);
        g.update(vec![p(7, 900, 10, 0)]);
        let c = g.counters(100);
        assert_eq!((c.utime_s, c.stime_s, c.cpu_s), (2.1, 1.0, 3.1));
        assert_eq!(c.departed, 1);
        assert_eq!(c.write_bytes, Some(100));
    }

    #[test]
    fn unreadable_io_is_null_while_live_and_never_lowers_totals() {
        let mut g = Group::default();
        let mut hidden = p(2, 1, 5, 5);
        hidden.io = None;
        g.update(vec![p(1, 1, 5, 5), hidden.clone()]);
        assert_eq!(g.counters(100).read_bytes, None);
        g.update(vec![p(1, 1, 6, 6)]);
        assert_eq!(g.counters(100).wchar, Some(0));
        assert_eq!(g.counters(100).write_bytes, Some(6));
        // A reading that is lower than the last one does not lower the sum.
        g.update(vec![p(1, 1, 1, 1)]);
        assert_eq!(g.counters(100).cpu_s, 0.22);
    }

    #[test]
    fn registry_answers_zeros_for_unknown_and_evicts_the_least_recent() {
        let key = |n: usize| GroupKey {
            mode: MatchMode::Comm,
            name: format!("g{n}"),
        };
        let mut r = Registry::default();
        for n in 0..MAX_GROUPS {
            r.touch(&[key(n)]);
        }
        r.touch(&[key(0)]);
        r.touch(&[key(MAX_GROUPS)]);
        let keys = r.keys();
        assert_eq!(keys.len(), MAX_GROUPS);
        assert!(keys.contains(&key(0)));
        assert!(!keys.contains(&key(1)));
        let c = r.counters(&["nobody".to_string()], MatchMode::Comm, 100);
        assert_eq!(c["nobody"].processes, 0);
        assert_eq!(c["nobody"].read_bytes, Some(0));
    }
}
