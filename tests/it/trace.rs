//! `autoperf run --trace` against the testbed's shop: every exchange
//! printed as it happens — the request as sent, the redirect hops, the
//! answer, the checks, the values extracted, the transition and the
//! condition it was drawn under — and exit 1 when an exchange failed.

use crate::support;

use std::path::Path;

fn scenario(dir: &Path, web_url: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/shop-cart-limit.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", web_url);
    let path = dir.join("cart-limit.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_trace_shows_each_exchange_and_why_the_session_went_where_it_did() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("trace");
    let s = scenario(&dir, &tb.web_url);
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &s,
        "--trace",
        "--users",
        "2",
        "--sessions",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for wanted in [
        "== user 2, session 2",
        "-- login",
        "> POST /shop/login HTTP/1.1",
        "> user=user",
        "< HTTP/1.1 303 See Other",
        "   (redirect followed)",
        "> GET /shop/account HTTP/1.1",
        "< {\"cart\":",
        "   = 200 in ",
        "   check status: passed",
        "   extracted count = \"",
        "(from cart: add 0.8 when `${count} < 3` held, checkout 0.2)",
        "(not waited in a trace)",
    ] {
        assert!(stdout.contains(wanted), "no {wanted:?} in:\n{stdout}");
    }
    // The summary adds up what was printed; nothing failed.
    let exchanges = stdout.lines().filter(|l| l.starts_with("   = ")).count();
    let summary = stdout.lines().last().unwrap();
    assert!(
        summary.starts_with(&format!(
            "traced 2 user(s) × 2 session(s): {exchanges} exchanges, 0 failed"
        )),
        "{summary}"
    );
    // A trace measures nothing and writes no results.
    assert!(!out.exists());
}

#[test]
fn a_trace_whose_check_fails_says_which_and_exits_1() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("trace-fails");
    let s = scenario(&dir, &tb.web_url);
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &s,
        "--trace",
        "--set",
        "requests.cart.check.status=201",
    ]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("   check status: FAILED"), "{stdout}");
    assert!(stdout.contains("   = FAILED: check_failed"), "{stdout}");
    let summary = stdout.lines().last().unwrap();
    assert!(!summary.contains(" 0 failed"), "{summary}");
    // A response that failed its check was not extracted from: the trace
    // does not show the old value as if it had been.
    for exchange in stdout.split("\n-- ").filter(|e| e.starts_with("cart\n")) {
        assert!(!exchange.contains("extracted"), "{exchange}");
    }
}
