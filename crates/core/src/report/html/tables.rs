//! The report's tables: all levels at a glance, each level's requests and
//! tiers, and the profile's demand table (with its bar chart).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::record::{LevelRecord, TierDemands};
use crate::report::svg::BarChart;
use crate::report::svg::{esc, fnum};

pub(crate) fn head(h: &mut String, columns: &[&str]) {
    h.push_str("<div class=\"table-wrap\"><table>\n<tr>");
    for c in columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>\n");
}

pub(crate) fn row(h: &mut String, class: &str, cells: &[String]) {
    if class.is_empty() {
        h.push_str("<tr>");
    } else {
        let _ = write!(h, "<tr class=\"{class}\">");
    }
    for c in cells {
        let _ = write!(h, "<td>{c}</td>");
    }
    h.push_str("</tr>\n");
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Every level in run order, client-bottleneck levels shaded.
pub(super) fn levels(h: &mut String, levels: &[LevelRecord]) {
    h.push_str("<h3>All levels</h3>\n");
    head(
        h,
        &[
            "level",
            "users",
            "req/s",
            "mean ms",
            "p90 ms",
            "p99 ms",
            "errors",
            "think s",
            "client bottleneck",
            "steady",
            "why this level",
        ],
    );
    for l in levels {
        let why = l
            .capacity
            .as_ref()
            .map_or(String::new(), |c| esc(&c.reason));
        row(
            h,
            if l.client_bottleneck { "cb" } else { "" },
            &[
                l.level.to_string(),
                l.users.map_or("—".into(), |u| u.to_string()),
                fnum(l.throughput_rps, 1),
                fnum(l.response_time_ms.mean, 2),
                fnum(l.response_time_ms.p90, 2),
                fnum(l.response_time_ms.p99, 2),
                l.errors.to_string(),
                fnum(l.think_time_s.achieved, 3),
                yes_no(l.client_bottleneck),
                yes_no(l.steady_state),
                format!("<span class=\"why\">{why}</span>"),
            ],
        );
    }
    h.push_str("</table></div>\n");
}

pub(super) fn per_request(h: &mut String, l: &LevelRecord) {
    let _ = writeln!(
        h,
        "<p class=\"note\">{} requests, {} errors in {} s measured after {} s warm-up; think time {} s achieved ({} s configured); generator CPU {} of {} cores.</p>",
        l.requests,
        l.errors,
        fnum(l.duration_s, 1),
        fnum(l.warmup_s, 1),
        fnum(l.think_time_s.achieved, 3),
        fnum(l.think_time_s.configured, 3),
        fnum(l.client.cpu_util_cores, 2),
        l.client.cores
    );
    head(
        h,
        &[
            "request", "requests", "errors", "req/s", "mean ms", "p50 ms", "p90 ms", "p95 ms",
            "p99 ms", "max ms",
        ],
    );
    let mut all: Vec<(String, &crate::record::PerRequestRecord)> =
        l.per_request.iter().map(|(n, r)| (esc(n), r)).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, r) in all {
        let t = &r.response_time_ms;
        let errors = if r.errors_by_kind.is_empty() {
            r.errors.to_string()
        } else {
            let kinds: Vec<String> = r
                .errors_by_kind
                .iter()
                .map(|(k, n)| format!("{} {n}", esc(k)))
                .chain(
                    // The script's reasons, in its own words.
                    r.script_failures
                        .iter()
                        .map(|(reason, n)| format!("script: {} {n}", esc(reason))),
                )
                .collect();
            format!(
                "{} <span class=\"note\">({})</span>",
                r.errors,
                kinds.join(", ")
            )
        };
        // Requests a `skip_if:` skipped were not sent: named beside those
        // that were.
        let requests = match r.skipped {
            0 => r.requests.to_string(),
            n => format!("{} <span class=\"note\">(skipped {n})</span>", r.requests),
        };
        row(
            h,
            "",
            &[
                name,
                requests,
                errors,
                fnum(r.throughput_rps, 1),
                fnum(t.mean, 2),
                fnum(t.p50, 2),
                fnum(t.p90, 2),
                fnum(t.p95, 2),
                fnum(t.p99, 2),
                fnum(t.max, 2),
            ],
        );
    }
    let t = &l.response_time_ms;
    row(
        h,
        "",
        &[
            "<strong>all</strong>".into(),
            l.requests.to_string(),
            l.errors.to_string(),
            fnum(l.throughput_rps, 1),
            fnum(t.mean, 2),
            fnum(t.p50, 2),
            fnum(t.p90, 2),
            fnum(t.p95, 2),
            fnum(t.p99, 2),
            fnum(t.max, 2),
        ],
    );
    h.push_str("</table></div>\n");
}

/// Each workload class's users, requests and response times (`classes:`).
pub(super) fn per_class(h: &mut String, l: &LevelRecord) {
    if l.per_class.is_empty() {
        return;
    }
    head(
        h,
        &[
            "class", "share", "users", "requests", "errors", "req/s", "mean ms", "p50 ms",
            "p90 ms", "p99 ms", "max ms",
        ],
    );
    for (name, c) in &l.per_class {
        let t = &c.response_time_ms;
        row(
            h,
            "",
            &[
                esc(name),
                format!("{}%", fnum(c.share * 100.0, 1)),
                c.users.map_or("—".into(), |u| u.to_string()),
                c.requests.to_string(),
                c.errors.to_string(),
                fnum(c.throughput_rps, 1),
                fnum(t.mean, 2),
                fnum(t.p50, 2),
                fnum(t.p90, 2),
                fnum(t.p99, 2),
                fnum(t.max, 2),
            ],
        );
    }
    h.push_str("</table></div>\n");
}

pub(super) fn servers(h: &mut String, l: &LevelRecord) {
    if l.servers.is_empty() {
        return;
    }
    head(
        h,
        &[
            "tier",
            "cores",
            "CPU busy cores",
            "CPU ms/request",
            "net rx B/req",
            "net tx B/req",
            "disk read B/req",
            "disk write B/req",
        ],
    );
    for (tier, s) in &l.servers {
        let per_process: Vec<String> = s
            .cpu_ms_per_request
            .iter()
            .map(|(p, ms)| format!("{} {}", esc(p), fnum(*ms, 3)))
            .collect();
        row(
            h,
            "",
            &[
                esc(tier),
                s.cores.to_string(),
                fnum(s.cpu_util_cores, 3),
                per_process.join(", "),
                fnum(s.net_bytes_per_request.rx, 0),
                fnum(s.net_bytes_per_request.tx, 0),
                fnum(s.disk_bytes_per_request.read, 0),
                fnum(s.disk_bytes_per_request.write, 0),
            ],
        );
    }
    h.push_str("</table></div>\n");
}

/// `analysis.demands[request][tier]`: the table and a bar chart of CPU ms.
pub(super) fn demands(h: &mut String, demands: &BTreeMap<String, BTreeMap<String, TierDemands>>) {
    let tiers: BTreeSet<&str> = demands
        .values()
        .flat_map(|t| t.keys().map(String::as_str))
        .collect();
    let get = |req: &str, tier: &str| demands.get(req).and_then(|t| t.get(tier));
    let chart = BarChart {
        x_label: "CPU ms per request".into(),
        categories: demands.keys().cloned().collect(),
        keys: tiers.iter().map(|t| t.to_string()).collect(),
        values: demands
            .keys()
            .map(|r| {
                tiers
                    .iter()
                    .map(|t| get(r, t).map_or(0.0, |d| d.cpu_ms))
                    .collect()
            })
            .collect(),
    };
    h.push_str("<div class=\"charts\">\n<figure>\n<figcaption>CPU ms per request, by tier</figcaption>\n<ul class=\"legend\">");
    for (i, t) in tiers.iter().enumerate() {
        let _ = write!(
            h,
            "<li><span class=\"sw s{}\"></span>{}</li>",
            i % 6,
            esc(t)
        );
    }
    let _ = write!(
        h,
        "</ul>\n{}\n</figure>\n</div>\n",
        chart.render("CPU milliseconds per request for each tier")
    );
    head(
        h,
        &[
            "request",
            "tier",
            "CPU ms",
            "per process",
            "net rx B",
            "net tx B",
            "disk read B",
            "disk write B",
            "converged",
        ],
    );
    for req in demands.keys() {
        for tier in &tiers {
            let d = get(req, tier);
            let cell = |v: fn(&TierDemands) -> f64, decimals: usize| {
                d.map_or("—".into(), |d| fnum(v(d), decimals))
            };
            let per_process = d
                .map(|d| {
                    d.cpu_ms_per_process
                        .iter()
                        .map(|(p, v)| format!("{} {}", esc(p), fnum(*v, 3)))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let ignored = d
                .filter(|d| !d.ignored.is_empty())
                .map(|d| {
                    let names: Vec<String> = d.ignored.iter().map(|n| esc(n)).collect();
                    format!(
                        " <span class=\"note\">(ignored: {})</span>",
                        names.join(", ")
                    )
                })
                .unwrap_or_default();
            row(
                h,
                "",
                &[
                    esc(req),
                    esc(tier),
                    cell(|d| d.cpu_ms, 3),
                    format!("{per_process}{ignored}"),
                    cell(|d| d.net_rx_bytes, 0),
                    cell(|d| d.net_tx_bytes, 0),
                    cell(|d| d.disk_read_bytes, 0),
                    cell(|d| d.disk_write_bytes, 0),
                    d.map_or("—".into(), |d| yes_no(d.converged)),
                ],
            );
        }
    }
    h.push_str("</table></div>\n");
}
