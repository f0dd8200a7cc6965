//! How much CPU this host gives the worker: its cores (CPU affinity), or
//! less under a cgroup CPU quota — a container's CPU limit, 500m say —
//! which `available_parallelism` rounds up to whole cores. A level is split
//! over the workers by this figure, so a throttled worker gets its share.

use std::path::{Path, PathBuf};

/// Cores' worth of CPU this process may use (fractional under a quota).
pub(crate) fn capacity() -> f64 {
    let cores = crate::engine::split::cores() as f64;
    match quota() {
        Some(q) if q > 0.0 => cores.min(q),
        _ => cores,
    }
}

/// The tightest CFS quota over this process's cgroup and its ancestors,
/// in cores (cgroup v2's `cpu.max`, or v1's `cpu.cfs_quota_us` over
/// `cpu.cfs_period_us`).
fn quota() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<f64> = None;
    let mut take = |q: Option<f64>| {
        if let Some(q) = q {
            best = Some(best.map_or(q, |b| b.min(q)));
        }
    };
    for line in text.lines() {
        // "ID:CONTROLLERS:PATH"; v2 has ID 0 and no controllers.
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if id == "0" && controllers.is_empty() {
            for dir in ancestors(Path::new("/sys/fs/cgroup"), relative) {
                take(v2(&dir));
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                for dir in ancestors(Path::new(mount), relative) {
                    take(v1(&dir));
                }
            }
        }
    }
    best
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

fn v2(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    parse_v2(&text)
}

fn parse_v2(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next()?.parse().ok()?;
    if quota == "max" || period <= 0.0 {
        return None;
    }
    Some(quota.parse::<f64>().ok()? / period)
}

fn v1(dir: &Path) -> Option<f64> {
    let read = |name: &str| -> Option<f64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let quota = read("cpu.cfs_quota_us")?;
    let period = read("cpu.cfs_period_us")?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_read_as_cores() {
        assert_eq!(parse_v2("max 100000\n"), None);
        assert_eq!(parse_v2("50000 100000\n"), Some(0.5));
        assert_eq!(parse_v2("250000 100000"), Some(2.5));
        assert_eq!(parse_v2(""), None);
        let dirs = ancestors(Path::new("/sys/fs/cgroup"), "/kubepods/pod1/c1");
        assert_eq!(dirs.len(), 4);
        assert_eq!(dirs[3], Path::new("/sys/fs/cgroup/kubepods/pod1/c1"));
    }

    #[test]
    fn this_process_has_some_cpu() {
        let c = capacity();
        assert!(c > 0.0 && c <= crate::engine::split::cores() as f64, "{c}");
    }
}
