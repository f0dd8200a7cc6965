//! Per-tier resource use over a level's measured window, from the first and
//! last agent readings inside it: utilisation in busy cores, and per request
//! CPU ms per process, network and disk bytes. Per-request figures use the
//! utilisation law, `D = U / X` (AutoPerf section 2.1.1), with `U` over the
//! agents' own clock and `X` the level's throughput.

use std::collections::BTreeMap;

use super::agents::{AgentSet, Counters};
use super::sampler::Reading;
use crate::record::{ByteRates, DiskRates, TierUsage};
use crate::scenario::ServerSpec;

/// The tiers' usage between the first and last readings in `readings` in
/// which their agent answered; tiers without two such readings are left
/// out (and named in the returned warnings).
pub fn tier_usage(
    servers: &[ServerSpec],
    agents: &AgentSet,
    readings: &[Reading],
    throughput_rps: f64,
) -> (BTreeMap<String, TierUsage>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut warnings = Vec::new();
    for server in servers {
        let Some(i) = agents
            .agents
            .iter()
            .position(|a| a.url == server.agent || a.tiers.contains(&server.tier))
        else {
            continue;
        };
        let answered: Vec<&Counters> = readings
            .iter()
            .filter_map(|r| r.counters.get(i).and_then(Option::as_ref))
            .collect();
        let (Some(first), Some(last)) = (answered.first(), answered.last()) else {
            warnings.push(format!(
                "tier {}: no agent readings in this level",
                server.tier
            ));
            continue;
        };
        let dt = last.monotonic_s - first.monotonic_s;
        if answered.len() < 2 || dt < 0.5 {
            warnings.push(format!(
                "tier {}: too few agent readings in this level to measure it",
                server.tier
            ));
            continue;
        }
        out.insert(
            server.tier.clone(),
            usage(
                server,
                &agents.agents[i].url,
                first,
                last,
                dt,
                throughput_rps,
            ),
        );
    }
    (out, warnings)
}

fn usage(
    server: &ServerSpec,
    agent: &str,
    first: &Counters,
    last: &Counters,
    dt: f64,
    throughput_rps: f64,
) -> TierUsage {
    // Per request: a rate divided by throughput (utilisation law).
    let per_request = |rate: f64| {
        if throughput_rps > 0.0 {
            rate / throughput_rps
        } else {
            0.0
        }
    };
    let mut per_process_util = BTreeMap::new();
    let mut cpu_ms = BTreeMap::new();
    let (mut read, mut write) = (0.0, 0.0);
    for name in &server.processes {
        let (Some(a), Some(b)) = (first.processes.get(name), last.processes.get(name)) else {
            continue;
        };
        let util = (b.cpu_s - a.cpu_s).max(0.0) / dt;
        per_process_util.insert(name.clone(), round(util, 4));
        cpu_ms.insert(name.clone(), round(per_request(util) * 1e3, 4));
        let delta = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (Some(x), Some(y)) => y.saturating_sub(x) as f64,
            _ => 0.0,
        };
        read += delta(a.read_bytes, b.read_bytes);
        write += delta(a.write_bytes, b.write_bytes);
    }
    let net = |f: fn(&autoperf_agent::NetCounters) -> u64| -> f64 {
        let sum = |c: &Counters| c.host.net.values().map(f).sum::<u64>();
        sum(last).saturating_sub(sum(first)) as f64
    };
    let disk = |f: fn(&autoperf_agent::DiskCounters) -> u64| -> f64 {
        let sum = |c: &Counters| c.host.disk.values().map(f).sum::<u64>();
        sum(last).saturating_sub(sum(first)) as f64
    };
    TierUsage {
        agent: agent.to_string(),
        cores: server.cores.unwrap_or(last.host.cores),
        host_cores: last.host.cores,
        cpu_util_cores: round(per_process_util.values().sum(), 4),
        cpu_util_cores_per_process: per_process_util,
        cpu_ms_per_request: cpu_ms,
        net_bytes_per_request: ByteRates {
            rx: round(per_request(net(|n| n.rx_bytes) / dt), 1),
            tx: round(per_request(net(|n| n.tx_bytes) / dt), 1),
        },
        disk_bytes_per_request: DiskRates {
            read: round(per_request(read / dt), 1),
            write: round(per_request(write / dt), 1),
        },
        host_disk_bytes_per_request: DiskRates {
            read: round(per_request(disk(|d| d.read_bytes) / dt), 1),
            write: round(per_request(disk(|d| d.write_bytes) / dt), 1),
        },
        host_cpu_util_cores: round(
            (last.host.cpu.busy_s - first.host.cpu.busy_s).max(0.0) / dt,
            4,
        ),
        window_s: round(dt, 3),
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}
