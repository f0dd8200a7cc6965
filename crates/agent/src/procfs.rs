//! Pure parsers for the `/proc` files the agent reads.
//!
//! Every function here takes the text of one file and returns typed values,
//! so each one is tested on captured fixtures without touching the live
//! system. Values stay in the kernel's units (clock ticks, sectors become
//! bytes only because the sector size of diskstats is fixed at 512).

use std::collections::{BTreeMap, BTreeSet};

/// What could not be parsed, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// `/proc/PID/stat` has no `(comm)` pair: not a stat file.
    #[error("stat: no '(comm)' found")]
    MissingComm,
    /// A required field is absent or not a number.
    #[error("{file}: field {field} is missing or not a number")]
    BadField {
        file: &'static str,
        field: &'static str,
    },
    /// `/proc/stat` has no aggregate `cpu ` line.
    #[error("/proc/stat: no aggregate 'cpu' line")]
    MissingCpuLine,
}

/// The fields the agent uses from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidStat {
    pub pid: u32,
    /// The executable name, at most 15 bytes (the kernel truncates it).
    pub comm: String,
    /// Single-letter state: R, S, D, Z, …
    pub state: char,
    /// User-mode time of all threads, live and exited, in clock ticks.
    pub utime: u64,
    /// Kernel-mode time of all threads, in clock ticks.
    pub stime: u64,
    pub num_threads: u32,
    /// Resident set size, in pages.
    pub rss_pages: u64,
    /// Start time after boot in clock ticks: with the PID, it identifies one
    /// process across PID reuse.
    pub starttime: u64,
}

/// Parses `/proc/PID/stat`.
///
/// The comm may itself contain spaces and parentheses (`(a) (b)`), so it runs
/// from the first `(` to the *last* `)`; the numbered fields follow that.
pub fn parse_pid_stat(text: &str) -> Result<PidStat, ParseError> {
    let open = text.find('(').ok_or(ParseError::MissingComm)?;
    let close = text.rfind(')').ok_or(ParseError::MissingComm)?;
    if close < open {
        return Err(ParseError::MissingComm);
    }
    let bad = |field| ParseError::BadField {
        file: "stat",
        field,
    };
    let pid = text[..open].trim().parse().map_err(|_| bad("pid"))?;
    let comm = text[open + 1..close].to_string();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize, name: &'static str| -> Result<u64, ParseError> {
        rest.get(n - 3)
            .and_then(|s| s.parse().ok())
            .ok_or(bad(name))
    };
    let state = rest
        .first()
        .and_then(|s| s.chars().next())
        .ok_or(bad("state"))?;
    Ok(PidStat {
        pid,
        comm,
        state,
        utime: field(14, "utime")?,
        stime: field(15, "stime")?,
        num_threads: field(20, "num_threads")? as u32,
        starttime: field(22, "starttime")?,
        rss_pages: field(24, "rss")?,
    })
}

/// The byte counters of `/proc/PID/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Bytes passed to read()-like calls, cache hits included.
    pub rchar: u64,
    /// Bytes passed to write()-like calls.
    pub wchar: u64,
    /// Bytes actually fetched from the storage layer.
    pub read_bytes: u64,
    /// Bytes caused to be sent to the storage layer.
    pub write_bytes: u64,
}

impl IoCounters {
    pub fn add(&mut self, other: &IoCounters) {
        self.rchar += other.rchar;
        self.wchar += other.wchar;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
    }
}

/// Parses `/proc/PID/io` (`key: value` lines).
pub fn parse_pid_io(text: &str) -> Result<IoCounters, ParseError> {
    let mut found: BTreeMap<&str, u64> = BTreeMap::new();
    for line in text.lines() {
        if let Some((key, value)) = line.split_once(':') {
            if let Ok(v) = value.trim().parse() {
                found.insert(key.trim(), v);
            }
        }
    }
    let get = |field: &'static str| {
        found
            .get(field)
            .copied()
            .ok_or(ParseError::BadField { file: "io", field })
    };
    Ok(IoCounters {
        rchar: get("rchar")?,
        wchar: get("wchar")?,
        read_bytes: get("read_bytes")?,
        write_bytes: get("write_bytes")?,
    })
}

/// The host-wide CPU times of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuStat {
    /// user + nice + system + irq + softirq + steal. Guest time is already
    /// counted inside user and nice, so it is not added again.
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// The number of `cpuN` lines: the online CPUs.
    pub cpus: u32,
    /// Time the hypervisor ran something else while this host's CPUs had
    /// work (inside `busy`).
    pub steal: u64,
}

impl CpuStat {
    pub fn total(&self) -> u64 {
        self.busy + self.idle
    }
}

/// Parses `/proc/stat`: the aggregate `cpu` line and the count of `cpuN` lines.
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ParseError> {
    let mut aggregate = None;
    let mut cpus = 0;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        match words.next() {
            Some("cpu") => aggregate = Some(words.collect::<Vec<_>>()),
            Some(w) if w.len() > 3 && w.starts_with("cpu") => cpus += 1,
            _ => {}
        }
    }
    let values = aggregate.ok_or(ParseError::MissingCpuLine)?;
    // Older kernels have fewer columns; a missing trailing column counts 0.
    let col = |i: usize, field: &'static str| -> Result<u64, ParseError> {
        match values.get(i) {
            None => Ok(0),
            Some(s) => s.parse().map_err(|_| ParseError::BadField {
                file: "/proc/stat",
                field,
            }),
        }
    };
    let steal = col(7, "steal")?;
    let busy = col(0, "user")?
        + col(1, "nice")?
        + col(2, "system")?
        + col(5, "irq")?
        + col(6, "softirq")?
        + steal;
    let idle = col(3, "idle")? + col(4, "iowait")?;
    Ok(CpuStat {
        busy,
        idle,
        cpus,
        steal,
    })
}

/// One thread's times as the scheduler keeps them, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedTimes {
    /// On a CPU.
    pub ran: u64,
    /// Ready to run but waiting for a CPU (the run delay).
    pub waited: u64,
}

impl SchedTimes {
    pub fn add(&mut self, other: SchedTimes) {
        self.ran += other.ran;
        self.waited += other.waited;
    }
}

/// Parses `/proc/PID/task/TID/schedstat` (`on-CPU ns, run-queue wait ns,
/// time slices`).
pub fn parse_schedstat(text: &str) -> Result<SchedTimes, ParseError> {
    let mut words = text.split_ascii_whitespace();
    let mut next = |field| {
        words
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or(ParseError::BadField {
                file: "schedstat",
                field,
            })
    };
    Ok(SchedTimes {
        ran: next("cpu_time")?,
        waited: next("run_delay")?,
    })
}

/// Received and transmitted bytes of one network interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetBytes {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

impl NetBytes {
    pub fn add(&mut self, other: NetBytes) {
        self.rx_bytes = self.rx_bytes.saturating_add(other.rx_bytes);
        self.tx_bytes = self.tx_bytes.saturating_add(other.tx_bytes);
    }

    /// Every interface's bytes together.
    pub fn total(interfaces: &BTreeMap<String, NetBytes>) -> NetBytes {
        let mut sum = NetBytes::default();
        for &n in interfaces.values() {
            sum.add(n);
        }
        sum
    }
}

/// Parses `/proc/net/dev`: bytes per interface, every interface (the
/// controller chooses which ones matter). Malformed lines are skipped.
pub fn parse_net_dev(text: &str) -> BTreeMap<String, NetBytes> {
    let mut out = BTreeMap::new();
    // The two header lines have no ':' before their '|' columns, but to be
    // safe skip them by position as every kernel prints them.
    for line in text.lines().skip(2) {
        let Some((name, values)) = line.split_once(':') else {
            continue;
        };
        let cols: Vec<u64> = values
            .split_ascii_whitespace()
            .map_while(|s| s.parse().ok())
            .collect();
        // Receive has 8 columns, then transmit bytes.
        if cols.len() >= 9 {
            out.insert(
                name.trim().to_string(),
                NetBytes {
                    rx_bytes: cols[0],
                    tx_bytes: cols[8],
                },
            );
        }
    }
    out
}

/// Bytes read from and written to one block device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskBytes {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// diskstats counts in 512-byte sectors whatever the device's sector size.
const SECTOR_BYTES: u64 = 512;

/// Parses `/proc/diskstats`: bytes per whole device.
///
/// Partitions are dropped when their whole disk is listed (`sda1` beside
/// `sda`, `nvme0n1p2` beside `nvme0n1`), so nothing is counted twice; loop,
/// ram and zram devices are dropped as they are memory, not disks.
pub fn parse_diskstats(text: &str) -> BTreeMap<String, DiskBytes> {
    let mut all = BTreeMap::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_ascii_whitespace().collect();
        if cols.len() < 10 {
            continue;
        }
        let name = cols[2];
        if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let (Ok(read), Ok(written)) = (cols[5].parse::<u64>(), cols[9].parse::<u64>()) else {
            continue;
        };
        all.insert(
            name.to_string(),
            DiskBytes {
                read_bytes: read * SECTOR_BYTES,
                write_bytes: written * SECTOR_BYTES,
            },
        );
    }
    let names: BTreeSet<String> = all.keys().cloned().collect();
    all.retain(|name, _| !is_partition_of_listed(name, &names));
    all
}

/// `sda1` is a partition of `sda`; `nvme0n1p1` and `mmcblk0p1` are partitions
/// of `nvme0n1` and `mmcblk0` (a 'p' separates when the disk ends in a digit).
fn is_partition_of_listed(name: &str, names: &BTreeSet<String>) -> bool {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.len() == name.len() || base.is_empty() {
        return false;
    }
    if names.contains(base) && !base.ends_with(|c: char| c.is_ascii_digit()) {
        return true;
    }
    match base.strip_suffix('p') {
        Some(disk) if disk.ends_with(|c: char| c.is_ascii_digit()) => names.contains(disk),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_an_ordinary_process() {
        let s = parse_pid_stat(
            "42 (tb-web) S 1 42 42 0 -1 4194560 10 0 0 0 150 30 0 0 20 0 7 0 9000 1 1\n",
        )
        .unwrap();
        assert_eq!(s.pid, 42);
        assert_eq!(s.comm, "tb-web");
        assert_eq!(s.state, 'S');
        assert_eq!(
            (s.utime, s.stime, s.num_threads, s.starttime),
            (150, 30, 7, 9000)
        );
    }

    #[test]
    fn stat_comm_runs_to_the_last_paren() {
        let s =
            parse_pid_stat("7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 77 1 1").unwrap();
        assert_eq!(s.comm, "a) b) (c");
        assert_eq!((s.utime, s.stime, s.starttime), (5, 6, 77));
    }

    #[test]
    fn stat_errors() {
        assert_eq!(parse_pid_stat("garbage"), Err(ParseError::MissingComm));
        assert_eq!(parse_pid_stat(") 1 ("), Err(ParseError::MissingComm));
        assert!(matches!(
            parse_pid_stat("1 (x) S 1 2"),
            Err(ParseError::BadField { field: "utime", .. })
        ));
    }

    #[test]
    fn io_needs_its_four_counters() {
        assert!(parse_pid_io("rchar: 1\nwchar: 2\n").is_err());
        let io = parse_pid_io("rchar: 1\nwchar: 2\nread_bytes: 3\nwrite_bytes: 4\n").unwrap();
        assert_eq!(io.write_bytes, 4);
    }

    #[test]
    fn cpu_stat_sums_busy_and_idle_columns() {
        let s = parse_cpu_stat("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n")
            .unwrap();
        assert_eq!(s.busy, 1 + 2 + 3 + 6 + 7 + 8);
        assert_eq!(s.idle, 4 + 5);
        assert_eq!(s.cpus, 1);
        assert_eq!(parse_cpu_stat("intr 1\n"), Err(ParseError::MissingCpuLine));
    }

    #[test]
    fn partitions_are_recognised_only_beside_their_disk() {
        let names: BTreeSet<String> = ["sda", "sda1", "nvme0n1", "nvme0n1p2", "md0", "dm-0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(is_partition_of_listed("sda1", &names));
        assert!(is_partition_of_listed("nvme0n1p2", &names));
        assert!(!is_partition_of_listed("nvme0n1", &names));
        assert!(!is_partition_of_listed("md0", &names));
        assert!(!is_partition_of_listed("dm-0", &names));
        assert!(!is_partition_of_listed("sdb1", &names));
    }
}
