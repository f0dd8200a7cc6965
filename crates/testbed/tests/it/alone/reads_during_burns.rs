//! A burn blocks its own event loop and no other: while one loop burns,
//! the connections pinned to another are served, and those pinned to the
//! burning loop wait, as behind a busy pre-fork worker (see burn.rs).
//! Run alone (see main.rs), so that the CPU of the web workers it watches
//! is its tier's alone.

use std::time::{Duration, Instant};

use crate::common::{threads_cpu, Conn, Tiers};
use hyper::StatusCode;

const BURN: Duration = Duration::from_millis(1000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burn_blocks_only_its_own_loop() {
    let tiers = Tiers::start(2, 1).await;
    // Three connections, kept open and used once so that each is pinned
    // before the burn: least-connections puts them on loops 0, 1, and 0
    // again (a tie goes round-robin).
    let mut burner = Conn::open(tiers.web).await;
    let mut other_loop = Conn::open(tiers.web).await;
    let mut same_loop = Conn::open(tiers.web).await;
    for conn in [&mut burner, &mut other_loop, &mut same_loop] {
        assert_eq!(conn.get("/health").await.status, StatusCode::OK);
    }
    let before = threads_cpu("web-worker");
    let long = tokio::spawn(async move {
        let r = burner.get(&format!("/cpu?ms={}", BURN.as_millis())).await;
        assert_eq!(r.status, StatusCode::OK);
        Instant::now()
    });
    // Until the burn is well under way.
    while threads_cpu("web-worker").saturating_sub(before) < Duration::from_millis(100) {
        assert!(!long.is_finished(), "the burn ended before it began");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The burning loop's other connection: its request is read and answered
    // only once the burn is over.
    let waiting = tokio::spawn(async move {
        assert_eq!(same_loop.get("/health").await.status, StatusCode::OK);
        threads_cpu("web-worker").saturating_sub(before)
    });
    let start = Instant::now();
    let mut answered = Vec::new();
    // Well inside the rest of the burn, at least 0.9 s of wall time.
    while start.elapsed() < Duration::from_millis(400) {
        assert_eq!(other_loop.get("/health").await.status, StatusCode::OK);
        answered.push(Instant::now());
    }
    let long_done = long.await.unwrap();
    let late = answered.iter().filter(|&&at| at >= long_done).count();
    assert_eq!(
        late,
        0,
        "{late} of {} health checks on the other loop waited for the burn to end",
        answered.len()
    );
    // Answered after the whole burn had run on the workers' threads.
    let burned = waiting.await.unwrap();
    assert!(
        burned >= BURN,
        "the burning loop answered its other connection after {burned:?} of burn"
    );
    tiers.stop().await;
}
