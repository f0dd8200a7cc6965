//! What was imported, as a page in the report's style (the graph drawn,
//! nodes sized by visits and edges by probability; the classes; the
//! think-time fit; arrivals by hour; what was skipped and why) and as
//! JSON for scripts.

use std::f64::consts::PI;
use std::fmt::Write;

use serde::Serialize;

use super::fit::ThinkFit;
use super::graph::Graph;
use crate::report::html::{table_head, table_row, STYLE};
use crate::report::svg::{esc, BarChart};

#[derive(Debug, Clone, Serialize)]
pub struct ReportClass {
    pub name: String,
    pub method: String,
    pub pattern: String,
    pub requests: u64,
    pub share: f64,
    pub statuses: String,
    pub data_rows: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub what: String,
    pub count: u64,
    pub why: String,
}

/// Everything the page shows; written as `<name>.import.json` too.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub source: String,
    pub kind: String,
    pub scenario: String,
    pub facts: Vec<(String, String)>,
    pub classes: Vec<ReportClass>,
    pub graph: Graph,
    pub think: Option<ThinkFit>,
    pub skipped: Vec<Skipped>,
    /// Line number, text, why.
    pub examples: Vec<(u64, String, String)>,
    /// For a HAR: the values carried from one answer into later requests.
    pub correlations: Vec<String>,
    pub notes: Vec<String>,
}

pub(crate) fn render(r: &ImportReport) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>autoperf import · {}</title>\n<style>\n{STYLE}\
         .cbmg .node {{ fill: var(--card); stroke: var(--c0); stroke-width: 2; }}\n\
         .cbmg .edge {{ fill: none; stroke: var(--c1); }}\n.cbmg .arrow {{ fill: var(--c1); }}\n\
         .cbmg .plabel {{ fill: var(--muted); font-size: 10px; }}\n</style>\n</head>\n<body>\n",
        esc(&r.source)
    );
    let _ = write!(
        h,
        "<header>\n<h1>Import of <code>{}</code></h1>\n<p class=\"sub\">{} → <code>{}</code></p>\n</header>\n<dl class=\"cards\">\n",
        esc(&r.source),
        esc(&r.kind),
        esc(&r.scenario)
    );
    for (k, v) in &r.facts {
        let _ = writeln!(
            h,
            "<div class=\"card\"><dt>{}</dt><dd>{}</dd></div>",
            esc(k),
            esc(v)
        );
    }
    h.push_str("</dl>\n");
    if !r.notes.is_empty() {
        h.push_str("<ul class=\"warnings\">\n");
        for n in &r.notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<h2>The graph</h2>\n<figure><figcaption>Customer Behaviour Model Graph: nodes sized by visits per session, edges by probability (those of 1% or more drawn)</figcaption>\n");
    h.push_str(&draw_graph(&r.graph, &r.classes));
    h.push_str("</figure>\n<h2>Request classes</h2>\n");
    table_head(
        &mut h,
        &[
            "class",
            "method",
            "path template",
            "requests",
            "share",
            "statuses",
            "data rows",
        ],
    );
    for c in &r.classes {
        table_row(
            &mut h,
            "",
            &[
                format!("<code>{}</code>", esc(&c.name)),
                esc(&c.method),
                format!("<code>{}</code>", esc(&c.pattern)),
                c.requests.to_string(),
                format!("{:.2}%", c.share * 100.0),
                esc(&c.statuses),
                c.data_rows.to_string(),
            ],
        );
    }
    h.push_str("</table></div>\n<h2>Transitions</h2>\n");
    table_head(&mut h, &["from", "to", "probability", "count"]);
    for e in &r.graph.entries {
        table_row(
            &mut h,
            "",
            &[
                "<em>session start</em>".into(),
                esc(&r.classes[e.to].name),
                format!("{:.4}", e.probability),
                e.count.to_string(),
            ],
        );
    }
    for (a, row) in r.graph.edges.iter().enumerate() {
        let from = esc(&r.classes[a].name);
        for e in row {
            table_row(
                &mut h,
                "",
                &[
                    from.clone(),
                    esc(&r.classes[e.to].name),
                    format!("{:.4}", e.probability),
                    e.count.to_string(),
                ],
            );
        }
        let (p, n) = r.graph.exits[a];
        if n > 0 {
            table_row(
                &mut h,
                "",
                &[
                    from.clone(),
                    "<em>session end</em>".into(),
                    format!("{p:.4}"),
                    n.to_string(),
                ],
            );
        }
    }
    h.push_str("</table></div>\n");
    if let Some(f) = &r.think {
        h.push_str("<h2>Think time</h2>\n");
        let _ = writeln!(
            h,
            "<p>{} gaps between a session's consecutive requests{}, mean {:.3} s, coefficient of variation {:.2}. \
             The better fit (smaller Kolmogorov–Smirnov distance) is used; gaps include the server's response times.</p>",
            f.gaps,
            if f.whole_seconds { " (time stamps in whole seconds, accounted for in the fit)" } else { "" },
            f.mean_s,
            f.cv
        );
        table_head(&mut h, &["model", "mean s", "cv", "KS distance", "chosen"]);
        let chosen = |m| if f.chosen == m { "yes" } else { "" }.to_string();
        table_row(
            &mut h,
            "",
            &[
                "exponential".into(),
                format!("{:.3}", f.mean_s),
                "1.00".into(),
                format!("{:.4}", f.exponential_ks),
                chosen(super::fit::Model::Exponential),
            ],
        );
        table_row(
            &mut h,
            "",
            &[
                "lognormal".into(),
                format!("{:.3}", f.lognormal_mean_s),
                format!("{:.2}", f.lognormal_cv),
                format!("{:.4}", f.lognormal_ks),
                chosen(super::fit::Model::Lognormal),
            ],
        );
        h.push_str("</table></div>\n");
    }
    let hours: Vec<(usize, f64)> = r
        .graph
        .arrivals_by_hour
        .iter()
        .enumerate()
        .filter_map(|(h, x)| x.map(|x| (h, x)))
        .collect();
    if !hours.is_empty() {
        h.push_str("<h2>New sessions by hour of the day (UTC)</h2>\n<figure>\n");
        let chart = BarChart {
            x_label: "sessions per second".into(),
            categories: hours.iter().map(|(h, _)| format!("{h:02}:00")).collect(),
            keys: vec!["arrivals".into()],
            values: hours.iter().map(|(_, x)| vec![*x]).collect(),
        };
        h.push_str(&chart.render("new sessions per second by hour of the day"));
        h.push_str("</figure>\n");
    }
    if !r.correlations.is_empty() {
        h.push_str("<h2>Correlated values</h2>\n<ul>\n");
        for c in &r.correlations {
            let _ = writeln!(h, "<li>{}</li>", esc(c));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<h2>Skipped</h2>\n");
    table_head(&mut h, &["what", "count", "why"]);
    for s in &r.skipped {
        table_row(
            &mut h,
            "",
            &[esc(&s.what), s.count.to_string(), esc(&s.why)],
        );
    }
    h.push_str("</table></div>\n");
    if !r.examples.is_empty() {
        h.push_str("<h3>Malformed lines, the first few</h3>\n<ul>\n");
        for (line, text, why) in &r.examples {
            let _ = writeln!(
                h,
                "<li>line {line}: {} — <code>{}</code></li>",
                esc(why),
                esc(text)
            );
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<footer>Written by autoperf import.</footer>\n</body>\n</html>\n");
    h
}

/// The CBMG on a circle, the most visited class first at the top.
fn draw_graph(g: &Graph, classes: &[ReportClass]) -> String {
    let n = classes.len();
    let visits = g.visits();
    let most = visits.iter().cloned().fold(1e-9, f64::max);
    let (w, hgt) = (900.0f64, 640.0f64);
    let (cx, cy) = (w / 2.0, hgt / 2.0);
    let ring = (hgt / 2.0 - 80.0).max(100.0);
    let radius: Vec<f64> = visits
        .iter()
        .map(|v| 10.0 + 26.0 * (v / most).sqrt())
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| visits[b].total_cmp(&visits[a]));
    let mut pos = vec![(cx, cy); n];
    for (k, &i) in order.iter().enumerate() {
        let angle = -PI / 2.0 + 2.0 * PI * k as f64 / n.max(1) as f64;
        pos[i] = (cx + ring * 1.25 * angle.cos(), cy + ring * angle.sin());
    }
    let mut s = format!(
        "<svg class=\"chart cbmg\" viewBox=\"0 0 {w} {hgt}\" width=\"100%\" role=\"img\" aria-label=\"the CBMG\">\
         <defs><marker id=\"arr\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerUnits=\"userSpaceOnUse\" markerWidth=\"10\" markerHeight=\"10\" orient=\"auto-start-reverse\"><path class=\"arrow\" d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>"
    );
    for (a, row) in g.edges.iter().enumerate() {
        for e in row.iter().filter(|e| e.probability >= 0.01) {
            let width = 0.6 + 6.0 * e.probability;
            let opacity = 0.25 + 0.75 * e.probability;
            let (x1, y1) = pos[a];
            if e.to == a {
                // A loop: a small circle outside the node, away from the centre.
                let (dx, dy) = (x1 - cx, y1 - cy);
                let d = (dx * dx + dy * dy).sqrt().max(1e-9);
                let (ux, uy) = (dx / d, dy / d);
                let r = radius[a];
                let (lx, ly) = (x1 + ux * (r + 9.0), y1 + uy * (r + 9.0));
                let _ = write!(
                    s,
                    "<circle class=\"edge\" cx=\"{lx:.1}\" cy=\"{ly:.1}\" r=\"10\" stroke-width=\"{width:.2}\" stroke-opacity=\"{opacity:.2}\"><title>{} → itself: {:.3} ({})</title></circle>\
                     <text class=\"plabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.2}</text>",
                    esc(&classes[a].name),
                    e.probability,
                    e.count,
                    lx + ux * 20.0,
                    ly + uy * 20.0 + 3.0,
                    e.probability
                );
                continue;
            }
            let (x2, y2) = pos[e.to];
            let (dx, dy) = (x2 - x1, y2 - y1);
            let d = (dx * dx + dy * dy).sqrt().max(1e-9);
            let (ux, uy) = (dx / d, dy / d);
            // Start and end on the nodes' rims; bend to the right so the two
            // directions of a pair do not overlap.
            let (sx, sy) = (x1 + ux * radius[a], y1 + uy * radius[a]);
            let (ex, ey) = (
                x2 - ux * (radius[e.to] + 2.0),
                y2 - uy * (radius[e.to] + 2.0),
            );
            let (mx, my) = (
                (sx + ex) / 2.0 - uy * d * 0.12,
                (sy + ey) / 2.0 + ux * d * 0.12,
            );
            let _ = write!(
                s,
                "<path class=\"edge\" d=\"M{sx:.1},{sy:.1} Q{mx:.1},{my:.1} {ex:.1},{ey:.1}\" stroke-width=\"{width:.2}\" stroke-opacity=\"{opacity:.2}\" marker-end=\"url(#arr)\"><title>{} → {}: {:.3} ({})</title></path>",
                esc(&classes[a].name),
                esc(&classes[e.to].name),
                e.probability,
                e.count
            );
            if e.probability >= 0.1 {
                let _ = write!(
                    s,
                    "<text class=\"plabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.2}</text>",
                    (sx + 2.0 * mx + ex) / 4.0,
                    (sy + 2.0 * my + ey) / 4.0,
                    e.probability
                );
            }
        }
    }
    let entry: Vec<f64> = (0..n)
        .map(|i| {
            g.entries
                .iter()
                .find(|e| e.to == i)
                .map_or(0.0, |e| e.probability)
        })
        .collect();
    for i in 0..n {
        let (x, y) = pos[i];
        let _ = write!(
            s,
            "<circle class=\"node\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{:.1}\"><title>{}: {:.3} visits per session, {} requests</title></circle>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            radius[i],
            esc(&classes[i].name),
            visits[i],
            classes[i].requests,
            y + radius[i] + 14.0,
            esc(&classes[i].name)
        );
        if entry[i] > 0.0 {
            let _ = write!(
                s,
                "<text class=\"plabel\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">start {:.0}%</text>",
                y + 4.0,
                entry[i] * 100.0
            );
        }
    }
    s.push_str("</svg>");
    s
}
