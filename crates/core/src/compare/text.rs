//! The comparison as printed at the end of `compare` (and of a run with
//! `--baseline`): one table per level, the regressions named last.

use std::fmt::Write;

use super::{Change, Comparison, Metric, Verdict};
use crate::results::ALL_REQUESTS;

pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "compare: base {} ({})", c.base, c.base_mode.as_str());
    let _ = writeln!(out, "         new  {} ({})", c.new, c.new_mode.as_str());
    let _ = writeln!(
        out,
        "limits: {}; a change beyond its limit is a regression when the measured seconds show it beyond the limit (one-sided Mann-Whitney, p < {})",
        c.limits, c.alpha
    );
    for note in &c.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for level in &c.levels {
        let _ = writeln!(
            out,
            "\n{} (base level {}, new level {})",
            level.load, level.base_level, level.new_level
        );
        let _ = writeln!(
            out,
            "  {:<16} {:<16} {:>10} {:>10} {:>9} {:>8}  verdict",
            "request", "metric", "base", "new", "change", "p"
        );
        for ch in &level.changes {
            row(&mut out, ch);
        }
    }
    if let Some(ch) = &c.max_throughput {
        let _ = writeln!(out, "\ncapacity");
        row(&mut out, ch);
        if let Some((b, n)) = c.saturation_users {
            let users = |u: Option<u32>| u.map_or("not reached".to_string(), |u| u.to_string());
            let _ = writeln!(
                out,
                "  saturation users: base {}, new {}",
                users(b),
                users(n)
            );
        }
    }
    if let Some(ch) = &c.max_passing_rate {
        let _ = writeln!(out, "\nhighest rate meeting the SLOs (sessions/s)");
        row(&mut out, ch);
    }
    for (what, list) in [("base", &c.only_in_base), ("new", &c.only_in_new)] {
        if !list.is_empty() {
            let _ = writeln!(out, "\nonly in {what}: {}", list.join(", "));
        }
    }
    out.push('\n');
    if c.regressions == 0 {
        let _ = writeln!(out, "no regression");
    } else {
        let _ = writeln!(
            out,
            "{} regression{}:",
            c.regressions,
            if c.regressions == 1 { "" } else { "s" }
        );
        for (load, ch) in c.regressions() {
            let _ = writeln!(out, "  {}", describe(load, ch));
        }
    }
    out
}

/// `20 users, request `cpu`: p50 12.1 → 15.8 ms (+30.6%, limit +10%, p < 0.001)`.
pub(crate) fn describe(load: &str, ch: &Change) -> String {
    let who = match &ch.tier {
        Some(tier) => format!("tier `{tier}`"),
        None if ch.request == ALL_REQUESTS => "all requests".to_string(),
        None => format!("request `{}`", ch.request),
    };
    format!(
        "{load}, {who}: {} {} → {} {} ({}, limit {}, {})",
        ch.metric,
        value(ch.metric, ch.base),
        value(ch.metric, ch.new),
        ch.metric.unit(),
        change(ch),
        limit(ch),
        p_text(ch.p_value)
    )
}

fn row(out: &mut String, ch: &Change) {
    let request = ch.who();
    let verdict = match ch.verdict {
        Verdict::Noise => "noise (not significantly beyond the limit)",
        v => v.as_str(),
    };
    let _ = writeln!(
        out,
        "  {:<16} {:<16} {:>10} {:>10} {:>9} {:>8}  {verdict}",
        request,
        format!("{} {}", ch.metric, ch.metric.unit()),
        value(ch.metric, ch.base),
        value(ch.metric, ch.new),
        change(ch),
        ch.p_value.map_or("-".into(), |p| if p < 0.001 {
            "<0.001".into()
        } else {
            format!("{p:.3}")
        })
    );
}

pub(super) fn value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Errors => format!("{:.2}", v * 100.0),
        Metric::Memory => format!("{:.1}", v / (1u64 << 20) as f64),
        Metric::Throughput => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// The signed change of the figure itself: `+30.6%`, or `+1.20 pt` for the
/// error share.
pub(super) fn change(ch: &Change) -> String {
    match ch.metric {
        Metric::Errors => format!("{:+.2} pt", (ch.new - ch.base) * 100.0),
        _ if ch.base > 0.0 => format!("{:+.1}%", (ch.new - ch.base) / ch.base * 100.0),
        _ => "-".into(),
    }
}

pub(super) fn limit(ch: &Change) -> String {
    match (ch.metric, ch.limit) {
        (_, None) => "none".into(),
        (Metric::Errors, Some(l)) => format!("+{:.2} pt", l * 100.0),
        (Metric::Throughput, Some(l)) => format!("-{}%", trim_pct(l)),
        (_, Some(l)) => format!("+{}%", trim_pct(l)),
    }
}

fn trim_pct(l: f64) -> String {
    let s = format!("{:.2}", l * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(super) fn p_text(p: Option<f64>) -> String {
    match p {
        None => "untested: too few seconds".into(),
        Some(p) if p < 0.001 => "p < 0.001".into(),
        Some(p) => format!("p = {p:.3}"),
    }
}
