//! `compare.html`: the comparison as one self-contained page in the
//! report's style — the verdict, the regressions, both runs' curves
//! overlaid (against load, and each compared level's seconds), and every
//! compared figure.

use std::fmt::Write;

use super::text::{change, limit, p_text, value};
use super::{Change, Comparison, Results, Verdict};
use crate::record::LevelRecord;
use crate::report::html::{figure, Key, STYLE};
use crate::report::svg::{esc, LineChart, Series};
use crate::results::ALL_REQUESTS;

pub fn render(c: &Comparison, base: &Results, new: &Results) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>autoperf compare · {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        esc(&new.record.scenario.name)
    );
    let _ = write!(
        h,
        "<header>\n<h1>Comparison</h1>\n<p class=\"sub\">base <code>{}</code> ({}) · new <code>{}</code> ({})</p>\n</header>\n",
        esc(&c.base),
        esc(c.base_mode.as_str()),
        esc(&c.new),
        esc(c.new_mode.as_str())
    );
    let badge = if c.regressions == 0 {
        "<span class=\"badge ok\">no regression</span>".to_string()
    } else {
        format!(
            "<span class=\"badge bad\">{} regression{}</span>",
            c.regressions,
            if c.regressions == 1 { "" } else { "s" }
        )
    };
    let _ = write!(
        h,
        "<dl class=\"cards\">\n<div class=\"card verdict\"><dt>Verdict</dt><dd id=\"verdict\">{badge}</dd></div>\n\
         <div class=\"card\"><dt>Limits</dt><dd>{}</dd></div>\n\
         <div class=\"card\"><dt>Significance</dt><dd>one-sided Mann–Whitney of the measured seconds against the limit, p &lt; {}</dd></div>\n\
         <div class=\"card\"><dt>Loads compared</dt><dd>{}</dd></div>\n</dl>\n",
        esc(&c.limits.to_string()),
        c.alpha,
        c.levels.len()
    );
    if !c.notes.is_empty() {
        h.push_str("<ul class=\"warnings\">\n");
        for n in &c.notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
    if c.regressions > 0 {
        h.push_str("<h2>Regressions</h2>\n<ul id=\"regressions\">\n");
        for (load, ch) in c.regressions() {
            let _ = writeln!(h, "<li>{}</li>", esc(&super::text::describe(load, ch)));
        }
        h.push_str("</ul>\n");
    }
    against_load(&mut h, base, new);
    for level in &c.levels {
        let _ = write!(
            h,
            "<section class=\"level\">\n<h3>{} <small>(base level {}, new level {})</small></h3>\n<div class=\"charts\">\n",
            esc(&level.load),
            level.base_level,
            level.new_level
        );
        type PerSecond = fn(&super::RequestSecond) -> Option<f64>;
        let charts: [(&str, PerSecond); 2] = [
            ("p99 (ms)", |s| (s.p50_ms > 0.0).then_some(s.p99_ms)),
            ("throughput (req/s)", |s| Some(s.throughput_rps)),
        ];
        for (y_label, y) in charts {
            let levels = (level.base_level, level.new_level);
            seconds_chart(&mut h, (base, new), levels, y_label, y);
        }
        h.push_str("</div>\n");
        table(&mut h, &level.changes);
        h.push_str("</section>\n");
    }
    if let Some(ch) = &c.max_throughput {
        h.push_str("<h2>Capacity</h2>\n");
        if let Some((b, n)) = c.saturation_users {
            let users = |u: Option<u32>| u.map_or("not reached".to_string(), |u| u.to_string());
            let _ = writeln!(
                h,
                "<p id=\"saturation\">Saturation: base {} users, new {} users.</p>",
                users(b),
                users(n)
            );
        }
        table(&mut h, std::slice::from_ref(ch));
    }
    if let Some(ch) = &c.max_passing_rate {
        h.push_str("<h2>Highest rate meeting the SLOs</h2>\n");
        table(&mut h, std::slice::from_ref(ch));
    }
    for (what, list) in [("base", &c.only_in_base), ("new", &c.only_in_new)] {
        if !list.is_empty() {
            let _ = writeln!(
                h,
                "<p class=\"note\">Only in {what}: {}</p>",
                esc(&list.join(", "))
            );
        }
    }
    let _ = write!(
        h,
        "<footer>Rendered by autoperf {} from both runs' <code>run.json</code> and <code>request_series.csv</code>.</footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    h
}

/// Both runs' throughput and p99 against users (or offered rate), when
/// either ran more than one load.
fn against_load(h: &mut String, base: &Results, new: &Results) {
    let curve = |levels: &[LevelRecord], y: fn(&LevelRecord) -> f64| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = levels
            .iter()
            .filter(|l| l.invalid.is_none())
            .filter_map(|l| {
                let x = l.users.map(f64::from).or(l.rate_rps)?;
                Some((x, y(l)))
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let (b, n) = (&base.record.levels, &new.record.levels);
    if b.len() < 2 && n.len() < 2 {
        return;
    }
    let x_label = if n.iter().any(|l| l.users.is_some()) {
        "users"
    } else {
        "offered rate (req/s)"
    };
    h.push_str("<h2>Against load</h2>\n<div class=\"charts\">\n");
    type Figure = fn(&LevelRecord) -> f64;
    let charts: [(&str, Figure); 2] = [
        ("throughput (req/s)", |l| l.throughput_rps),
        ("p99 (ms)", |l| l.response_time_ms.p99),
    ];
    for (y_label, y) in charts {
        let mut chart = LineChart::new(x_label, y_label);
        chart.series.push(series("base", 0, curve(b, y), true));
        chart.series.push(series("new", 1, curve(n, y), true));
        let svg = chart.render(&format!("{y_label} against {x_label}, base and new"));
        figure(
            h,
            &format!("{y_label} against {x_label}"),
            &[Key::Line("base", 0, false), Key::Line("new", 1, false)],
            &svg,
        );
    }
    h.push_str("</div>\n");
}

/// One compared level's measured seconds, base and new overlaid from the
/// first measured second of each.
fn seconds_chart(
    h: &mut String,
    (base, new): (&Results, &Results),
    (base_level, new_level): (u32, u32),
    y_label: &str,
    y: impl Fn(&super::RequestSecond) -> Option<f64>,
) {
    let points = |r: &Results, level: u32| -> Vec<(f64, f64)> {
        let rows: Vec<_> = r.seconds_of(level, ALL_REQUESTS).collect();
        let start = rows.first().map_or(0.0, |s| s.t_s);
        rows.iter()
            .filter_map(|s| Some((s.t_s - start + 1.0, y(s)?)))
            .collect()
    };
    let (b, n) = (points(base, base_level), points(new, new_level));
    if b.is_empty() && n.is_empty() {
        return;
    }
    let mut chart = LineChart::new("measured second", y_label);
    chart.dense = true;
    chart.series.push(series("base", 0, b, false));
    chart.series.push(series("new", 1, n, false));
    let svg = chart.render(&format!("{y_label} per measured second, base and new"));
    figure(
        h,
        &format!("{y_label} per second"),
        &[Key::Line("base", 0, false), Key::Line("new", 1, false)],
        &svg,
    );
}

fn series(name: &str, colour: usize, points: Vec<(f64, f64)>, markers: bool) -> Series {
    Series {
        name: name.into(),
        colour,
        points,
        dashed: false,
        markers,
    }
}

fn table(h: &mut String, changes: &[Change]) {
    h.push_str(
        "<div class=\"table-wrap\"><table class=\"changes\">\n<tr><th>request</th><th>metric</th><th>base</th><th>new</th><th>change</th><th>limit</th><th>significance</th><th>verdict</th></tr>\n",
    );
    for ch in changes {
        let request = ch.who();
        let class = match ch.verdict {
            Verdict::Regression => " class=\"bad\"",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr data-verdict=\"{}\"><td>{}</td><td class=\"l\">{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{class}>{}</td></tr>",
            ch.verdict.as_str(),
            esc(&request),
            ch.metric,
            ch.metric.unit(),
            value(ch.metric, ch.base),
            value(ch.metric, ch.new),
            esc(&change(ch)),
            esc(&limit(ch)),
            esc(&p_text(ch.p_value)),
            ch.verdict.as_str()
        );
    }
    h.push_str("</table></div>\n");
}
