//! A real Prometheus server (Debian's `prometheus`, which `scripts/test.sh`
//! installs) scraping the given targets every second, on 127.0.0.1:0 with
//! its data in a scratch directory; killed when dropped.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::ChildGuard;

pub struct Prometheus {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    addr: String,
    _child: ChildGuard,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts Prometheus scraping each `(job, "host:port")` every second, and
/// waits (at most 30 s) until it has scraped every one.
pub fn prometheus(tag: &str, targets: &[(&str, String)]) -> Prometheus {
    let dir = super::scratch_dir(&format!("prometheus-{tag}"));
    let jobs: String = targets
        .iter()
        .map(|(job, addr)| {
            format!("  - job_name: {job}\n    static_configs: [{{targets: ['{addr}']}}]\n")
        })
        .collect();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nscrape_configs:\n{jobs}"),
    )
    .unwrap();
    let mut child = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg("--web.listen-address=127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prometheus (Debian's package; scripts/test.sh installs it)");
    // Its log names the port it bound: `msg="Listening on" address=127.0.0.1:PORT`.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if !sent && line.contains("msg=\"Listening on\"") {
                if let Some(addr) = line.split("address=").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                    sent = true;
                }
            }
        }
    });
    let child = ChildGuard(child);
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("prometheus says where it listens within 30 s");
    let p = Prometheus {
        url: format!("http://{addr}"),
        addr,
        _child: child,
        dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = p.query("sum(up)");
        if up.as_deref() == Some(&*targets.len().to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus scraped {up:?} of {} targets in 30 s",
            targets.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

impl Prometheus {
    /// The first value `query` returns now, as Prometheus writes it.
    pub fn query(&self, query: &str) -> Option<String> {
        let encoded: String = query
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let mut stream = TcpStream::connect(&self.addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            stream,
            "GET /api/v1/query?query={encoded} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let body = answer.split("\r\n\r\n").nth(1)?;
        let json: serde_json::Value = serde_json::from_str(body).ok()?;
        json["data"]["result"][0]["value"][1]
            .as_str()
            .map(str::to_string)
    }
}
