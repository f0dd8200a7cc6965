//! Reading the live `/proc`: one pass over the process directories for all
//! tracked groups, and the host-wide files; cgroup groups read their
//! cgroups' own files (`crate::cgroups`). The roots are parameters so a
//! test can point them at directories it built.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::api::{CpuTimes, DiskCounters, HostCounters, MatchMode, NetCounters};
use crate::cgroups::Hierarchies;
use crate::groups::{GroupKey, Missing, ProcSample};
use crate::procfs::{self, NetBytes, PidStat};

/// The kernel keeps at most this many bytes of a comm (TASK_COMM_LEN - 1).
const COMM_BYTES: usize = 15;

/// The longest command line read; a marker past it is not found.
const CMDLINE_BYTES: u64 = 32 * 1024;

/// A `/proc` tree.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
    cgroups: Hierarchies,
}

impl ProcFs {
    /// A `/proc` tree at `root`, and no cgroup hierarchy.
    pub fn new(root: impl Into<PathBuf>) -> ProcFs {
        ProcFs {
            root: root.into(),
            cgroups: Hierarchies::default(),
        }
    }

    /// The system's `/proc` and cgroup hierarchies.
    pub fn system() -> ProcFs {
        ProcFs {
            root: "/proc".into(),
            cgroups: Hierarchies::system(),
        }
    }

    /// The cgroup hierarchies read for cgroup groups.
    pub fn with_cgroups(mut self, cgroups: Hierarchies) -> ProcFs {
        self.cgroups = cgroups;
        self
    }

    /// For a cgroup glob that matches nothing: the cgroups nearest it.
    pub fn nearest_cgroups(&self, glob: &str) -> Vec<String> {
        self.cgroups.nearest(glob, 5)
    }

    /// Samples every process matching any of `keys`, in one pass over the
    /// process directories. A process that vanishes mid-pass is skipped.
    pub fn scan(&self, keys: &[GroupKey]) -> HashMap<GroupKey, Vec<ProcSample>> {
        let mut out: HashMap<GroupKey, Vec<ProcSample>> = HashMap::new();
        for key in keys.iter().filter(|k| k.mode == MatchMode::Cgroup) {
            // The pods of one glob may share a namespace (a pod's
            // containers do): it is counted by the first cgroup in it.
            let mut counted = HashSet::new();
            let samples = self
                .cgroups
                .matching(&key.name)
                .iter()
                .filter_map(|rel| {
                    let mut sample = self.cgroups.sample(rel)?;
                    sample.net = self
                        .cgroups
                        .member(rel)
                        .and_then(|pid| self.namespace_bytes(pid, &mut counted));
                    Some(sample)
                })
                .collect();
            out.insert(key.clone(), samples);
        }
        let keys: Vec<&GroupKey> = keys
            .iter()
            .filter(|k| k.mode != MatchMode::Cgroup)
            .collect();
        if keys.is_empty() {
            return out;
        }
        let wants_cmdline = keys.iter().any(|k| k.mode == MatchMode::Cmdline);
        let Ok(entries) = fs::read_dir(&self.root) else {
            return out;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let dir = self.root.join(pid.to_string());
            let Some(stat) = read_small(&dir.join("stat"))
                .ok()
                .and_then(|t| procfs::parse_pid_stat(&t).ok())
            else {
                continue;
            };
            let cmdline = if wants_cmdline {
                read_cmdline(&dir.join("cmdline")).unwrap_or_default()
            } else {
                String::new()
            };
            let mut sample = None;
            for &key in &keys {
                if matches(key, &stat, &cmdline) {
                    let s = sample.get_or_insert_with(|| to_sample(&stat, &dir));
                    out.entry(key.clone()).or_default().push(s.clone());
                }
            }
        }
        out
    }

    /// The bytes through process `pid`'s network namespace, every
    /// interface: zero when `counted` already holds the namespace, none
    /// when it cannot be read (the process left).
    fn namespace_bytes(&self, pid: u32, counted: &mut HashSet<u64>) -> Option<NetBytes> {
        let dir = self.root.join(pid.to_string());
        // The namespace's identity: the inode its ns/net link points to.
        let namespace = fs::metadata(dir.join("ns/net")).ok()?.ino();
        let text = read_small(&dir.join("net/dev")).ok()?;
        let bytes = NetBytes::total(&procfs::parse_net_dev(&text));
        Some(match counted.insert(namespace) {
            true => bytes,
            false => NetBytes::default(),
        })
    }

    /// The host-wide counters. /proc/stat is required; an unreadable
    /// net/dev or diskstats gives empty maps.
    pub fn host(&self, clk_tck: u64) -> io::Result<HostCounters> {
        let stat = read_small(&self.root.join("stat"))?;
        let cpu = procfs::parse_cpu_stat(&stat)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let available = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let ticks = clk_tck.max(1) as f64;
        let net = read_small(&self.root.join("net/dev"))
            .map(|t| procfs::parse_net_dev(&t))
            .unwrap_or_default()
            .into_iter()
            .map(|(name, b)| {
                let c = NetCounters {
                    rx_bytes: b.rx_bytes,
                    tx_bytes: b.tx_bytes,
                };
                (name, c)
            })
            .collect::<BTreeMap<_, _>>();
        let disk = read_small(&self.root.join("diskstats"))
            .map(|t| procfs::parse_diskstats(&t))
            .unwrap_or_default()
            .into_iter()
            .map(|(name, b)| {
                let c = DiskCounters {
                    read_bytes: b.read_bytes,
                    write_bytes: b.write_bytes,
                };
                (name, c)
            })
            .collect::<BTreeMap<_, _>>();
        Ok(HostCounters {
            cores: if cpu.cpus > 0 { cpu.cpus } else { available },
            available_parallelism: available,
            clk_tck,
            cpu: CpuTimes {
                busy_s: cpu.busy as f64 / ticks,
                total_s: cpu.total() as f64 / ticks,
                steal_s: cpu.steal as f64 / ticks,
            },
            net,
            disk,
        })
    }
}

fn matches(key: &GroupKey, stat: &PidStat, cmdline: &str) -> bool {
    match key.mode {
        MatchMode::Comm => {
            // The kernel truncates comm, so a longer name matches on its
            // first 15 bytes (cut at a character boundary).
            let name = if key.name.len() > COMM_BYTES {
                &key.name[..key.name.floor_char_boundary(COMM_BYTES)]
            } else {
                key.name.as_str()
            };
            stat.comm == name
        }
        MatchMode::Cmdline => cmdline.contains(key.name.as_str()),
        MatchMode::Cgroup => false,
    }
}

fn to_sample(stat: &PidStat, dir: &Path) -> ProcSample {
    let io = read_small(&dir.join("io"))
        .ok()
        .and_then(|t| procfs::parse_pid_io(&t).ok());
    ProcSample {
        missing: Missing::default(),
        memory_split: None,
        net: None,
        pid: stat.pid,
        starttime: stat.starttime,
        utime: stat.utime,
        stime: stat.stime,
        precise_ns: None,
        threads: stat.num_threads,
        rss_bytes: stat.rss_pages.saturating_mul(page_size()),
        io,
        sched: read_sched_times(dir),
    }
}

/// Bytes per page, the unit of /proc's resident set sizes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if bytes > 0 {
        bytes as u64
    } else {
        4096
    }
}

/// The scheduler's times of each thread of the process at `dir`, by
/// thread id; None when its tasks cannot be listed or a thread's schedstat
/// read (a kernel built without it). A thread that exits mid-pass is
/// skipped.
fn read_sched_times(dir: &Path) -> Option<BTreeMap<u32, procfs::SchedTimes>> {
    let mut delays = BTreeMap::new();
    for entry in fs::read_dir(dir.join("task")).ok()?.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        match read_small(&entry.path().join("schedstat")) {
            Ok(text) => {
                delays.insert(tid, procfs::parse_schedstat(&text).ok()?);
            }
            Err(_) if !entry.path().exists() => continue,
            Err(_) => return None,
        }
    }
    Some(delays)
}

/// /proc files are generated on read and small; read them whole.
fn read_small(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
}

/// The command line with its NUL separators made spaces, so a marker that
/// spans two arguments (`-c script`) is found as the user would type it.
fn read_cmdline(path: &Path) -> io::Result<String> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(CMDLINE_BYTES)
        .read_to_end(&mut bytes)?;
    for b in &mut bytes {
        if *b == 0 {
            *b = b' ';
        }
    }
    Ok(String::from_utf8_lossy(&bytes).trim_end().to_string())
}

/// Clock ticks per second, the unit of /proc's CPU times.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// CLOCK_MONOTONIC in seconds.
pub fn monotonic_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}
