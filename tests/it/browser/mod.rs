//! Headless Chromium for the report tests: loads a local page with every
//! host name mapped to nowhere and a network log on, and returns the DOM
//! Chromium built, what the page wrote to the console and every network
//! request the page itself started (Chromium's own background requests,
//! whose initiator is "not an origin", are told apart and left out).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `chromium` package puts the browser (or the first
/// `chromium` on PATH).
pub fn find_chromium() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.exists() {
        return Some(fixed);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("chromium"))
            .find(|p| p.exists())
    })
}

/// The browser to use, or `None` (after saying so loudly) when it is
/// missing outside CI. In CI a missing browser fails the test.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    match find_chromium() {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some() => {
            panic!("{test}: chromium is not installed (scripts/test.sh installs it)")
        }
        None => {
            eprintln!(
                "\n!!!!!!!!\n!!! SKIPPED {test}: chromium is not installed; run scripts/test.sh or `apt-get install chromium`\n!!!!!!!!\n"
            );
            None
        }
    }
}

pub struct Loaded {
    /// The DOM after load, as `--dump-dom` serialises it.
    pub dom: String,
    /// Console messages of the page (`INFO:CONSOLE` log lines).
    pub console: Vec<String>,
    /// URLs the page asked the network for.
    pub page_requests: Vec<String>,
}

/// Common flags: headless, no first-run work, a fresh profile, and no
/// name resolving at all, so a fetch could not succeed even by accident.
fn base(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    c
}

/// Runs `cmd` to completion within `limit`, returning (stdout, stderr).
fn run_bounded(mut cmd: Command, out: &Path, err: &Path, limit: Duration) {
    let child_out = std::fs::File::create(out).unwrap();
    let child_err = std::fs::File::create(err).unwrap();
    let mut child = cmd
        .stdout(child_out)
        .stderr(child_err)
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                status.success(),
                "chromium failed: {status}; see {}",
                err.display()
            );
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Loads `page` and reports what it did. `work` is a scratch directory.
pub fn load(chromium: &Path, page: &Path, work: &Path) -> Loaded {
    std::fs::create_dir_all(work).unwrap();
    let netlog = work.join("netlog.json");
    let (out, err) = (work.join("dom.html"), work.join("chromium.log"));
    let mut cmd = base(chromium, &work.join("profile"));
    cmd.args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg(file_url(page));
    run_bounded(cmd, &out, &err, Duration::from_secs(90));
    let log = std::fs::read_to_string(&err).unwrap();
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Loaded {
        dom: std::fs::read_to_string(&out).unwrap(),
        console,
        page_requests: page_requests(&std::fs::read_to_string(&netlog).unwrap()),
    }
}

/// Saves a PNG of `page` at the given window size.
pub fn screenshot(chromium: &Path, page: &Path, png: &Path, width: u32, height: u32, work: &Path) {
    std::fs::create_dir_all(work).unwrap();
    let mut cmd = base(chromium, &work.join("profile-shot"));
    cmd.arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(file_url(page));
    run_bounded(
        cmd,
        &work.join("shot.out"),
        &work.join("shot.log"),
        Duration::from_secs(90),
    );
    assert!(png.exists(), "no screenshot written");
}

fn file_url(page: &Path) -> String {
    format!("file://{}", page.canonicalize().unwrap().display())
}

/// URL requests in a Chromium net log that a page started: the browser's
/// own requests have the initiator "not an origin".
pub fn page_requests(netlog: &str) -> Vec<String> {
    // A net log cut short (browser killed) lacks its closing brackets.
    let log: serde_json::Value = serde_json::from_str(netlog)
        .or_else(|_| {
            serde_json::from_str(&format!("{}]}}", netlog.trim_end().trim_end_matches(',')))
        })
        .expect("chromium's net log parses");
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64();
    log["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["type"].as_u64() == start_job)
                .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
                .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
