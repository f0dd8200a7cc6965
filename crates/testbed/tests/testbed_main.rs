//! `autoperf testbed`'s body: starts both tiers, and stops them cleanly on
//! SIGTERM. Alone in its binary, because it signals the test process.

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

#[test]
fn stops_both_tiers_on_sigterm() {
    let exe = tier_exe();
    let runner = std::thread::spawn(move || testbed_main(exe, TestbedOptions::default()));

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

    // SAFETY: signals this process, whose SIGTERM testbed_main now handles.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let result = runner.join().unwrap();
    assert!(result.is_ok(), "{result:?}");
    for (pid, name) in tiers {
        assert!(!alive(pid), "{name} ({pid}) still running");
    }
}
