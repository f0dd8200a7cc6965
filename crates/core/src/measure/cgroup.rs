//! This process's cgroup CPU limit as the kernel enforces it: the quota (a
//! container's CPU limit, 500m say, which `available_parallelism` rounds
//! up to whole cores) and how often it held the process back. A generator
//! its quota throttles leaves responses unread and timers unfired until
//! the next period begins, so the latencies it measures then are partly
//! its own: the throttling is how a level tells.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tightest CFS quota over this process's cgroup and its ancestors.
#[derive(Debug, Clone)]
pub struct CpuLimit {
    /// The quota in cores (quota over period).
    pub cores: f64,
    /// The period the quota is granted in: a throttled process waits at
    /// most about this long for the next grant.
    pub period: Duration,
    /// The group that sets it, whose `cpu.stat` counts its throttling.
    dir: PathBuf,
    v2: bool,
}

/// The kernel's throttling counters of a group, since it was made, and
/// the period its quota is granted in (a held-back process waits at most
/// about that long).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Throttling {
    pub period: Duration,
    /// Enforcement periods that went by while the group had work.
    pub periods: u64,
    /// Of those, the periods in which the group spent its quota and was
    /// held back.
    pub throttled_periods: u64,
    /// Time its runqueues spent held back (cgroup v1 adds up each CPU's).
    pub throttled: Duration,
}

impl Throttling {
    /// What went by between `earlier` and this reading.
    pub(crate) fn since(&self, earlier: &Throttling) -> Throttling {
        Throttling {
            period: self.period,
            periods: self.periods.saturating_sub(earlier.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
            throttled: self.throttled.saturating_sub(earlier.throttled),
        }
    }
}

/// Whether a quota that held a generator back in `throttled` of `periods`
/// periods was its bottleneck: once in a while is a burst's doing (a
/// second's bookkeeping); a tenth of the periods or more is a generator
/// the quota is too small for.
pub(crate) fn holds_back(periods: u64, throttled: u64) -> bool {
    throttled > 0 && throttled * 10 >= periods
}

impl CpuLimit {
    /// This process's limit, if a quota holds it (None without cgroups, or
    /// with no quota anywhere up its tree).
    pub(crate) fn of_this_process() -> Option<CpuLimit> {
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mut best: Option<CpuLimit> = None;
        for line in text.lines() {
            // "ID:CONTROLLERS:PATH"; v2 has ID 0 and no controllers.
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let relative = path.trim_start_matches('/');
            let found: Vec<CpuLimit> = if id == "0" && controllers.is_empty() {
                ancestors(Path::new("/sys/fs/cgroup"), relative)
                    .into_iter()
                    .filter_map(v2)
                    .collect()
            } else if controllers.split(',').any(|c| c == "cpu") {
                ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
                    .iter()
                    .flat_map(|mount| ancestors(Path::new(mount), relative))
                    .filter_map(v1)
                    .collect()
            } else {
                Vec::new()
            };
            for limit in found {
                if best.as_ref().is_none_or(|b| limit.cores < b.cores) {
                    best = Some(limit);
                }
            }
        }
        best
    }

    /// The group's throttling counters now; None when they cannot be read.
    pub(crate) fn throttling(&self) -> Option<Throttling> {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let counters = parse_stat(&text, self.v2)?;
        Some(Throttling {
            period: self.period,
            ..counters
        })
    }
}

/// `root/relative` and each parent of it up to `root` (in a container the
/// path may name a cgroup its own mount shows as the root: that is checked
/// too).
fn ancestors(root: &Path, relative: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    let mut dir = root.to_path_buf();
    for part in relative.split('/').filter(|p| !p.is_empty()) {
        dir.push(part);
        dirs.push(dir.clone());
    }
    dirs
}

fn v2(dir: PathBuf) -> Option<CpuLimit> {
    let text = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    let (cores, period) = parse_v2(&text)?;
    Some(CpuLimit {
        cores,
        period,
        dir,
        v2: true,
    })
}

/// cgroup v2's `cpu.max`: "QUOTA PERIOD" in µs, or "max PERIOD".
fn parse_v2(text: &str) -> Option<(f64, Duration)> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: u64 = it.next()?.parse().ok()?;
    if quota == "max" || period == 0 {
        return None;
    }
    Some((
        quota.parse::<f64>().ok()? / period as f64,
        Duration::from_micros(period),
    ))
}

fn v1(dir: PathBuf) -> Option<CpuLimit> {
    let read = |name: &str| -> Option<i64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let quota = read("cpu.cfs_quota_us")?;
    let period = read("cpu.cfs_period_us")?;
    (quota > 0 && period > 0).then(|| CpuLimit {
        cores: quota as f64 / period as f64,
        period: Duration::from_micros(period as u64),
        dir,
        v2: false,
    })
}

/// `cpu.stat`: v1 counts throttled time in ns (`throttled_time`), v2 in µs
/// (`throttled_usec`); both count `nr_periods` and `nr_throttled`.
fn parse_stat(text: &str, v2: bool) -> Option<Throttling> {
    let mut t = Throttling::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match key {
            "nr_periods" => t.periods = value,
            "nr_throttled" => t.throttled_periods = value,
            "throttled_time" if !v2 => t.throttled = Duration::from_nanos(value),
            "throttled_usec" if v2 => t.throttled = Duration::from_micros(value),
            _ => continue,
        }
        seen += 1;
    }
    (seen == 3).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_read_as_cores_and_periods() {
        assert_eq!(parse_v2("max 100000\n"), None);
        assert_eq!(
            parse_v2("50000 100000\n"),
            Some((0.5, Duration::from_millis(100)))
        );
        assert_eq!(
            parse_v2("250000 100000"),
            Some((2.5, Duration::from_millis(100)))
        );
        assert_eq!(parse_v2(""), None);
        let dirs = ancestors(Path::new("/sys/fs/cgroup"), "/kubepods/pod1/c1");
        assert_eq!(dirs.len(), 4);
        assert_eq!(dirs[3], Path::new("/sys/fs/cgroup/kubepods/pod1/c1"));
    }

    #[test]
    fn throttling_reads_from_either_version() {
        let v1 = "nr_periods 929\nnr_throttled 579\nthrottled_time 30947215882\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(
            parse_stat(v1, false),
            Some(Throttling {
                period: Duration::ZERO,
                periods: 929,
                throttled_periods: 579,
                throttled: Duration::from_nanos(30_947_215_882),
            })
        );
        let v2 = "usage_usec 8016\nuser_usec 4811\nsystem_usec 3205\nnr_periods 12\nnr_throttled 3\nthrottled_usec 250000\n";
        let t = parse_stat(v2, true).unwrap();
        assert_eq!(t.throttled, Duration::from_millis(250));
        assert_eq!(t.throttled_periods, 3);
        // A group without a quota's counters (v2 lists usage only).
        assert_eq!(parse_stat("usage_usec 8016\nuser_usec 4811\n", true), None);
        let later = Throttling {
            period: Duration::ZERO,
            periods: 940,
            throttled_periods: 580,
            throttled: Duration::from_nanos(31_000_000_000),
        };
        let delta = later.since(&parse_stat(v1, false).unwrap());
        assert_eq!((delta.periods, delta.throttled_periods), (11, 1));
    }
}
