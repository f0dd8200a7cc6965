//! Merges the shards' interval snapshots into one tick per second for the
//! whole generator, hands each tick to the sinks (live view, time series,
//! controller) and sums the ticks after warm-up into the level's totals.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::cgroup::{CpuLimit, Throttling};
use super::precision::Batches;
use super::stats::{new_histogram, IntervalStats};
use super::Snapshot;

/// One second of the whole generator.
#[derive(Debug, Clone)]
pub struct Tick {
    /// Interval index from the level's start: covers [seq s, seq+1 s).
    pub seq: u64,
    /// Length of the interval (shorter for the last one).
    pub length: Duration,
    /// When the interval ended, on the monotonic clock (to line ticks up
    /// with agent readings).
    pub end: Instant,
    /// Inside the warm-up, so excluded from the level's figures.
    pub warmup: bool,
    pub stats: IntervalStats,
    pub active_users: u32,
}

impl Tick {
    /// This tick's point of the level's `throughput_series` (req/s): none
    /// in warm-up, nor for a last tick too short to say a rate.
    pub(crate) fn measured_throughput(&self) -> Option<f64> {
        (!self.warmup && self.length >= Duration::from_millis(500))
            .then(|| self.stats.total().requests as f64 / self.length.as_secs_f64())
    }
}

/// What the sinks know of the level a tick belongs to.
#[derive(Debug, Clone)]
pub struct LevelInfo {
    /// 1-based index of the level in the run.
    pub index: u32,
    pub users: u32,
    pub warmup: Duration,
    pub duration: Duration,
    /// An open level's arrivals per second over time, from its start
    /// (None for closed users).
    pub rate: Option<crate::load::RateShape>,
}

/// A consumer of ticks: the live view, the time-series file, a controller.
pub trait TickSink {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick);
}

/// The level's totals after warm-up.
#[derive(Debug, Clone)]
pub struct LevelTotals {
    pub stats: IntervalStats,
    /// Length of the measured window (after warm-up, up to the end).
    pub measured: Duration,
    /// Per-tick throughput of the measured window, for steady-state checks.
    pub throughput_series: Vec<f64>,
    /// The measured window's ticks in batches, for the figures' intervals.
    pub batches: Batches,
    /// CPU time the generator process used during the measured window.
    pub client_cpu: Duration,
    /// The cgroup CPU quota this process ran under, and how it held the
    /// group back in the measured window (None without a quota).
    pub client_quota: Option<QuotaUse>,
    /// The level ended before its planned duration (stop requested).
    pub interrupted: bool,
    /// The measured window on the monotonic clock (to match agent readings).
    pub measure_start: Instant,
    pub measure_end: Instant,
    /// Active users averaged over the measured window (a ramp's users vary).
    pub mean_active_users: f64,
    /// The measured window's lateness of each group of shards (each
    /// worker's), when the collector was given groups: one late generator
    /// in a pool is named, not blurred into the merged figure.
    pub lateness_by_group: Vec<GroupLateness>,
}

/// A CPU quota and what it did in a window.
#[derive(Debug, Clone)]
pub struct QuotaUse {
    pub limit: CpuLimit,
    pub throttling: Throttling,
}

/// How late one group of shards' timers fired, and what the CPU quota of
/// the processes running them did (a worker's: its group's own).
#[derive(Debug, Clone)]
pub struct GroupLateness {
    /// Think timers (closed workloads).
    pub timer: Histogram<u64>,
    /// Arrivals (open workloads).
    pub arrival: Histogram<u64>,
    /// Summed over the measured window's snapshots; None when none came
    /// from under a quota.
    pub quota: Option<Throttling>,
}

impl Default for GroupLateness {
    fn default() -> GroupLateness {
        GroupLateness {
            timer: new_histogram(),
            arrival: new_histogram(),
            quota: None,
        }
    }
}

pub struct Collector {
    shards: usize,
    start: Instant,
    deadline: Instant,
    warmup_ticks: u64,
    requests: usize,
    /// The group of each shard (by its global index), if any.
    groups: Vec<usize>,
}

struct Pending {
    stats: IntervalStats,
    active_users: u32,
    end: Instant,
}

/// The warm-up's whole ticks: the first measured interval's index.
pub fn warmup_ticks(warmup: Duration) -> u64 {
    warmup.as_secs() + u64::from(warmup.subsec_nanos() > 0)
}

impl Collector {
    /// `warmup` is rounded up to whole ticks, so a tick is either all
    /// warm-up or all measured.
    pub(crate) fn new(
        shards: usize,
        requests: usize,
        start: Instant,
        warmup: Duration,
        deadline: Instant,
    ) -> Collector {
        Collector {
            shards,
            start,
            deadline,
            warmup_ticks: warmup_ticks(warmup),
            requests,
            groups: Vec::new(),
        }
    }

    /// Keeps the lateness of each group of shards apart as well: `groups`
    /// holds each shard's group, by the shard's global index.
    pub(crate) fn grouped(mut self, groups: Vec<usize>) -> Collector {
        self.groups = groups;
        self
    }

    pub(crate) fn measure_start(&self) -> Instant {
        self.start + Duration::from_secs(self.warmup_ticks)
    }

    /// Receives until every shard has sent its last snapshot.
    pub(crate) fn run(
        self,
        level: &LevelInfo,
        snapshots: Receiver<Snapshot>,
        sinks: &mut [&mut dyn TickSink],
    ) -> LevelTotals {
        let measure_start = self.measure_start();
        let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
        let mut finished = 0usize;
        // Per shard, the latest interval it reported and whether it has
        // ended. A shard's snapshots arrive in order, so one for interval k
        // vouches for every interval before it; a shard that ended (a
        // generator process that died) reports nothing after, and later
        // intervals must not wait for it. Counting snapshots per interval
        // instead once left a run waiting forever, its intervals piling up
        // in memory, when a starved shard skipped one.
        let mut shards: HashMap<usize, (u64, bool)> = HashMap::new();
        let mut totals = IntervalStats::new(self.requests);
        let mut series = Vec::new();
        let mut batches = Batches::default();
        let mut cpu_at_start: Option<Duration> = None;
        let quota = CpuLimit::of_this_process();
        let throttled = || quota.as_ref().and_then(CpuLimit::throttling);
        let mut throttled_at_start = None;
        let mut remote_cpu = Duration::ZERO;
        let mut end = self.start;
        let mut user_seconds = 0.0;
        let groups = self.groups.iter().max().map_or(0, |&g| g + 1);
        let mut by_group = vec![GroupLateness::default(); groups];
        let mut emit = |seq: u64, p: Pending, sinks: &mut [&mut dyn TickSink]| {
            let begin = self.start + Duration::from_secs(seq);
            let length = p
                .end
                .min(begin + Duration::from_secs(1))
                .saturating_duration_since(begin);
            let tick = Tick {
                seq,
                length,
                end: begin + length,
                warmup: seq < self.warmup_ticks,
                stats: p.stats,
                active_users: p.active_users,
            };
            if !tick.warmup {
                totals.merge(&tick.stats);
                user_seconds += f64::from(tick.active_users) * length.as_secs_f64();
                series.extend(tick.measured_throughput());
                batches.add(length.as_secs_f64(), tick.active_users, &tick.stats);
            }
            for sink in sinks.iter_mut() {
                sink.on_tick(level, &tick);
            }
            if seq % 60 == 59 {
                release_free_memory();
            }
        };
        while finished < self.shards {
            if cpu_at_start.is_none() && Instant::now() >= measure_start {
                cpu_at_start = Some(process_cpu_time());
                throttled_at_start = throttled();
            }
            let wait = if cpu_at_start.is_none() {
                measure_start
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(250))
            } else {
                Duration::from_millis(250)
            };
            let snap = match snapshots.recv_timeout(wait) {
                Ok(s) => s,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if snap.seq >= self.warmup_ticks {
                remote_cpu += snap.remote_cpu;
                if let Some(&g) = self.groups.get(snap.shard) {
                    let late = &mut by_group[g];
                    late.timer
                        .add(&snap.stats.timer_lateness)
                        .expect("auto-resizing histograms always add");
                    late.arrival
                        .add(&snap.stats.arrival_lateness)
                        .expect("auto-resizing histograms always add");
                    if let Some(q) = snap.remote_quota {
                        let sum = late.quota.get_or_insert_with(Throttling::default);
                        sum.period = sum.period.max(q.period);
                        sum.periods += q.periods;
                        sum.throttled_periods += q.throttled_periods;
                        sum.throttled += q.throttled;
                    }
                }
            }
            if snap.last {
                finished += 1;
                end = end.max(snap.at.min(self.deadline));
            }
            let seen = shards.entry(snap.shard).or_insert((snap.seq, false));
            seen.0 = seen.0.max(snap.seq);
            seen.1 |= snap.last;
            let interval_end = if snap.last {
                snap.at.min(self.deadline)
            } else {
                self.start + Duration::from_secs(snap.seq + 1)
            };
            let entry = pending.entry(snap.seq).or_insert_with(|| Pending {
                stats: IntervalStats::new(self.requests),
                active_users: 0,
                end: interval_end,
            });
            entry.stats.merge(&snap.stats);
            entry.active_users += snap.active_users;
            entry.end = entry.end.max(interval_end);
            // Emit, in order, every interval all shards have reported (or
            // ended before).
            while let Some((&seq, _)) = pending.first_key_value() {
                let done = shards
                    .values()
                    .filter(|&&(latest, ended)| ended || latest >= seq)
                    .count();
                if done < self.shards {
                    break;
                }
                let p = pending.remove(&seq).expect("key just seen");
                emit(seq, p, sinks);
            }
        }
        // Shards that stopped early may leave partial intervals behind.
        while let Some((seq, p)) = pending.pop_first() {
            emit(seq, p, sinks);
        }
        let cpu_end = process_cpu_time();
        let client_quota = match (&quota, throttled_at_start, throttled()) {
            (Some(limit), Some(start), Some(end)) => Some(QuotaUse {
                limit: limit.clone(),
                throttling: end.since(&start),
            }),
            _ => None,
        };
        let measured = end.saturating_duration_since(measure_start);
        LevelTotals {
            stats: totals,
            measured,
            throughput_series: series,
            batches,
            client_cpu: cpu_end.saturating_sub(cpu_at_start.unwrap_or(cpu_end)) + remote_cpu,
            client_quota,
            interrupted: end + Duration::from_millis(50) < self.deadline,
            measure_start,
            measure_end: end,
            mean_active_users: user_seconds / measured.as_secs_f64().max(1e-9),
            lateness_by_group: by_group,
        }
    }
}

/// User plus system CPU time of this process so far.
pub(crate) fn process_cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Hands memory the allocator holds free back to the system, once a
/// minute: a burst (a slow second, many requests in flight) grows the
/// heap, and glibc keeps the freed pages, so a run of hours would show the
/// burst's high-water mark as its size. Cheap next to a second's work.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Passes on the seq of every tick as it comes out.
    struct Seen(mpsc::Sender<u64>);

    impl TickSink for Seen {
        fn on_tick(&mut self, _: &LevelInfo, tick: &Tick) {
            let _ = self.0.send(tick.seq);
        }
    }

    /// Runs a ten-second level's collector over two shards' snapshots.
    fn collect_two_shards(
        start: Instant,
        deadline: Instant,
        snapshots: mpsc::Receiver<Snapshot>,
        seen: mpsc::Sender<u64>,
    ) {
        let info = LevelInfo {
            index: 1,
            users: 2,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(10),
            rate: None,
        };
        let collector = Collector::new(2, 1, start, Duration::ZERO, deadline);
        collector.run(&info, snapshots, &mut [&mut Seen(seen)]);
    }

    fn snapshot(shard: usize, seq: u64, last: bool, at: Instant) -> Snapshot {
        Snapshot {
            shard,
            seq,
            last,
            at,
            stats: IntervalStats::new(1),
            active_users: 1,
            remote_cpu: Duration::ZERO,
            remote_quota: None,
        }
    }

    #[test]
    fn ticks_keep_coming_after_a_shard_ends_early() {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(10);
        let (tx, rx) = mpsc::channel();
        let (seen_tx, seen_rx) = mpsc::channel();
        // Shard 0 dies in interval 1; shard 1 reports intervals 1..=8 and
        // holds back its last one until tick 8 is out (or 5 s have passed).
        let feeder = std::thread::spawn(move || {
            tx.send(snapshot(0, 0, false, start)).unwrap();
            tx.send(snapshot(1, 0, false, start)).unwrap();
            tx.send(snapshot(0, 1, true, start + Duration::from_millis(1500)))
                .unwrap();
            for seq in 1..9 {
                tx.send(snapshot(1, seq, false, deadline)).unwrap();
            }
            let mut out = Vec::new();
            let give_up = Instant::now() + Duration::from_secs(5);
            while out.last() != Some(&8) && Instant::now() < give_up {
                if let Ok(seq) = seen_rx.recv_timeout(Duration::from_millis(50)) {
                    out.push(seq);
                }
            }
            tx.send(snapshot(1, 9, true, deadline)).unwrap();
            out
        });
        collect_two_shards(start, deadline, rx, seen_tx);
        let before_the_end = feeder.join().unwrap();
        assert_eq!(before_the_end, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn ticks_keep_coming_when_a_shard_skips_an_interval() {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(10);
        let (tx, rx) = mpsc::channel();
        let (seen_tx, seen_rx) = mpsc::channel();
        // Shard 1, starved, never sends interval 2: its interval 3 vouches
        // for it. Both hold back their last snapshots until tick 6 is out.
        let feeder = std::thread::spawn(move || {
            for seq in 0..7 {
                tx.send(snapshot(0, seq, false, deadline)).unwrap();
                if seq != 2 {
                    tx.send(snapshot(1, seq, false, deadline)).unwrap();
                }
            }
            let mut out = Vec::new();
            let give_up = Instant::now() + Duration::from_secs(5);
            while out.last() != Some(&6) && Instant::now() < give_up {
                if let Ok(seq) = seen_rx.recv_timeout(Duration::from_millis(50)) {
                    out.push(seq);
                }
            }
            tx.send(snapshot(0, 7, true, deadline)).unwrap();
            tx.send(snapshot(1, 7, true, deadline)).unwrap();
            out
        });
        collect_two_shards(start, deadline, rx, seen_tx);
        let before_the_end = feeder.join().unwrap();
        assert_eq!(before_the_end, (0..7).collect::<Vec<_>>());
    }

    #[test]
    fn grouped_shards_keep_their_lateness_apart_after_warm_up() {
        // Three shards, the first two one worker's, the third another's;
        // one second of warm-up whose lateness counts nowhere.
        let start = Instant::now();
        let deadline = start + Duration::from_secs(3);
        let (tx, rx) = mpsc::channel();
        // The second worker runs under a quota, held back in 2 of 10
        // periods each second (and 9 of 10 in the warm-up).
        let late = |shard: usize, seq: u64, last: bool, ms: u64| {
            let mut s = snapshot(shard, seq, last, deadline);
            s.stats.timer_lateness.record(ms * 1_000_000).unwrap();
            s.remote_quota = (shard == 2).then_some(Throttling {
                period: Duration::from_millis(100),
                periods: 10,
                throttled_periods: if seq == 0 { 9 } else { 2 },
                throttled: Duration::from_millis(150),
            });
            s
        };
        for shard in 0..3 {
            tx.send(late(shard, 0, false, 500)).unwrap();
        }
        for seq in 1..3 {
            tx.send(late(0, seq, seq == 2, 1)).unwrap();
            tx.send(late(1, seq, seq == 2, 2)).unwrap();
            tx.send(late(2, seq, seq == 2, 90)).unwrap();
        }
        drop(tx);
        let info = LevelInfo {
            index: 1,
            users: 3,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(2),
            rate: None,
        };
        let totals = Collector::new(3, 1, start, Duration::from_secs(1), deadline)
            .grouped(vec![0, 0, 1])
            .run(&info, rx, &mut []);
        let groups = &totals.lateness_by_group;
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].timer.len(), 4);
        assert_eq!(groups[1].timer.len(), 2);
        assert!(groups[0].timer.max() < 3_000_000, "warm-up left out");
        assert!(groups[1].timer.min() > 89_000_000);
        assert_eq!(
            totals.stats.timer_lateness.len(),
            6,
            "the merged figure holds both"
        );
        assert!(groups.iter().all(|g| g.arrival.is_empty()));
        assert_eq!(groups[0].quota, None);
        let quota = groups[1].quota.unwrap();
        assert_eq!((quota.periods, quota.throttled_periods), (20, 4));
        assert_eq!(quota.period, Duration::from_millis(100));
    }
}
