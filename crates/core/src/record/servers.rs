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
    /// Seconds between the two readings used.
    pub window_s: f64,
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
