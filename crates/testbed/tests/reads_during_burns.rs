//! Requests are read while every worker burns: a thread that blocks in a
//! burn must not be the one left holding tokio's I/O driver (see burn.rs).
//! One test in this binary, so that the CPU of the web workers it watches is
//! its tier's alone.

mod common;

use std::time::{Duration, Instant};

use common::{threads_cpu, Conn, Tiers};
use hyper::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_read_while_a_burn_runs() {
    // The one worker's burn takes the only permit; a thread that blocks in a
    // burn must not be left holding the I/O driver, or nothing is read until
    // the burn ends.
    let tiers = Tiers::start(1, 1).await;
    // Both connections first, and used once: a new connection is handed to
    // the workers in a way that wakes a sleeping one, which would hide the
    // fault this test is for.
    let mut burner = Conn::open(tiers.web).await;
    let mut health = Conn::open(tiers.web).await;
    assert_eq!(burner.get("/health").await.status, StatusCode::OK);
    assert_eq!(health.get("/health").await.status, StatusCode::OK);
    let before = threads_cpu("web-worker");
    let long = tokio::spawn(async move {
        let r = burner.get("/cpu?ms=1000").await;
        assert_eq!(r.status, StatusCode::OK);
        Instant::now()
    });
    // Until the burn is well under way, and the request in it alone.
    while threads_cpu("web-worker").saturating_sub(before) < Duration::from_millis(100) {
        assert!(!long.is_finished(), "the burn ended before it began");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let start = Instant::now();
    let mut answered = Vec::new();
    // Well inside the rest of the burn, at least 0.9 s of wall time.
    while start.elapsed() < Duration::from_millis(400) {
        assert_eq!(health.get("/health").await.status, StatusCode::OK);
        answered.push(Instant::now());
    }
    let long_done = long.await.unwrap();
    let late = answered.iter().filter(|&&at| at >= long_done).count();
    assert_eq!(
        late,
        0,
        "{late} of {} health checks waited for the burn to end",
        answered.len()
    );
    tiers.stop().await;
}
