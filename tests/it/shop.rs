//! examples/shop.yaml, a logged-in journey (login, cookie, redirects,
//! checks, values from JSON), against the testbed's shop over HTTP/1.1,
//! h2c, HTTPS with h2 by ALPN and HTTPS with HTTP/1.1 — through `autoperf
//! run` and `autoperf capacity` — with the shop's own counters saying what
//! it received.

use crate::support;

use std::path::Path;

/// The example, aimed at `base_url` with `http` and, for HTTPS, the
/// testbed's certificate.
fn example(dir: &Path, base_url: &str, http: &str, ca_file: Option<&Path>) -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop.yaml"))
            .unwrap();
    assert!(text.contains("base_url: \"http://127.0.0.1:8080\""));
    assert!(text.contains("http: auto"));
    let tls = ca_file.map_or(String::new(), |p| {
        format!("\n  tls: {{ca_file: \"{}\"}}", p.display())
    });
    let text = text
        .replace("http://127.0.0.1:8080", base_url)
        .replace("http: auto", &format!("http: \"{http}\"{tls}"));
    let path = dir.join(format!("shop-{http}-{}.yaml", base_url.len()));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// The shop's counters (`GET /shop/stats`).
pub(crate) fn stats(web: std::net::SocketAddr) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(web).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"GET /shop/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap();
    serde_json::from_str(body).unwrap()
}

/// The users of each run.
const USERS: u64 = 6;

fn run(scenario: &str, out: &Path) -> serde_json::Value {
    let (code, stdout, stderr) = support::run_briefly(scenario, &USERS.to_string(), out);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let run = support::run_json(out);
    let level = &run["levels"][0];
    assert_eq!(level["errors"], 0, "{level}");
    let per = &level["per_request"];
    for name in ["login", "products", "product", "add", "checkout", "logout"] {
        assert!(per[name]["requests"].as_u64() > Some(0), "{name}: {per}");
        for (check, count) in per[name]["checks"].as_object().unwrap() {
            assert_eq!(count["failed"], 0, "{name}.{check}: {count}");
        }
    }
    // login → account, add → cart, checkout → order, logout → products.
    let redirects = |n: &str| per[n]["redirects"].as_u64().unwrap_or(0);
    assert_eq!(
        redirects("login"),
        per["login"]["requests"].as_u64().unwrap()
    );
    assert_eq!(
        redirects("checkout"),
        per["checkout"]["requests"].as_u64().unwrap()
    );
    run
}

#[test]
fn the_shop_journey_runs_green_over_http1_h2c_and_https() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("shop");
    let https = tb.https_url.clone().expect("the web tier serves HTTPS");
    let ca = tb
        .ca_file
        .clone()
        .expect("and says which certificate to trust");
    let mut before = stats(tb.web_addr);
    for (i, (url, http, tls)) in [
        (tb.web_url.as_str(), "auto", false),
        (tb.web_url.as_str(), "2", false),
        (https.as_str(), "auto", true),
        (https.as_str(), "1.1", true),
    ]
    .into_iter()
    .enumerate()
    {
        let scenario = example(&dir, url, http, tls.then_some(ca.as_path()));
        let run = run(&scenario, &dir.join(format!("out{i}")));
        let after = stats(tb.web_addr);
        let grew = |key: &str| after[key].as_u64().unwrap() - before[key].as_u64().unwrap();
        let by = |proto: &str| {
            after["protocols"][proto].as_u64().unwrap_or(0)
                - before["protocols"][proto].as_u64().unwrap_or(0)
        };
        let what = format!("{url} http {http}: {after}");
        let level = &run["levels"][0];
        let logins = level["per_request"]["login"]["requests"].as_u64().unwrap();
        // A level ends at its deadline: a login the shop had answered but
        // whose response was still on its way is the shop's, not the run's
        // — at most one per user.
        assert!(
            (logins..=logins + USERS).contains(&grew("logins")),
            "{logins} logins measured: {what}"
        );
        assert_eq!(grew("unauthorised"), 0, "every page had its cookie: {what}");
        assert!(
            grew("orders") > 0 && grew("carts_added") >= grew("orders"),
            "{what}"
        );
        // HTTP/2 where asked or offered by ALPN; HTTP/1.1 otherwise.
        let h2 = http == "2" || (http == "auto" && tls);
        let (want, other) = if h2 {
            ("HTTP/2.0", "HTTP/1.1")
        } else {
            ("HTTP/1.1", "HTTP/2.0")
        };
        assert!(by(want) > 0 && by(other) == 0, "{what}");
        // run.json says which the connections spoke.
        let h2_connections = level["client"]["http2_connections"].as_u64().unwrap_or(0);
        assert_eq!(h2_connections > 0, h2, "{}", level["client"]);
        assert_eq!(grew("tls") > 0, tls, "{what}");
        if tls {
            assert!(
                level["client"]["tls_handshakes"].as_u64() > Some(0),
                "{level}"
            );
        }
        // compression: true, and the shop's JSON is not compressed: both
        // sizes agree and are counted.
        let products = &level["per_request"]["products"];
        assert!(products["body_bytes"].as_u64() > Some(100), "{products}");
        assert_eq!(products["body_bytes"], products["decoded_bytes"]);
        before = after;
    }

    // A capacity analysis of the journey over h2 with TLS: two levels.
    let scenario = example(&dir, &https, "2", Some(&ca));
    let out = dir.join("capacity");
    let (code, stdout, stderr) = support::autoperf(&[
        "capacity",
        &scenario,
        "--levels",
        "2,4",
        "--duration",
        "2s",
        "--no-agents",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let run = support::run_json(&out);
    let levels = run["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{run}");
    for level in levels {
        assert_eq!(level["errors"], 0, "{level}");
    }
    assert!(
        stats(tb.web_addr)["protocols"]["HTTP/2.0"].as_u64()
            > before["protocols"]["HTTP/2.0"].as_u64()
    );
}

#[test]
fn the_shop_journey_is_profiled_over_https_h2() {
    // Profiling loads each request type alone, its prerequisites (login,
    // the catalogue, a product) run in the warm-up: the cart is only
    // reached with the cookie and values of the steps before it.
    let tb = support::testbed(1);
    let agent = support::agent();
    let dir = support::scratch_dir("shop-profile");
    let https = tb.https_url.clone().expect("the web tier serves HTTPS");
    let ca = tb
        .ca_file
        .clone()
        .expect("and says which certificate to trust");
    let scenario = example(&dir, &https, "2", Some(&ca));
    let text = std::fs::read_to_string(&scenario).unwrap()
        + &format!(
            "servers:\n  - {{tier: web, agent: \"{}\", processes: [{}]}}\ncapacity: {{min_duration: 3s, max_duration: 8s}}\n",
            agent.url(),
            tb.web_process
        );
    std::fs::write(&scenario, text).unwrap();
    let before = stats(tb.web_addr);
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "profile",
        &scenario,
        "--requests",
        "products,add",
        "--users",
        "2",
        "--warmup",
        "1s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let run = support::run_json(&out);
    assert_eq!(run["mode"], "profile");
    for level in run["levels"].as_array().unwrap() {
        assert_eq!(level["errors"], 0, "{level}");
    }
    let d = &run["analysis"]["demands"];
    for name in ["products", "add"] {
        let cpu = d[name]["web"]["cpu_ms_per_process"][&tb.web_process].as_f64();
        assert!(cpu > Some(0.0), "{name}: {d}");
    }
    let after = stats(tb.web_addr);
    let grew = |key: &str| after[key].as_u64().unwrap() - before[key].as_u64().unwrap();
    assert!(
        grew("carts_added") > 0 && grew("unauthorised") == 0,
        "{after}"
    );
    assert!(grew("tls") > 0, "{after}");
}

#[test]
fn a_server_without_h2c_stops_an_http2_run_at_its_start() {
    // A server that answers one HTTP/1.1 response to whatever came first
    // (here the HTTP/2 preface), then closes.
    let (addr, _) = support::misbehaving_server(support::Misbehaviour::AnswerOnceThenClose);
    let dir = support::scratch_dir("no-h2c");
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        format!(
            "name: h2\ntarget: {{base_url: \"http://{addr}\", http: 2}}\nrequests:\n  a: {{path: /}}\n"
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        path.to_str().unwrap(),
        "--users",
        "1",
        "--duration",
        "1s",
        "--quiet",
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(
        stderr.contains("h2c") && stderr.contains("target.http"),
        "{stderr}"
    );
}
