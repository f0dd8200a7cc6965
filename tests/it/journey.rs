//! A logged-in user's journey through `autoperf run`: a form login answered
//! by a 303 and a session cookie, pages that need the cookie, values taken
//! from JSON, headers and cookies into later requests, redirect chains and
//! their method rules — against a small HTTP/1.1 application written here
//! on 127.0.0.1:0 that records what it received.

use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Seen {
    /// Request line, then the Cookie header (or "-").
    requests: Vec<(String, String)>,
    logins: u64,
    /// Requests to pages that need the session, with a valid one.
    authorised: u64,
    unauthorised: u64,
    /// Bodies received by POST /echo.
    echoed: Vec<String>,
    /// The Accept-Encoding of each GET /gz.
    accept_encoding: Vec<Option<String>>,
}

fn gzipped(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn app() -> (SocketAddr, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let state = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(10_000) {
            let Ok(stream) = stream else { return };
            let state = state.clone();
            std::thread::spawn(move || serve(stream, &state));
        }
    });
    (addr, seen)
}

fn serve(stream: std::net::TcpStream, state: &Mutex<Seen>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    for _ in 0..100_000 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let mut parts = line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        let cookie = headers.get("cookie").cloned().unwrap_or_else(|| "-".into());
        let session = cookie
            .split("; ")
            .find_map(|c| c.strip_prefix("sid="))
            .map(str::to_string);
        let valid = session.as_deref().is_some_and(|s| s.starts_with("token-"));
        let mut s = state.lock().unwrap();
        s.requests
            .push((line.trim_end().to_string(), cookie.clone()));
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path == "/gz" {
            // JSON, gzipped when asked for.
            let text = format!(r#"{{"greeting": "{}"}}"#, "hello ".repeat(50));
            let gzip = headers
                .get("accept-encoding")
                .is_some_and(|a| a.contains("gzip"));
            s.accept_encoding
                .push(headers.get("accept-encoding").cloned());
            drop(s);
            let (coding, body) = match gzip {
                true => ("Content-Encoding: gzip\r\n", gzipped(text.as_bytes())),
                false => ("", text.into_bytes()),
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{coding}Content-Length: {}\r\n\r\n",
                body.len()
            );
            if out.write_all(head.as_bytes()).is_err() || out.write_all(&body).is_err() {
                return;
            }
            continue;
        }
        let reply = match (method, path) {
            ("POST", "/login") if body.contains("password=secret") => {
                s.logins += 1;
                let user = body
                    .split('&')
                    .find_map(|f| f.strip_prefix("user="))
                    .unwrap_or("?");
                format!("HTTP/1.1 303 See Other\r\nLocation: /home\r\nSet-Cookie: sid=token-{user}; Path=/; HttpOnly\r\nContent-Length: 0\r\n\r\n")
            }
            ("POST", "/login") => "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".into(),
            ("GET", "/home" | "/api/me" | "/item") if !valid => {
                s.unauthorised += 1;
                "HTTP/1.1 302 Found\r\nLocation: /login-page\r\nContent-Length: 0\r\n\r\n".into()
            }
            ("GET", "/home") => {
                s.authorised += 1;
                let user = session.unwrap_or_default();
                let text = format!("Welcome {}", user.trim_start_matches("token-"));
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                    text.len()
                )
            }
            ("GET", "/api/me") => {
                s.authorised += 1;
                let text = r#"{"user": {"id": 7}, "token": "tk-9"}"#;
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Order: order-31\r\nContent-Length: {}\r\n\r\n{text}", text.len())
            }
            ("GET", "/item") => {
                s.authorised += 1;
                let ok = headers.get("authorization").map(String::as_str) == Some("Bearer tk-9");
                let status = if ok { "200 OK" } else { "403 Forbidden" };
                format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok")
            }
            ("GET", "/login-page") => {
                "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nplease log in".into()
            }
            ("GET", "/chain") => {
                let n: u32 = query
                    .strip_prefix("n=")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if n == 0 {
                    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nend".into()
                } else {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: /chain?n={}\r\nContent-Length: 0\r\n\r\n",
                        n - 1
                    )
                }
            }
            ("GET", "/loop") => {
                "HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n".into()
            }
            // Another port on loopback that nothing listens on: never asked.
            ("GET", "/away") => {
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/x\r\nContent-Length: 0\r\n\r\n"
                    .into()
            }
            ("POST", "/keep") => {
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: /echo\r\nContent-Length: 0\r\n\r\n"
                    .into()
            }
            ("POST", "/echo") => {
                s.echoed.push(body.clone());
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".into(),
        };
        drop(s);
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn run(dir: &std::path::Path, yaml: &str, users: &str) -> (Option<i32>, serde_json::Value, String) {
    let path = dir.join("s.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let (code, stdout, stderr) = support::run_briefly(path.to_str().unwrap(), users, &out);
    let json = std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, json, format!("{stdout}{stderr}"))
}

#[test]
fn a_logged_in_journey_keeps_its_cookie_and_follows_redirects() {
    let (addr, seen) = app();
    let dir = support::scratch_dir("journey");
    let yaml = format!(
        r#"
name: journey
target: {{base_url: "http://{addr}"}}
think_time: 5ms
requests:
  login:
    method: POST
    path: /login
    form: {{user: "u${{random(1, 3)}}", password: secret}}
    check: {{status: [200], body_contains: Welcome}}
    extract: {{sid: {{cookie: sid, on_missing: fail}}}}
  me:
    path: /api/me
    check: {{json: {{"$.user.id": 7}}}}
    extract:
      token: {{json: "$.token"}}
      order: {{header: X-Order, regex: 'order-(\d+)'}}
  item:
    path: "/item?order=${{order}}&s=${{cookie.sid}}"
    headers: {{Authorization: "Bearer ${{token}}"}}
    check: {{status: 200}}
  chain: {{path: "/chain?n=3"}}
  keep: {{method: POST, path: /keep, body: "payload-${{sid}}"}}
session:
  start: login
  transitions:
    login: {{me: 1}}
    me: {{item: 1}}
    item: {{chain: 1}}
    chain: {{keep: 1}}
"#
    );
    let (code, run, output) = run(&dir, &yaml, "2");
    assert_eq!(code, Some(0), "{output}");
    let level = &run["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    let per = &level["per_request"];
    // login: POST → 303 → GET /home with the new cookie; one hop each.
    assert!(per["login"]["requests"].as_u64().unwrap() >= 2, "{per}");
    assert_eq!(per["login"]["redirects"], per["login"]["requests"], "{per}");
    assert_eq!(
        per["chain"]["redirects"].as_u64(),
        per["chain"]["requests"].as_u64().map(|n| 3 * n)
    );
    assert_eq!(per["item"]["errors"], 0, "{per}");
    let s = seen.lock().unwrap();
    assert!(s.logins >= 2);
    assert_eq!(s.unauthorised, 0, "every page after login had the session");
    // The 303 made the next hop a GET with the cookie just set.
    let after_login: Vec<&(String, String)> = s
        .requests
        .iter()
        .filter(|(line, _)| line.starts_with("GET /home "))
        .collect();
    assert!(!after_login.is_empty());
    assert!(
        after_login
            .iter()
            .all(|(_, cookie)| cookie.starts_with("sid=token-u")),
        "{after_login:?}"
    );
    // Values from a header and a cookie went into the path; a JSON token
    // into a header (the item answered 200).
    assert!(
        s.requests
            .iter()
            .any(|(line, _)| line.starts_with("GET /item?order=31&s=token-u")),
        "{:?}",
        &s.requests[..s.requests.len().min(10)]
    );
    // 307 kept the method and the body.
    assert!(
        s.echoed.iter().all(|b| b.starts_with("payload-token-u")),
        "{:?}",
        s.echoed
    );
    assert!(!s.echoed.is_empty());
    // Sessions end after `keep`, and with them the session cookie: each
    // login is sent without one.
    assert!(
        s.requests
            .iter()
            .filter(|(line, _)| line.starts_with("POST /login "))
            .all(|(_, cookie)| cookie == "-"),
        "logins carried a stale cookie"
    );
}

#[test]
fn redirects_stop_at_ten_hops_at_other_origins_and_when_asked() {
    let (addr, seen) = app();
    let dir = support::scratch_dir("redirect-limits");
    let yaml = format!(
        r#"
name: limits
target: {{base_url: "http://{addr}"}}
think_time: 5ms
# Two requests of three fail on purpose: the level is still the measurement.
capacity: {{max_error_rate: 90%}}
requests:
  loop: {{path: /loop}}
  away: {{path: /away}}
  stay: {{path: /home, follow_redirects: false, check: {{status: 302, header: {{Location: "^/login-page$"}}}}}}
session:
  start: loop
  transitions: {{loop: {{away: 1}}, away: {{stay: 1}}}}
"#
    );
    let (code, run, output) = run(&dir, &yaml, "1");
    assert_eq!(code, Some(0), "{output}");
    let per = &run["levels"][0]["per_request"];
    let lp = &per["loop"];
    assert_eq!(
        lp["errors_by_kind"]["redirect_limit"], lp["requests"],
        "{lp}"
    );
    assert_eq!(
        lp["redirects"].as_u64(),
        lp["requests"].as_u64().map(|n| 10 * n)
    );
    let away = &per["away"];
    assert_eq!(
        away["errors_by_kind"]["redirect_off_target"], away["requests"],
        "{away}"
    );
    assert_eq!(per["stay"]["errors"], 0, "{}", per["stay"]);
    assert!(per["stay"]["redirects"].is_null());
    let s = seen.lock().unwrap();
    assert!(s.requests.iter().all(|(line, _)| !line.contains("/x ")));
    assert!(!s
        .requests
        .iter()
        .any(|(line, _)| line.starts_with("GET /login-page")));
}

#[test]
fn compressed_answers_are_decoded_for_checks_and_counted_both_ways() {
    let (addr, seen) = app();
    let dir = support::scratch_dir("compression");
    let scenario = |compression: bool| {
        format!(
            r#"
name: gz
target: {{base_url: "http://{addr}", compression: {compression}}}
think_time: 5ms
requests:
  gz:
    path: /gz
    check: {{body_contains: "hello hello hello", status: 200}}
"#
        )
    };
    let (code, json, output) = run(&dir, &scenario(true), "2");
    assert_eq!(code, Some(0), "{output}");
    let gz = &json["levels"][0]["per_request"]["gz"];
    let requests = gz["requests"].as_u64().unwrap();
    assert!(requests > 10, "{gz}");
    assert_eq!(gz["errors"], 0, "{gz}");
    let (body, decoded) = (
        gz["body_bytes"].as_u64().unwrap(),
        gz["decoded_bytes"].as_u64().unwrap(),
    );
    let text = r#"{"greeting": ""}"#.len() as u64 + 6 * 50;
    assert_eq!(decoded, text * requests, "{gz}");
    assert!(body * 5 < decoded, "gzip shrinks 50 hellos: {gz}");
    assert!(seen
        .lock()
        .unwrap()
        .accept_encoding
        .iter()
        .all(|a| a.as_deref() == Some("gzip, deflate, br")));

    // Without compression nothing is asked and both sizes agree.
    seen.lock().unwrap().accept_encoding.clear();
    let (code, json, output) = run(&dir, &scenario(false), "1");
    assert_eq!(code, Some(0), "{output}");
    let gz = &json["levels"][0]["per_request"]["gz"];
    assert_eq!(gz["errors"], 0, "{gz}");
    assert_eq!(gz["body_bytes"], gz["decoded_bytes"], "{gz}");
    assert!(seen
        .lock()
        .unwrap()
        .accept_encoding
        .iter()
        .all(Option::is_none));
}
