//! `--vary NAME=v1,v2,… --apply 'COMMAND {NAME}' [--ready URL]`: between
//! the series of an open capacity analysis, the user's command
//! reconfigures the system under test (restart it with more workers, scale
//! a deployment, change a CPU limit), and the analysis waits until the
//! system answers again before it measures: until `--ready URL` answers
//! 2xx, or else until the target accepts connections.

use std::net::ToSocketAddrs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::probe_target;
use crate::protocol::{http1, Response};
use crate::scenario::Scenario;

/// How often readiness is polled.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Tries `attempt` every `POLL_EVERY` until it succeeds, and returns how
/// long that took; or, when an attempt fails once `timeout` has passed,
/// that attempt's error. It tries at least once, so a zero timeout is one
/// look.
fn poll(
    timeout: Duration,
    mut attempt: impl FnMut() -> Result<(), String>,
) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        match attempt() {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) if start.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(POLL_EVERY),
        }
    }
}

/// Waits until the scenario's target accepts connections again (after
/// `--apply` restarted it); how long that took.
pub fn wait_target(scenario: &Scenario, timeout: Duration) -> Result<Duration, String> {
    poll(timeout, || {
        probe_target(scenario).map_err(|e| e.to_string())
    })
    .map_err(|e| {
        format!(
            "the target did not come back within {:.0} s after --apply: {e}",
            timeout.as_secs_f64()
        )
    })
}

/// `NAME=v1,v2,…` → the name and its values.
pub fn parse_vary(text: &str) -> Result<(String, Vec<String>), String> {
    let (name, values) = text.split_once('=').ok_or_else(|| {
        format!("--vary `{text}`: expected NAME=v1,v2,… (e.g. web_workers=1,2,4)")
    })?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "--vary `{text}`: the name must be letters, digits, `_` or `-` (it is written {{NAME}} in --apply)"
        ));
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(format!(
            "--vary `{text}`: a value is empty; give NAME=v1,v2,…"
        ));
    }
    Ok((name.to_string(), values))
}

/// Runs `command` through `sh -c` with every `{name}` replaced by `value`;
/// its output goes to this process's stderr (or nowhere, when quiet). A
/// command that starts a server in the background (`… &`) returns at once.
pub fn apply(command: &str, name: &str, value: &str, quiet: bool) -> Result<(), String> {
    let line = command.replace(&format!("{{{name}}}"), value);
    use std::os::fd::AsFd;
    // Its output goes to our stderr: our stdout may be run.json (--json).
    let to_stderr = || {
        if quiet {
            return Stdio::null();
        }
        std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_or_else(|_| Stdio::null(), Stdio::from)
    };
    let status = Command::new("sh")
        .arg("-c")
        .arg(&line)
        .stdin(Stdio::null())
        .stdout(to_stderr())
        .stderr(to_stderr())
        .status()
        .map_err(|e| format!("--apply: cannot run `sh -c {line}`: {e}"))?;
    if !status.success() {
        return Err(format!(
            "--apply for {name}={value}: `{line}` failed ({status})"
        ));
    }
    Ok(())
}

/// Polls `url` (plain `http://`) with GET until it answers 2xx, every
/// `POLL_EVERY`, for at most `timeout`; returns how long it took.
pub fn wait_ready(url: &str, timeout: Duration) -> Result<Duration, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("--ready `{url}`: {e}"))?;
    if parsed.scheme() != "http" {
        return Err(format!("--ready `{url}`: only http:// URLs are polled"));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("--ready `{url}`: no host"))?
        .trim_matches(['[', ']']);
    let port = parsed.port_or_known_default().unwrap_or(80);
    let mut target = parsed.path().to_string();
    if let Some(q) = parsed.query() {
        target.push('?');
        target.push_str(q);
    }
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: autoperf\r\nConnection: close\r\n\r\n",
        parsed.authority()
    )
    .into_bytes();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let attempt = || {
        let addr = (host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve {host}"))?;
        let answer = runtime.block_on(async {
            let once = async {
                let mut conn = http1::connect(addr, None)
                    .await
                    .map_err(|k| k.name().replace('_', " "))?;
                let mut response = Response::default();
                conn.exchange(&request, false, Some(&mut response), &mut Vec::new())
                    .await
                    .map(|reply| reply.status)
                    .map_err(|f| f.kind.name().replace('_', " "))
            };
            tokio::time::timeout(Duration::from_secs(2), once)
                .await
                .unwrap_or_else(|_| Err("no answer within 2 s".into()))
        });
        match answer? {
            200..=299 => Ok(()),
            status => Err(format!("HTTP {status}")),
        }
    };
    poll(timeout, attempt).map_err(|last| {
        format!(
            "--ready {url}: not ready within {:.0} s (last answer: {last})",
            timeout.as_secs_f64()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_names_a_resource_and_its_values() {
        assert_eq!(
            parse_vary("web_workers=1,2, 4").unwrap(),
            (
                "web_workers".into(),
                vec!["1".into(), "2".into(), "4".into()]
            )
        );
        assert!(parse_vary("web_workers").unwrap_err().contains("NAME=v1"));
        assert!(parse_vary("web workers=1").unwrap_err().contains("name"));
        assert!(parse_vary("w=1,,2").unwrap_err().contains("empty"));
    }

    #[test]
    fn apply_substitutes_the_value_and_reports_failure() {
        let dir = std::env::temp_dir().join(format!("autoperf-vary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("value");
        let cmd = format!("echo {{w}} > {}", file.display());
        apply(&cmd, "w", "7", true).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "7");
        let err = apply("exit 3", "w", "7", true).unwrap_err();
        assert!(err.contains("w=7") && err.contains("failed"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn polling_tries_at_least_once_and_gives_up_with_the_last_failure() {
        let mut tries = 0;
        let err = poll(Duration::ZERO, || {
            tries += 1;
            Err(format!("try {tries}"))
        })
        .unwrap_err();
        assert_eq!((tries, err.as_str()), (1, "try 1"));
        let mut tries = 0;
        poll(Duration::from_secs(5), || {
            tries += 1;
            if tries < 2 {
                return Err("not yet".into());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(tries, 2);
    }

    #[test]
    fn ready_waits_for_an_answer_and_gives_up_on_none() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = wait_ready(
            &format!("http://127.0.0.1:{port}/health"),
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert!(err.contains("not ready"), "{err}");
        assert!(wait_ready("https://127.0.0.1/", Duration::from_secs(1))
            .unwrap_err()
            .contains("http://"));
    }
}
