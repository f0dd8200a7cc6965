//! `ProcFs` over a /proc tree built by the test: matching by comm and by
//! command line, unreadable io, and the host files.

use std::fs;
use std::path::{Path, PathBuf};

use autoperf_agent::api::MatchMode;
use autoperf_agent::groups::GroupKey;
use autoperf_agent::scan::ProcFs;

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "autoperf-agent-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn process(root: &Path, pid: u32, comm: &str, utime: u64, cmdline: &[&str], io: bool) {
    let dir = root.join(pid.to_string());
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("stat"),
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {utime} 5 0 0 20 0 3 0 {} 1 1\n",
            pid * 10
        ),
    )
    .unwrap();
    let mut argv = cmdline.join("\0");
    argv.push('\0');
    fs::write(dir.join("cmdline"), argv).unwrap();
    if io {
        fs::write(
            dir.join("io"),
            "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n",
        )
        .unwrap();
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn key(mode: MatchMode, name: &str) -> GroupKey {
    GroupKey {
        mode,
        name: name.to_string(),
    }
}

#[test]
fn scan_matches_by_comm_and_by_cmdline() {
    let tmp = TempDir::new("scan");
    let root = &tmp.0;
    process(
        root,
        100,
        "tb-web",
        50,
        &["/usr/bin/tb-web", "--workers", "2"],
        true,
    );
    process(
        root,
        101,
        "tb-web",
        70,
        &["/usr/bin/tb-web", "--worker"],
        false,
    );
    process(
        root,
        200,
        "a) (b",
        1,
        &["python3", "-m", "shop.server"],
        true,
    );
    // Kernel truncates comm to 15 bytes.
    process(
        root,
        300,
        "very-long-serve",
        9,
        &["very-long-server-name"],
        true,
    );
    fs::create_dir_all(root.join("self")).unwrap();
    fs::create_dir_all(root.join("999")).unwrap(); // vanished: no stat

    let keys = [
        key(MatchMode::Comm, "tb-web"),
        key(MatchMode::Comm, "a) (b"),
        key(MatchMode::Cmdline, "-m shop.server"),
        key(MatchMode::Comm, "very-long-server-name"),
        key(MatchMode::Comm, "nobody"),
    ];
    let found = ProcFs::new(root).scan(&keys);

    let mut web = found[&keys[0]].clone();
    web.sort_by_key(|s| s.pid);
    assert_eq!(web.len(), 2);
    assert_eq!((web[0].pid, web[0].utime, web[0].stime), (100, 50, 5));
    assert_eq!(web[0].starttime, 1000);
    assert_eq!(web[0].threads, 3);
    assert_eq!(web[0].io.unwrap().write_bytes, 8192);
    assert_eq!(web[1].io, None, "no io file");

    assert_eq!(found[&keys[1]][0].pid, 200);
    assert_eq!(found[&keys[2]][0].pid, 200, "argv joined with spaces");
    assert_eq!(found[&keys[3]][0].pid, 300);
    assert!(!found.contains_key(&keys[4]));
}

#[test]
fn host_counters_from_the_fixture_files() {
    let tmp = TempDir::new("host");
    let root = &tmp.0;
    fs::create_dir_all(root.join("net")).unwrap();
    fs::copy(fixture("proc_stat.txt"), root.join("stat")).unwrap();
    fs::copy(fixture("net_dev.txt"), root.join("net/dev")).unwrap();
    fs::copy(fixture("diskstats_partitions.txt"), root.join("diskstats")).unwrap();

    let host = ProcFs::new(root).host(100).unwrap();
    assert_eq!(host.cores, 2);
    assert_eq!(host.clk_tck, 100);
    assert!(
        (host.cpu.busy_s - 223.36).abs() < 1e-9,
        "{}",
        host.cpu.busy_s
    );
    assert!((host.cpu.total_s - (223.36 + 1915.31)).abs() < 1e-9);
    assert_eq!(host.net["eth0"].tx_bytes, 191699);
    assert_eq!(host.disk["sda"].read_bytes, 2000 * 512);
    assert!(!host.disk.contains_key("sda1"));

    // Only /proc/stat is required.
    fs::remove_file(root.join("diskstats")).unwrap();
    assert!(ProcFs::new(root).host(100).unwrap().disk.is_empty());
    fs::remove_file(root.join("stat")).unwrap();
    assert!(ProcFs::new(root).host(100).is_err());
}
