//! A CPU limit for processes a test starts: a cgroup with a CFS quota, as
//! a container's CPU limit is. A starved load generator made this way is
//! starved by the same share of a core whatever runs beside it, and takes
//! nothing from the tests beside it (a busy loop pinned to its core did
//! both). Needs root, as the multi-host tests do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The CFS period quotas are granted in, in microseconds: 10 ms, not the
/// 100 ms Kubernetes uses. A process that spends its quota early in a
/// period waits out the rest of it, and 90 ms stalls (0.1 cores of a
/// 100 ms period) made even a lightly loaded worker's timers late past the
/// lateness floor; at 10 ms a stall is at most 9 ms, so what starves a
/// process is the mean CPU it lacks. The least quota Linux grants is 1 ms:
/// 0.1 cores at this period.
const PERIOD_US: f64 = 10_000.0;

/// A cgroup of its own; removed on drop, its processes moved out first.
pub struct CpuQuota(PathBuf);

impl CpuQuota {
    /// A group whose processes share `cores` of CPU (at least 0.1).
    pub fn new(cores: f64) -> CpuQuota {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "autoperf-test-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let quota = (cores * PERIOD_US) as u64;
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let dir = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cpu.cfs_period_us"), format!("{PERIOD_US}")).unwrap();
            std::fs::write(dir.join("cpu.cfs_quota_us"), format!("{quota}")).unwrap();
            dir
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cpu.max"), format!("{quota} {PERIOD_US}")).unwrap();
            dir
        };
        CpuQuota(dir)
    }

    /// Moves `pid` (and the threads and children it will have) into the group.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// `program` run inside the group from its first instruction: a shell
    /// joins the group, then execs it.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
            .arg(&self.0)
            .arg(program);
        cmd
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        let parent = self.0.parent().unwrap().join("cgroup.procs");
        if let Ok(pids) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for pid in pids.lines() {
                let _ = std::fs::write(&parent, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}
