//! Measures what each tier process spends per request beyond the CPU the
//! request asks for: the overhead the profiler would attribute to the
//! workload. Run in release, after building the `tier` example beside it:
//!
//! ```text
//! cargo build --release -p autoperf-testbed --examples
//! target/release/examples/overhead [REQUESTS] [CLIENTS]
//! ```
//!
//! Both tiers run as child processes (the `tier` example); the clients run
//! here, so their CPU is not counted. A tier's CPU is read two ways: utime +
//! stime of /proc/PID/stat (what the profiler reads, clock-tick resolution)
//! and the sum of /proc/PID/task/*/schedstat (nanoseconds; exact while no
//! thread exits, which holds for the tiers).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use autoperf_testbed::{Testbed, TestbedOptions};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A tier's CPU time: from /proc/PID/stat, and from the threads' schedstat.
#[derive(Clone, Copy)]
struct Cpu {
    stat: Duration,
    sched: Duration,
}

fn cpu(pid: u32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let mut sched = Duration::ZERO;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let s = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let ns: u64 = s.split(' ').next().unwrap_or("0").parse().unwrap_or(0);
        sched += Duration::from_nanos(ns);
    }
    Cpu {
        stat: Duration::from_micros(ticks * 1_000_000 / hz),
        sched,
    }
}

/// Sends `requests` GETs of `path`, spread over `clients` keep-alive connections.
async fn load(addr: SocketAddr, path: &'static str, requests: usize, clients: usize) {
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let share = requests / clients + usize::from(i < requests % clients);
            tokio::spawn(async move {
                let stream = TcpStream::connect(addr).await.expect("connect");
                stream.set_nodelay(true).unwrap();
                let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
                    .await
                    .expect("handshake");
                tokio::spawn(conn);
                let host = addr.to_string();
                for _ in 0..share {
                    let req = Request::get(path)
                        .header("host", &host)
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    sender.ready().await.expect("ready");
                    let resp = sender.send_request(req).await.expect("response");
                    assert!(resp.status().is_success(), "{path}: {}", resp.status());
                    resp.into_body().collect().await.expect("body");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

fn per_request(before: Cpu, after: Cpu, requests: usize, burn_ms: f64) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0 / requests as f64;
    let (stat, sched) = (ms(after.stat - before.stat), ms(after.sched - before.sched));
    format!(
        "{sched:.3} ms/req (overhead {:+.3}; stat {stat:.3}, {:+.3})",
        sched - burn_ms,
        stat - burn_ms
    )
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let requests: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let clients: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let exe = std::env::current_exe()?
        .parent()
        .context("examples dir")?
        .join("tier");
    let testbed = Testbed::spawn(&exe, &TestbedOptions::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cases: [(&'static str, f64, f64); 4] = [
        ("/cpu?ms=2", 2.0, 0.0),
        ("/cpu?ms=0", 0.0, 0.0),
        ("/db?web_ms=1&db_ms=3", 1.0, 3.0),
        ("/bytes?n=200000", 0.0, 0.0),
    ];
    println!("{requests} requests per case from {clients} clients");
    for (path, web_ms, db_ms) in cases {
        runtime.block_on(load(testbed.web_addr, path, 50, clients));
        let (web, db) = (cpu(testbed.web_pid), cpu(testbed.db_pid));
        let started = Instant::now();
        runtime.block_on(load(testbed.web_addr, path, requests, clients));
        let wall = started.elapsed();
        let (web2, db2) = (cpu(testbed.web_pid), cpu(testbed.db_pid));
        println!(
            "{path:<24} {:>6.0}/s  tb-web {}  tb-db {}",
            requests as f64 / wall.as_secs_f64(),
            per_request(web, web2, requests, web_ms),
            per_request(db, db2, requests, db_ms),
        );
    }
    Ok(())
}
