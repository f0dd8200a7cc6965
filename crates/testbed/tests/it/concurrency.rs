//! The concurrency model: CPU burns are limited to the tier's workers (one
//! event loop each), while sleeping holds no worker and the lock serialises
//! (and, in reads_during_burns.rs, a burn blocks only its own loop).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{send, Conn, Tiers};
use hyper::{Method, StatusCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_caps_cpu_throughput() {
    let tiers = Tiers::start(1, 1).await;
    let done = Arc::new(AtomicU64::new(0));
    let window = Duration::from_secs(1);
    let start = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let done = Arc::clone(&done);
            let web = tiers.web;
            tokio::spawn(async move {
                let mut conn = Conn::open(web).await;
                while start.elapsed() < window {
                    let r = conn.get("/cpu?ms=5").await;
                    assert_eq!(r.status, StatusCode::OK);
                    if start.elapsed() <= window {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let rate = done.load(Ordering::Relaxed) as f64 / window.as_secs_f64();
    eprintln!("1 web worker, 8 clients, /cpu?ms=5: {rate} req/s");
    // One worker burning 5 ms per request completes at most 200 per second.
    assert!(rate <= 210.0, "{rate} req/s with one worker");
    assert!(rate >= 50.0, "{rate} req/s: the worker hardly ran");
    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_holds_no_worker() {
    let tiers = Tiers::start(1, 1).await;
    let start = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let web = tiers.web;
            tokio::spawn(async move { Conn::open(web).await.get("/sleep?ms=200").await.status })
        })
        .collect();
    for client in clients {
        assert_eq!(client.await.unwrap(), StatusCode::OK);
    }
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    // Serialised on the one worker they could not take less than 1.6 s,
    // however fast the machine; side by side they take 200 ms and what a
    // busy machine adds.
    assert!(elapsed < Duration::from_millis(1600), "{elapsed:?}");
    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_serialises() {
    let tiers = Tiers::start(2, 1).await;
    let start = Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let web = tiers.web;
            tokio::spawn(async move {
                send(web, Method::POST, "/lock?ms=50&bytes=100", &[], "")
                    .await
                    .status
            })
        })
        .collect();
    for client in clients {
        assert_eq!(client.await.unwrap(), StatusCode::OK);
    }
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    tiers.stop().await;
}
