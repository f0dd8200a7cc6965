//! The open capacity search's part of the report: its verdict cards, the
//! delivered rate and p99 against the offered rate (the bracket marked),
//! with lag thresholds each consumer group's lag trend against it,
//! every level with the SLO it failed, and with `--vary` Theodolite's
//! scalability result: the highest passing rate per resource value and the
//! resource each load needs.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::card;
use super::figure::{figure, Key};
use crate::record::{LevelRecord, RateAnalysis, RunRecord, SloVerdict, Unit};
use crate::report::svg::{esc, fnum, BarChart, ErrorBar, HLine, LineChart, Series, VLine};

fn rate(r: Option<f64>) -> String {
    r.map_or("—".to_string(), |r| format!("{} /s", fnum(r, 1)))
}

pub(super) fn cards(h: &mut String, a: &RateAnalysis) {
    card(
        h,
        "verdict",
        "Highest passing rate",
        &esc(&rate(a.found.max_passing_rate_rps)),
    );
    let why = a.found.failed_slo.as_ref().map_or(String::new(), |s| {
        format!("<br><small>{}</small>", esc(&s.failure_text()))
    });
    card(
        h,
        "verdict",
        "First failing rate",
        &format!("{}{why}", esc(&rate(a.found.first_failing_rate_rps))),
    );
    if let Some(g) = a.found.generator_limit_rps {
        card(
            h,
            "verdict",
            "Generator's limit",
            &format!(
                "{} /s<br><small>autoperf could not keep this rate: not the system's limit</small>",
                fnum(g, 1)
            ),
        );
    }
    if let Some(c) = a.found.capacity_rps {
        card(
            h,
            "",
            "Capacity past saturation",
            &format!("{} /s", fnum(c, 1)),
        );
    }
    card(
        h,
        "",
        "SLO rule",
        &format!(
            "≥ {}% of the rate delivered<br><small>bracket within {}%</small>",
            fnum(a.min_achieved * 100.0, 1),
            fnum(a.rate_precision * 100.0, 1)
        ),
    );
}

/// The levels of each series (one, without `--vary`), by offered rate.
fn by_series(levels: &[LevelRecord]) -> BTreeMap<String, Vec<&LevelRecord>> {
    let mut out: BTreeMap<String, Vec<&LevelRecord>> = BTreeMap::new();
    for l in levels
        .iter()
        .filter(|l| !l.interrupted && l.invalid.is_none())
    {
        let Some(judged) = &l.rate_search else {
            continue;
        };
        let key = judged
            .series
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        out.entry(key).or_default().push(l);
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| {
            a.rate_rps
                .unwrap_or(0.0)
                .total_cmp(&b.rate_rps.unwrap_or(0.0))
        });
    }
    out
}

pub(super) fn section(h: &mut String, record: &RunRecord, a: &RateAnalysis) {
    h.push_str("<h2>Highest rate meeting the SLOs</h2>\n");
    let series = by_series(&record.levels);
    if series.is_empty() {
        h.push_str("<p class=\"note\">No level finished.</p>\n");
        return;
    }
    let marks = |c: &mut LineChart| {
        if a.series.is_empty() {
            if let Some(p) = a.found.max_passing_rate_rps {
                c.vlines.push(VLine {
                    x: p,
                    label: "highest passing".into(),
                    class: "mark",
                });
            }
            if let Some(f) = a.found.first_failing_rate_rps {
                c.vlines.push(VLine {
                    x: f,
                    label: "first failing".into(),
                    class: "bad",
                });
            }
        }
    };
    let name = |k: &str| {
        if k.is_empty() {
            "delivered".to_string()
        } else {
            k.to_string()
        }
    };
    let mut delivered = LineChart::new("offered rate (arrivals/s)", "delivered (sessions/s)");
    let mut p99 = LineChart::new("offered rate (arrivals/s)", "p99 (ms)");
    let mut top = 0.0f64;
    for (i, (key, levels)) in series.iter().enumerate() {
        let points = |f: &dyn Fn(&LevelRecord) -> f64| -> Vec<(f64, f64)> {
            levels
                .iter()
                .map(|l| (l.rate_rps.unwrap_or(0.0), f(l)))
                .collect()
        };
        top = levels.iter().filter_map(|l| l.rate_rps).fold(top, f64::max);
        delivered.series.push(Series {
            name: name(key),
            colour: i,
            points: points(&|l| l.rate_search.as_ref().map_or(0.0, |j| j.delivered_rps)),
            dashed: false,
            markers: true,
        });
        p99.series.push(Series {
            name: if key.is_empty() {
                "p99".into()
            } else {
                key.clone()
            },
            colour: i,
            points: points(&|l| l.response_time_ms.p99),
            dashed: false,
            markers: true,
        });
    }
    delivered.series.push(Series {
        name: "offered".into(),
        colour: 5,
        points: vec![(0.0, 0.0), (top, top)],
        dashed: true,
        markers: false,
    });
    marks(&mut delivered);
    marks(&mut p99);
    // The latency SLOs, drawn where p99 is (the first level's list holds
    // every SLO).
    let first = series.values().flatten().next();
    for slo in first
        .and_then(|l| l.rate_search.as_ref())
        .into_iter()
        .flat_map(|j| &j.slos)
    {
        if slo.unit == Unit::Ms && slo.source.contains("p99") {
            p99.hlines.push(HLine {
                y: slo.bound,
                label: slo.source.clone(),
                colour: 3,
            });
        }
    }
    let keys: Vec<String> = series.keys().map(|k| name(k)).collect();
    let mut legend: Vec<Key> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Key::Line(k, i, false))
        .collect();
    legend.push(Key::Dashed("offered"));
    figure(
        h,
        "Delivered against offered rate",
        &legend,
        &delivered.render("delivered rate against offered rate"),
    );
    let p99_keys: Vec<String> = series
        .keys()
        .map(|k| {
            if k.is_empty() {
                "p99".into()
            } else {
                k.clone()
            }
        })
        .collect();
    let legend: Vec<Key> = p99_keys
        .iter()
        .enumerate()
        .map(|(i, k)| Key::Line(k, i, false))
        .collect();
    figure(
        h,
        "p99 response time against offered rate",
        &legend,
        &p99.render("p99 against offered rate"),
    );
    lag_chart(h, &series, first.and_then(|l| l.rate_search.as_ref()));
    if !a.series.is_empty() {
        scalability(h, a);
    }
    levels_table(h, &record.levels);
}

/// With lag thresholds, each consumer group's lag trend against the
/// offered rate (Theodolite's view: the application keeps up where the
/// trend stays flat), their bounds drawn.
fn lag_chart(
    h: &mut String,
    series: &BTreeMap<String, Vec<&LevelRecord>>,
    judged: Option<&crate::record::RateLevel>,
) {
    let mut chart = LineChart::new("offered rate (arrivals/s)", "lag trend (records/s)");
    let mut names = Vec::new();
    for (key, levels) in series {
        let groups: std::collections::BTreeSet<&String> =
            levels.iter().flat_map(|l| l.kafka_lag.keys()).collect();
        for group in groups {
            let points: Vec<(f64, f64)> = levels
                .iter()
                .filter_map(|l| Some((l.rate_rps?, l.kafka_lag.get(group)?.trend_rps)))
                .collect();
            // Each trend's 95% interval, where the level had readings enough.
            chart.error_bars.extend(levels.iter().filter_map(|l| {
                let f = l.kafka_lag.get(group)?;
                let ci = f.trend_ci95_rps?;
                Some(ErrorBar {
                    x: l.rate_rps?,
                    lo: f.trend_rps - ci,
                    hi: f.trend_rps + ci,
                    colour: names.len(),
                })
            }));
            let name = if key.is_empty() {
                group.clone()
            } else {
                format!("{group} {key}")
            };
            chart.series.push(Series {
                name: name.clone(),
                colour: names.len(),
                points,
                dashed: false,
                markers: true,
            });
            names.push(name);
        }
    }
    if names.is_empty() {
        return;
    }
    for slo in judged.into_iter().flat_map(|j| &j.slos) {
        if slo.unit == Unit::RecordsPerSecond {
            chart.hlines.push(HLine {
                y: slo.bound,
                label: slo.source.clone(),
                colour: 3,
            });
        }
    }
    let legend: Vec<Key> = names
        .iter()
        .enumerate()
        .map(|(i, k)| Key::Line(k, i, false))
        .collect();
    figure(
        h,
        "Consumer lag trend against offered rate",
        &legend,
        &chart.render("consumer lag trend against offered rate"),
    );
}

/// Theodolite's result: capacity per resource value, and demand per load.
fn scalability(h: &mut String, a: &RateAnalysis) {
    h.push_str("<h3>Scalability</h3>\n");
    let chart = BarChart {
        x_label: "highest passing rate (arrivals/s)".into(),
        categories: a
            .series
            .iter()
            .map(|s| format!("{}={}", s.name, s.value))
            .collect(),
        keys: vec!["highest passing rate".into()],
        values: a
            .series
            .iter()
            .map(|s| vec![s.found.max_passing_rate_rps.unwrap_or(0.0)])
            .collect(),
    };
    figure(
        h,
        "Capacity per resource value",
        &[Key::Line("highest passing rate", 0, false)],
        &chart.render("highest passing rate per resource value"),
    );
    h.push_str("<div class=\"table-wrap\"><table>\n<tr><th>Resource</th><th>Highest passing</th><th>First failing</th><th>Why</th><th>Stopped</th></tr>\n");
    for s in &a.series {
        let why = match (&s.error, &s.found.failed_slo) {
            (Some(e), _) => e.clone(),
            (None, Some(slo)) => slo.failure_text(),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\"><code>{}={}</code></td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&s.name),
            esc(&s.value),
            esc(&rate(s.found.max_passing_rate_rps)),
            esc(&rate(s.found.first_failing_rate_rps)),
            esc(&why),
            esc(s.stop_reason.as_str())
        );
    }
    h.push_str("</table></div>\n");
    if a.demand.is_empty() {
        return;
    }
    h.push_str("<p class=\"note\">Resource demand (Theodolite): the least resource value, in the order tried, whose highest passing rate covers each load.</p>\n<div class=\"table-wrap\"><table>\n<tr><th>Load</th><th>Resource needed</th></tr>\n");
    for d in &a.demand {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&rate(Some(d.load_rps))),
            esc(d.resource.as_deref().unwrap_or("more than any value tried"))
        );
    }
    h.push_str("</table></div>\n");
}

fn levels_table(h: &mut String, levels: &[LevelRecord]) {
    h.push_str("<div class=\"table-wrap\"><table>\n<tr><th>Level</th><th>Offered</th><th>Delivered</th><th>p99 ms</th><th>Errors</th><th>Verdict</th><th>Why</th><th>Chosen because</th></tr>\n");
    for l in levels {
        let Some(j) = &l.rate_search else {
            continue;
        };
        let why = j.why();
        let series: String = j.series.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let (class, verdict) = match (l.interrupted, j.verdict) {
            (true, _) => ("warn", "cut short"),
            (false, SloVerdict::Pass) => ("ok", "pass"),
            (false, SloVerdict::Fail) => ("bad", "fail"),
            (false, other) => ("warn", other.as_str()),
        };
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#level-{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\"><span class=\"badge {class}\">{}</span></td><td class=\"l\">{}</td><td class=\"l\">{}{}</td></tr>",
            l.level,
            l.level,
            esc(&rate(l.rate_rps)),
            esc(&rate(Some(j.delivered_rps))),
            fnum(l.response_time_ms.p99, 2),
            l.errors,
            esc(verdict),
            esc(&why),
            esc(&series),
            esc(&j.reason)
        );
    }
    h.push_str("</table></div>\n");
}
