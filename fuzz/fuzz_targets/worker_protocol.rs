//! The worker protocol from both ends, sent any bytes.
//!
//! Byte 0 even: the rest goes over TCP to a real `autoperf worker` (with a
//! token, on loopback) as a would-be controller's. It must greet, then
//! refuse or close, in time, and go on serving; it must never welcome the
//! peer, which cannot have proven the token (the proof signs the fresh
//! nonce of the greeting, sent after these bytes were chosen).
//!
//! Byte 0 odd: the rest is what a worker sent its controller, read message
//! by message as a level reads them (`fuzz_from_worker`: snapshots decoded
//! and checked as plausible, clock readings made offsets): never a panic.
#![no_main]
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use autoperf_core::engine::workers::{fuzz_from_worker, worker_main, WorkerOptions};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const TOKEN: &str = "fuzz-worker-token-0123456789";

/// How a welcome begins on the wire.
const WELCOME: &[u8] = b"{\"type\":\"welcome\"";

/// The worker, started once on a thread of its own.
fn worker() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("autoperf-fuzz-worker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token_file = dir.join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let options = WorkerOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            token_file: Some(token_file),
            name: Some("fuzz".into()),
            local_addresses: Vec::new(),
            program: None,
            tls_cert: None,
            tls_key: None,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || worker_main(options, |addr| tx.send(addr).unwrap()).unwrap());
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the worker listens");
        // Read before it listens: the file is no longer needed.
        let _ = std::fs::remove_dir_all(&dir);
        addr
    })
}

thread_local! {
    static CLIENT: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
}

/// What the worker answers `data`, sent as a controller's first bytes.
fn exchange(data: &[u8]) -> Vec<u8> {
    let server = worker();
    // Closed connections wait in TIME_WAIT for a minute: spreading them
    // over 250 loopback source addresses keeps ports free at any speed.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let from = SocketAddr::from((Ipv4Addr::new(127, 0, 1, 1 + (n % 250) as u8), 0));
    CLIENT.with(|rt| {
        rt.block_on(async {
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind(from).unwrap();
            let mut stream = socket
                .connect(server)
                .await
                .expect("the worker still accepts connections");
            let _ = stream.write_all(data).await;
            let _ = stream.shutdown().await;
            let mut answer = Vec::new();
            // A close with our bytes unread is a reset, which may cut the
            // answer short: what was read is still checked.
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
                .await
                .expect("the worker answers or closes in time")
                .ok();
            answer
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let [pick, rest @ ..] = data else { return };
    if pick % 2 == 1 {
        fuzz_from_worker(rest);
        return;
    }
    let answer = exchange(rest);
    // Messages are `{"type":…` lines; inside a string (a refusal that
    // quotes the peer) a quote is escaped, so this is only ever a message.
    assert!(
        !answer.windows(WELCOME.len()).any(|w| w == WELCOME),
        "welcomed a peer without the token: {}",
        String::from_utf8_lossy(&answer)
    );
    // Whole lines: a greeting, then at most a refusal.
    let whole = answer.len() - answer.iter().rev().take_while(|&&b| b != b'\n').count();
    for (i, line) in answer[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let message: serde_json::Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("not a message ({e}): {}", String::from_utf8_lossy(line)));
        let kind = message["type"].as_str();
        let expected = if i == 0 { "greeting" } else { "refused" };
        assert!(
            kind == Some(expected) && i < 2,
            "message {i} is {kind:?}, not {expected}: {message}"
        );
    }
});
