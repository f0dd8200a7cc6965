use std::path::Path;

use super::Correlator;
use crate::import::har::fixture::Exchange;
use crate::import::har::{recording, yaml};
use crate::import::{har_scenario, HarOptions, Outputs};

/// A session of `n` steps: a login, then steps that each send the
/// token and the id the answer before gave; every answer gives the
/// token again and an id of its own.
fn long_session(n: usize) -> String {
    let token = "tok-0123456789abcdefghij";
    let entries: Vec<_> = (0..n)
        .map(|i| {
            let (url, headers) = match i {
                0 => ("http://a/login".to_string(), serde_json::json!([])),
                _ => (
                    format!("http://a/items/{}", 1000 + i - 1),
                    serde_json::json!([{"name": "Authorization", "value": format!("Bearer {token}")}]),
                ),
            };
            serde_json::json!({
                "startedDateTime": format!("2024-01-01T00:00:00.{i:06}Z"), "time": 0.5,
                "request": {"method": "GET", "url": url, "headers": headers},
                "response": {"status": 200, "headers": [], "content": {
                    "mimeType": "application/json",
                    "text": format!("{{\"token\": \"{token}\", \"id\": {}}}", 1000 + i),
                }},
            })
        })
        .collect();
    serde_json::json!({"log": {"entries": entries}}).to_string()
}

#[test]
fn correlating_a_long_session_does_linear_work() {
    // Each request's values were given by every answer before it: a
    // search of those answers did n²/2 comparisons (7.5 s for 16,000
    // entries). The index does a binary search of each value's answers.
    let n = 4096;
    let r = recording::read(&long_session(n), &[], &mut ()).unwrap();
    let mut c = Correlator::new(&r.steps, &mut ());
    let names = yaml::request_names(&r.steps);
    let journey = yaml::Journey {
        source: Path::new("long.har"),
        report: Path::new("long.import.html"),
        recording: &r,
        base_url: "http://a",
        names: &names,
    };
    let y = yaml::print(&journey, &mut c, &mut ());
    // Each step after the first extracts the token and the id from the
    // answer before it: two correlations a step.
    assert_eq!(c.notes.len(), 2 * (n - 1));
    assert!(y.contains("      id_4095: {json: \"$.id\"}"), "{y}");
    assert!(
        y.contains("path: \"/items/${raw(id_4095)}\"\n    headers:\n      \"Authorization\": \"Bearer ${token_4095}\""),
        "{}",
        &y[y.len() - 2000..]
    );
    // A path segment, a query value, the token: a few lookups a step,
    // each at most log2(n) + 1 comparisons.
    let log2 = u64::from(usize::BITS - n.leading_zeros());
    let lookups = 4 * n as u64;
    assert!(
        c.producers.probes.get() <= lookups * (log2 + 1),
        "{} comparisons for {n} steps",
        c.producers.probes.get()
    );
    // 2n variables from two hints: a try or two each, not the n²
    // of counting up from `_2` every time.
    assert!(c.vars.tries <= 2 * 2 * n as u64, "{}", c.vars.tries);
}

#[test]
fn typed_values_stay_answers_values_are_extracted() {
    let h = |n: &str, v: &str| serde_json::json!([{"name": n, "value": v}]);
    let mut b64 = Exchange {
        started: "2024-01-01T00:00:04Z",
        url: "http://a/b64",
        mime: "application/json",
        body: "eyJrIjoidjEyMzQ1Njc4In0=",
        ..Exchange::default()
    }
    .json();
    b64["response"]["content"]["encoding"] = "base64".into();
    let entries = vec![
        // The user types `typed123`; the answer echoes it and gives 4711.
        Exchange {
            started: "2024-01-01T00:00:00Z",
            url: "http://a/find?who=typed123",
            request_headers: h("Cookie", "s=1"),
            response_headers: h("X-Token", "tk-99887766"),
            mime: "application/json",
            body: "{\"who\":\"typed123\",\"order\":4711}",
            ..Exchange::default()
        }
        .json(),
        Exchange {
            started: "2024-01-01T00:00:01Z",
            method: "POST",
            url: "http://a/orders/4711",
            request_headers: h("Authorization", "Bearer tk-99887766"),
            ..Exchange::default()
        }
        .json(),
        Exchange {
            started: "2024-01-01T00:00:02Z",
            url: "http://a/page",
            status: 304,
            ..Exchange::default()
        }
        .json(),
        Exchange {
            started: "2024-01-01T00:00:03Z",
            url: "http://a/blocked",
            status: 0,
            ..Exchange::default()
        }
        .json(),
        b64,
    ];
    let har = serde_json::json!({"log": {"entries": entries}});
    let out = Outputs::for_scenario(Path::new("/nonexistent/j.yaml"));
    let s = har_scenario(
        &har.to_string(),
        Path::new("j.har"),
        &HarOptions::default(),
        &out,
    )
    .unwrap();
    let y = &s.yaml;
    assert!(
        y.contains("path: \"/find?who=typed123\""),
        "typed input stays: {y}"
    );
    assert!(y.contains("path: \"/orders/${raw(order)}\""), "{y}");
    assert!(y.contains("order: {json: \"$.order\"}"), "{y}");
    assert!(
        y.contains("\"Authorization\": \"Bearer ${x_token}\""),
        "{y}"
    );
    assert!(y.contains("x_token: {header: \"X-Token\"}"), "{y}");
    // A number from an answer in a JSON body: raw JSON text keeps it a number.
    assert!(
        y.contains(r#"body: "{\"n\": ${order}, \"who\": \"typed123\"}""#),
        "{y}"
    );
    assert!(y.contains("check: {status: [200, 304]}"), "{y}");
    assert!(
        !y.contains("/blocked") && s.skipped["requests without an answer"] == 1,
        "{y}"
    );
    assert!(!y.contains("\"Cookie\":"), "{y}");
    assert_eq!(s.steps, 4);
    if let Err(d) = crate::scenario::decode::decode(y, Path::new("/nonexistent/j.yaml"), &[]) {
        panic!("{d:?}\n{y}");
    }
}
