//! Plain-text summaries for the terminal: the per-request table of one level
//! and the users-vs-throughput table of a series of levels. Fixed-width,
//! no colour, so they read the same in a terminal, a pipe and a CI log.

use std::fmt::Write;

use crate::record::{Latency, LevelRecord};

mod prediction;

pub use prediction::{model_summary, prediction_table};

/// The per-request and total table of one level.
pub fn level_table(level: &LevelRecord) -> String {
    let mut out = String::new();
    // Each class's row, under the total: its users (or share) beside it.
    let classes: Vec<(String, &crate::record::ClassRecord)> = level
        .per_class
        .iter()
        .map(|(name, c)| {
            let label = match c.users {
                Some(users) => format!("class {name} ({users} users)"),
                None => format!(
                    "class {name} ({}%)",
                    crate::measure::round_to(c.share * 100.0, 1)
                ),
            };
            (label, c)
        })
        .collect();
    let name_width = level
        .per_request
        .keys()
        .chain(classes.iter().map(|(label, _)| label))
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0)
        .max("request".len())
        .max("total".len());
    let _ = writeln!(
        out,
        "{:<w$}  {:>9}  {:>7}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}",
        "request",
        "requests",
        "errors",
        "req/s",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        w = name_width
    );
    let row = |out: &mut String, name: &str, requests: u64, errors: u64, rps: f64, l: &Latency| {
        let _ = writeln!(
            out,
            "{:<w$}  {:>9}  {:>7}  {:>9.1}  {:>9.2}  {:>9.2}  {:>9.2}  {:>9.2}  {:>9.2}",
            name,
            requests,
            errors,
            rps,
            l.mean,
            l.p50,
            l.p90,
            l.p99,
            l.max,
            w = name_width
        );
    };
    for (name, r) in &level.per_request {
        row(
            &mut out,
            name,
            r.requests,
            r.errors,
            r.throughput_rps,
            &r.response_time_ms,
        );
    }
    row(
        &mut out,
        "total",
        level.requests,
        level.errors,
        level.throughput_rps,
        &level.response_time_ms,
    );
    for (label, c) in &classes {
        row(
            &mut out,
            label,
            c.requests,
            c.errors,
            c.throughput_rps,
            &c.response_time_ms,
        );
    }
    if !level.errors_by_kind.is_empty() {
        let kinds: Vec<String> = level
            .errors_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "errors: {}", kinds.join(", "));
    }
    let skipped: Vec<String> = level
        .per_request
        .iter()
        .filter(|(_, r)| r.skipped > 0)
        .map(|(k, r)| format!("{k} {}", r.skipped))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(out, "skipped (skip_if held): {}", skipped.join(", "));
    }
    for (name, r) in &level.per_request {
        for (reason, n) in &r.script_failures {
            let _ = writeln!(out, "script failed {name} {n}×: {reason}");
        }
    }
    if let Some(c) = &level.ci95 {
        let latency = c.response_time_ms.map_or(String::new(), |r| {
            format!(
                ", mean {:.2} ± {:.2} ms, p99 {:.2} ± {:.2} ms",
                level.response_time_ms.mean, r.mean, level.response_time_ms.p99, r.p99
            )
        });
        let _ = writeln!(
            out,
            "95% intervals: {:.1} ± {:.1} req/s (±{}){latency} ({} batches of {:.0} s)",
            level.throughput_rps,
            c.throughput_rps,
            precision(level),
            c.batches,
            c.batch_s,
        );
    }
    if let (Some(target), Some(achieved)) = (level.rate_rps, level.achieved_rate_rps) {
        let a = level.arrivals.as_ref();
        let _ = writeln!(
            out,
            "open workload: target {target:.1}/s, achieved {achieved:.1}/s; arrivals queued {}, never started {}; service time p99 {:.2} ms (response time counts from the intended start)",
            a.map_or(0, |a| a.queued),
            a.map_or(0, |a| a.unstarted),
            level.service_time_ms.as_ref().map_or(0.0, |l| l.p99),
        );
        let _ = writeln!(
            out,
            "measured {:.1}s  client CPU {:.2} of {} cores",
            level.duration_s, level.client.cpu_util_cores, level.client.cores
        );
        return out;
    }
    let z = &level.think_time_s;
    let _ = writeln!(
        out,
        "users {}  measured {:.1}s  think time configured {:.3}s, achieved {:.3}s (N/X-R), measured {:.3}s  client CPU {:.2} of {} cores",
        level.users.map_or("-".to_string(), |u| u.to_string()),
        level.duration_s,
        z.configured,
        z.achieved,
        z.measured,
        level.client.cpu_util_cores,
        level.client.cores,
    );
    out
}

/// The throughput's 95% half-width relative to it (`3.1%`), or `-` for a
/// level too short to say.
fn precision(l: &LevelRecord) -> String {
    l.ci95
        .as_ref()
        .and_then(|c| c.relative_throughput(l.throughput_rps))
        .map_or_else(|| "-".to_string(), |r| format!("{:.1}%", r * 100.0))
}

/// One line per level: the curve of a series of levels.
pub fn levels_table(levels: &[LevelRecord]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6}  {:>10}  {:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>8}  {:>7}",
        "users", "req/s", "±95%", "mean ms", "p90 ms", "p99 ms", "think s", "errors", "steady"
    );
    for l in levels {
        let _ = writeln!(
            out,
            "{:>6}  {:>10.1}  {:>6}  {:>9.2}  {:>9.2}  {:>9.2}  {:>9.3}  {:>8}  {:>7}{}",
            l.users.map_or("-".to_string(), |u| u.to_string()),
            l.throughput_rps,
            precision(l),
            l.response_time_ms.mean,
            l.response_time_ms.p90,
            l.response_time_ms.p99,
            l.think_time_s.achieved,
            l.errors,
            if l.steady_state { "yes" } else { "no" },
            if l.incomplete.is_some() {
                "  INCOMPLETE: part of its load was lost"
            } else if l.invalid.is_some() {
                "  INVALID: errors, not the system"
            } else if l.client_bottleneck {
                "  client bottleneck"
            } else {
                ""
            }
        );
    }
    out
}

/// The profiling table: request × tier × process, CPU ms, network and disk
/// bytes per request.
pub fn demand_table(
    demands: &std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, crate::record::TierDemands>,
    >,
) -> String {
    let mut out = String::new();
    let w = demands.keys().map(|k| k.len()).max().unwrap_or(0).max(7);
    let _ = writeln!(
        out,
        "{:<w$}  {:<6}  {:<12}  {:>9}  {:>11}  {:>11}  {:>11}  {:>11}  converged",
        "request", "tier", "process", "cpu ms", "net rx B", "net tx B", "disk rd B", "disk wr B",
    );
    for (request, tiers) in demands {
        for (tier, d) in tiers {
            for (i, (process, ms)) in d.cpu_ms_per_process.iter().enumerate() {
                let first = i == 0;
                let blank = String::new();
                let num = |x: f64| {
                    if first {
                        format!("{x:.0}")
                    } else {
                        blank.clone()
                    }
                };
                let _ = writeln!(
                    out,
                    "{:<w$}  {:<6}  {:<12}  {:>9.3}  {:>11}  {:>11}  {:>11}  {:>11}  {}",
                    request,
                    tier,
                    process,
                    ms,
                    num(d.net_rx_bytes),
                    num(d.net_tx_bytes),
                    num(d.disk_read_bytes),
                    num(d.disk_write_bytes),
                    if d.ignored.contains(process) {
                        "idle (ignored)"
                    } else if d.converged {
                        "yes"
                    } else {
                        "no"
                    }
                );
            }
        }
    }
    out
}

/// The verdict of a capacity analysis, from `run.json`'s analysis.
pub fn capacity_summary(record: &crate::record::RunRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "capacity: {} levels, stopped: {}",
        record.levels.len(),
        record.analysis.stop_reason
    );
    let Some(a) = &record.analysis.capacity else {
        return out;
    };
    let at = a
        .max_throughput_users
        .map_or(String::new(), |u| format!(" at {u} users"));
    let _ = writeln!(out, "max throughput {:.1} req/s{at}", a.max_throughput_rps);
    match a.saturation_users {
        Some(u) => {
            let _ = writeln!(out, "saturation point: {u} users (95% of max throughput)");
        }
        None => {
            let _ = writeln!(out, "saturation point: not determined");
        }
    }
    match (&a.hidden_bottleneck, a.n_star) {
        (Some(h), _) => {
            let _ = writeln!(
                out,
                "N* (Kleinrock saturation number, the hidden station included): {:.1}",
                h.n_star
            );
            let _ = writeln!(
                out,
                "bottleneck: not a CPU — something the agents do not see (a lock, a pool, a connection limit): fitted demand {:.2} ms, X ≤ {:.1} req/s; the busiest CPU, tier {}, was {:.0}% busy at {} users",
                h.demand_ms,
                h.max_throughput_rps,
                h.busiest_cpu.tier,
                h.busiest_cpu.utilisation * 100.0,
                h.busiest_cpu.users
            );
        }
        (None, Some(n)) => {
            let _ = writeln!(
                out,
                "N* (Kleinrock saturation number from measured demands): {n:.1}"
            );
        }
        (None, None) => {}
    }
    if let (Some(b), None) = (&a.bottleneck, &a.hidden_bottleneck) {
        if b.tier.contains('+') {
            // Tiers that take turns on one host's cores: one station.
            let _ = writeln!(
                out,
                "bottleneck: tiers {} together, on one host's cores (busiest process {})",
                b.tier, b.process
            );
        } else {
            let _ = writeln!(out, "bottleneck: tier {} (process {})", b.tier, b.process);
        }
    }
    if let Some(u) = a.first_client_bottleneck_users {
        let _ = writeln!(
            out,
            "warning: the load generator became the bottleneck at {u} users; throughput beyond that is the generator's limit, not the server's"
        );
    }
    out
}

/// The open search's levels: target and delivered rate, p99, the verdict
/// and the first SLO that failed.
pub fn rate_levels_table(levels: &[LevelRecord]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>10}  {:>12}  {:>9}  {:>8}  {:<8}  why",
        "rate /s", "delivered /s", "p99 ms", "errors", "verdict"
    );
    for l in levels {
        let Some(judged) = &l.rate_search else {
            continue;
        };
        let why = judged.why();
        let series: String = judged
            .series
            .iter()
            .map(|(k, v)| format!("[{k}={v}] "))
            .collect();
        let _ = writeln!(
            out,
            "{:>10.1}  {:>12.1}  {:>9.2}  {:>8}  {:<8}  {series}{why}",
            l.rate_rps.unwrap_or(0.0),
            judged.delivered_rps,
            l.response_time_ms.p99,
            l.errors,
            if l.interrupted {
                "cut"
            } else {
                judged.verdict.as_str()
            },
        );
    }
    out
}

/// The open search's verdict: the highest passing rate, the first failing
/// one and why; with `--vary`, one line per resource value and the demand.
pub fn rate_summary(record: &crate::record::RunRecord) -> String {
    let mut out = String::new();
    let Some(a) = &record.analysis.rates else {
        return out;
    };
    let _ = writeln!(
        out,
        "open capacity: {} levels, stopped: {}",
        record.levels.len(),
        record.analysis.stop_reason
    );
    let rate = |r: Option<f64>| r.map_or("none".to_string(), |r| format!("{r}/s"));
    let verdict =
        |pass: Option<f64>, fail: Option<f64>, slo: Option<&crate::record::ThresholdResult>| {
            let why = slo.map_or(String::new(), |s| format!(" — {}", s.failure_text()));
            format!(
                "highest passing rate {}, first failing {}{why}",
                rate(pass),
                rate(fail)
            )
        };
    if a.series.is_empty() {
        let _ = writeln!(
            out,
            "{}",
            verdict(
                a.found.max_passing_rate_rps,
                a.found.first_failing_rate_rps,
                a.found.failed_slo.as_ref()
            )
        );
    }
    for s in &a.series {
        let _ = writeln!(
            out,
            "{}={}: {} (stopped: {}{})",
            s.name,
            s.value,
            verdict(
                s.found.max_passing_rate_rps,
                s.found.first_failing_rate_rps,
                s.found.failed_slo.as_ref()
            ),
            s.stop_reason,
            s.error.as_ref().map_or(String::new(), |e| format!("; {e}"))
        );
    }
    if let Some(c) = a.found.capacity_rps {
        let _ = writeln!(out, "capacity measured past saturation: {c:.1}/s");
    }
    for d in &a.demand {
        let _ = writeln!(
            out,
            "demand: {}/s needs {}",
            d.load_rps,
            d.resource.as_deref().unwrap_or("more than any value tried")
        );
    }
    if let Some(g) = a.found.generator_limit_rps {
        let _ = writeln!(
            out,
            "warning: the load generator could not keep {g}/s (it kept {}); that is autoperf's limit on this machine, not the system's (spread the load over other hosts with --workers, or over processes with --generators)",
            rate(a.found.max_passing_rate_rps)
        );
    }
    out
}

/// The first lines of a summary when the run measured something that is
/// not the system working: which levels, and why.
pub fn untrustworthy(record: &crate::record::RunRecord) -> String {
    let mut out = String::new();
    for l in record.levels.iter().filter(|l| l.invalid.is_some()) {
        let _ = writeln!(
            out,
            "NOT TRUSTWORTHY: level {}: {}",
            l.level,
            l.invalid.as_deref().unwrap_or("")
        );
    }
    if record.analysis.stop_reason.untrustworthy() {
        let _ = writeln!(
            out,
            "the analysis stopped there ({}); the levels before it are kept",
            record.analysis.stop_reason
        );
    }
    out
}
