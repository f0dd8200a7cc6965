//! Shared by the integration tests: the testbed's tiers in process on
//! 127.0.0.1:0, and a small HTTP/1.1 client on hyper's connection API.
#![allow(dead_code)]

pub mod process;

use std::net::SocketAddr;
use std::time::Duration;

use autoperf_testbed::{serve_db, serve_web, DbConfig, WebConfig};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Bounds every request of the tests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Both tiers running in this process.
pub struct Tiers {
    pub web: SocketAddr,
    pub db: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

async fn bind() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

fn start<F>(
    serve: impl FnOnce(oneshot::Receiver<()>) -> F,
) -> (oneshot::Sender<()>, JoinHandle<anyhow::Result<()>>)
where
    F: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let (stop, stopped) = oneshot::channel();
    (stop, tokio::spawn(serve(stopped)))
}

impl Tiers {
    pub async fn start(web_workers: usize, db_workers: usize) -> Tiers {
        let (db_listener, db) = bind().await;
        let (web_listener, web) = bind().await;
        let (db_stop, db_task) = start(|stopped| {
            serve_db(
                db_listener,
                DbConfig {
                    workers: db_workers,
                },
                async {
                    let _ = stopped.await;
                },
            )
        });
        let config = WebConfig {
            workers: web_workers,
            db: Some(db),
            ..Default::default()
        };
        let (web_stop, web_task) = start(|stopped| {
            serve_web(web_listener, config, async {
                let _ = stopped.await;
            })
        });
        Tiers {
            web,
            db,
            stops: vec![web_stop, db_stop],
            tasks: vec![web_task, db_task],
        }
    }

    /// Signals shutdown and waits for both servers to return.
    pub async fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("server stops within 5 s")
                .expect("server task")
                .expect("server result");
        }
    }
}

/// A response with its whole body.
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        Conn {
            sender,
            host: addr.to_string(),
        }
    }

    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
        let exchange = async {
            self.sender.ready().await.expect("connection ready");
            let resp = self.sender.send_request(req).await.expect("response");
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.expect("body").to_bytes();
            Response {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| panic!("{path}: no response within {REQUEST_TIMEOUT:?}"))
    }

    pub async fn get(&mut self, path: &str) -> Response {
        self.send(Method::GET, path, &[], "").await
    }
}

/// One request on a connection of its own.
pub async fn get(addr: SocketAddr, path: &str) -> Response {
    Conn::open(addr).await.get(path).await
}

/// One request with headers and a body, on a connection of its own.
pub async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    Conn::open(addr)
        .await
        .send(method, path, headers, body)
        .await
}

/// CPU time of the threads of this process whose name starts with `prefix`,
/// from /proc/self/task/*/schedstat (nanoseconds, unlike /proc/*/stat).
pub fn threads_cpu(prefix: &str) -> Duration {
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap();
        let ns: u64 = schedstat.split(' ').next().unwrap().parse().unwrap();
        total += Duration::from_nanos(ns);
    }
    total
}
