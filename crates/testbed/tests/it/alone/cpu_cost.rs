//! The CPU cost of `/cpu` in process: the whole test process's CPU time grows
//! by what the requests ask for. Run alone (see main.rs), so that no other
//! test's CPU is counted.

use std::time::Duration;

use crate::common::{threads_cpu, Conn, Tiers};
use hyper::StatusCode;

/// User + system CPU time of this whole process.
fn process_cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[tokio::test(flavor = "current_thread")]
async fn cpu_requests_cost_what_they_ask() {
    let tiers = Tiers::start(2, 1).await;
    let mut web = Conn::open(tiers.web).await;
    // Warm the connection and the lazily initialised parts of both sides.
    for _ in 0..5 {
        assert_eq!(web.get("/cpu?ms=0.1").await.status, StatusCode::OK);
    }

    let requests = 100;
    let (process_before, burn_before) = (process_cpu(), threads_cpu("web-worker"));
    for _ in 0..requests {
        assert_eq!(web.get("/cpu?ms=2").await.status, StatusCode::OK);
    }
    let process = process_cpu() - process_before;
    let burned = threads_cpu("web-worker") - burn_before;
    let expected = Duration::from_millis(2) * requests;
    eprintln!("{requests} x /cpu?ms=2: process CPU {process:?}, of which the web workers {burned:?}; expected {expected:?}");
    // The workers spend what was asked, their handling of the requests
    // included (burn.rs's ledger). The ledger's window is shifted by one
    // request: the first burn here takes off the handling done before the
    // window (the warm-up's last reply), and the last reply's handling falls
    // inside it. The two differ by microseconds, either way.
    let slack = expected.mul_f64(0.01);
    assert!(burned >= expected - slack, "{burned:?} < {expected:?} - 1%");
    assert!(burned <= expected + slack, "{burned:?} > {expected:?} + 1%");
    // The rest is the client's HTTP work on this thread: about 10 % in a
    // debug build, a few % in release.
    assert!(
        process <= expected.mul_f64(1.25),
        "{process:?} > {expected:?} + 25%"
    );
    tiers.stop().await;
}
