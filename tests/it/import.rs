//! `autoperf import`: access logs written here from a known CBMG import to
//! that CBMG (a million lines, gzip too), the imported scenario reproduces
//! the log's request mix against the testbed, and a HAR recorded here from
//! the testbed shop's login journey (cookie, redirects, a CSRF token) runs
//! with zero errors. Bad lines and unknown formats are explained.

use crate::support;

use std::collections::BinaryHeap;
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use autoperf_core::scenario::{self, ThinkTime};

/// A CBMG the logs are drawn from: start probabilities and transitions
/// (what is left ends the session).
struct Truth {
    names: Vec<&'static str>,
    start: Vec<f64>,
    next: Vec<Vec<(usize, f64)>>,
}

fn truth() -> Truth {
    // home, search, post, user, login, post_comment
    Truth {
        names: vec!["home", "search", "post", "user", "login", "post_comment"],
        start: vec![0.6, 0.25, 0.15, 0.0, 0.0, 0.0],
        next: vec![
            vec![(1, 0.3), (2, 0.4), (4, 0.1)],
            vec![(1, 0.2), (2, 0.5)],
            vec![(2, 0.3), (3, 0.2), (5, 0.1), (0, 0.1)],
            vec![(2, 0.5)],
            vec![(0, 0.7), (2, 0.2)],
            vec![(2, 0.6)],
        ],
    }
}

const THINK_MEAN_S: f64 = 12.0;
const USERS: [&str; 60] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
    "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "xavier", "yolanda",
    "zoe", "amber", "bruno", "cedric", "delia", "emil", "fiona", "gustav", "hanna", "igor", "jana",
    "kurt", "lena", "milo", "nora", "otto", "paula", "quinn", "rosa", "sven", "tilda", "ulf",
    "vera", "wim", "xena", "yann", "zelda", "arno", "bea", "cora", "dirk", "edda", "finn", "gina",
    "hugo", "ines", "jonas", "karla", "lars",
];

/// The request line of class `c`, values drawn like real traffic's.
fn request(c: usize, rng: &mut fastrand::Rng) -> String {
    match c {
        0 => "GET / HTTP/1.1".into(),
        1 => format!("GET /search?q=term{} HTTP/1.1", rng.u32(1..300)),
        2 => format!("GET /post/{} HTTP/1.1", rng.u32(1..5000)),
        3 => format!("GET /user/{} HTTP/1.1", USERS[rng.usize(..USERS.len())]),
        4 => "POST /login HTTP/1.1".into(),
        _ => format!("POST /post/{}/comment HTTP/1.1", rng.u32(1..5000)),
    }
}

fn clf_time(t: i64) -> String {
    // Days since the epoch to a civil date (inverse of the importer's).
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Writes `lines` requests in the combined format, in time order: sessions
/// arrive as a Poisson process, walk the CBMG, think exponentially between
/// requests; every session its own client. Robots, static assets and a few
/// malformed lines are mixed in. Returns the count of malformed lines.
fn write_log(path: &Path, lines: usize, seed: u64) -> usize {
    let t = truth();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    // (−time in ms, session, class): the soonest first.
    let mut heap: BinaryHeap<(i64, u64, usize)> = BinaryHeap::new();
    let start = 1_700_000_000i64 * 1000;
    let mut next_arrival = start;
    let mut session = 0u64;
    let mut written = 0;
    let mut malformed = 0;
    let pick = |rng: &mut fastrand::Rng, options: &[(usize, f64)]| -> Option<usize> {
        let u = rng.f64();
        let mut acc = 0.0;
        for &(c, p) in options {
            acc += p;
            if u < acc {
                return Some(c);
            }
        }
        None
    };
    let starts: Vec<(usize, f64)> = t.start.iter().copied().enumerate().collect();
    while written < lines {
        let soonest = heap.peek().map(|h| -h.0);
        if soonest.is_none_or(|s| next_arrival <= s) {
            let c = pick(&mut rng, &starts).unwrap_or(0);
            heap.push((-next_arrival, session, c));
            session += 1;
            // 40 sessions a second.
            next_arrival += (-(1.0 - rng.f64()).ln() * 25.0) as i64;
            continue;
        }
        let (neg, s, c) = heap.pop().unwrap();
        let now = -neg;
        let ip = format!("10.{}.{}.{}", (s >> 16) & 255, (s >> 8) & 255, s & 255);
        writeln!(
            out,
            "{ip} - - [{}] \"{}\" 200 {} \"-\" \"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0\"",
            clf_time(now / 1000),
            request(c, &mut rng),
            rng.u32(100..9000)
        )
        .unwrap();
        written += 1;
        if written % 1000 == 0 {
            writeln!(
                out,
                "{ip} - - [{}] \"GET /static/app.css HTTP/1.1\" 200 512 \"-\" \"Mozilla/5.0\"",
                clf_time(now / 1000)
            )
            .unwrap();
            writeln!(out, "66.249.66.1 - - [{}] \"GET /post/1 HTTP/1.1\" 200 512 \"-\" \"Mozilla/5.0 (compatible; Googlebot/2.1)\"", clf_time(now / 1000)).unwrap();
        }
        if written % 20_000 == 0 {
            writeln!(
                out,
                "{ip} - - [garbage] \"\\x16\\x03\\x01\" 400 0 \"-\" \"-\""
            )
            .unwrap();
            malformed += 1;
        }
        if let Some(n) = pick(&mut rng, &t.next[c]) {
            let think = -(1.0 - rng.f64()).ln() * THINK_MEAN_S * 1000.0;
            heap.push((-(now + think as i64), s, n));
        }
    }
    out.flush().unwrap();
    malformed
}

fn import(args: &[&str]) -> (String, String) {
    let (code, stdout, stderr) = support::autoperf(&[&["import"], args].concat());
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    (stdout, stderr)
}

#[test]
fn a_million_line_log_imports_to_the_cbmg_it_was_drawn_from() {
    let dir = support::scratch_dir("import-million");
    let log = dir.join("access.log");
    let malformed = write_log(&log, 1_000_000, 1);
    let out = dir.join("site.yaml");
    let (stdout, _) = import(&[
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        stdout.contains(&format!("skipped: {malformed} malformed")),
        "{stdout}"
    );
    assert!(
        stdout.contains("line ") && stdout.contains("not a time"),
        "examples shown: {stdout}"
    );
    let s = scenario::load(&out)
        .unwrap_or_else(|d| panic!("{d}\n{}", std::fs::read_to_string(&out).unwrap()));
    let t = truth();
    let id = |name: &str| {
        s.request_id(name).unwrap_or_else(|| {
            panic!(
                "no class `{name}` in {:?}",
                s.requests.iter().map(|r| &r.name).collect::<Vec<_>>()
            )
        })
    };
    assert_eq!(s.requests.len(), t.names.len(), "{stdout}");
    let mut worst: f64 = 0.0;
    for (a, name) in t.names.iter().enumerate() {
        let from = id(name);
        let start = s
            .session
            .entries()
            .iter()
            .find(|(r, _)| *r == from)
            .map_or(0.0, |e| e.1);
        worst = worst.max((start - t.start[a]).abs());
        for (b, to_name) in t.names.iter().enumerate() {
            let want = t.next[a].iter().find(|e| e.0 == b).map_or(0.0, |e| e.1);
            let got = s
                .session
                .transitions(from)
                .iter()
                .find(|(r, _)| *r == id(to_name))
                .map_or(0.0, |e| e.1);
            assert!(
                (got - want).abs() <= 0.02,
                "{name} → {to_name}: {got} vs {want}"
            );
            worst = worst.max((got - want).abs());
        }
        let exit_want = 1.0 - t.next[a].iter().map(|e| e.1).sum::<f64>();
        let exit_got = s.session.exit_probability(from);
        assert!(
            (exit_got - exit_want).abs() <= 0.02,
            "{name} ends: {exit_got} vs {exit_want}"
        );
    }
    eprintln!("largest probability error: {worst:.4}");
    match s.think_time {
        ThinkTime::Exponential { mean } => {
            let err = (mean.as_secs_f64() - THINK_MEAN_S).abs() / THINK_MEAN_S;
            assert!(err < 0.03, "think mean {mean:?} vs {THINK_MEAN_S} s");
        }
        other => panic!("expected the exponential fit, found {other:?}"),
    }
    // Parameters became data, and the report and its JSON are there.
    assert!(dir.join("site.data/post.csv").exists());
    let users = std::fs::read_to_string(dir.join("site.data/user.csv")).unwrap();
    assert!(
        users.starts_with("id\n") && users.contains("alice"),
        "{users}"
    );
    let json = support::json_file(&dir.join("site.import.json"));
    assert_eq!(json["skipped"][1]["what"], "static assets");
    assert_eq!(json["skipped"][1]["count"], 1000);
    assert_eq!(json["skipped"][2]["count"], 1000, "robots");
    let html = std::fs::read_to_string(dir.join("site.import.html")).unwrap();
    assert!(html.contains("<svg class=\"chart cbmg\"") && html.contains("post_comment"));
    // It passes check.
    let (code, o, e) = support::autoperf(&["check", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{o}{e}");
    // A second import will not overwrite the first without --force.
    let (code, _, e) = support::autoperf(&[
        "import",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(e.contains("--force"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gzip_and_json_logs_import_alike() {
    let dir = support::scratch_dir("import-formats");
    let log = dir.join("a.log");
    write_log(&log, 20_000, 2);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    std::fs::write(dir.join("a.log.gz"), gz.finish().unwrap()).unwrap();
    // The same requests as JSON lines, with fields named our way.
    let mut json = String::new();
    for line in text.lines() {
        let Some(open) = line.find('[') else { continue };
        let ip = &line[..line.find(' ').unwrap()];
        let Some(close) = line.find(']') else {
            continue;
        };
        let time = &line[open + 1..close];
        let rest = &line[close + 3..];
        let request = &rest[..rest.find('"').unwrap()];
        json.push_str(&format!(
            "{}\n",
            serde_json::json!({"at": time, "addr": ip, "request": request, "status": 200, "agent": "Mozilla/5.0"})
        ));
    }
    std::fs::write(dir.join("a.jsonl"), json).unwrap();
    let mut results = Vec::new();
    for (file, extra) in [
        ("a.log", vec![]),
        ("a.log.gz", vec![]),
        (
            "a.jsonl",
            vec![
                "--format",
                "json",
                "--json-fields",
                "time=at,client=addr,agent=agent",
            ],
        ),
    ] {
        let out = dir.join(format!("{file}.yaml"));
        let mut args = vec![
            dir.join(file).to_str().unwrap().to_string(),
            "--out".into(),
            out.to_str().unwrap().into(),
            "--quiet".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        import(&refs);
        let s = scenario::load(&out).unwrap_or_else(|d| panic!("{d}"));
        let post = s.request_id("post").unwrap();
        results.push((s.requests.len(), s.session.transitions(post).to_vec()));
    }
    assert_eq!(results[0], results[1], "gzip");
    assert_eq!(results[0].0, results[2].0, "json");
    for ((a, p), (b, q)) in results[0].1.iter().zip(&results[2].1) {
        assert_eq!(a, b);
        assert!((p - q).abs() < 0.01, "{p} vs {q}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_formats_and_bad_lines_are_explained() {
    let dir = support::scratch_dir("import-bad");
    let odd = dir.join("odd.log");
    std::fs::write(&odd, "hello world\nthis is not a log\n").unwrap();
    let (code, _, e) = support::autoperf(&[
        "import",
        odd.to_str().unwrap(),
        "--out",
        dir.join("x.yaml").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("combined")
            && e.contains("common")
            && e.contains("json")
            && e.contains("--format"),
        "{e}"
    );
    assert!(!dir.join("x.yaml").exists());
    // Mostly good lines with bad ones among them: counted, shown, skipped.
    let mixed = dir.join("mixed.log");
    let good = r#"127.0.0.1 - - [01/Mar/2024:10:00:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "ua""#;
    let good2 = r#"127.0.0.1 - - [01/Mar/2024:10:00:03 +0000] "GET /b HTTP/1.1" 200 5 "-" "ua""#;
    let text = format!("{good}\nnonsense here\n{good2}\n{good}\n\u{0}\u{1}binary\n");
    std::fs::write(&mixed, text).unwrap();
    let (stdout, _) = import(&[
        mixed.to_str().unwrap(),
        "--out",
        dir.join("m.yaml").to_str().unwrap(),
    ]);
    assert!(stdout.contains("skipped: 2 malformed"), "{stdout}");
    assert!(
        stdout.contains("line 2:") && stdout.contains("line 5:"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log of testbed requests drawn from a small CBMG.
fn testbed_log(path: &Path) {
    let mut rng = fastrand::Rng::with_seed(9);
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let pages = [
        "/health",
        "/cpu?ms=0",
        "/shop/products",
        "/bytes?n=N",
        "/sleep?ms=1",
    ];
    // (next page, probability) per page; the rest ends the session.
    let next: [&[(usize, f64)]; 5] = [
        &[(2, 0.6), (1, 0.2)],
        &[(3, 0.5), (1, 0.3)],
        &[(3, 0.4), (4, 0.3), (0, 0.1)],
        &[(2, 0.5), (3, 0.2)],
        &[(0, 0.5)],
    ];
    let mut t = 1_700_000_000i64;
    for s in 0..8000u32 {
        let mut page = if rng.bool() { 0 } else { 2 };
        let ip = format!("10.9.{}.{}", s >> 8, s & 255);
        loop {
            let target = pages[page].replace('N', &rng.u32(10..2000).to_string());
            writeln!(
                out,
                "{ip} - - [{}] \"GET {target} HTTP/1.1\" 200 10 \"-\" \"Mozilla/5.0\"",
                clf_time(t)
            )
            .unwrap();
            t += i64::from(rng.u32(0..3));
            let u = rng.f64();
            let mut acc = 0.0;
            let mut to = None;
            for &(n, p) in next[page] {
                acc += p;
                if u < acc {
                    to = Some(n);
                    break;
                }
            }
            match to {
                Some(n) => page = n,
                None => break,
            }
        }
    }
    out.flush().unwrap();
}

#[test]
fn the_imported_scenario_reproduces_the_logs_request_mix() {
    let tb = support::testbed(2);
    let dir = support::scratch_dir("import-mix");
    let log = dir.join("tb.log");
    testbed_log(&log);
    let out = dir.join("tb.yaml");
    import(&[
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--target",
        &tb.web_url,
        "--quiet",
    ]);
    let imported = support::json_file(&dir.join("tb.import.json"));
    let results = dir.join("run");
    let (code, o, e) = support::autoperf(&[
        "run",
        out.to_str().unwrap(),
        "--users",
        "16",
        "--duration",
        "8s",
        "--warmup",
        "1s",
        "--quiet",
        "--set",
        "think_time=0s",
        "--out",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{o}{e}");
    let level = &support::run_json(&results)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    let total = level["requests"].as_f64().unwrap();
    assert!(total > 2000.0, "{level}");
    let mut worst: f64 = 0.0;
    for c in imported["classes"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let want = c["share"].as_f64().unwrap();
        let got = level["per_request"][name]["requests"]
            .as_f64()
            .unwrap_or(0.0)
            / total;
        eprintln!("{name}: log {want:.4}, run {got:.4}");
        assert!(
            (got - want).abs() <= 0.02,
            "{name}: run {got:.4} vs log {want:.4}"
        );
        worst = worst.max((got - want).abs());
    }
    eprintln!("largest share difference: {worst:.4} over {total} requests");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One HTTP/1.1 exchange on a new connection, as a browser's recorder
/// sees it: status, headers, body.
fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        loop {
            let (size, after) = rest.split_once("\r\n").unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    (status, headers, body)
}

/// Records the shop's login journey as a browser would save it: every
/// hop of every redirect its own entry, cookies sent by hand, a static
/// asset and a third-party script among them.
fn record_har(web: SocketAddr) -> serde_json::Value {
    let base = format!("http://{web}");
    let mut entries = Vec::new();
    let mut cookie: Option<String> = None;
    let mut clock = 1_700_000_000_000u64;
    let entry = |method: &str,
                 path: &str,
                 headers: Vec<(&str, String)>,
                 body: Option<(&str, String)>,
                 cookie: &mut Option<String>,
                 clock: &mut u64| {
        let mut sent = headers.clone();
        if let Some(c) = cookie.as_ref() {
            sent.push(("Cookie", c.clone()));
        }
        if let Some((mime, _)) = &body {
            sent.push(("Content-Type", mime.to_string()));
        }
        sent.push(("User-Agent", "Mozilla/5.0 (recorder)".into()));
        let (status, resp_headers, resp_body) = exchange(
            web,
            method,
            path,
            &sent,
            body.as_ref().map_or("", |b| b.1.as_str()),
        );
        for (k, v) in &resp_headers {
            if k.eq_ignore_ascii_case("set-cookie") {
                let pair = v.split(';').next().unwrap().to_string();
                *cookie = if pair.ends_with('=') {
                    None
                } else {
                    Some(pair)
                };
            }
        }
        let started = chrono_like(*clock);
        *clock += 40;
        let mime = resp_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map_or(String::new(), |(_, v)| v.clone());
        let location = resp_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("location"))
            .map_or(String::new(), |(_, v)| v.clone());
        let mut e = serde_json::json!({
            "startedDateTime": started,
            "time": 40,
            "request": {
                "method": method,
                "url": format!("{base}{path}"),
                "httpVersion": "HTTP/1.1",
                "headers": sent.iter().map(|(k, v)| serde_json::json!({"name": k, "value": v})).collect::<Vec<_>>(),
            },
            "response": {
                "status": status,
                "headers": resp_headers.iter().map(|(k, v)| serde_json::json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "content": {"mimeType": mime, "text": resp_body},
                "redirectURL": location,
            },
        });
        if let Some((mime, text)) = body {
            e["request"]["postData"] = serde_json::json!({"mimeType": mime, "text": text});
        }
        (e, status, location, resp_body)
    };
    let mut go = |method: &str,
                  path: &str,
                  headers: Vec<(&str, String)>,
                  body: Option<(&str, String)>,
                  think_ms: u64|
     -> String {
        let (e, status, location, body_text) =
            entry(method, path, headers, body, &mut cookie, &mut clock);
        entries.push(e);
        let mut last = body_text;
        // Follow redirects the way a browser does: a GET, its own entry.
        let mut location = (300..400).contains(&status).then_some(location);
        while let Some(to) = location.take() {
            let (e, status, next, body_text) =
                entry("GET", &to, vec![], None, &mut cookie, &mut clock);
            entries.push(e);
            last = body_text;
            location = (300..400).contains(&status).then_some(next);
        }
        clock += think_ms;
        last
    };
    go(
        "POST",
        "/shop/login",
        vec![],
        Some((
            "application/x-www-form-urlencoded",
            "user=user7&password=secret".into(),
        )),
        300,
    );
    go("GET", "/static/logo.svg", vec![], None, 10);
    let account = go(
        "GET",
        "/shop/account",
        vec![("Accept", "application/json".into())],
        None,
        200,
    );
    let csrf = serde_json::from_str::<serde_json::Value>(&account).unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_string();
    let products = go("GET", "/shop/products", vec![], None, 500);
    let p2 = serde_json::from_str::<serde_json::Value>(&products).unwrap()["products"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    go("GET", &format!("/shop/products/{p2}"), vec![], None, 400);
    go(
        "POST",
        "/shop/cart",
        vec![],
        Some(("application/json", format!("{{\"product\":\"{p2}\"}}"))),
        300,
    );
    go(
        "POST",
        "/shop/checkout",
        vec![("X-CSRF-Token", csrf)],
        None,
        600,
    );
    go("POST", "/shop/logout", vec![], None, 0);
    // A third-party script the page loaded: recorded, never requested here.
    entries.push(serde_json::json!({
        "startedDateTime": chrono_like(clock),
        "time": 10,
        "request": {"method": "GET", "url": "https://cdn.example.com/analytics.js", "headers": []},
        "response": {"status": 200, "headers": [], "content": {"mimeType": "application/javascript", "text": ""}},
    }));
    serde_json::json!({"log": {"version": "1.2", "creator": {"name": "test recorder", "version": "1"}, "entries": entries}})
}

/// Milliseconds since the epoch as RFC 3339 (UTC).
fn chrono_like(ms: u64) -> String {
    let s = (ms / 1000) as i64;
    let clf = clf_time(s); // dd/Mon/yyyy:HH:MM:SS +0000
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (d, rest) = clf.split_once('/').unwrap();
    let (mon, rest) = rest.split_once('/').unwrap();
    let (y, rest) = rest.split_once(':').unwrap();
    let time = &rest[..8];
    let m = months.iter().position(|x| *x == mon).unwrap() + 1;
    format!("{y}-{m:02}-{d}T{time}.{:03}Z", ms % 1000)
}

#[test]
fn a_recorded_login_journey_imports_and_runs_without_errors() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("import-har");
    let har = record_har(tb.web_addr);
    let path = dir.join("journey.har");
    std::fs::write(&path, serde_json::to_string_pretty(&har).unwrap()).unwrap();
    let out = dir.join("journey.yaml");
    let (stdout, stderr) = import(&[path.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    // Off a terminal, no progress is drawn.
    assert!(stderr.is_empty(), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    // Redirect hops folded into their steps; the asset and the CDN left out.
    assert!(stdout.contains("imported 7 steps"), "{stdout}\n{text}");
    assert!(
        stdout.contains("1 static assets") && stdout.contains("1 third-party hosts"),
        "{stdout}"
    );
    // The CSRF token and the product id come from the answers.
    assert!(text.contains("csrf: {json: \"$.csrf\"}"), "{text}");
    assert!(text.contains("\"X-CSRF-Token\": \"${csrf}\""), "{text}");
    assert!(text.contains("/shop/products/${raw(id)}"), "{text}");
    assert!(
        !text.contains("\"Cookie\":"),
        "the jar sends cookies: {text}"
    );
    let before = shop_orders(tb.web_addr);
    let results = dir.join("run");
    let (code, o, e) = support::autoperf(&[
        "run",
        out.to_str().unwrap(),
        "--users",
        "3",
        "--duration",
        "5s",
        "--warmup",
        "0s",
        "--quiet",
        "--out",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{o}{e}\n{text}");
    let level = &support::run_json(&results)["levels"][0];
    assert_eq!(level["errors"], 0, "{level}\n{text}");
    assert!(level["requests"].as_u64().unwrap() >= 7, "{level}");
    // Orders were placed: checkout got the right token every time.
    assert!(shop_orders(tb.web_addr) > before, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn shop_orders(web: SocketAddr) -> u64 {
    let (_, _, body) = exchange(web, "GET", "/shop/stats", &[], "");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["orders"].as_u64().unwrap()
}

#[test]
#[ignore = "writes a million-line log for bench/import.sh"]
fn write_a_log_for_the_benchmark() {
    let path = std::env::var("AUTOPERF_BENCH_LOG").expect("AUTOPERF_BENCH_LOG names the file");
    let lines = std::env::var("AUTOPERF_BENCH_LINES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    write_log(Path::new(&path), lines, 1);
}

#[test]
fn a_custom_format_groups_sessions_by_the_logged_cookie() {
    let dir = support::scratch_dir("import-custom");
    let log = dir.join("cookies.log");
    // Three users whose requests come from changing addresses (mobile
    // networks, proxies): by client they are nine sessions, by cookie
    // three. Each visit's first request comes before its cookie is set.
    let mut text = String::new();
    for user in 0..3 {
        for step in 0..4 {
            let sid = if step == 0 {
                "-".to_string()
            } else {
                format!("user{user}")
            };
            text.push_str(&format!(
                "10.0.{user}.{} - - [{}] \"GET /p/{step} HTTP/1.1\" 200 12 \"-\" \"ua\" sid={sid}\n",
                step.max(1),
                clf_time(1_700_000_000 + user * 100 + step * 5)
            ));
        }
    }
    std::fs::write(&log, text).unwrap();
    let format = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" sid=$cookie_sid"#;
    let (stdout, _) = import(&[
        log.to_str().unwrap(),
        "--out",
        dir.join("c.yaml").to_str().unwrap(),
        "--log-format",
        format,
    ]);
    assert!(stdout.contains("custom format) in 3 sessions"), "{stdout}");
    let (stdout, _) = import(&[
        log.to_str().unwrap(),
        "--out",
        dir.join("d.yaml").to_str().unwrap(),
        "--format",
        "combined",
    ]);
    assert!(stdout.contains("in 9 sessions"), "{stdout}");
    // A format that cannot work says why.
    let (code, _, e) = support::autoperf(&[
        "import",
        log.to_str().unwrap(),
        "--out",
        dir.join("e.yaml").to_str().unwrap(),
        "--log-format",
        "$remote_addr $status",
    ]);
    assert_eq!(code, Some(2));
    assert!(e.contains("--log-format: the format logs no time"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
