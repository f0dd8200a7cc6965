//! Finding the tier binary, and reading /proc for the spawned tiers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The `tier` example, which stands in for `autoperf tier …`. `cargo test`
/// builds examples; a filtered run (`--test spawn`) may not have, so build it.
pub fn tier_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let test_exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/<test> → target/<profile>
        let profile_dir = test_exe.parent().unwrap().parent().unwrap();
        let exe = profile_dir.join("examples").join("tier");
        if !exe.exists() {
            let mut cargo = Command::new(env!("CARGO"));
            cargo
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "autoperf-testbed",
                    "--example",
                    "tier",
                    "--target-dir",
                ])
                .arg(profile_dir.parent().unwrap());
            if profile_dir.file_name().unwrap() == "release" {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("running cargo build --example tier");
            assert!(status.success(), "cargo build --example tier: {status}");
        }
        exe
    })
}

/// /proc/PID/comm without its newline.
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

/// utime + stime of a process, from /proc/PID/stat (clock-tick resolution).
pub fn proc_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // The command name may contain spaces; the fields after it do not.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // Fields 14 and 15 of proc(5); `fields` starts at field 3.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// A field of /proc/PID/io, such as `write_bytes`.
pub fn proc_io(pid: u32, field: &str) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("read /proc/PID/io");
    io.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(": ")?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/io"))
}

/// Whether a process exists (and is not a zombie awaiting its parent).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat[stat.rfind(')').unwrap()..].starts_with(") Z"),
        Err(_) => false,
    }
}
