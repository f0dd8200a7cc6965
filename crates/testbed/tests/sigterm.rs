//! `autoperf testbed`'s body: starts both tiers, and stops them cleanly on
//! SIGTERM. Alone in its binary, because it signals the test process.

#[path = "it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use autoperf_testbed::{testbed_main, TestbedOptions};
use common::process::{alive, comm, tier_exe};

/// Children of this process, by name.
fn children() -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid = after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            found.push((pid, comm(pid)));
        }
    }
    found
}

/// `GET path` on a connection of its own, HTTP/1.0 so the server closes it;
/// the whole response.
fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

#[test]
fn stops_both_tiers_on_sigterm() {
    let exe = tier_exe();
    // A port free a moment ago: testbed_main prints the registry's address
    // only to stdout, which this test cannot read.
    let registry = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let options = TestbedOptions {
        schema_registry: Some(registry),
        ..Default::default()
    };
    let runner = std::thread::spawn(move || testbed_main(exe, options));

    let deadline = Instant::now() + Duration::from_secs(10);
    let tiers = loop {
        let tiers = children();
        if tiers.iter().any(|(_, name)| name == "tb-web") {
            break tiers;
        }
        assert!(Instant::now() < deadline, "no tb-web after 10 s: {tiers:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(tiers.iter().any(|(_, name)| name == "tb-db"), "{tiers:?}");
    // The registry was bound before the tiers were spawned.
    let subjects = http_get(registry, "/subjects");
    assert!(
        subjects.starts_with("HTTP/1.0 200") && subjects.ends_with("\r\n\r\n[]"),
        "{subjects}"
    );

    // SAFETY: signals this process, whose SIGTERM testbed_main now handles.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let result = runner.join().unwrap();
    assert!(result.is_ok(), "{result:?}");
    for (pid, name) in tiers {
        assert!(!alive(pid), "{name} ({pid}) still running");
    }
}
