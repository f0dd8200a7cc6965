//! Workload classes (`classes:`) in the report: each class's throughput
//! against users, measured at every level and, when a model was fitted,
//! the model's per class over it; and a profile's CPU per request of each
//! class's mix.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::figure::{figure, Key};
use super::tables::{head, row};
use crate::model::Prediction;
use crate::record::LevelRecord;
use crate::report::svg::{esc, fnum, LineChart, Series};

/// Colour slots the classes take in turn.
const COLOURS: usize = 6;

/// The chart of each class's throughput against users, when the levels
/// measured classes at two user counts or more, or the model has them.
pub(super) fn curves(h: &mut String, levels: &[LevelRecord], prediction: Option<&Prediction>) {
    let mut measured: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for l in levels.iter().filter(|l| l.invalid.is_none()) {
        let Some(users) = l.users else { continue };
        for (name, c) in &l.per_class {
            measured
                .entry(name)
                .or_default()
                .push((f64::from(users), c.throughput_rps));
        }
    }
    let mut model: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for p in prediction.map_or(&[][..], |p| &p.points) {
        let Some(users) = p.users else { continue };
        for (name, c) in &p.per_class {
            model
                .entry(name)
                .or_default()
                .push((f64::from(users), c.throughput_rps));
        }
    }
    let enough = measured.values().any(|v| v.len() > 1) || model.values().any(|v| v.len() > 1);
    if !enough {
        return;
    }
    let names: Vec<&str> = measured.keys().chain(model.keys()).copied().collect();
    let mut names = names;
    names.sort_unstable();
    names.dedup();
    let mut chart = LineChart::new("users", "throughput (req/s)");
    let mut keys = Vec::new();
    let labels: Vec<(String, String)> = names
        .iter()
        .map(|n| (n.to_string(), format!("{n} (model)")))
        .collect();
    for (i, name) in names.iter().enumerate() {
        let colour = i % COLOURS;
        if let Some(points) = measured.get(name) {
            let mut points = points.clone();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart.series.push(Series {
                name: name.to_string(),
                colour,
                points,
                dashed: false,
                markers: true,
            });
            keys.push(Key::Line(&labels[i].0, colour, false));
        }
        if let Some(points) = model.get(name) {
            chart.series.push(Series {
                name: labels[i].1.clone(),
                colour,
                points: points.clone(),
                dashed: true,
                markers: false,
            });
            keys.push(Key::Line(&labels[i].1, colour, true));
        }
    }
    h.push_str("<h3>Per workload class</h3>\n<div class=\"charts\">\n");
    figure(
        h,
        "Throughput of each class vs users",
        &keys,
        &chart.render("each workload class's throughput against users"),
    );
    h.push_str("</div>\n");
}

/// A profile's CPU per request of each class's own mix, per tier.
pub(super) fn demands(h: &mut String, class_demands: &BTreeMap<String, BTreeMap<String, f64>>) {
    if class_demands.is_empty() {
        return;
    }
    let tiers: Vec<&String> = {
        let mut t: Vec<&String> = class_demands.values().flat_map(|d| d.keys()).collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    let _ = writeln!(
        h,
        "<p class=\"note\">Per workload class: CPU ms per request of the class's own mix (the requests' demands weighted by its session's visits).</p>"
    );
    let columns: Vec<String> = std::iter::once("class".to_string())
        .chain(tiers.iter().map(|t| format!("{t} cpu ms")))
        .collect();
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    head(h, &columns);
    for (class, d) in class_demands {
        let cells: Vec<String> = std::iter::once(esc(class))
            .chain(
                tiers
                    .iter()
                    .map(|t| d.get(*t).map_or("—".into(), |ms| fnum(*ms, 3))),
            )
            .collect();
        row(h, "", &cells);
    }
    h.push_str("</table></div>\n");
}
