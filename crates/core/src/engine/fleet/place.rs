//! Placement: how many generator processes a level (or one host's share
//! of it) needs on a host, and which source addresses they connect from.
//! Each process may keep only as many sockets open as its open-file limit
//! allows (often 20,000 and not raisable without privileges), and one
//! source address has only ~28,000 ephemeral ports toward one server port.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use super::Generators;
use crate::engine::error::EngineError;
use crate::protocol::HttpTransport;
use crate::scenario::{Endpoint, Scenario};

/// File descriptors a generator keeps for itself (runtime, pipes, results
/// files, agent connections), beyond one per connection.
const FD_RESERVE: u64 = 256;

/// Ephemeral ports left unused per source address (TIME_WAIT, other
/// programs on the host).
const PORT_RESERVE: u32 = 1_000;

/// How one level is spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub processes: u32,
    /// Source addresses, taken in turn by every shard's connections; empty:
    /// the OS chooses.
    pub addresses: Vec<IpAddr>,
    /// The addresses were chosen here (127.0.0.x), not given.
    automatic: bool,
    connections: u32,
    per_process: u64,
    pub(crate) program: Option<PathBuf>,
}

impl Placement {
    pub(crate) fn is_local(&self) -> bool {
        self.processes <= 1
    }

    /// What the live view says about a spread level (nothing for one
    /// process connecting from any address).
    pub(crate) fn note(&self) -> Option<String> {
        if self.is_local() && (self.addresses.is_empty() || self.automatic) {
            return None;
        }
        let from = if self.addresses.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self.addresses.iter().map(IpAddr::to_string).collect();
            format!(", connecting from {}", list.join(", "))
        };
        let connections = match self.connections {
            0 => String::new(),
            n => format!("{n} connections: "),
        };
        Some(format!(
            "{connections}{} generator process{} (one holds at most {} under its open-file limit){from}",
            self.processes,
            if self.processes == 1 { "" } else { "es" },
            self.per_process,
        ))
    }
}

/// Chooses processes and source addresses for a level of `connections`.
pub fn place(
    scenario: &Scenario,
    connections: u32,
    generators: &Generators,
) -> Result<Placement, EngineError> {
    let (target, connections) = match &scenario.target.endpoint {
        Endpoint::Http(base) => (
            HttpTransport::new(scenario, base).map(|t| t.addr()).ok(),
            connections,
        ),
        // One producer per shard, whatever the users: nothing to spread.
        #[allow(unreachable_patterns)]
        _ => (None, 0),
    };
    // A typo in --local-addresses would otherwise cost a whole level of
    // connect errors.
    for &ip in &generators.local_addresses {
        if let Err(e) = std::net::TcpListener::bind((ip, 0)) {
            return Err(EngineError::Placement(format!(
                "cannot connect from {ip}: {e} (--local-addresses takes addresses of this host)"
            )));
        }
    }
    plan(connections, target, Limits::here(), generators)
}

/// What bounds one generator process on a host (a worker reports its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub open_files: u64,
    /// Ephemeral ports per source address toward one server port.
    pub ports: u32,
}

impl Limits {
    /// This host's, for this process.
    pub(crate) fn here() -> Limits {
        Limits {
            open_files: open_file_limit(),
            ports: ephemeral_ports(),
        }
    }
}

/// Generator processes started by themselves at most.
pub const MAX_PROCESSES: u32 = 64;

/// Chooses processes and source addresses for `connections` on a host
/// bounded by `limits` (the target's address decides whether loopback
/// addresses may be added).
pub fn plan(
    connections: u32,
    target: Option<std::net::SocketAddr>,
    limits: Limits,
    generators: &Generators,
) -> Result<Placement, EngineError> {
    let limit = limits.open_files;
    let per_process = limit.saturating_sub(FD_RESERVE).max(1);
    let ports = limits.ports.saturating_sub(PORT_RESERVE).max(1);
    let need = |room: u64| (u64::from(connections).div_ceil(room)).max(1) as u32;
    let processes = generators.processes.unwrap_or(1).max(need(per_process));
    if processes > 1 && generators.program.is_none() {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections, more than one process may hold ({per_process} under its open-file limit of {limit}); run it with the autoperf command, which spreads it over generator processes"
        )));
    }
    if processes > MAX_PROCESSES {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections: {processes} generator processes of {per_process} each (open-file limit {limit}), more than the {MAX_PROCESSES} autoperf starts; raise the hard open-file limit or run fewer users"
        )));
    }
    let loopback = matches!(target.map(|a| a.ip()), Some(IpAddr::V4(ip)) if ip.is_loopback());
    let fast = fast_ports(limits.ports);
    let (addresses, automatic) = if !generators.local_addresses.is_empty() {
        (generators.local_addresses.clone(), false)
    } else if loopback && need(u64::from(fast)) > 1 {
        // Every 127.0.0.0/8 address is this host's: plenty to spare, so
        // each carries only what it can connect quickly.
        let count = need(u64::from(fast)).min(254);
        let addresses = (1..=count)
            .map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 0, i as u8)))
            .collect();
        (addresses, true)
    } else if need(u64::from(ports)) > 1 {
        return Err(EngineError::Placement(format!(
            "the level needs {connections} connections, but one source address has only about {ports} ephemeral ports toward {}; give several local addresses of this host with --local-addresses",
            target.map_or("the target".to_string(), |a| a.to_string())
        )));
    } else {
        (Vec::new(), false)
    };
    // Every shard deals its connections over all the addresses in turn, so
    // each address carries an equal share.
    if !addresses.is_empty() {
        let each = u64::from(connections).div_ceil(addresses.len() as u64);
        if each > u64::from(ports) {
            return Err(EngineError::Placement(format!(
                "{connections} connections over {} source addresses is {each} each, more than the about {ports} ephemeral ports one address has toward one server port; give more local addresses with --local-addresses",
                addresses.len()
            )));
        }
    }
    Ok(Placement {
        processes,
        addresses,
        automatic,
        connections,
        per_process,
        program: generators.program.clone(),
    })
}

/// The soft limit on open files (raised to the hard one at start-up).
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// Raises the soft open-file limit to the hard one: every connection is a
/// file descriptor, and the default soft limit (often 1,024) is far below
/// what a load generator needs. Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit read and write only the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        }
    }
    open_file_limit()
}

/// Connections one source address takes toward one server port without
/// slowing down. Linux's connect() gives out the even half of the port range
/// first and, once it is full, scans it port by port under a lock before
/// trying the odd half: past about half the range every connect costs a
/// scan of thousands of ports in the kernel, on the shard's thread (18,000
/// users from 127.0.0.1 stalled all responses for 4 s; from two addresses,
/// p99 stayed 2 ms).
fn fast_ports(ports: u32) -> u32 {
    ports * 7 / 20
}

/// Ports the kernel hands out for outgoing connections from one address.
fn ephemeral_ports() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u32>().ok());
            let (lo, hi) = (it.next()??, it.next()??);
            Some(hi.saturating_sub(lo) + 1)
        })
        .unwrap_or(28_232)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: Limits = Limits {
        open_files: 20_000,
        ports: 28_232,
    };

    fn with_program() -> Generators {
        Generators {
            program: Some(PathBuf::from("autoperf")),
            ..Generators::default()
        }
    }

    fn loopback() -> Option<std::net::SocketAddr> {
        Some("127.0.0.1:8080".parse().unwrap())
    }

    #[test]
    fn a_loopback_level_past_half_the_port_range_takes_a_second_address() {
        let p = plan(18_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!(p.processes, 1);
        assert_eq!(p.addresses.len(), 2);
        assert!(p.note().is_none(), "nothing to say for one process");
    }

    #[test]
    fn a_small_level_stays_in_this_process() {
        let p = plan(5_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!((p.processes, p.addresses.len()), (1, 0));
        assert!(p.is_local() && p.note().is_none());
    }

    #[test]
    fn fifty_thousand_users_spread_over_processes_and_loopback_addresses() {
        let p = plan(50_000, loopback(), HERE, &with_program()).unwrap();
        assert_eq!(p.processes, 3, "19,744 connections per process at most");
        let want: Vec<IpAddr> = (1..=6)
            .map(|i| format!("127.0.0.{i}").parse().unwrap())
            .collect();
        assert_eq!(p.addresses, want, "at most 9,881 connections per address");
        let note = p.note().unwrap();
        assert!(
            note.contains("3 generator processes") && note.contains("127.0.0.6"),
            "{note}"
        );
    }

    #[test]
    fn without_the_binary_a_level_too_big_for_one_process_is_refused() {
        let e = plan(50_000, loopback(), HERE, &Generators::default()).unwrap_err();
        assert!(e.to_string().contains("open-file limit of 20000"), "{e}");
    }

    #[test]
    fn too_few_ports_toward_a_remote_target_asks_for_local_addresses() {
        let remote = Some("10.0.0.5:80".parse().unwrap());
        let e = plan(50_000, remote, HERE, &with_program()).unwrap_err();
        assert!(e.to_string().contains("--local-addresses"), "{e}");
        let two = Generators {
            local_addresses: vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            ..with_program()
        };
        let p = plan(50_000, remote, HERE, &two).unwrap();
        assert_eq!(p.addresses.len(), 2);
        let one = Generators {
            local_addresses: vec!["10.0.0.1".parse().unwrap()],
            ..with_program()
        };
        let e = plan(50_000, remote, HERE, &one).unwrap_err();
        assert!(
            e.to_string()
                .contains("over 1 source addresses is 50000 each"),
            "{e}"
        );
    }

    #[test]
    fn asked_for_processes_are_started_even_for_a_small_level() {
        let g = Generators {
            processes: Some(2),
            ..with_program()
        };
        let p = plan(10, loopback(), HERE, &g).unwrap();
        assert_eq!(p.processes, 2);
        assert!(!p.is_local());
    }
}
