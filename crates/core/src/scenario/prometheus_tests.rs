//! Tiers read through Prometheus (`servers[].prometheus`) and PromQL
//! thresholds: what decodes, and the located errors for what does not.

use super::tests::{errors, expect, ok};
use super::*;

const HEAD: &str = "target: {base_url: 'http://127.0.0.1:1'}\nrequests:\n  a: {path: /a}\n";

#[test]
fn a_tier_read_through_prometheus_decodes_with_its_credentials() {
    std::env::set_var("AUTOPERF_TEST_PROM_PASSWORD", "s3cret");
    let s = ok(&format!(
        "{HEAD}servers:\n  - tier: web\n    cores: 4\n    prometheus:\n      url: https://prom.example:9443/prefix\n      cpu: 'sum(rate_free_counter{{job=\"web\"}})'\n      memory: 'sum(rss{{job=\"web\"}})'\n      username: me\n      password: ${{env.AUTOPERF_TEST_PROM_PASSWORD}}\nthresholds:\n  - promql: {{query: 'max(lag)', below: 1000}}\n  - promql: {{query: 'up', above: 0.5, url: 'http://other:9090'}}\n"
    ));
    let web = &s.servers[0];
    assert_eq!(web.by, Selector::Prometheus);
    assert_eq!(web.processes, ["web"]);
    assert_eq!(web.cores, Some(4));
    let p = web.prometheus.as_ref().unwrap();
    assert!(p.url.tls && p.url.port == 9443 && p.url.path_prefix == "/prefix");
    assert_eq!(p.memory.as_deref(), Some("sum(rss{job=\"web\"})"));
    // base64("me:s3cret")
    assert_eq!(p.authorization.as_deref(), Some("Basic bWU6czNjcmV0"));
    let (lag, up) = (&s.thresholds[0], &s.thresholds[1]);
    assert_eq!(
        (lag.metric, lag.op, lag.bound),
        (Metric::Promql, Comparison::Less, 1000.0)
    );
    let q = lag.promql.as_ref().unwrap();
    // The one Prometheus `servers:` reads, and its credentials.
    assert_eq!(q.url, p.url);
    assert_eq!(q.authorization, p.authorization);
    assert_eq!(lag.source, "promql `max(lag)` < 1000");
    let q = up.promql.as_ref().unwrap();
    assert_eq!(
        (up.op, q.url.host.as_str(), q.authorization.as_ref()),
        (Comparison::Greater, "other", None)
    );
}

#[test]
fn prometheus_mistakes_are_located() {
    let server = |body: &str| format!("{HEAD}servers:\n  - {body}\n");
    expect(
        &server("{tier: web, prometheus: {url: 'http://p:9090', cpu: 'x'}}"),
        "missing required key `cores`",
        5,
        5,
    );
    expect(
        &server("{tier: web, cores: 1, agent: 'http://a:1', prometheus: {url: 'http://p:9090', cpu: 'x'}}"),
        "found both",
        5,
        34,
    );
    expect(
        &server(
            "{tier: web, cores: 1, processes: [x], prometheus: {url: 'http://p:9090', cpu: 'x'}}",
        ),
        "`processes` in a `servers` entry measured through `prometheus`",
        5,
        38,
    );
    expect(
        &server("{tier: web, cores: 1, prometheus: {url: 'http://p:9090'}}"),
        "missing required key `cpu`",
        5,
        39,
    );
    expect(
        &server("{tier: web, cores: 1, prometheus: {url: 'http://p:9090', cpu: 'x', token: t, username: u}}"),
        "either `token` or both `username` and `password`",
        5,
        39,
    );
    expect(
        &server("{tier: web, cores: 1, prometheus: {url: 'ftp://p', cpu: 'x'}}"),
        "Prometheus's URL",
        5,
        45,
    );
    // A PromQL threshold needs a bound, and a URL when `servers:` reads none.
    let threshold = |body: &str| format!("{HEAD}thresholds:\n  - {body}\n");
    expect(
        &threshold("{promql: {query: up}}"),
        "missing `below` or `above`",
        5,
        14,
    );
    expect(
        &threshold("{promql: {query: up, below: 1}}"),
        "missing `url` in `promql`",
        5,
        14,
    );
    expect(
        &threshold("{promql: {query: up, below: one, url: 'http://p:9090'}}"),
        "expected a number",
        5,
        33,
    );
    assert!(errors(&threshold(
        "{promql: {query: up, below: 1, above: 2, url: 'http://p:1'}}"
    ))
    .iter()
    .any(|d| d.message.contains("found both")));
    // The string grammar points to the map.
    expect(&threshold("promql < 5"), "expected a metric", 5, 5);
}
