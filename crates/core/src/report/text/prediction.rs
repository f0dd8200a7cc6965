//! The prediction in plain text: the model, its bounds, a table of its
//! points (and of each workload class's), the model against the measured
//! levels; and the paragraph a capacity analysis's summary gives it.

use std::fmt::Write;

/// A prediction: the bounds, a table of at most `rows` points, and the
/// model against the measured levels when there are any.
pub fn prediction_table(p: &crate::model::Prediction, rows: usize) -> String {
    let mut out = String::new();
    let tiers: Vec<&String> = p.model.tiers.keys().collect();
    let _ = writeln!(out, "model: {}", p.model.kind);
    for (tier, t) in &p.model.tiers {
        let _ = writeln!(
            out,
            "  {tier}: {:.3} ms CPU per request on {} core{}",
            t.cpu_ms_per_request,
            t.cores,
            if t.cores == 1 { "" } else { "s" }
        );
    }
    for shared in &p.model.shared_hosts {
        let _ = writeln!(out, "  {} share one host's cores", shared.join(" and "));
    }
    for (tier, m) in &p.memory {
        let _ = writeln!(
            out,
            "  {tier}: memory {} + {} a user (fitted over {} levels, {} to {} users, R² {:.3})",
            crate::scenario::files::human_bytes(m.baseline_bytes.max(0.0) as u64),
            crate::scenario::files::human_bytes(m.per_user_bytes.max(0.0) as u64),
            m.levels,
            m.users_from,
            m.users_to,
            m.r_squared
        );
    }
    let _ = writeln!(
        out,
        "bounds: X ≤ {:.1} req/s (bottleneck {}), R ≥ {:.3} ms, N* = {:.1}",
        p.bounds.max_throughput_rps,
        p.bounds.bottleneck,
        p.bounds.min_response_time_ms,
        p.bounds.n_star
    );
    let _ = write!(out, "\n{:>10} {:>11} {:>11}", "load", "req/s", "R ms");
    for t in &tiers {
        let _ = write!(out, " {:>10}", format!("{t} cores"));
    }
    let memory: Vec<&String> = p.memory.keys().collect();
    for t in &memory {
        let _ = write!(out, " {:>11}", format!("{t} MiB"));
    }
    let _ = writeln!(out, "  bottleneck");
    let step = p.points.len().div_ceil(rows.max(1)).max(1);
    let last = p.points.len().saturating_sub(1);
    for (i, point) in p.points.iter().enumerate() {
        if i % step != 0 && i != last {
            continue;
        }
        let load = match (point.users, point.rate_rps) {
            (Some(u), _) => format!("{u} users"),
            (None, Some(r)) => format!("{r:.1}/s"),
            _ => String::new(),
        };
        let r = if point.saturated {
            "saturated".to_string()
        } else {
            format!("{:.3}", point.response_time_ms)
        };
        let _ = write!(out, "{load:>10} {:>11.1} {r:>11}", point.throughput_rps);
        for t in &tiers {
            let _ = write!(
                out,
                " {:>10.3}",
                point.utilization.get(*t).copied().unwrap_or(0.0)
            );
        }
        for t in &memory {
            let _ = match point.memory_bytes.get(*t) {
                Some(&b) => write!(out, " {:>11.1}", b as f64 / f64::from(1u32 << 20)),
                None => write!(out, " {:>11}", "-"),
            };
        }
        let _ = writeln!(out, "  {}", point.bottleneck);
    }
    class_rows(&mut out, p, rows);
    if !p.measured.is_empty() {
        let _ = writeln!(
            out,
            "\nmodel against the measured levels:\n{:>7} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}",
            "users", "X measured", "X model", "error", "R measured", "R model", "error"
        );
        for c in &p.measured {
            let _ = writeln!(
                out,
                "{:>7} {:>12.1} {:>12.1} {:>7.1}% {:>12.3} {:>12.3} {:>7.1}%{}",
                c.users,
                c.measured_throughput_rps,
                c.model_throughput_rps,
                c.throughput_error * 100.0,
                c.measured_response_time_ms,
                c.model_response_time_ms,
                c.response_time_error * 100.0,
                if c.model_untrusted {
                    "  (measured far below the model: a limit it cannot see)"
                } else {
                    ""
                }
            );
            for (name, k) in &c.per_class {
                let _ = writeln!(
                    out,
                    "{:>7} {:>12.1} {:>12.1} {:>7.1}% {:>12.3} {:>12.3}  class {name}",
                    k.users,
                    k.measured_throughput_rps,
                    k.model_throughput_rps,
                    k.throughput_error * 100.0,
                    k.measured_response_time_ms,
                    k.model_response_time_ms,
                );
            }
        }
    }
    out
}

/// The workload classes of a prediction's points (at most `rows` of them):
/// each class's users, throughput and response time.
fn class_rows(out: &mut String, p: &crate::model::Prediction, rows: usize) {
    for (name, c) in &p.model.classes {
        let tiers: Vec<String> = c
            .cpu_ms_per_request
            .iter()
            .map(|(t, ms)| format!("{t} {ms:.3} ms"))
            .collect();
        let _ = writeln!(
            out,
            "  class {name}: {:.1}% of the users, think {:.3} s, CPU per request {}",
            c.share * 100.0,
            c.think_time_s,
            tiers.join(", ")
        );
    }
    let with: Vec<&crate::model::predict::Point> = p
        .points
        .iter()
        .filter(|pt| !pt.per_class.is_empty())
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nper class:\n{:>10} {:>12} {:>8} {:>11} {:>11}",
        "load", "class", "users", "req/s", "R ms"
    );
    let step = with.len().div_ceil(rows.max(1)).max(1);
    for (i, point) in with.iter().enumerate() {
        if i % step != 0 && i + 1 != with.len() {
            continue;
        }
        for (name, c) in &point.per_class {
            let _ = writeln!(
                out,
                "{:>10} {name:>12} {:>8} {:>11.1} {:>11.3}",
                format!("{} users", point.users.unwrap_or(0)),
                c.users,
                c.throughput_rps,
                c.response_time_ms
            );
        }
    }
}

/// One paragraph on the model set against a capacity analysis: its
/// bounds, its error where it describes the system, and where it does not.
pub fn model_summary(p: &crate::model::Prediction, path: &std::path::Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model: X ≤ {:.1} req/s (bottleneck {}), N* = {:.1}",
        p.bounds.max_throughput_rps, p.bounds.bottleneck, p.bounds.n_star
    );
    if let Some(fit) = p.fit() {
        let _ = writeln!(
            out,
            "model vs measured: RMS error {:.1}% in throughput, {:.1}% in mean response time over {} levels{}",
            fit.throughput_rms * 100.0,
            fit.response_time_rms * 100.0,
            fit.levels,
            match fit.median_precision {
                Some(precision) => format!(
                    "; the model's throughput inside the 95% interval of {} of the {} levels that have one (median ±{:.1}%)",
                    fit.within_interval,
                    fit.with_interval,
                    precision * 100.0
                ),
                None => String::new(),
            }
        );
    }
    if let Some(users) = p.untrusted_users() {
        let _ = writeln!(
            out,
            "model does not describe {users} users: measured throughput far below it (a limit it cannot see)"
        );
    }
    if let Some(users) = p.short_of_cpu_users() {
        let _ = writeln!(
            out,
            "model does not describe {users} users: the servers were short of CPU there (another process or the hypervisor took it)"
        );
    }
    let _ = writeln!(out, "prediction: {}", path.display());
    out
}
