//! Per-tier resource use over a level's measured window, from the agent
//! readings inside it (differences between consecutive readings of one
//! agent process, summed): utilisation in busy cores, and per request
//! CPU ms per process, network and disk bytes. Per-request figures divide
//! what was used by the requests completed over the same intervals (the
//! utilisation law, `D = U / X`, AutoPerf section 2.1.1): when the agent
//! missed part of the level, the level's own throughput would not match.

use std::collections::BTreeMap;
use std::time::Instant;

use super::agents::{AgentSet, Counters};
use super::sampler::Reading;
use crate::measure::round_to;
use crate::record::{ByteRates, DiskRates, TierUsage};
use crate::scenario::{Selector, ServerSpec};

/// One interval between consecutive readings of a tier's agent (about a
/// second): a row of `server_series.csv`, the samples `compare` tests a
/// change of CPU per request with.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerSecond {
    /// Seconds into the level's measured window at the interval's end.
    pub window_s: f64,
    pub level: u32,
    pub tier: String,
    /// Requests the generator completed over the interval.
    pub requests: f64,
    /// The tier's processes' CPU per request over the interval (0 when no
    /// request completed).
    pub cpu_ms_per_request: f64,
    pub cpu_util_cores: f64,
    /// The tier's resident memory at the interval's end (0 in files
    /// written before it was kept).
    #[serde(default)]
    pub memory_bytes: u64,
}

/// What the agents measured of a level: each tier's usage, its intervals,
/// and warnings naming the tiers left out.
pub struct TierFigures {
    pub usage: BTreeMap<String, TierUsage>,
    pub seconds: Vec<ServerSecond>,
    pub warnings: Vec<String>,
}

/// The tiers' usage over the readings in `readings` in which their agent
/// answered; tiers without two such readings are left out (and named in the
/// returned warnings). `level` numbers the intervals' rows.
pub fn tier_usage(
    servers: &[ServerSpec],
    agents: &AgentSet,
    readings: &[Reading],
    completed: &dyn Fn(Instant, Instant) -> f64,
    level: u32,
) -> TierFigures {
    let mut out = BTreeMap::new();
    let mut seconds = Vec::new();
    let mut warnings = Vec::new();
    for server in servers {
        let Some(i) = agents.agent_of(&server.tier) else {
            continue;
        };
        let answered: Vec<(Instant, &Counters)> = readings
            .iter()
            .filter_map(|r| Some((r.at, r.counters.get(i)?.as_ref()?)))
            .collect();
        if answered.is_empty() {
            warnings.push(format!(
                "tier {}: no agent readings in this level",
                server.tier
            ));
            continue;
        }
        let (window, restarted) = Window::over(server, &answered, completed);
        if window.dt < 0.5 {
            warnings.push(format!(
                "tier {}: too few agent readings in this level to measure it",
                server.tier
            ));
            continue;
        }
        let span = answered[answered.len() - 1].1.monotonic_s - answered[0].1.monotonic_s;
        if restarted {
            warnings.push(format!(
                "tier {}: its agent restarted during the level; usage is measured over the {:.1} s of {:.1} s between readings of one agent process",
                server.tier, window.dt, span
            ));
        }
        let last = answered[answered.len() - 1].1;
        let endpoint = &agents.agents[i];
        let mut usage = if endpoint.is_prometheus() {
            // Not a host: each tier read through Prometheus is its own,
            // so the model never takes two of them as sharing CPUs.
            let label = format!("{}#{}", endpoint.url, server.tier);
            window.usage(server, &label, server.cores.unwrap_or(1))
        } else {
            window.usage(server, &endpoint.url, last.host.cores)
        };
        if server.by == Selector::Prometheus {
            warnings.extend(coarse_scrape(server, &window));
        }
        if matches!(server.by, Selector::Cgroup | Selector::Prometheus) {
            usage.replicas = server
                .processes
                .iter()
                .map(|glob| last.processes.get(glob).map_or(0, |g| g.processes))
                .reduce(u32::saturating_add);
        }
        usage.unmeasured = unmeasured(server, &answered);
        out.insert(server.tier.clone(), usage);
        seconds.extend(window.intervals.iter().map(|i| ServerSecond {
            level,
            tier: server.tier.clone(),
            window_s: round_to(i.end_s, 3),
            requests: round_to(i.requests, 3),
            cpu_ms_per_request: if i.requests > 0.0 {
                round_to(i.cpu_s / i.requests * 1e3, 4)
            } else {
                0.0
            },
            cpu_util_cores: round_to(i.cpu_s / i.dt.max(1e-9), 4),
            memory_bytes: i.memory_bytes,
        }));
    }
    TierFigures {
        usage: out,
        seconds,
        warnings,
    }
}

/// A cgroup tier's anonymous pages and page cache in one reading, when
/// every cgroup of it gave them.
fn memory_split_of(server: &ServerSpec, c: &Counters) -> Option<(u64, u64)> {
    server
        .processes
        .iter()
        .try_fold((0u64, 0u64), |(anon, file), glob| {
            let g = c.processes.get(glob)?;
            Some((
                anon.saturating_add(g.memory_anon_bytes?),
                file.saturating_add(g.memory_file_bytes?),
            ))
        })
}

/// The bytes through the network namespaces of `server`'s cgroups in one
/// reading, when every one of them gave its own.
fn namespace_bytes(server: &ServerSpec, c: &Counters) -> Option<autoperf_agent::NetCounters> {
    let mut sum = autoperf_agent::NetCounters {
        rx_bytes: 0,
        tx_bytes: 0,
    };
    for glob in &server.processes {
        let n = c.processes.get(glob)?.net?;
        sum.rx_bytes = sum.rx_bytes.saturating_add(n.rx_bytes);
        sum.tx_bytes = sum.tx_bytes.saturating_add(n.tx_bytes);
    }
    Some(sum)
}

/// The controllers the tier's cgroups lacked at any reading of the level,
/// as the agent named them.
fn unmeasured(server: &ServerSpec, answered: &[(Instant, &Counters)]) -> Vec<String> {
    let mut names: Vec<String> = answered
        .iter()
        .flat_map(|(_, c)| server.processes.iter().filter_map(|p| c.processes.get(p)))
        .flat_map(|g| g.missing.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A tier read through Prometheus whose CPU counter moved at fewer than
/// ten readings of a level: the counter is only as fresh as its last
/// scrape, so each end of the window is uncertain by a scrape interval,
/// and the demand by the share of the window that is.
fn coarse_scrape(server: &ServerSpec, window: &Window) -> Option<String> {
    let moved = window.intervals.iter().filter(|i| i.cpu_s > 0.0).count();
    let busy = window.cpu_s.values().sum::<f64>() > 0.0;
    (busy && moved < 10).then(|| {
        format!(
            "tier {}: its CPU counter in Prometheus moved at only {moved} of the level's readings over {:.1} s (scraped about every {:.1} s), so its demand is known to about ±{:.0}%; scrape it more often or make levels longer (capacity.min_duration, --duration)",
            server.tier,
            window.dt,
            window.dt / moved.max(1) as f64,
            100.0 / moved.max(1) as f64
        )
    })
}

/// What a tier used over a window made of intervals between readings.
#[derive(Default)]
struct Window {
    dt: f64,
    /// Requests the load generator completed over the same intervals.
    requests: f64,
    /// CPU seconds per process name seen at both ends of some interval.
    cpu_s: BTreeMap<String, f64>,
    /// Seconds waited for a CPU and run, by the scheduler's clock, per
    /// process name, over the intervals where both readings had them.
    wait_s: BTreeMap<String, (f64, f64)>,
    read: f64,
    write: f64,
    net_rx: f64,
    net_tx: f64,
    disk_read: f64,
    disk_write: f64,
    host_busy_s: f64,
    host_steal_s: f64,
    intervals: Vec<Interval>,
    /// The tier's resident memory at each reading, in bytes.
    memory: Vec<u64>,
    /// A cgroup tier's anonymous pages and page cache at each reading,
    /// when every cgroup gave them.
    memory_split: Vec<Option<(u64, u64)>>,
}

/// One interval between two readings of one agent process.
struct Interval {
    /// Seconds into the window at its end.
    end_s: f64,
    requests: f64,
    /// The tier's CPU seconds in it.
    cpu_s: f64,
    dt: f64,
    /// The tier's resident memory at its end.
    memory_bytes: u64,
}

/// The resident memory of `server`'s processes together in one reading.
fn memory_of(server: &ServerSpec, c: &Counters) -> u64 {
    server
        .processes
        .iter()
        .filter_map(|name| c.processes.get(name))
        .fold(0u64, |sum, g| sum.saturating_add(g.rss_bytes))
}

impl Window {
    /// Differences between consecutive readings, summed: a gap where the
    /// agent did not answer is bridged (its counters are cumulative), a
    /// restart is not (a new agent's group totals have forgotten the
    /// processes that left before it). Also says whether there was one.
    fn over(
        server: &ServerSpec,
        answered: &[(Instant, &Counters)],
        completed: &dyn Fn(Instant, Instant) -> f64,
    ) -> (Window, bool) {
        let mut window = Window::default();
        let mut restarted = false;
        // Memory is a level, not a count: every reading has one.
        window.memory = answered.iter().map(|(_, c)| memory_of(server, c)).collect();
        window.memory_split = answered
            .iter()
            .map(|(_, c)| memory_split_of(server, c))
            .collect();
        for pair in answered.windows(2) {
            let ((from, a), (to, b)) = (pair[0], pair[1]);
            if a.agent.started_ms == b.agent.started_ms {
                let cpu_s = window.add(server, a, b);
                let requests = completed(from, to);
                window.requests += requests;
                window.intervals.push(Interval {
                    end_s: window.dt,
                    requests,
                    cpu_s,
                    dt: (b.monotonic_s - a.monotonic_s).max(0.0),
                    memory_bytes: memory_of(server, b),
                });
            } else {
                restarted = true;
            }
        }
        (window, restarted)
    }

    /// Adds the interval from `a` to `b`; the tier's CPU seconds in it.
    fn add(&mut self, server: &ServerSpec, a: &Counters, b: &Counters) -> f64 {
        let mut tier_cpu_s = 0.0;
        self.dt += (b.monotonic_s - a.monotonic_s).max(0.0);
        let delta = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (Some(x), Some(y)) => y.saturating_sub(x) as f64,
            _ => 0.0,
        };
        for name in &server.processes {
            let (Some(pa), Some(pb)) = (a.processes.get(name), b.processes.get(name)) else {
                continue;
            };
            let cpu_s = (pb.cpu_s - pa.cpu_s).max(0.0);
            tier_cpu_s += cpu_s;
            *self.cpu_s.entry(name.clone()).or_default() += cpu_s;
            if let (Some(wa), Some(wb), Some(ra), Some(rb)) =
                (pa.cpu_wait_s, pb.cpu_wait_s, pa.sched_cpu_s, pb.sched_cpu_s)
            {
                let (waited, ran) = self.wait_s.entry(name.clone()).or_default();
                *waited += (wb - wa).max(0.0);
                *ran += (rb - ra).max(0.0);
            }
            self.read += delta(pa.read_bytes, pb.read_bytes);
            self.write += delta(pa.write_bytes, pb.write_bytes);
        }
        // A tier selected by cgroup has its own network namespace (a
        // container's): its bytes, when every cgroup gave them; else, as
        // for processes, the host's.
        let (rx, tx) = match (namespace_bytes(server, a), namespace_bytes(server, b)) {
            (Some(x), Some(y)) => (
                y.rx_bytes.saturating_sub(x.rx_bytes),
                y.tx_bytes.saturating_sub(x.tx_bytes),
            ),
            _ => {
                let host = |c: &Counters, f: fn(&autoperf_agent::NetCounters) -> u64| {
                    c.host.net.values().map(f).sum::<u64>()
                };
                (
                    host(b, |n| n.rx_bytes).saturating_sub(host(a, |n| n.rx_bytes)),
                    host(b, |n| n.tx_bytes).saturating_sub(host(a, |n| n.tx_bytes)),
                )
            }
        };
        self.net_rx += rx as f64;
        self.net_tx += tx as f64;
        let disk = |c: &Counters, f: fn(&autoperf_agent::DiskCounters) -> u64| {
            c.host.disk.values().map(f).sum::<u64>()
        };
        self.disk_read +=
            disk(b, |d| d.read_bytes).saturating_sub(disk(a, |d| d.read_bytes)) as f64;
        self.disk_write +=
            disk(b, |d| d.write_bytes).saturating_sub(disk(a, |d| d.write_bytes)) as f64;
        self.host_busy_s += (b.host.cpu.busy_s - a.host.cpu.busy_s).max(0.0);
        self.host_steal_s += (b.host.cpu.steal_s - a.host.cpu.steal_s).max(0.0);
        tier_cpu_s
    }

    /// The mean of one part of the memory split over the readings, when
    /// every reading had it.
    fn split_mean(&self, part: fn((u64, u64)) -> u64) -> Option<u64> {
        let parts: Option<Vec<u64>> = self.memory_split.iter().map(|s| s.map(part)).collect();
        let parts = parts.filter(|p| !p.is_empty())?;
        Some((parts.iter().map(|&p| p as f64).sum::<f64>() / parts.len() as f64) as u64)
    }

    fn usage(&self, server: &ServerSpec, agent: &str, host_cores: u32) -> TierUsage {
        let dt = self.dt;
        // Per request: a rate divided by throughput (utilisation law).
        let throughput_rps = self.requests / dt;
        let per_request = |rate: f64| {
            if throughput_rps > 0.0 {
                rate / throughput_rps
            } else {
                0.0
            }
        };
        let mut per_process_util = BTreeMap::new();
        let mut cpu_ms = BTreeMap::new();
        for (name, cpu_s) in &self.cpu_s {
            let util = cpu_s / dt;
            per_process_util.insert(name.clone(), round_to(util, 4));
            cpu_ms.insert(name.clone(), round_to(per_request(util) * 1e3, 4));
        }
        TierUsage {
            agent: agent.to_string(),
            cores: server.cores.unwrap_or(host_cores),
            host_cores,
            cpu_util_cores: round_to(per_process_util.values().sum(), 4),
            cpu_util_cores_per_process: per_process_util,
            cpu_ms_per_request: cpu_ms,
            net_bytes_per_request: ByteRates {
                rx: round_to(per_request(self.net_rx / dt), 1),
                tx: round_to(per_request(self.net_tx / dt), 1),
            },
            disk_bytes_per_request: DiskRates {
                read: round_to(per_request(self.read / dt), 1),
                write: round_to(per_request(self.write / dt), 1),
            },
            host_disk_bytes_per_request: DiskRates {
                read: round_to(per_request(self.disk_read / dt), 1),
                write: round_to(per_request(self.disk_write / dt), 1),
            },
            host_cpu_util_cores: round_to(self.host_busy_s / dt, 4),
            cpu_wait_share_per_process: self
                .wait_s
                .iter()
                .map(|(name, (waited, ran))| {
                    // A process that never ran waited none of its ready time.
                    let share = if waited + ran > 0.0 {
                        waited / (waited + ran)
                    } else {
                        0.0
                    };
                    (name.clone(), round_to(share, 4))
                })
                .collect(),
            host_steal_cores: round_to(self.host_steal_s / dt, 4),
            memory_mean_bytes: match self.memory.len() {
                0 => 0,
                n => (self.memory.iter().map(|&m| m as f64).sum::<f64>() / n as f64) as u64,
            },
            memory_max_bytes: self.memory.iter().copied().max().unwrap_or(0),
            memory_anon_mean_bytes: self.split_mean(|s| s.0),
            memory_file_mean_bytes: self.split_mean(|s| s.1),
            replicas: None,
            unmeasured: Vec::new(),
            window_s: round_to(dt, 3),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn reading(started_ms: u64, t: f64, cpu_s: f64) -> Counters {
        serde_json::from_value(serde_json::json!({
            "agent": {"name": "autoperf-agent", "version": "0", "started_ms": started_ms},
            "timestamp_ms": 0, "monotonic_s": t,
            "host": {"cores": 4, "clk_tck": 100, "cpu": {"busy_s": cpu_s, "total_s": 4.0 * t,
                     "steal_s": cpu_s / 10.0},
                     "net": {}, "disk": {}},
            "processes": {"web": {"cpu_s": cpu_s, "utime_s": cpu_s, "stime_s": 0.0,
                "read_bytes": null, "write_bytes": null, "rchar": null, "wchar": null,
                "processes": 2, "threads": 2, "departed": 0, "cpu_wait_s": cpu_s / 2.0,
                "rss_bytes": (cpu_s * 1e6) as u64,
                "sched_cpu_s": cpu_s}}
        }))
        .unwrap()
    }

    #[test]
    fn a_restarted_agent_is_never_compared_with_its_predecessor() {
        let server = ServerSpec {
            tier: "web".into(),
            agent: "http://127.0.0.1:1".into(),
            processes: vec!["web".into()],
            by: Default::default(),
            cores: None,
            token: None,
            prometheus: None,
        };
        // Half a core busy throughout. The first agent counted 10 s of a
        // worker that left; the restarted one never knew it, so its totals
        // start lower: comparing across would give 0, not 0.5 cores.
        let readings = [
            reading(1, 100.0, 20.0),
            reading(1, 102.0, 21.0),
            // (down from 102 s to 106 s: that interval spans the restart and
            // is left out)
            reading(2, 106.0, 13.0),
            reading(2, 108.0, 14.0),
            reading(2, 110.0, 15.0),
        ];
        // 100 requests a second on the load generator's clock, which
        // starts at `zero` where the agents' clock says 100 s.
        let zero = Instant::now();
        let at = |c: &Counters| zero + Duration::from_secs_f64(c.monotonic_s - 100.0);
        let completed = |from: Instant, to: Instant| 100.0 * (to - from).as_secs_f64();
        let answered: Vec<(Instant, &Counters)> = readings.iter().map(|c| (at(c), c)).collect();
        let (window, restarted) = Window::over(&server, &answered, &completed);
        assert!(restarted);
        assert_eq!(window.dt, 6.0);
        let usage = window.usage(&server, "a", 4);
        assert_eq!(usage.cpu_util_cores, 0.5);
        assert_eq!(usage.cpu_ms_per_request["web"], 5.0);
        assert_eq!(usage.host_cpu_util_cores, 0.5);
        assert_eq!(usage.window_s, 6.0);
        // Waiting half as long as it ran: a third of its ready time.
        assert_eq!(usage.cpu_wait_share_per_process["web"], 0.3333);
        assert_eq!(usage.host_steal_cores, 0.05);

        // One agent throughout, a reading missing: the gap is bridged.
        let steady = [
            reading(1, 100.0, 20.0),
            reading(1, 104.0, 22.0),
            reading(1, 106.0, 23.0),
        ];
        let answered: Vec<(Instant, &Counters)> = steady.iter().map(|c| (at(c), c)).collect();
        let (window, restarted) = Window::over(&server, &answered, &completed);
        assert!(!restarted);
        let usage = window.usage(&server, "a", 4);
        assert_eq!(usage.cpu_util_cores, 0.5);
        assert_eq!(usage.cpu_ms_per_request["web"], 5.0);
        // Its intervals: 4 s and 2 s, half a core, 5 ms a request each.
        let rows: Vec<(f64, f64, f64)> = window
            .intervals
            .iter()
            .map(|i| (i.end_s, i.requests, i.cpu_s / i.dt))
            .collect();
        assert_eq!(rows, [(4.0, 400.0, 0.5), (6.0, 200.0, 0.5)]);
        // Memory at each of the three readings: 20, 22 and 23 MB.
        let usage = window.usage(&server, "a", 4);
        assert_eq!(usage.memory_max_bytes, 23_000_000);
        assert_eq!(usage.memory_mean_bytes, 21_666_666);
    }
}
