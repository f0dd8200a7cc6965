//! The queueing model's part of the report, from `prediction.json`
//! (written by `autoperf predict`, or by `autoperf capacity` when demands
//! were measured): what the model is and its bounds; its curve against
//! users (drawn over the measured curves of a capacity analysis, alone for
//! a profile); and the model against each measured level, with the levels
//! it does not describe.

use std::fmt::Write;

use super::figure::{figure, Key};
use super::tables::{head, row};
use crate::model::predict::UNTRUSTED_GAP;
use crate::model::Prediction;
use crate::report::svg::{esc, fnum, LineChart, Series};

/// Colour slot of the model's lines, unused by the measured ones.
pub(super) const MODEL_COLOUR: usize = 3;

/// The model's throughput and mean response time against users, up to
/// `max_users` (0: all of it).
pub(super) fn curves(p: &Prediction, max_users: f64) -> (Series, Series) {
    let points: Vec<(f64, f64, f64)> = p
        .points
        .iter()
        .filter_map(|pt| Some((f64::from(pt.users?), pt.throughput_rps, pt.response_time_ms)))
        .filter(|(u, ..)| max_users <= 0.0 || *u <= max_users)
        .collect();
    let series = |f: fn(&(f64, f64, f64)) -> f64| Series {
        name: "model".into(),
        colour: MODEL_COLOUR,
        points: points.iter().map(|p| (p.0, f(p))).collect(),
        dashed: true,
        markers: false,
    };
    (series(|p| p.1), series(|p| p.2))
}

/// The section. `overlaid`: the model's curves are already drawn on the
/// measured charts above.
pub(super) fn section(h: &mut String, p: &Prediction, overlaid: bool) {
    h.push_str("<h2>Queueing model</h2>\n");
    let tiers: Vec<String> = p
        .model
        .tiers
        .iter()
        .map(|(name, t)| {
            format!(
                "{} {} ms CPU per request on {} core{}",
                esc(name),
                fnum(t.cpu_ms_per_request, 3),
                t.cores,
                if t.cores == 1 { "" } else { "s" }
            )
        })
        .collect();
    let _ = write!(
        h,
        "<p>{} of the measured demands: {}; think time {} s.",
        esc(&p.model.kind),
        tiers.join(", "),
        fnum(p.model.think_time_s, 3)
    );
    for shared in &p.model.shared_hosts {
        let _ = write!(h, " {} share one host's cores.", esc(&shared.join(" and ")));
    }
    for (name, c) in &p.model.classes {
        let tiers: Vec<String> = c
            .cpu_ms_per_request
            .iter()
            .map(|(t, ms)| format!("{} {} ms", esc(t), fnum(*ms, 3)))
            .collect();
        let _ = write!(
            h,
            " Class {}: {}% of the users, think {} s, CPU per request {}.",
            esc(name),
            fnum(c.share * 100.0, 1),
            fnum(c.think_time_s, 3),
            tiers.join(", ")
        );
    }
    let b = &p.bounds;
    let _ = writeln!(
        h,
        " Bounds: X ≤ {} req/s (bottleneck {}), R ≥ {} ms, N* = {}.</p>",
        fnum(b.max_throughput_rps, 1),
        esc(&b.bottleneck),
        fnum(b.min_response_time_ms, 3),
        fnum(b.n_star, 1)
    );
    if !overlaid {
        alone(h, p);
    }
    if !p.measured.is_empty() {
        against_measured(h, p);
    }
}

/// The model's curves on charts of their own (a profile has no measured
/// curve to draw them over).
fn alone(h: &mut String, p: &Prediction) {
    let (x, r) = curves(p, 0.0);
    if x.points.is_empty() {
        return;
    }
    h.push_str("<div class=\"charts\">\n");
    let key = [Key::Line("model", MODEL_COLOUR, true)];
    let mut c = LineChart::new("users", "throughput (req/s)");
    c.series.push(x);
    figure(
        h,
        "Model: throughput vs users",
        &key,
        &c.render("model throughput against users"),
    );
    let mut c = LineChart::new("users", "response time (ms)");
    c.series.push(r);
    figure(
        h,
        "Model: mean response time vs users",
        &key,
        &c.render("model response time against users"),
    );
    h.push_str("</div>\n");
}

fn against_measured(h: &mut String, p: &Prediction) {
    h.push_str("<h3>Model against the measured levels</h3>\n");
    if let Some(fit) = p.fit() {
        let _ = writeln!(
            h,
            "<p>Over the {} levels the model describes: RMS error {}% in throughput, {}% in mean response time.</p>",
            fit.levels,
            fnum(fit.throughput_rms * 100.0, 1),
            fnum(fit.response_time_rms * 100.0, 1)
        );
    }
    if let Some(users) = p.untrusted_users() {
        let _ = writeln!(
            h,
            "<p class=\"warnings\">At {} users the measured throughput is more than {}% below the model's: something the model does not see limits the system there (a lock, a pool, the network, the disk, or the generator). Past that point the model describes the CPUs alone.</p>",
            esc(&users),
            fnum(UNTRUSTED_GAP * 100.0, 0)
        );
    }
    head(
        h,
        &[
            "users",
            "req/s measured",
            "req/s model",
            "error",
            "mean ms measured",
            "mean ms model",
            "error",
        ],
    );
    for c in &p.measured {
        row(
            h,
            if c.model_untrusted { "cb" } else { "" },
            &[
                c.users.to_string(),
                fnum(c.measured_throughput_rps, 1),
                fnum(c.model_throughput_rps, 1),
                format!("{}%", fnum(c.throughput_error * 100.0, 1)),
                fnum(c.measured_response_time_ms, 2),
                fnum(c.model_response_time_ms, 2),
                format!("{}%", fnum(c.response_time_error * 100.0, 1)),
            ],
        );
        // Each class at the users the level gave it.
        for (name, k) in &c.per_class {
            row(
                h,
                "",
                &[
                    format!("{} <span class=\"note\">({})</span>", k.users, esc(name)),
                    fnum(k.measured_throughput_rps, 1),
                    fnum(k.model_throughput_rps, 1),
                    format!("{}%", fnum(k.throughput_error * 100.0, 1)),
                    fnum(k.measured_response_time_ms, 2),
                    fnum(k.model_response_time_ms, 2),
                    String::new(),
                ],
            );
        }
    }
    h.push_str("</table></div>\n");
}
