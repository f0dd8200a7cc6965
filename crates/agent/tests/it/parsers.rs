//! The /proc parsers on files captured from a real host, plus hand-made
//! edge cases (a comm with spaces and parentheses, partitions).

use autoperf_agent::procfs::{
    parse_cpu_stat, parse_diskstats, parse_net_dev, parse_pid_io, parse_pid_stat, DiskBytes,
    NetBytes,
};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn stat_of_a_busy_shell() {
    let s = parse_pid_stat(&fixture("stat_busy_sh.txt")).unwrap();
    assert_eq!(s.pid, 9283);
    assert_eq!(s.comm, "sh");
    assert_eq!(s.state, 'S');
    assert_eq!((s.utime, s.stime), (61, 2));
    assert_eq!(s.num_threads, 1);
    assert_eq!(s.starttime, 109530);
    assert_eq!(s.rss_pages, 493);
}

#[test]
fn stat_with_spaces_and_parentheses_in_comm() {
    // Captured from a copy of sleep named "tb) (web x".
    let s = parse_pid_stat(&fixture("stat_odd_comm.txt")).unwrap();
    assert_eq!(s.pid, 8859);
    assert_eq!(s.comm, "tb) (web x");
    assert_eq!(s.state, 'S');
    assert_eq!((s.utime, s.stime, s.num_threads), (0, 0, 1));
    assert_eq!(s.starttime, 107235);
}

#[test]
fn io_counters() {
    let io = parse_pid_io(&fixture("io.txt")).unwrap();
    assert_eq!(io.rchar, 127130);
    assert_eq!(io.wchar, 1529198);
    assert_eq!(io.read_bytes, 208896);
    assert_eq!(io.write_bytes, 1458176);
}

#[test]
fn host_cpu_times() {
    let s = parse_cpu_stat(&fixture("proc_stat.txt")).unwrap();
    // cpu  17953 0 4327 191120 411 0 36 20 0 0
    assert_eq!(s.busy, 17953 + 4327 + 36 + 20);
    assert_eq!(s.idle, 191120 + 411);
    assert_eq!(s.total(), s.busy + s.idle);
    assert_eq!(s.cpus, 2);
}

#[test]
fn network_bytes_per_interface() {
    let net = parse_net_dev(&fixture("net_dev.txt"));
    assert_eq!(
        net.keys().map(String::as_str).collect::<Vec<_>>(),
        ["eth0", "ifb0", "ifb1", "lo"]
    );
    assert_eq!(
        net["eth0"],
        NetBytes {
            rx_bytes: 63067672,
            tx_bytes: 191699
        }
    );
    assert_eq!(net["lo"].rx_bytes, 3193);
}

#[test]
fn disk_bytes_skip_loop_and_zram() {
    let disk = parse_diskstats(&fixture("diskstats.txt"));
    assert_eq!(disk.keys().map(String::as_str).collect::<Vec<_>>(), ["vda"]);
    assert_eq!(
        disk["vda"],
        DiskBytes {
            read_bytes: 3630722 * 512,
            write_bytes: 2590912 * 512
        }
    );
}

#[test]
fn disk_bytes_skip_partitions_of_listed_disks() {
    let disk = parse_diskstats(&fixture("diskstats_partitions.txt"));
    assert_eq!(
        disk.keys().map(String::as_str).collect::<Vec<_>>(),
        // sdb1's disk is not listed, so it is the only record of that disk.
        ["dm-0", "mmcblk0", "nvme0n1", "sda", "sdb1", "sr0"]
    );
    assert_eq!(disk["nvme0n1"].read_bytes, 17398214 * 512);
    assert_eq!(disk["sda"].write_bytes, 4000 * 512);
}

#[test]
fn malformed_input_is_an_error_or_skipped_never_a_panic() {
    assert!(parse_pid_stat("").is_err());
    assert!(parse_pid_stat("1 (x").is_err());
    assert!(parse_pid_io("").is_err());
    assert!(parse_cpu_stat("").is_err());
    assert!(parse_cpu_stat("cpu  a b c").is_err());
    assert!(parse_net_dev("h1\nh2\n eth0: 1 2\nbad line\n").is_empty());
    assert!(parse_diskstats("8 0 sda x y z\n\n").is_empty());
}
