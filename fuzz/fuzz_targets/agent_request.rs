//! The profiler agent's request handling, whole: the real server (hyper,
//! the bearer-token check, routing, the query parser, /proc reads) on a
//! loopback port, sent any bytes. It must answer with an HTTP response or
//! close, in time, and go on serving; it must never answer 200 to a
//! request without the token.
#![no_main]
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const TOKEN: &str = "fuzz-token";

/// The agent, started once on a thread of its own.
fn agent() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        std_listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                let access = autoperf_agent::Access {
                    token: Some(TOKEN.to_string()),
                    cmdline: vec!["fuzz".to_string()],
                    ..autoperf_agent::Access::default()
                };
                autoperf_agent::serve(listener, access, std::future::pending())
                    .await
                    .unwrap();
            });
        });
        addr
    })
}

thread_local! {
    static CLIENT: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
}

fuzz_target!(|data: &[u8]| {
    let server = agent();
    // Closed connections wait in TIME_WAIT for a minute: spreading them
    // over 250 loopback source addresses keeps ports free at any speed.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let from = SocketAddr::from((Ipv4Addr::new(127, 0, 1, 1 + (n % 250) as u8), 0));
    let answer = CLIENT.with(|rt| {
        rt.block_on(async {
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind(from).unwrap();
            let mut stream = socket
                .connect(server)
                .await
                .expect("the agent still accepts connections");
            let _ = stream.write_all(data).await;
            let _ = stream.shutdown().await;
            let mut answer = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
                .await
                .expect("the agent answers or closes in time")
                .ok();
            answer
        })
    });
    if !answer.is_empty() {
        assert!(
            answer.starts_with(b"HTTP/1.1 ") || answer.starts_with(b"HTTP/1.0 "),
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        );
    }
    let has_token = data.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes());
    if !has_token {
        assert!(
            !answer.windows(7).any(|w| w == b" 200 OK"),
            "200 without the token"
        );
    }
});
