//! The report's charts, built from the record: the curves against users
//! (throughput, response time, CPU per tier, think time) with the
//! saturation point, N* and client-bottleneck levels marked, and each
//! level's throughput and percentiles over time with the warm-up shaded.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::figure::{figure, Key};
use super::prediction;
use crate::model::Prediction;
use crate::record::{LagReading, LevelRecord, RunRecord, Unit};
use crate::report::svg::fnum;
use crate::report::svg::{Band, ErrorBar, HLine, Highlight, LineChart, Series, VLine};

/// One row of `timeseries.csv`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct SeriesRow {
    /// Seconds since the run started, at the end of the row's interval.
    pub t_s: f64,
    /// The level index (as in `LevelRecord::level`).
    pub level: u32,
    pub requests: u64,
    pub errors: u64,
    pub throughput_rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub active_users: u32,
}

/// Levels ordered by users (the search does not run them in order); an
/// invalid level is no curve point.
fn by_users(levels: &[LevelRecord]) -> Vec<(f64, &LevelRecord)> {
    let mut v: Vec<(f64, &LevelRecord)> = levels
        .iter()
        .filter(|l| l.invalid.is_none())
        .filter_map(|l| l.users.map(|u| (f64::from(u), l)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.level.cmp(&b.1.level)));
    v
}

/// Marks shared by every chart against users.
struct Marks {
    vlines: Vec<(f64, String)>,
    /// Users of the client-bottleneck levels.
    flagged: Vec<f64>,
}

impl Marks {
    fn of(record: &RunRecord, levels: &[(f64, &LevelRecord)]) -> Marks {
        let mut vlines = Vec::new();
        if let Some(a) = &record.analysis.capacity {
            if let Some(n) = a.n_star {
                vlines.push((n, format!("N* ≈ {}", fnum(n, 0))));
            }
            if let Some(n) = a.saturation_users.map(f64::from) {
                vlines.push((n, format!("saturation {}", fnum(n, 0))));
            }
        }
        let flagged = levels
            .iter()
            .filter(|(_, l)| l.client_bottleneck)
            .map(|(u, _)| *u)
            .collect();
        Marks { vlines, flagged }
    }

    fn apply(&self, c: &mut LineChart, span: f64, y_of: impl Fn(f64) -> Option<f64>) {
        for (x, label) in &self.vlines {
            c.vlines.push(VLine {
                x: *x,
                label: label.clone(),
                class: "mark",
            });
        }
        if let (Some(lo), Some(hi)) = (
            self.flagged.iter().copied().reduce(f64::min),
            self.flagged.iter().copied().reduce(f64::max),
        ) {
            let pad = span * 0.02;
            c.bands.push(Band {
                x0: (lo - pad).max(0.0),
                x1: hi + pad,
                label: "client bottleneck".into(),
                class: "band bad",
            });
        }
        for &u in &self.flagged {
            if let Some(y) = y_of(u) {
                c.highlights.push(Highlight {
                    x: u,
                    y,
                    label: format!("client bottleneck at {} users", fnum(u, 0)),
                });
            }
        }
    }

    fn keys(&self) -> Vec<Key<'static>> {
        let mut k = Vec::new();
        if !self.vlines.is_empty() {
            k.push(Key::Mark("N* / saturation"));
        }
        if !self.flagged.is_empty() {
            k.push(Key::Flag("client bottleneck"));
            k.push(Key::BadBand("client-bottleneck region"));
        }
        k
    }
}

/// The curves against users, with the queueing model's drawn over them
/// when there is one.
pub(super) fn capacity(h: &mut String, record: &RunRecord, model: Option<&Prediction>) {
    let levels = by_users(&record.levels);
    let marks = Marks::of(record, &levels);
    let span = levels.last().map_or(1.0, |l| l.0);
    let (model_x, model_r) = match model {
        Some(p) => {
            let (x, r) = prediction::curves(p, span);
            (Some(x), Some(r))
        }
        None => (None, None),
    };
    let series =
        |name: &str, colour: usize, dashed: bool, f: &dyn Fn(&LevelRecord) -> f64| Series {
            name: name.into(),
            colour,
            points: levels.iter().map(|(u, l)| (*u, f(l))).collect(),
            dashed,
            markers: true,
        };
    let levels = &levels;
    let at = |f: fn(&LevelRecord) -> f64| {
        move |u: f64| levels.iter().find(|l| l.0 == u).map(|(_, l)| f(l))
    };
    h.push_str("<div class=\"charts\">\n");

    let mut c = LineChart::new("users", "throughput (req/s)");
    c.series
        .push(series("throughput", 0, false, &|l| l.throughput_rps));
    c.error_bars = error_bars(levels, 0, |l| {
        l.ci95
            .as_ref()
            .map(|c| (l.throughput_rps, c.throughput_rps))
    });
    marks.apply(&mut c, span, at(|l| l.throughput_rps));
    let mut keys = vec![Key::Line("throughput", 0, false)];
    if let Some(x) = model_x {
        c.series.push(x);
        keys.push(Key::Line("model", prediction::MODEL_COLOUR, true));
    }
    keys.extend(marks.keys());
    figure(
        h,
        "Throughput vs users",
        &keys,
        &c.render("throughput against users"),
    );

    let mut c = LineChart::new("users", "response time (ms)");
    c.series
        .push(series("mean", 0, false, &|l| l.response_time_ms.mean));
    c.series
        .push(series("p90", 1, false, &|l| l.response_time_ms.p90));
    c.series
        .push(series("p99", 4, false, &|l| l.response_time_ms.p99));
    let latency = |l: &LevelRecord| l.ci95.as_ref().and_then(|c| c.response_time_ms);
    c.error_bars = error_bars(levels, 0, |l| {
        latency(l).map(|r| (l.response_time_ms.mean, r.mean))
    });
    c.error_bars.extend(error_bars(levels, 4, |l| {
        latency(l).map(|r| (l.response_time_ms.p99, r.p99))
    }));
    marks.apply(&mut c, span, at(|l| l.response_time_ms.p99));
    let mut keys = vec![
        Key::Line("mean", 0, false),
        Key::Line("p90", 1, false),
        Key::Line("p99", 4, false),
    ];
    if let Some(r) = model_r {
        c.series.push(Series {
            name: "model mean".into(),
            ..r
        });
        keys.push(Key::Line("model mean", prediction::MODEL_COLOUR, true));
    }
    keys.extend(marks.keys());
    figure(
        h,
        "Response time vs users",
        &keys,
        &c.render("response time against users"),
    );

    cpu_chart(h, record, levels, &marks, span);
    memory_chart(h, levels, model, &marks, span);

    let mut c = LineChart::new("users", "think time (s)");
    c.series
        .push(series("achieved", 2, false, &|l| l.think_time_s.achieved));
    c.series.push(series("configured", 5, true, &|l| {
        l.think_time_s.configured
    }));
    marks.apply(&mut c, span, at(|l| l.think_time_s.achieved));
    let mut keys = vec![
        Key::Line("achieved (N/X − R)", 2, false),
        Key::Line("configured", 5, true),
    ];
    keys.extend(marks.keys());
    figure(
        h,
        "Think time: achieved vs configured",
        &keys,
        &c.render("think time against users"),
    );
    h.push_str("</div>\n");
}

/// The 95% intervals of the levels that have one: `figure` gives the
/// point and its half-width.
fn error_bars(
    levels: &[(f64, &LevelRecord)],
    colour: usize,
    figure: impl Fn(&LevelRecord) -> Option<(f64, f64)>,
) -> Vec<ErrorBar> {
    levels
        .iter()
        .filter_map(|(u, l)| {
            let (y, half) = figure(l)?;
            Some(ErrorBar {
                x: *u,
                lo: y - half,
                hi: y + half,
                colour,
            })
        })
        .collect()
}

fn cpu_chart(
    h: &mut String,
    record: &RunRecord,
    levels: &[(f64, &LevelRecord)],
    marks: &Marks,
    span: f64,
) {
    /// A tier's cores and its (users, busy cores) points.
    type TierCurve = (u32, Vec<(f64, f64)>);
    let mut tiers: BTreeMap<&str, TierCurve> = BTreeMap::new();
    for (u, l) in levels {
        for (tier, usage) in &l.servers {
            let e = tiers.entry(tier).or_default();
            e.0 = e.0.max(usage.cores);
            e.1.push((*u, usage.cpu_util_cores));
        }
    }
    if tiers.is_empty() {
        h.push_str("<figure>\n<figcaption>CPU utilisation vs users</figcaption>\n<p class=\"note\">Not measured: the run had no profiler agents.</p>\n</figure>\n");
        return;
    }
    let bottleneck = record
        .analysis
        .capacity
        .as_ref()
        .and_then(|a| a.bottleneck.as_ref())
        .map(|b| b.tier.as_str());
    let mut c = LineChart::new("users", "CPU (busy cores)");
    let names: Vec<String> = tiers
        .keys()
        .map(|t| {
            // Tiers sharing a host's cores are one station: `web+db`.
            if bottleneck.is_some_and(|b| b.split('+').any(|part| part == *t)) {
                format!("{t} (bottleneck)")
            } else {
                t.to_string()
            }
        })
        .collect();
    for (i, ((tier, (cores, points)), name)) in tiers.iter().zip(&names).enumerate() {
        c.series.push(Series {
            name: name.clone(),
            colour: i,
            points: points.clone(),
            dashed: false,
            markers: true,
        });
        // Tiers with the same core count share one line and label.
        match c.hlines.iter_mut().find(|h| h.y == f64::from(*cores)) {
            Some(h) => h.label = format!("{}, {tier}", h.label),
            None => c.hlines.push(HLine {
                y: f64::from(*cores),
                label: tier.to_string(),
                colour: i,
            }),
        }
    }
    for h in &mut c.hlines {
        h.label = format!(
            "{}: {} core{}",
            h.label,
            h.y,
            if h.y == 1.0 { "" } else { "s" }
        );
    }
    marks.apply(&mut c, span, |_| None);
    let mut keys: Vec<Key> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Key::Line(n, i, false))
        .collect();
    keys.push(Key::Dashed("cores available"));
    keys.extend(marks.keys());
    figure(
        h,
        "CPU utilisation per tier vs users",
        &keys,
        &c.render("CPU utilisation of each tier against users"),
    );
}

/// Each tier's mean resident memory against users, and the line fitted
/// to it (`model::memory`) dashed beside it; nothing when no level
/// measured memory.
fn memory_chart(
    h: &mut String,
    levels: &[(f64, &LevelRecord)],
    model: Option<&Prediction>,
    marks: &Marks,
    span: f64,
) {
    const MIB: f64 = (1u64 << 20) as f64;
    let mut tiers: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for (u, l) in levels {
        for (tier, usage) in l.servers.iter().filter(|(_, u)| u.memory_mean_bytes > 0) {
            tiers
                .entry(tier)
                .or_default()
                .push((*u, usage.memory_mean_bytes as f64 / MIB));
        }
    }
    if tiers.is_empty() {
        return;
    }
    let mut c = LineChart::new("users", "resident memory (MiB)");
    let mut keys = Vec::new();
    let fits = model.map(|p| &p.memory);
    for (i, (tier, points)) in tiers.iter().enumerate() {
        c.series.push(Series {
            name: tier.to_string(),
            colour: i,
            points: points.clone(),
            dashed: false,
            markers: true,
        });
        keys.push(Key::Line(tier, i, false));
        if let Some(f) = fits.and_then(|f| f.get(*tier)) {
            c.series.push(Series {
                name: format!("{tier} fitted"),
                colour: i,
                points: vec![
                    (0.0, f.at(0) as f64 / MIB),
                    (span, f.at(span as u32) as f64 / MIB),
                ],
                dashed: true,
                markers: false,
            });
        }
    }
    if fits.is_some_and(|f| !f.is_empty()) {
        keys.push(Key::Dashed("fitted: baseline + memory per user"));
    }
    marks.apply(&mut c, span, |_| None);
    keys.extend(marks.keys());
    figure(
        h,
        "Memory per tier vs users",
        &keys,
        &c.render("resident memory of each tier against users"),
    );
}

/// One level's time series: throughput, and p50/p99, warm-up shaded.
pub(super) fn level(h: &mut String, level: &LevelRecord, rows: &[&SeriesRow], lag: &[&LagReading]) {
    let Some(first) = rows.first() else {
        h.push_str("<p class=\"note\">No time series for this level.</p>\n");
        return;
    };
    // A row's t_s is the end of its one-second interval; the level's last
    // row may cover a sliver of a second, whose rate is noise: dropped.
    let rows: Vec<&SeriesRow> = rows
        .iter()
        .enumerate()
        .filter(|(i, r)| *i == 0 || r.t_s - rows[i - 1].t_s >= 0.5)
        .map(|(_, r)| *r)
        .collect();
    let start = (first.t_s - 1.0).max(0.0);
    let x = |r: &SeriesRow| r.t_s - start;
    let points = |f: fn(&SeriesRow) -> f64| rows.iter().map(|r| (x(r), f(r))).collect();
    h.push_str("<div class=\"charts\">\n");
    let mut c = over_time("throughput (req/s)", level);
    c.series.push(Series {
        name: "throughput".into(),
        colour: 0,
        points: points(|r| r.throughput_rps),
        dashed: false,
        markers: true,
    });
    let keys = [Key::Line("throughput", 0, false), Key::Band("warm-up")];
    let caption = format!("Level {}: throughput over time", level.level);
    figure(h, &caption, &keys, &c.render(&caption));

    let mut c = over_time("response time (ms)", level);
    c.series.push(Series {
        name: "p50".into(),
        colour: 0,
        points: points(|r| r.p50_ms),
        dashed: false,
        markers: true,
    });
    c.series.push(Series {
        name: "p99".into(),
        colour: 4,
        points: points(|r| r.p99_ms),
        dashed: false,
        markers: true,
    });
    let keys = [
        Key::Line("p50", 0, false),
        Key::Line("p99", 4, false),
        Key::Band("warm-up"),
    ];
    let caption = format!("Level {}: response time over time", level.level);
    figure(h, &caption, &keys, &c.render(&caption));
    lag_over_time(h, level, lag);
    h.push_str("</div>\n");
}

/// A chart of a figure through a level, its warm-up shaded.
fn over_time(y_label: &str, level: &LevelRecord) -> LineChart {
    let mut c = LineChart::new("seconds into the level", y_label);
    c.dense = true;
    c.bands.push(Band {
        x0: 0.0,
        x1: level.warmup_s,
        label: "warm-up".into(),
        class: "band",
    });
    c
}

/// Each watched consumer group's lag through the level's measured window
/// (readings are timed from the window's start, which the warm-up
/// precedes), its bound drawn when a `lag(GROUP)` SLO judged it: a group
/// that keeps up shows a flat saw-tooth (a second's records between
/// commits), one that falls behind a ramp.
fn lag_over_time(h: &mut String, level: &LevelRecord, lag: &[&LagReading]) {
    let groups: std::collections::BTreeSet<&str> = lag.iter().map(|r| r.group.as_str()).collect();
    if groups.is_empty() {
        return;
    }
    let mut c = over_time("consumer lag (records)", level);
    for (colour, group) in groups.iter().enumerate() {
        c.series.push(Series {
            name: (*group).to_string(),
            colour,
            points: lag
                .iter()
                .filter(|r| r.group == *group)
                .map(|r| (level.warmup_s + r.window_s, r.lag_records as f64))
                .collect(),
            dashed: false,
            markers: true,
        });
    }
    let judged = level.rate_search.iter().flat_map(|j| &j.slos);
    for slo in judged.filter(|s| s.unit == Unit::Records) {
        c.hlines.push(HLine {
            y: slo.bound,
            label: slo.source.clone(),
            colour: 3,
        });
    }
    let mut keys: Vec<Key> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| Key::Line(g, i, false))
        .collect();
    keys.push(Key::Band("warm-up"));
    let caption = format!("Level {}: consumer lag over time", level.level);
    figure(h, &caption, &keys, &c.render(&caption));
}
