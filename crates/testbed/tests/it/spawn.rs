//! The testbed as child processes: names, costs seen from /proc, shutdown.

use crate::common;
use std::time::Duration;

use crate::common::process::{alive, comm, proc_cpu, proc_io, tier_exe};
use crate::common::Conn;
use autoperf_testbed::{Testbed, TestbedOptions};
use hyper::{Method, StatusCode};

fn options(web_workers: usize, db_workers: usize) -> TestbedOptions {
    TestbedOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        web_workers,
        db_workers,
        ..Default::default()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn tiers_are_named_processes_that_stop() {
    let mut testbed = Testbed::spawn(tier_exe(), &options(1, 1)).unwrap();
    assert_eq!(comm(testbed.web_pid), "tb-web");
    assert_eq!(comm(testbed.db_pid), "tb-db");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", testbed.web_pid)).unwrap();
    assert!(
        cmdline.starts_with(b"tb-web\0tier\0web\0"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    assert!(testbed.web_url.starts_with("http://127.0.0.1:"));
    assert_eq!(testbed.web_url, format!("http://{}", testbed.web_addr));

    let mut web = Conn::open(testbed.web_addr).await;
    assert_eq!(web.get("/health").await.status, StatusCode::OK);
    assert_eq!(web.get("/db?web_ms=1&db_ms=1").await.status, StatusCode::OK);
    assert_eq!(
        common::get(testbed.db_addr, "/health").await.status,
        StatusCode::OK
    );
    drop(web);

    let (web_pid, db_pid) = (testbed.web_pid, testbed.db_pid);
    let started = std::time::Instant::now();
    testbed.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "SIGTERM was enough: {:?}",
        started.elapsed()
    );
    assert!(!alive(web_pid) && !alive(db_pid));
    testbed.shutdown();
}

#[tokio::test(flavor = "current_thread")]
async fn tiers_cost_what_requests_ask() {
    let testbed = Testbed::spawn(tier_exe(), &options(2, 2)).unwrap();
    let mut web = Conn::open(testbed.web_addr).await;
    web.get("/db?web_ms=0.1&db_ms=0.1").await; // warm the web → db pool

    let requests = 150u32;
    let before = proc_cpu(testbed.web_pid);
    for _ in 0..requests {
        assert_eq!(web.get("/cpu?ms=2").await.status, StatusCode::OK);
    }
    let web_cpu = proc_cpu(testbed.web_pid) - before;
    eprintln!(
        "tb-web: {requests} x /cpu?ms=2 cost {web_cpu:?}, {:?} per request",
        web_cpu / requests
    );
    within_10_percent(web_cpu, Duration::from_millis(2) * requests);

    let (web_before, db_before) = (proc_cpu(testbed.web_pid), proc_cpu(testbed.db_pid));
    for _ in 0..requests {
        assert_eq!(web.get("/db?web_ms=1&db_ms=3").await.status, StatusCode::OK);
    }
    let web_cpu = proc_cpu(testbed.web_pid) - web_before;
    let db_cpu = proc_cpu(testbed.db_pid) - db_before;
    eprintln!(
        "{requests} x /db?web_ms=1&db_ms=3: tb-web {web_cpu:?} ({:?} per request), tb-db {db_cpu:?} ({:?} per request)",
        web_cpu / requests,
        db_cpu / requests
    );
    within_10_percent(db_cpu, Duration::from_millis(3) * requests);
    // The web tier also runs the client side of the call to db, which costs
    // a few hundred microseconds in a debug build: a looser bound.
    assert!(
        web_cpu >= Duration::from_millis(1) * requests * 9 / 10,
        "{web_cpu:?}"
    );
    assert!(
        web_cpu <= Duration::from_micros(1600) * requests,
        "{web_cpu:?}"
    );
}

fn within_10_percent(measured: Duration, expected: Duration) {
    assert!(
        measured >= expected.mul_f64(0.9),
        "{measured:?} < {expected:?} - 10%"
    );
    assert!(
        measured <= expected.mul_f64(1.1),
        "{measured:?} > {expected:?} + 10%"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn lock_writes_reach_the_io_accounting() {
    let testbed = Testbed::spawn(tier_exe(), &options(1, 1)).unwrap();
    let mut web = Conn::open(testbed.web_addr).await;
    let (requests, bytes) = (50u64, 8192u64);
    let (wchar, write_bytes) = (
        proc_io(testbed.web_pid, "wchar"),
        proc_io(testbed.web_pid, "write_bytes"),
    );
    for _ in 0..requests {
        let r = web
            .send(Method::POST, &format!("/lock?ms=1&bytes={bytes}"), &[], "")
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let wchar = proc_io(testbed.web_pid, "wchar") - wchar;
    let write_bytes = proc_io(testbed.web_pid, "write_bytes") - write_bytes;
    let expected = requests * bytes;
    eprintln!(
        "tb-web: {requests} x {bytes} bytes written: wchar +{wchar}, write_bytes +{write_bytes}"
    );
    // wchar counts every write(2), the socket's included.
    assert!(wchar >= expected, "wchar +{wchar} < {expected}");
    // write_bytes counts page-cache pages dirtied, when the file system
    // accounts them (ext4, xfs; not tmpfs).
    assert!(
        write_bytes >= expected * 9 / 10,
        "write_bytes +{write_bytes} < {expected} - 10%"
    );
    assert!(
        write_bytes <= expected * 11 / 10 + 4096,
        "write_bytes +{write_bytes} > {expected} + 10%"
    );
}

#[test]
fn a_tier_that_dies_at_start_is_reported_with_its_stderr() {
    let sh = std::path::Path::new("/bin/sh");
    // `sh tier db --listen …` fails to open the script `tier`, on stderr.
    let err = Testbed::spawn(sh, &options(1, 1)).unwrap_err().to_string();
    assert!(err.starts_with("tb-db exited before listening"), "{err}");
    assert!(err.contains("tier"), "stderr is included: {err}");

    let err = Testbed::spawn(
        std::path::Path::new("/nonexistent/autoperf"),
        &options(1, 1),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("starting tb-db"), "{err:#}");
}
