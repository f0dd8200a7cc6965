//! Every endpoint of both tiers, in process over real HTTP on loopback.

use std::time::{Duration, Instant};

use crate::common::{get, send, Conn, Tiers};
use hyper::{Method, StatusCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_cpu_sleep_db_and_errors() {
    let tiers = Tiers::start(2, 2).await;
    let mut web = Conn::open(tiers.web).await;

    let r = web.get("/health").await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "ok\n"));
    assert_eq!(get(tiers.db, "/health").await.status, StatusCode::OK);

    // One keep-alive connection carries all of these.
    for path in [
        "/cpu?ms=1",
        "/cpu?ms=0.5",
        "/cpu?ms=0",
        "/sleep?ms=5",
        "/db?web_ms=1&db_ms=2",
        "/db",
    ] {
        let r = web.get(path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
    }
    assert_eq!(get(tiers.db, "/burn?ms=1").await.status, StatusCode::OK);

    for path in [
        "/cpu",
        "/cpu?ms=-1",
        "/cpu?ms=abc",
        "/cpu?ms=1e9",
        "/sleep",
        "/db?web_ms=x",
        "/bytes",
        "/bytes?n=-3",
    ] {
        let r = web.get(path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        let reason = r.text();
        assert!(
            reason.ends_with('\n') && reason.lines().count() == 1,
            "{path}: {reason:?}"
        );
    }
    assert_eq!(
        web.get("/cpu?ms=abc").await.text(),
        "query parameter ms=abc: expected milliseconds between 0 and 10000\n"
    );
    assert_eq!(
        get(tiers.db, "/burn?ms=z").await.status,
        StatusCode::BAD_REQUEST
    );

    assert_eq!(web.get("/nope").await.status, StatusCode::NOT_FOUND);
    assert_eq!(web.get("/static/").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        get(tiers.db, "/cpu?ms=1").await.status,
        StatusCode::NOT_FOUND
    );
    let r = web.send(Method::POST, "/cpu?ms=1", &[], "").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers["allow"], "GET");
    assert_eq!(
        web.get("/lock?ms=1").await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );

    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_without_db_tier_is_unavailable_and_dead_db_is_bad_gateway() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web = listener.local_addr().unwrap();
    // A port nobody listens on: bind, note it, close.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = autoperf_testbed::WebConfig {
        workers: 1,
        db: Some(dead),
        ..Default::default()
    };
    let server = tokio::spawn(autoperf_testbed::serve_web(listener, config, async {
        let _ = stopped.await;
    }));
    let r = get(web, "/db?db_ms=1").await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
    assert!(r.text().starts_with("db tier unreachable"), "{}", r.text());
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = autoperf_testbed::WebConfig {
        workers: 1,
        db: None,
        ..Default::default()
    };
    let server = tokio::spawn(autoperf_testbed::serve_web(listener, config, async {
        let _ = stopped.await;
    }));
    assert_eq!(
        get(web, "/db").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_content_is_cacheable() {
    let tiers = Tiers::start(1, 1).await;
    let mut web = Conn::open(tiers.web).await;

    let index = web.get("/static/index.html").await;
    assert_eq!(index.status, StatusCode::OK);
    assert_eq!(index.headers["content-type"], "text/html; charset=utf-8");
    assert!(index.text().contains("<title>autoperf testbed</title>"));

    let first = web.get("/static/app.js").await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(
        (2048..8192).contains(&first.body.len()),
        "{}",
        first.body.len()
    );
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    let modified = first.headers["last-modified"].to_str().unwrap().to_owned();
    assert_eq!(modified, "Mon, 01 Jan 2024 00:00:00 GMT");
    assert_eq!(
        web.get("/static/app.js").await.body,
        first.body,
        "deterministic"
    );
    assert_ne!(web.get("/static/other.js").await.body, first.body);

    let r = web
        .send(
            Method::GET,
            "/static/app.js",
            &[("if-none-match", &etag)],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert!(r.body.is_empty());
    assert_eq!(r.headers["etag"], etag.as_str());
    let r = web
        .send(
            Method::GET,
            "/static/app.js",
            &[("if-none-match", "\"stale\"")],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body, first.body);

    let r = web
        .send(
            Method::GET,
            "/static/app.js",
            &[("if-modified-since", &modified)],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    let r = web
        .send(
            Method::GET,
            "/static/app.js",
            &[("if-modified-since", "Sat, 30 Dec 2023 00:00:00 GMT")],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);

    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_has_the_exact_length() {
    let tiers = Tiers::start(1, 1).await;
    let mut web = Conn::open(tiers.web).await;
    for n in [0usize, 1, 1000, 65_536, 1_000_001] {
        let r = web.get(&format!("/bytes?n={n}")).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), n);
        assert_eq!(r.headers["content-length"], n.to_string().as_str());
    }
    assert_eq!(
        web.get("/bytes?n=999999999999").await.status,
        StatusCode::BAD_REQUEST
    );
    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_counts_valid_records() {
    let tiers = Tiers::start(1, 1).await;
    let mut web = Conn::open(tiers.web).await;
    let count = |r: crate::common::Response| {
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["count"].clone()
    };

    assert_eq!(count(web.get("/ingest/count").await), 0);
    for i in 0..3 {
        let r = web
            .send(
                Method::POST,
                "/ingest",
                &[("content-type", "application/json")],
                &format!("{{\"id\":{i}}}"),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    for bad in ["{", "not json", "[1,2]", ""] {
        let r = web.send(Method::POST, "/ingest", &[], bad).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad:?}");
    }
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(2 << 20));
    assert_eq!(
        send(tiers.web, Method::POST, "/ingest", &[], &big)
            .await
            .status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        web.get("/ingest").await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(count(web.get("/ingest/count").await), 3);
    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_writes_and_answers() {
    let tiers = Tiers::start(1, 1).await;
    let r = send(tiers.web, Method::POST, "/lock?ms=1&bytes=4096", &[], "").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = send(
        tiers.web,
        Method::POST,
        "/lock?ms=1&bytes=99999999999",
        &[],
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    tiers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    let tiers = Tiers::start(1, 1).await;
    let web = tiers.web;
    let slow = tokio::spawn(async move { get(web, "/sleep?ms=500").await });
    // The server must have read the request before shutdown begins: an idle
    // connection is closed at once. Nothing outside shows that moment, so give
    // it a generous 100 ms (it takes well under 1 ms).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    tiers.stop().await;
    assert_eq!(slow.await.unwrap().status, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        tokio::net::TcpStream::connect(web).await.is_err(),
        "stopped accepting"
    );
}
