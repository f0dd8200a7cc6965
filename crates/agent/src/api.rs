//! The agent's wire format: the JSON response types (shared with the
//! controller, which deserializes them) and the parsing of a counters query.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// At most this many process names per request.
pub const MAX_NAMES: usize = 32;
/// At most this many bytes per process name.
pub const MAX_NAME_BYTES: usize = 64;
/// At most this many bytes per cgroup glob (a Kubernetes pod's cgroup
/// path runs past 100).
pub const MAX_GLOB_BYTES: usize = 512;

/// Who answered.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    /// When this agent process started, ms since the Unix epoch (0 from
    /// agents before it was sent). A new value means the agent restarted:
    /// its group totals, which keep the CPU time of departed processes,
    /// began again, so the controller never takes a difference across it.
    #[serde(default)]
    pub started_ms: u64,
}

impl AgentInfo {
    /// This agent; the first call fixes `started_ms` (the server makes it
    /// when it starts).
    pub fn this() -> AgentInfo {
        static STARTED_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let started_ms = *STARTED_MS.get_or_init(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        });
        AgentInfo {
            name: "autoperf-agent".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_ms,
        }
    }
}

/// The answer to `GET /v1/counters`: cumulative counters, so the controller
/// takes differences between two answers.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Counters {
    pub agent: AgentInfo,
    /// Wall-clock time of the sample, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// CLOCK_MONOTONIC of the sample, in seconds: rates are computed with it.
    pub monotonic_s: f64,
    pub host: HostCounters,
    /// One entry per requested name.
    pub processes: BTreeMap<String, GroupCounters>,
    /// One entry per requested cgroup glob: its cgroups together, as a
    /// process group (`processes` counts the cgroups matched, the
    /// replicas; `threads` the processes in them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cgroups: BTreeMap<String, GroupCounters>,
    /// For each cgroup glob that matched nothing, the cgroups nearest it
    /// on this host, to name in the error.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unmatched_cgroups: BTreeMap<String, Vec<String>>,
}

/// Host-wide counters.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct HostCounters {
    /// Online CPUs (the `cpuN` lines of /proc/stat).
    pub cores: u32,
    /// CPUs this agent may run on (`available_parallelism`: affinity and
    /// cgroup quota), which may be fewer than `cores` in a container.
    #[serde(default)]
    pub available_parallelism: u32,
    /// Clock ticks per second, the unit /proc counts CPU time in.
    pub clk_tck: u64,
    pub cpu: CpuTimes,
    /// Per network interface, every interface.
    pub net: BTreeMap<String, NetCounters>,
    /// Per whole block device (no partitions, no loop/ram devices).
    pub disk: BTreeMap<String, DiskCounters>,
}

/// Host CPU time summed over all CPUs since boot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq + steal.
    pub busy_s: f64,
    /// busy + idle + iowait.
    pub total_s: f64,
    /// Inside busy: time a hypervisor gave this host's CPUs to another
    /// guest while they had work (0 from agents before it was sent, and on
    /// bare metal).
    #[serde(default)]
    pub steal_s: f64,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskCounters {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Cumulative counters of one process group: the live processes plus the
/// final values of the ones that exited since the agent started tracking
/// the group, so no counter ever goes backwards.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GroupCounters {
    /// utime_s + stime_s.
    pub cpu_s: f64,
    pub utime_s: f64,
    pub stime_s: f64,
    /// Storage bytes; null when a live process's /proc/PID/io is unreadable.
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub rchar: Option<u64>,
    pub wchar: Option<u64>,
    /// Live matching processes now.
    pub processes: u32,
    /// Threads of the live matching processes now.
    pub threads: u32,
    /// Resident set size of the live matching processes now, in bytes (a
    /// gauge, unlike the counters: 0 from agents before it was sent).
    #[serde(default)]
    pub rss_bytes: u64,
    /// Processes that matched and have exited since tracking began.
    pub departed: u32,
    /// Seconds the group's threads were ready to run but waited for a CPU
    /// (the scheduler's run delay, /proc/PID/task/TID/schedstat), summed
    /// over threads; null when a live process's could not be read (a
    /// kernel without schedstats) and from agents before it was sent.
    #[serde(default)]
    pub cpu_wait_s: Option<f64>,
    /// Seconds the same threads ran on a CPU, by the scheduler's own clock
    /// (ns, unlike `cpu_s`'s clock ticks): what `cpu_wait_s` is compared
    /// with. Null when `cpu_wait_s` is.
    #[serde(default)]
    pub sched_cpu_s: Option<f64>,
    /// For a cgroup group: the controllers its cgroups lacked at this
    /// reading, so the figures they give are not measured (`memory`:
    /// `rss_bytes` counts none of theirs; `io`: the storage bytes are null).
    /// Empty for processes, and from agents before it was sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// For a cgroup group: bytes through its cgroups' network namespaces,
    /// each namespace counted once (read from a member process's
    /// /proc/PID/net/dev, every interface). Null for processes (the
    /// host's `net` counts theirs) and when a cgroup had no process to
    /// read it through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetCounters>,
    /// For a cgroup group: its memory as anonymous pages and as page cache
    /// (`memory.stat`'s `anon`/`file`, v1's `total_rss`/`total_cache`), of
    /// the live cgroups now; null for processes and without the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_anon_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_file_bytes: Option<u64>,
}

/// The answer to `GET /v1/health`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Health {
    pub status: String,
    pub version: String,
}

/// The body of every 4xx answer: one line of JSON.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorBody {
    pub error: String,
}

/// How a name selects processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchMode {
    /// `comm` (the executable name in /proc/PID/stat) equals the name.
    Comm,
    /// /proc/PID/cmdline contains the name.
    Cmdline,
    /// A glob over the cgroup hierarchies (`system.slice/web-*.scope`).
    Cgroup,
}

/// A validated counters query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountersQuery {
    /// Distinct names, in request order.
    pub names: Vec<String>,
    pub mode: MatchMode,
    /// Distinct cgroup globs (`cgroup=`), in request order.
    pub cgroups: Vec<String>,
}

/// Why a query was refused (each becomes a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("at most {MAX_NAMES} process names per request")]
    TooManyNames,
    #[error("process name must be 1 to {MAX_NAME_BYTES} bytes")]
    NameLength,
    #[error("process name must be printable characters")]
    NameNotPrintable,
    #[error("match must be 'comm' or 'cmdline'")]
    BadMatch,
    #[error("cgroup glob must be 1 to {MAX_GLOB_BYTES} printable bytes")]
    GlobLength,
    #[error("{0}")]
    BadGlob(&'static str),
    #[error("unknown query parameter '{0}' (expected process, match, cgroup)")]
    UnknownParameter(String),
    #[error("query is not valid percent-encoded UTF-8")]
    BadEncoding,
}

/// Parses `process=a&process=b[&match=cmdline][&cgroup=GLOB…]`.
pub fn parse_counters_query(query: Option<&str>) -> Result<CountersQuery, QueryError> {
    let mut names: Vec<String> = Vec::new();
    let mut cgroups: Vec<String> = Vec::new();
    let mut mode = MatchMode::Comm;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key)?;
        let value = percent_decode(value)?;
        match key.as_str() {
            "process" => {
                if value.is_empty() || value.len() > MAX_NAME_BYTES {
                    return Err(QueryError::NameLength);
                }
                if value.chars().any(char::is_control) {
                    return Err(QueryError::NameNotPrintable);
                }
                if !names.contains(&value) {
                    if names.len() == MAX_NAMES {
                        return Err(QueryError::TooManyNames);
                    }
                    names.push(value);
                }
            }
            "cgroup" => {
                if value.is_empty()
                    || value.len() > MAX_GLOB_BYTES
                    || value.chars().any(char::is_control)
                {
                    return Err(QueryError::GlobLength);
                }
                crate::cgroups::check_glob(&value).map_err(QueryError::BadGlob)?;
                if !cgroups.contains(&value) {
                    if cgroups.len() == MAX_NAMES {
                        return Err(QueryError::TooManyNames);
                    }
                    cgroups.push(value);
                }
            }
            "match" => {
                mode = match value.as_str() {
                    "comm" => MatchMode::Comm,
                    "cmdline" => MatchMode::Cmdline,
                    _ => return Err(QueryError::BadMatch),
                }
            }
            _ => {
                let mut shown = key;
                shown.truncate(shown.floor_char_boundary(32));
                return Err(QueryError::UnknownParameter(shown));
            }
        }
    }
    Ok(CountersQuery {
        names,
        mode,
        cgroups,
    })
}

/// Decodes application/x-www-form-urlencoded text: `%XX` and `+` for space.
fn percent_decode(text: &str) -> Result<String, QueryError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(QueryError::BadEncoding)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(QueryError::BadEncoding);
                }
                let hex = std::str::from_utf8(hex).map_err(|_| QueryError::BadEncoding)?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| QueryError::BadEncoding)?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| QueryError::BadEncoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_mode() {
        let q =
            parse_counters_query(Some("process=tb-web&process=tb%2Ddb&process=tb-web")).unwrap();
        assert_eq!(q.names, ["tb-web", "tb-db"]);
        assert_eq!(q.mode, MatchMode::Comm);
        let q = parse_counters_query(Some("match=cmdline&process=a+b%20c")).unwrap();
        assert_eq!(q.names, ["a b c"]);
        assert_eq!(q.mode, MatchMode::Cmdline);
        assert!(parse_counters_query(None).unwrap().names.is_empty());
        let q =
            parse_counters_query(Some("process=tb-web&cgroup=system.slice%2Fweb-*.scope")).unwrap();
        assert_eq!(
            (q.names.len(), q.cgroups.as_slice()),
            (1, &["system.slice/web-*.scope".to_string()][..])
        );
        assert!(matches!(
            parse_counters_query(Some("cgroup=a%2F..%2Fb")),
            Err(QueryError::BadGlob(_))
        ));
        assert_eq!(
            parse_counters_query(Some("cgroup=")),
            Err(QueryError::GlobLength)
        );
    }

    #[test]
    fn refusals() {
        let too_many: Vec<String> = (0..=MAX_NAMES).map(|i| format!("process=p{i}")).collect();
        assert_eq!(
            parse_counters_query(Some(&too_many.join("&"))),
            Err(QueryError::TooManyNames)
        );
        let long = format!("process={}", "x".repeat(MAX_NAME_BYTES + 1));
        assert_eq!(
            parse_counters_query(Some(&long)),
            Err(QueryError::NameLength)
        );
        assert_eq!(
            parse_counters_query(Some("process=")),
            Err(QueryError::NameLength)
        );
        assert_eq!(
            parse_counters_query(Some("process=a%0Ab")),
            Err(QueryError::NameNotPrintable)
        );
        assert_eq!(
            parse_counters_query(Some("match=regex")),
            Err(QueryError::BadMatch)
        );
        assert_eq!(
            parse_counters_query(Some("process=%zz")),
            Err(QueryError::BadEncoding)
        );
        assert_eq!(
            parse_counters_query(Some("process=%ff")),
            Err(QueryError::BadEncoding)
        );
        assert_eq!(
            parse_counters_query(Some("process=%4")),
            Err(QueryError::BadEncoding)
        );
        assert_eq!(
            parse_counters_query(Some("process=%+1")),
            Err(QueryError::BadEncoding)
        );
        assert!(matches!(
            parse_counters_query(Some("pid=1")),
            Err(QueryError::UnknownParameter(_))
        ));
    }
}
