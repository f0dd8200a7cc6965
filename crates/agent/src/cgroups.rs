//! Control groups as server groups: a container, a pod, a systemd unit is
//! a cgroup, and a glob over the hierarchy (`system.slice/web-*.scope`)
//! selects the replicas of one service. Their figures come from the
//! cgroup's own files, which count every process in it, however many come
//! and go:
//!
//! | figure  | cgroup v2                   | cgroup v1                                   |
//! |---------|-----------------------------|---------------------------------------------|
//! | CPU     | `cpu.stat` user/system µs   | `cpuacct.usage_user`/`usage_sys` ns         |
//! | memory  | `memory.current`            | `memory.usage_in_bytes`                     |
//! | storage | `io.stat` rbytes/wbytes     | `blkio.throttle.io_service_bytes` Read/Write|
//!
//! CPU is counted in micro- or nanoseconds, far finer than /proc's 10 ms
//! ticks. The hierarchies are found in /proc/self/mountinfo, not assumed:
//! a host may mount v2 alone (today's Kubernetes nodes), v1 controllers
//! each at their own place, or both, and a figure is read from whichever
//! has it at the cgroup's path.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::groups::{MemorySplit, Missing, ProcSample};
use crate::procfs::IoCounters;

/// At most this many directories are visited per glob: a pattern of many
/// `*` over a large hierarchy stays cheap.
const MAX_VISITED: usize = 20_000;

/// The cgroup file systems of this host, where they are mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hierarchies {
    pub v2: Option<PathBuf>,
    pub cpuacct: Option<PathBuf>,
    pub memory: Option<PathBuf>,
    pub blkio: Option<PathBuf>,
}

impl Hierarchies {
    /// The hierarchies of `/proc/self/mountinfo`'s text (`proc(5)`: the
    /// mount point is field 5; after the ` - ` separator come the file
    /// system type and its super options, which name a v1 hierarchy's
    /// controllers).
    pub fn from_mountinfo(text: &str) -> Hierarchies {
        let mut found = Hierarchies::default();
        for line in text.lines() {
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let Some(mount_point) = before.split(' ').nth(4) else {
                continue;
            };
            let mut after = after.split(' ');
            let fs_type = after.next().unwrap_or("");
            let options = after.nth(1).unwrap_or("");
            let at = Some(PathBuf::from(unescape(mount_point)));
            match fs_type {
                "cgroup2" => found.v2 = found.v2.or(at),
                "cgroup" => {
                    let has = |c: &str| options.split(',').any(|o| o == c);
                    if has("cpuacct") {
                        found.cpuacct = found.cpuacct.or(at.clone());
                    }
                    if has("memory") {
                        found.memory = found.memory.or(at.clone());
                    }
                    if has("blkio") {
                        found.blkio = found.blkio.or(at);
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// The hierarchies under `root`, a host's /sys/fs/cgroup mounted
    /// elsewhere (an agent in a container): v2 when `root` is one (it has
    /// `cgroup.controllers`), else v1's `cpuacct` (or `cpu,cpuacct`),
    /// `memory`, `blkio` and a v2 `unified` beside them, as systemd lays
    /// them out.
    pub fn under(root: &Path) -> Hierarchies {
        if root.join("cgroup.controllers").is_file() {
            return Hierarchies {
                v2: Some(root.to_path_buf()),
                ..Hierarchies::default()
            };
        }
        let first = |names: &[&str]| names.iter().map(|n| root.join(n)).find(|p| p.is_dir());
        Hierarchies {
            v2: first(&["unified"]),
            cpuacct: first(&["cpuacct", "cpu,cpuacct", "cpuacct,cpu"]),
            memory: first(&["memory"]),
            blkio: first(&["blkio"]),
        }
    }

    /// This host's, from `/proc/self/mountinfo` (none when unreadable).
    pub fn system() -> Hierarchies {
        fs::read_to_string("/proc/self/mountinfo")
            .map(|t| Hierarchies::from_mountinfo(&t))
            .unwrap_or_default()
    }

    fn roots(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.v2, &self.cpuacct, &self.memory, &self.blkio]
            .into_iter()
            .flatten()
    }

    /// The cgroups `glob` matches in any hierarchy, as paths relative to
    /// the hierarchy's root (`system.slice/web-1.scope`), sorted. Each `/`
    /// separated part of the glob matches one level (`*`, `?`, `[…]`).
    pub fn matching(&self, glob: &str) -> Vec<String> {
        let Some(parts) = glob_parts(glob) else {
            return Vec::new();
        };
        let mut found = BTreeSet::new();
        for root in self.roots() {
            let mut level = vec![String::new()];
            let mut visited = 0;
            for part in &parts {
                let mut next = Vec::new();
                for rel in &level {
                    for name in subdirectories(&root.join(rel)) {
                        visited += 1;
                        if visited > MAX_VISITED {
                            break;
                        }
                        if part.matches(&name) {
                            next.push(join(rel, &name));
                        }
                    }
                }
                level = next;
            }
            found.extend(level);
        }
        found.into_iter().collect()
    }

    /// For a glob that matched nothing: the cgroups that exist where the
    /// match stopped (under the longest leading part that did match), at
    /// most `limit`, to name in the error.
    pub fn nearest(&self, glob: &str, limit: usize) -> Vec<String> {
        let Some(parts) = glob_parts(glob) else {
            return Vec::new();
        };
        let words: Vec<&str> = glob.trim_matches('/').split('/').collect();
        for depth in (0..parts.len()).rev() {
            let prefix = words[..depth].join("/");
            let found = if depth == 0 {
                vec![String::new()]
            } else {
                self.matching(&prefix)
            };
            let mut names: BTreeSet<String> = BTreeSet::new();
            for root in self.roots() {
                for rel in &found {
                    for name in subdirectories(&root.join(rel)) {
                        names.insert(join(rel, &name));
                    }
                }
            }
            if !names.is_empty() {
                return names.into_iter().take(limit).collect();
            }
        }
        Vec::new()
    }

    /// One cgroup's figures as a sample of its group: `rel` is its path
    /// relative to the hierarchies' roots. `None` when no hierarchy has
    /// its CPU (it went away mid-pass).
    pub fn sample(&self, rel: &str) -> Option<ProcSample> {
        let at = |root: &Option<PathBuf>| root.as_ref().map(|r| r.join(rel)).filter(|p| p.is_dir());
        let (user_ns, sys_ns, dir) = match at(&self.v2).and_then(|d| Some((v2_cpu(&d)?, d))) {
            Some(((user, sys), dir)) => (user, sys, dir),
            None => {
                let dir = at(&self.cpuacct)?;
                let (user, sys) = v1_cpu(&dir)?;
                (user, sys, dir)
            }
        };
        let memory = at(&self.v2)
            .and_then(|d| read_u64(&d.join("memory.current")))
            .or_else(|| at(&self.memory).and_then(|d| read_u64(&d.join("memory.usage_in_bytes"))));
        let memory_split = at(&self.v2)
            .and_then(|d| fs::read_to_string(d.join("memory.stat")).ok())
            .and_then(|t| parse_memory_stat(&t, "anon", "file"))
            .or_else(|| {
                at(&self.memory)
                    .and_then(|d| fs::read_to_string(d.join("memory.stat")).ok())
                    .and_then(|t| {
                        // The hierarchy's totals (children included), as
                        // usage_in_bytes counts them.
                        parse_memory_stat(&t, "total_rss", "total_cache")
                            .or_else(|| parse_memory_stat(&t, "rss", "cache"))
                    })
            });
        let io = at(&self.v2)
            .and_then(|d| fs::read_to_string(d.join("io.stat")).ok())
            .map(|t| parse_io_stat(&t))
            .or_else(|| {
                at(&self.blkio)
                    .and_then(|d| {
                        fs::read_to_string(d.join("blkio.throttle.io_service_bytes")).ok()
                    })
                    .map(|t| parse_blkio(&t))
            });
        let procs = fs::read_to_string(dir.join("cgroup.procs"))
            .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count() as u32)
            .unwrap_or(0);
        // The directory's inode: a cgroup removed and made again under the
        // same name (a restarted container) is another one.
        let inode = fs::metadata(&dir).map(|m| m.ino()).unwrap_or(0);
        Some(ProcSample {
            pid: fnv1a(rel.as_bytes()) as u32,
            starttime: inode,
            utime: 0,
            stime: 0,
            precise_ns: Some((user_ns, sys_ns)),
            threads: procs,
            rss_bytes: memory.unwrap_or(0),
            missing: Missing {
                memory: memory.is_none(),
                io: io.is_none(),
            },
            memory_split,
            net: None,
            io,
            sched: None,
        })
    }

    /// A process in cgroup `rel` (the first of its `cgroup.procs` in any
    /// hierarchy), to read what the cgroup shares with its processes: its
    /// network namespace.
    pub fn member(&self, rel: &str) -> Option<u32> {
        self.roots()
            .map(|r| r.join(rel).join("cgroup.procs"))
            .filter_map(|p| fs::read_to_string(p).ok())
            .find_map(|t| t.lines().find_map(|l| l.trim().parse().ok()))
    }
}

/// The glob's parts, each a pattern for one level; `None` for a glob that
/// could leave the hierarchy (`..`) or does not parse.
fn glob_parts(glob: &str) -> Option<Vec<glob::Pattern>> {
    let words: Vec<&str> = glob.trim_matches('/').split('/').collect();
    if words
        .iter()
        .any(|w| w.is_empty() || *w == "." || *w == "..")
    {
        return None;
    }
    words.iter().map(|w| glob::Pattern::new(w).ok()).collect()
}

/// Whether `glob` can select cgroups: relative parts, none `..`, each a
/// valid pattern. The reason when not.
pub fn check_glob(glob: &str) -> Result<(), &'static str> {
    match glob_parts(glob) {
        Some(_) => Ok(()),
        None => Err("a cgroup glob is parts separated by `/`, none empty, `.` or `..`, each a valid pattern"),
    }
}

fn subdirectories(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// v2 `cpu.stat`: user and system time in ns.
fn v2_cpu(dir: &Path) -> Option<(u64, u64)> {
    let text = fs::read_to_string(dir.join("cpu.stat")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some((field("user_usec ")? * 1000, field("system_usec ")? * 1000))
}

/// v1 `cpuacct`: user and system time in ns (`usage_user`/`usage_sys`
/// since Linux 4.7; before it, all of `usage` as user time).
fn v1_cpu(dir: &Path) -> Option<(u64, u64)> {
    match (
        read_u64(&dir.join("cpuacct.usage_user")),
        read_u64(&dir.join("cpuacct.usage_sys")),
    ) {
        (Some(user), Some(sys)) => Some((user, sys)),
        _ => Some((read_u64(&dir.join("cpuacct.usage"))?, 0)),
    }
}

/// `memory.stat`'s two fields `anon` and `file` (under the names given),
/// when both are there.
fn parse_memory_stat(text: &str, anon: &str, file: &str) -> Option<MemorySplit> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (key, value) = l.split_once(' ')?;
            (key == name).then(|| value.trim().parse::<u64>().ok())?
        })
    };
    Some(MemorySplit {
        anon: field(anon)?,
        file: field(file)?,
    })
}

/// v2 `io.stat`: `MAJ:MIN rbytes=… wbytes=… rios=…` per device, summed.
pub fn parse_io_stat(text: &str) -> IoCounters {
    let mut io = IoCounters::default();
    for word in text.split_ascii_whitespace() {
        if let Some(v) = word
            .strip_prefix("rbytes=")
            .and_then(|v| v.parse::<u64>().ok())
        {
            io.read_bytes += v;
        } else if let Some(v) = word
            .strip_prefix("wbytes=")
            .and_then(|v| v.parse::<u64>().ok())
        {
            io.write_bytes += v;
        }
    }
    io
}

/// v1 `blkio.throttle.io_service_bytes`: `MAJ:MIN Read N` and `MAJ:MIN
/// Write N` per device (the `Total` lines left out), summed.
pub fn parse_blkio(text: &str) -> IoCounters {
    let mut io = IoCounters::default();
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let (Some(_device), Some(op), Some(value)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        match op {
            "Read" => io.read_bytes += value,
            "Write" => io.write_bytes += value,
            _ => {}
        }
    }
    io
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// FNV-1a: a stable number for a cgroup's path (its group identity with
/// the directory's inode).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
41 31 0:38 / /sys/fs/cgroup/my\\040unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn hierarchies_are_found_by_type_and_controller() {
        let h = Hierarchies::from_mountinfo(MOUNTINFO);
        assert_eq!(h.cpuacct, Some("/sys/fs/cgroup/cpu,cpuacct".into()));
        assert_eq!(h.memory, Some("/sys/fs/cgroup/memory".into()));
        assert_eq!(h.blkio, Some("/sys/fs/cgroup/blkio".into()));
        assert_eq!(h.v2, Some("/sys/fs/cgroup/my unified".into()));
        assert_eq!(
            Hierarchies::from_mountinfo("garbage\n"),
            Hierarchies::default()
        );
    }

    /// A v2 hierarchy and a v1 memory one, built in a directory.
    fn built() -> (PathBuf, Hierarchies) {
        let root = std::env::temp_dir().join(format!("autoperf-cgroups-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (dir, files) in [
            (
                "v2/system.slice/web-1.scope",
                vec![
                    (
                        "cpu.stat",
                        "usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\n",
                    ),
                    ("cgroup.procs", "10\n11\n"),
                    (
                        "io.stat",
                        "8:0 rbytes=100 wbytes=50 rios=1\n8:16 rbytes=1 wbytes=2\n",
                    ),
                ],
            ),
            (
                "v2/system.slice/web-2.scope",
                vec![
                    ("cpu.stat", "user_usec 5\nsystem_usec 0\n"),
                    ("cgroup.procs", "12\n"),
                ],
            ),
            (
                "v2/system.slice/db.scope",
                vec![("cpu.stat", "user_usec 1\nsystem_usec 1\n")],
            ),
            (
                "v1mem/system.slice/web-1.scope",
                vec![
                    ("memory.usage_in_bytes", "4096\n"),
                    (
                        "memory.stat",
                        "cache 1000\nrss 3000\ntotal_cache 1024\ntotal_rss 3072\n",
                    ),
                ],
            ),
        ] {
            let d = root.join(dir);
            fs::create_dir_all(&d).unwrap();
            for (name, text) in files {
                fs::write(d.join(name), text).unwrap();
            }
        }
        let h = Hierarchies {
            v2: Some(root.join("v2")),
            memory: Some(root.join("v1mem")),
            ..Hierarchies::default()
        };
        (root, h)
    }

    #[test]
    fn a_glob_matches_level_by_level_and_figures_come_from_either_version() {
        let (root, h) = built();
        assert_eq!(
            h.matching("system.slice/web-*.scope"),
            ["system.slice/web-1.scope", "system.slice/web-2.scope"]
        );
        assert_eq!(
            h.matching("/system.slice/db.scope/"),
            ["system.slice/db.scope"]
        );
        assert!(
            h.matching("web-*").is_empty(),
            "a part matches one level only"
        );
        assert!(h.matching("system.slice/../..").is_empty());
        let s = h.sample("system.slice/web-1.scope").unwrap();
        assert_eq!(s.precise_ns, Some((2_000_000, 1_000_000)));
        assert_eq!((s.threads, s.rss_bytes), (2, 4096));
        let io = s.io.unwrap();
        assert_eq!((io.read_bytes, io.write_bytes), (101, 52));
        assert_eq!(s.missing, Missing::default());
        assert_eq!(
            s.memory_split,
            Some(MemorySplit {
                anon: 3072,
                file: 1024
            })
        );
        // Nothing in v1 memory for web-2 (nor io): its memory is unknown,
        // 0, and said to be so.
        let web2 = h.sample("system.slice/web-2.scope").unwrap();
        assert_eq!(web2.rss_bytes, 0);
        assert_eq!(web2.missing.names(), ["memory", "io"]);
        assert!(h.sample("system.slice/gone.scope").is_none());
        assert_eq!(
            h.nearest("system.slice/api-*.scope", 5),
            [
                "system.slice/db.scope",
                "system.slice/web-1.scope",
                "system.slice/web-2.scope"
            ]
        );
        assert_eq!(h.nearest("nothing/here/at-all", 1), ["system.slice"]);
        assert!(check_glob("a/../b").is_err() && check_glob("kubepods.slice/*").is_ok());
        // Two replicas are one group: their CPU summed, counted as two.
        let mut group = crate::groups::Group::default();
        let replicas: Vec<ProcSample> = h
            .matching("system.slice/web-*.scope")
            .iter()
            .filter_map(|rel| h.sample(rel))
            .collect();
        group.update(replicas);
        let c = group.counters(100);
        assert_eq!((c.processes, c.threads, c.rss_bytes), (2, 3, 4096));
        // One replica without them makes the group's figures unknown.
        assert_eq!(c.missing, ["memory", "io"]);
        assert_eq!(c.memory_anon_bytes, None);
        assert_eq!(c.read_bytes, None);
        assert!((c.cpu_s - 0.003005).abs() < 1e-12, "{c:?}");
        assert!((c.stime_s - 0.001).abs() < 1e-12, "{c:?}");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn memory_stat_gives_anonymous_pages_and_page_cache() {
        let v2 = "anon 8192\nfile 4096\nkernel 100\nfile_mapped 1\n";
        assert_eq!(
            parse_memory_stat(v2, "anon", "file"),
            Some(MemorySplit {
                anon: 8192,
                file: 4096
            })
        );
        assert_eq!(parse_memory_stat("anon 1\n", "anon", "file"), None);
    }

    #[test]
    fn blkio_sums_reads_and_writes_without_the_totals() {
        let io = parse_blkio(
            "8:0 Read 10\n8:0 Write 20\n8:0 Sync 30\n8:0 Total 60\n8:16 Read 1\nTotal 61\n",
        );
        assert_eq!((io.read_bytes, io.write_bytes), (11, 20));
    }
}
