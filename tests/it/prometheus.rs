//! Prometheus as a source: a tier's demands and memory read through PromQL
//! (`servers[].prometheus`) from a real Prometheus scraping the testbed's
//! `/metrics` every second, set against the agent's figures for the same
//! process in the same run; PromQL thresholds; and every bad input exits 3
//! with Prometheus's own words.

use crate::support;
use crate::support::prometheus::prometheus;

fn write(dir: &std::path::Path, yaml: &str) -> String {
    let path = dir.join("s.yaml");
    std::fs::write(&path, yaml).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn demands_and_memory_read_through_prometheus_match_the_agents() {
    let tb = support::testbed(2);
    let agent = support::agent();
    let prom = prometheus(
        "demands",
        &[
            ("web", tb.web_addr.to_string()),
            ("db", tb.db_addr.to_string()),
        ],
    );
    let dir = support::scratch_dir("prometheus-demands");
    let s = write(
        &dir,
        &format!(
            r#"
name: through-prometheus
target: {{base_url: "{web}"}}
think_time: 10ms
requests:
  db: {{path: "/db?web_ms=3&db_ms=2"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{wp}]}}
  - {{tier: db, agent: "{a}", processes: [{dp}]}}
  - tier: web_prom
    cores: 2
    prometheus:
      url: "{p}"
      cpu: 'sum(process_cpu_seconds_total{{job="web"}})'
      memory: 'sum(process_resident_memory_bytes{{job="web"}})'
  - tier: db_prom
    cores: 1
    prometheus: {{url: "{p}", cpu: 'process_cpu_seconds_total{{job="db"}}'}}
thresholds:
  - promql: {{query: 'process_resident_memory_bytes{{job="web"}}', below: 1e12}}
  - promql: {{query: 'process_resident_memory_bytes{{job="web"}}', below: 1000}}
  - promql: {{query: 'up', above: 0.5}}
"#,
            web = tb.web_url,
            a = agent.url(),
            wp = tb.web_process,
            dp = tb.db_process,
            p = prom.url,
        ),
    );
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        &s,
        "--users",
        "4",
        "--duration",
        "20s",
        "--warmup",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    // The second threshold fails: the web tier holds more than 1000 bytes.
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    let servers = &run["levels"][0]["servers"];
    let demand = |tier: &str| -> f64 {
        servers[tier]["cpu_ms_per_request"]
            .as_object()
            .unwrap_or_else(|| panic!("tier {tier} not measured: {servers}"))
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum()
    };
    // Both read the same processes over the same window: what Prometheus
    // scraped differs from the agent's reading by at most a scrape
    // interval at each end of a 20 s window.
    for (agent_tier, prom_tier) in [("web", "web_prom"), ("db", "db_prom")] {
        let (a, p) = (demand(agent_tier), demand(prom_tier));
        eprintln!("{prom_tier}: {p:.3} ms a request through Prometheus, {a:.3} from the agent");
        assert!(
            a > 0.5 && (p - a).abs() <= 0.10 * a,
            "{prom_tier} {p} ms vs the agent's {a} ms per request: {servers}"
        );
    }
    let memory = |tier: &str| servers[tier]["memory_mean_bytes"].as_f64().unwrap();
    let (a, p) = (memory("web"), memory("web_prom"));
    eprintln!("web memory: {p} bytes through Prometheus, {a} from the agent");
    assert!(
        a > 0.0 && (p - a).abs() <= 0.10 * a,
        "memory {p} vs {a}: {servers}"
    );
    assert_eq!(servers["web_prom"]["replicas"], 1, "{servers}");
    assert_eq!(servers["web_prom"]["cores"], 2, "{servers}");
    // The PromQL thresholds, judged on the query's worst point.
    let results = run["analysis"]["thresholds"].as_array().unwrap();
    assert_eq!(results[0]["passed"], true, "{results:?}");
    assert_eq!(results[1]["passed"], false, "{results:?}");
    let highest = results[1]["actual"].as_f64().unwrap();
    assert!(
        highest >= 0.9 * a && highest <= 1.5 * servers["web"]["memory_max_bytes"].as_f64().unwrap(),
        "{results:?}"
    );
    assert_eq!(results[2]["passed"], true, "{results:?}");
    assert_eq!(results[2]["unit"], "value");
    let figure = &run["levels"][0]["promql"]["up"];
    assert!(figure["points"].as_u64().unwrap() >= 10, "{figure}");
    assert!(
        stdout.contains("FAIL  promql `process_resident_memory_bytes{job=\"web\"}` < 1000"),
        "{stdout}"
    );
    // A scrape every second over a 20 s level is fine grained enough.
    assert!(!stderr.contains("scraped about every"), "{stderr}");
}

#[test]
fn a_prometheus_that_cannot_answer_stops_the_run_at_its_start() {
    let tb = support::testbed(1);
    let prom = prometheus("bad-input", &[("web", tb.web_addr.to_string())]);
    let dir = support::scratch_dir("prometheus-bad");
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let run = |servers: &str, thresholds: &str| {
        let s = write(
            &dir,
            &format!(
                "name: bad\ntarget: {{base_url: \"{}\"}}\nrequests:\n  h: {{path: /health}}\nservers:\n{servers}\nthresholds:\n{thresholds}\n",
                tb.web_url
            ),
        );
        let out = dir.join("out");
        let _ = std::fs::remove_dir_all(&out);
        let (code, stdout, stderr) = support::autoperf(&[
            "run",
            &s,
            "--users",
            "1",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(3), "{stdout}\n{stderr}");
        stderr
    };
    let tier = |url: &str, cpu: &str| {
        format!("  - {{tier: web, cores: 1, prometheus: {{url: \"{url}\", cpu: '{cpu}'}}}}")
    };
    let none = "  - p99 < 10s";
    let cpu = "process_cpu_seconds_total{job=\"web\"}";
    let err = run(&tier(&format!("http://{closed}"), cpu), none);
    assert!(
        err.contains("tier web: Prometheus at http://") && err.contains("no answer"),
        "{err}"
    );
    // Prometheus's own message for a syntax error.
    let err = run(&tier(&prom.url, "sum(process_cpu_seconds_total"), none);
    assert!(
        err.contains("bad_data") && err.contains("parse error"),
        "{err}"
    );
    let err = run(&tier(&prom.url, "no_such_metric_total"), none);
    assert!(
        err.contains("`no_such_metric_total`") && err.contains("returns no series"),
        "{err}"
    );
    // A threshold's query, likewise.
    let err = run(
        &tier(&prom.url, cpu),
        "  - promql: {query: 'rate(up[', below: 1}",
    );
    assert!(
        err.contains("threshold on PromQL") && err.contains("bad_data"),
        "{err}"
    );
}
