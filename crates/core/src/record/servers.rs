//! What the profiler agents measured, as the record keeps it: a level's
//! per-tier usage (`servers.<tier>`) and the profile's per-request demands
//! (`analysis.demands[request][tier]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ByteRates {
    pub rx: f64,
    pub tx: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DiskRates {
    pub read: f64,
    pub write: f64,
}

/// The `servers.<tier>` object of a level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TierUsage {
    pub agent: String,
    /// Cores the tier may use (configured, or the agent host's).
    pub cores: u32,
    /// Cores of the agent's host, which co-located tiers share (0 in
    /// records written before it was kept).
    #[serde(default)]
    pub host_cores: u32,
    /// CPU of the tier's processes together, in busy cores.
    pub cpu_util_cores: f64,
    pub cpu_util_cores_per_process: BTreeMap<String, f64>,
    pub cpu_ms_per_request: BTreeMap<String, f64>,
    /// Network bytes of the tier's host (all interfaces) per request.
    pub net_bytes_per_request: ByteRates,
    /// Storage bytes of the tier's processes (/proc/PID/io) per request;
    /// counted when written, unlike the host's disk counters which lag
    /// behind the page cache.
    pub disk_bytes_per_request: DiskRates,
    /// Storage bytes of the host's disks (/proc/diskstats) per request.
    pub host_disk_bytes_per_request: DiskRates,
    /// Busy cores of the whole host.
    pub host_cpu_util_cores: f64,
    /// Per process: of the time its threads were ready to run, the share
    /// they waited for a CPU (the scheduler's run delay over run delay plus
    /// CPU time). Near 0 when the process had the CPUs it wanted; a
    /// process queued behind others for cores waits, and then measures
    /// less throughput than its CPU demand allows. Absent where the agent
    /// could not read schedstat (and in records written before it).
    #[serde(default)]
    pub cpu_wait_share_per_process: BTreeMap<String, f64>,
    /// Cores of the agent's host a hypervisor gave to other guests while
    /// this host had work for them (/proc/stat steal): CPU the tier could
    /// not have, whoever on this host wanted it.
    #[serde(default)]
    pub host_steal_cores: f64,
    /// Resident memory of the tier's processes together over the agent's
    /// readings in the window, mean and max, in bytes (0 in records
    /// written before it was kept).
    #[serde(default)]
    pub memory_mean_bytes: u64,
    #[serde(default)]
    pub memory_max_bytes: u64,
    /// For a tier selected by cgroup: its memory as anonymous pages (what
    /// the service holds) and as page cache (files, reclaimable), means
    /// over the readings (`memory.stat`); absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_anon_mean_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_file_mean_bytes: Option<u64>,
    /// For a tier selected by cgroup: the cgroups its glob matched at the
    /// level's end (a service's replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// For a tier selected by cgroup: the controllers its cgroups lacked
    /// in the level (`memory`: the memory figures read 0 for want of it,
    /// not for want of memory; `io`: no storage bytes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
    /// Seconds between the two readings used.
    pub window_s: f64,
}

/// Of the time a server process was ready to run, the share it may wait
/// for a CPU before its level is called short of CPU. A process that has
/// the cores it wants waits a few percent (wake-ups land on a busy CPU,
/// or an idle virtual CPU takes its time to wake: up to 12% of a nearly
/// idle process's ready time on this project's CI machines); one queued
/// behind another for a core waits a large share, and its level measures
/// less throughput than its demands allow.
pub(crate) const SHORT_OF_CPU_WAIT: f64 = 0.2;

/// And the threads of that process waiting for a CPU at any moment, on
/// average, at least this many: a nearly idle process's waits for wake-up
/// are a large share of almost nothing.
pub(crate) const SHORT_OF_CPU_WAITING: f64 = 0.05;

/// Cores a hypervisor may take from a server host (steal) before its
/// level is called short of CPU.
pub(crate) const SHORT_OF_CPU_STEAL: f64 = 0.1;

/// Says why a level's servers had less CPU than they asked for, when they
/// did: the process that waited longest for a CPU past
/// [`SHORT_OF_CPU_WAIT`] and [`SHORT_OF_CPU_WAITING`] ("tb-web waited for a CPU 31% of the time it was
/// ready to run"), and any host whose CPUs a hypervisor took past
/// [`SHORT_OF_CPU_STEAL`]. The figures of such a level are those of a
/// busier machine than the one under test, not of the system alone.
pub(crate) fn short_of_cpu(servers: &BTreeMap<String, TierUsage>) -> Option<String> {
    let mut said = Vec::new();
    // Waiting threads on average = running ones × waited / ran.
    let waiting_threads = |t: &TierUsage, process: &str, share: f64| {
        let running = t
            .cpu_util_cores_per_process
            .get(process)
            .copied()
            .unwrap_or(0.0);
        running * share / (1.0 - share).max(1e-3)
    };
    let waiting = servers
        .values()
        .flat_map(|t| {
            t.cpu_wait_share_per_process
                .iter()
                .map(move |(p, &s)| (t, p, s))
        })
        .filter(|&(t, p, share)| {
            share >= SHORT_OF_CPU_WAIT && waiting_threads(t, p, share) >= SHORT_OF_CPU_WAITING
        })
        .map(|(_, p, share)| (p, share))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((process, share)) = waiting {
        said.push(format!(
            "{process} waited for a CPU {:.0}% of the time it was ready to run",
            share * 100.0
        ));
    }
    let mut hosts: Vec<(&str, f64)> = servers
        .values()
        .filter(|t| t.host_steal_cores >= SHORT_OF_CPU_STEAL)
        .map(|t| (t.agent.as_str(), t.host_steal_cores))
        .collect();
    hosts.sort_by(|a, b| a.0.cmp(b.0));
    hosts.dedup_by(|a, b| a.0 == b.0);
    for (agent, cores) in hosts {
        said.push(format!(
            "the hypervisor took {cores:.2} cores of the host of {agent}"
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// One request's demands at one tier, as `analysis.demands[request][tier]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TierDemands {
    /// The tier's processes together.
    pub cpu_ms: f64,
    pub cpu_ms_per_process: BTreeMap<String, f64>,
    pub net_rx_bytes: f64,
    pub net_tx_bytes: f64,
    pub disk_read_bytes: f64,
    pub disk_write_bytes: f64,
    /// Every process of the tier converged (or was ignored as idle).
    pub converged: bool,
    /// Processes that stayed near zero and were not waited for.
    pub ignored: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A figure with more digits than an f64 holds (written by another
    /// tool, or edited) reads back the same once written again: found by
    /// the `run_record` fuzz target, where serde_json's default parser
    /// read 1.0777777777777777 as 1.0777777777777775.
    #[test]
    fn a_figure_read_and_written_again_reads_the_same() {
        let text = r#"{"agent": "http://127.0.0.1:1", "cores": 2, "cpu_util_cores": 0.9,
            "cpu_util_cores_per_process": {"tb-web": 0.9}, "cpu_ms_per_request": {"tb-web": 2.28},
            "net_bytes_per_request": {"rx": 309.5, "tx": 309.5},
            "disk_bytes_per_request": {"read": 0.0, "write": 0.0},
            "host_disk_bytes_per_request": {"read": 139.0, "write": 24755.0},
            "host_cpu_util_cores": 1.0777777777777777545, "window_s": 4.998}"#;
        let read: TierUsage = serde_json::from_str(text).unwrap();
        let again: TierUsage =
            serde_json::from_str(&serde_json::to_string(&read).unwrap()).unwrap();
        assert_eq!(again, read);
        assert_eq!(read.host_cpu_util_cores, 1.0777777777777777);
    }

    fn tier(process: &str, running: f64, share: f64, steal: f64) -> TierUsage {
        serde_json::from_value(serde_json::json!({
            "agent": "http://127.0.0.1:1", "cores": 1, "host_cores": 2,
            "cpu_util_cores": running,
            "cpu_util_cores_per_process": {process: running},
            "cpu_ms_per_request": {process: 4.0},
            "net_bytes_per_request": {"rx": 0.0, "tx": 0.0},
            "disk_bytes_per_request": {"read": 0.0, "write": 0.0},
            "host_disk_bytes_per_request": {"read": 0.0, "write": 0.0},
            "host_cpu_util_cores": 1.0, "window_s": 4.0,
            "cpu_wait_share_per_process": {process: share},
            "host_steal_cores": steal
        }))
        .unwrap()
    }

    #[test]
    fn short_of_cpu_needs_a_large_share_of_real_waiting() {
        let one = |t: TierUsage| short_of_cpu(&BTreeMap::from([("web".to_string(), t)]));
        // The testbed on a quiet machine: 11% of an idle process's
        // ready time, 0.1% at saturation.
        assert_eq!(one(tier("web", 0.008, 0.11, 0.0)), None);
        assert_eq!(one(tier("web", 0.91, 0.001, 0.0)), None);
        // A large share of almost nothing is wake-up latency.
        assert_eq!(one(tier("web", 0.01, 0.5, 0.0)), None);
        // Queued behind a neighbour: 0.73 cores ran, 0.27 waited.
        let said = one(tier("web", 0.73, 0.27, 0.0)).unwrap();
        assert_eq!(
            said,
            "web waited for a CPU 27% of the time it was ready to run"
        );
        let said = one(tier("web", 0.9, 0.0, 0.4)).unwrap();
        assert!(said.contains("hypervisor took 0.40 cores"), "{said}");
    }
}
