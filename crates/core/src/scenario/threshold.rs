//! Threshold (SLO) expressions such as `p99 < 250ms`, `error_rate < 1%` or
//! `login.throughput >= 100/s`.
//!
//! Grammar: `[request | class "."] metric op value`, where metric is `mean`, `max`,
//! `pN` (`p50`, `p90`, `p95`, `p99`, `p99.9`, … with at most one decimal),
//! `error_rate`, `checks` or `throughput`, and op is `<`, `<=`, `>` or `>=`;
//! or, of what a tier of `servers:` spends, `tier "." cpu_ms op ms`
//! (`web.cpu_ms < 5`: its CPU per request), `tier "." util op share`
//! (`web.util < 60%`: its busy cores over its cores) and `tier "." memory
//! op size` (`web.memory < 1GiB`: its resident memory at its highest).
//! Of a Kafka target's consumer group (the application under test):
//! `lag(GROUP) op records` (its lag at the level's last reading) and
//! `lag_trend(GROUP) op rate` (its lag's least-squares trend over the
//! level, records per second: Theodolite's criterion).
//! Times take a duration and are kept in milliseconds; `error_rate` and
//! `checks` (the share of checks passed) take a percent or a fraction and
//! are kept as a fraction; `throughput` takes `100/s` or a plain number, in
//! requests per second.

use super::duration::parse_duration;
use super::model::{Comparison, Metric, RequestId, Threshold};

const METRICS: &str = "mean, max, p50, p90, p95, p99, p99.9, error_rate, checks or throughput";

/// `expr` with the scenario's request names (`request_id`) and tiers.
pub fn parse_threshold(
    expr: &str,
    request_id: impl Fn(&str) -> Option<RequestId>,
    tiers: &[&str],
) -> Result<Threshold, String> {
    parse_scoped(expr, request_id, tiers, &[])
}

/// `parse_threshold`, also of the scenario's workload classes
/// (`buyer.p99 < 300ms`: the requests of the class's users).
pub(crate) fn parse_scoped(
    expr: &str,
    request_id: impl Fn(&str) -> Option<RequestId>,
    tiers: &[&str],
    classes: &[&str],
) -> Result<Threshold, String> {
    let text = expr.trim();
    let Some(at) = text.find(['<', '>']) else {
        return Err(format!(
            "expected a comparison like `p99 < 250ms`, found `{text}`"
        ));
    };
    let or_equal = text[at + 1..].starts_with('=');
    let op = match (&text[at..at + 1], or_equal) {
        ("<", false) => Comparison::Less,
        ("<", true) => Comparison::LessOrEqual,
        (_, false) => Comparison::Greater,
        (_, true) => Comparison::GreaterOrEqual,
    };
    let op_text = &text[at..at + 1 + or_equal as usize];
    let left = text[..at].trim();
    let right = text[at + op_text.len()..].trim();

    if let Some(lag) = parse_lag(left) {
        return lag_threshold(text, lag?, op, op_text, right);
    }
    let mut class = None;
    let (request, tier, metric) = match parse_metric(left) {
        Some(metric) if metric.of_tier() => {
            let example = tiers.first().copied().unwrap_or("web");
            return Err(format!(
                "`{left}` is a tier's: write it after the tier's name, like `{example}.{left}`"
            ));
        }
        Some(metric) => (None, None, metric),
        None => match left.split_once('.') {
            Some((name, metric_text)) if !name.is_empty() => {
                let (name, metric_text) = (name.trim(), metric_text.trim());
                match (request_id(name), parse_metric(metric_text)) {
                    (_, Some(metric)) if metric.of_tier() => {
                        if !tiers.contains(&name) {
                            return Err(if tiers.is_empty() {
                                format!("`{metric_text}` of tier `{name}`: the scenario has no `servers:` to measure it")
                            } else {
                                format!("unknown tier `{name}` (the tiers of `servers:`: {})", tiers.join(", "))
                            });
                        }
                        (None, Some(name.to_string()), metric)
                    }
                    (Some(_), Some(_)) if classes.contains(&name) => {
                        return Err(format!(
                            "`{name}` is both a request and a class: rename the class to judge it apart"
                        ))
                    }
                    (Some(id), Some(metric)) => (Some(id), None, metric),
                    (None, Some(Metric::Checks)) if classes.contains(&name) => {
                        return Err(format!(
                            "checks are counted per request, not per class: write `REQUEST.checks`, or `checks` for all (`{name}` is a class)"
                        ))
                    }
                    (None, Some(metric)) if classes.contains(&name) => {
                        class = Some(name.to_string());
                        (None, None, metric)
                    }
                    (Some(_), None) => {
                        return Err(format!("expected a metric ({METRICS}), found `{metric_text}`"))
                    }
                    (None, Some(_)) if tiers.contains(&name) => {
                        return Err(format!(
                            "`{metric_text}` is the client's, not a tier's: a tier has cpu_ms, util and memory"
                        ))
                    }
                    (None, Some(_)) => return Err(format!("unknown request `{name}`")),
                    // Neither part makes sense: `p42.42` is a bad metric,
                    // not a request named `p42`.
                    (None, None) => {
                        return Err(format!("expected a metric ({METRICS}), found `{left}`"))
                    }
                }
            }
            _ => {
                return Err(format!(
                    "expected a metric ({METRICS}), optionally after a request name and `.`, found `{left}`"
                ))
            }
        },
    };

    let bound = match metric {
        Metric::Lag | Metric::LagTrend => unreachable!("parsed above"),
        Metric::Promql => {
            return Err("a PromQL threshold is a map: `promql: {query: '…', below: 5}`".into())
        }
        Metric::Mean | Metric::Max | Metric::Percentile(_) => parse_duration(right)
            .map(|d| d.as_secs_f64() * 1000.0)
            .map_err(|_| {
                format!("expected a duration like `250ms` after `{op_text}`, found `{right}`")
            })?,
        Metric::CpuMs => parse_duration(right)
            .map(|d| d.as_secs_f64() * 1000.0)
            .ok()
            .or_else(|| right.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0))
            .ok_or_else(|| {
                format!("expected CPU milliseconds like `5` or `5ms` after `{op_text}`, found `{right}`")
            })?,
        Metric::Memory => right
            .parse::<bytesize::ByteSize>()
            .map(|b| b.as_u64() as f64)
            .map_err(|_| {
                format!("expected a size like `512MiB` or `1GB` after `{op_text}`, found `{right}`")
            })?,
        Metric::ErrorRate | Metric::Checks | Metric::Util => parse_rate(right).ok_or_else(|| {
            format!("expected a percentage like `1%` or a fraction like `0.01` after `{op_text}`, found `{right}`")
        })?,
        Metric::Throughput => right
            .strip_suffix("/s")
            .unwrap_or(right)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                format!("expected a rate like `100/s` after `{op_text}`, found `{right}`")
            })?,
    };
    Ok(Threshold {
        source: text.to_string(),
        request,
        class,
        tier,
        metric,
        op,
        bound,
        promql: None,
        group: None,
    })
}

/// `lag(GROUP) op records` or `lag_trend(GROUP) op rate`, if `left` is
/// one of them: the metric and the group.
fn parse_lag(left: &str) -> Option<Result<(Metric, String), String>> {
    let (metric, rest) = if let Some(rest) = left.strip_prefix("lag_trend(") {
        (Metric::LagTrend, rest)
    } else if let Some(rest) = left.strip_prefix("lag(") {
        (Metric::Lag, rest)
    } else {
        return None;
    };
    let name = match rest.strip_suffix(')') {
        Some(name) => name.trim(),
        None => {
            return Some(Err(format!(
                "expected `)` after the consumer group's name in `{left}`"
            )))
        }
    };
    // Kafka's legal group names are any string, but one with quotes,
    // spaces or parentheses here is far likelier a typo.
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || "()'\"".contains(c)) {
        return Some(Err(format!(
            "expected a consumer group's name inside `{left}`, like `lag_trend(my-app)`"
        )));
    }
    Some(Ok((metric, name.to_string())))
}

/// A lag threshold: its bound in records (`lag`) or records per second
/// (`lag_trend`, which may be negative: a lag that must shrink).
fn lag_threshold(
    text: &str,
    (metric, group): (Metric, String),
    op: Comparison,
    op_text: &str,
    right: &str,
) -> Result<Threshold, String> {
    let bound = match metric {
        Metric::LagTrend => right
            .strip_suffix("/s")
            .unwrap_or(right)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| {
                format!(
                    "expected a rate of records like `100/s` after `{op_text}`, found `{right}`"
                )
            })?,
        _ => right
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                format!(
                    "expected a number of records like `10000` after `{op_text}`, found `{right}`"
                )
            })?,
    };
    Ok(Threshold {
        class: None,
        source: text.to_string(),
        request: None,
        tier: None,
        metric,
        op,
        bound,
        promql: None,
        group: Some(group),
    })
}

fn parse_metric(text: &str) -> Option<Metric> {
    match text {
        "mean" => Some(Metric::Mean),
        "max" => Some(Metric::Max),
        "error_rate" => Some(Metric::ErrorRate),
        "checks" => Some(Metric::Checks),
        "throughput" => Some(Metric::Throughput),
        "cpu_ms" => Some(Metric::CpuMs),
        "util" => Some(Metric::Util),
        "memory" => Some(Metric::Memory),
        _ => {
            let number = text.strip_prefix('p')?;
            let (whole, tenth) = match number.split_once('.') {
                Some((w, t)) if t.len() == 1 => (w, t),
                Some(_) => return None,
                None => (number, "0"),
            };
            if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Checked: `p6554` must not wrap around to p0.4 (found by fuzzing).
            let per_mille = whole
                .parse::<u16>()
                .ok()?
                .checked_mul(10)?
                .checked_add(tenth.parse::<u16>().ok()?)?;
            (1..=1000)
                .contains(&per_mille)
                .then_some(Metric::Percentile(per_mille))
        }
    }
}

/// `1%` → 0.01, `0.01` → 0.01; in [0, 1].
pub(crate) fn parse_rate(text: &str) -> Option<f64> {
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok()? / 100.0,
        None => text.parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<RequestId> {
        (name == "login").then_some(RequestId(3))
    }

    #[test]
    fn percentiles_past_p100_are_refused_however_large() {
        assert_eq!(parse_metric("p99.9"), Some(Metric::Percentile(999)));
        assert_eq!(parse_metric("p100"), Some(Metric::Percentile(1000)));
        for text in ["p100.1", "p6554", "p9905", "p65535", "p99999", "p0"] {
            assert_eq!(parse_metric(text), None, "{text}");
        }
    }

    #[test]
    fn grammar_table() {
        use Comparison::*;
        let ok: &[(&str, Option<RequestId>, Metric, Comparison, f64)] = &[
            ("p99 < 250ms", None, Metric::Percentile(990), Less, 250.0),
            (
                "p99.9<=1s",
                None,
                Metric::Percentile(999),
                LessOrEqual,
                1000.0,
            ),
            ("p50 > 1.5ms", None, Metric::Percentile(500), Greater, 1.5),
            ("p90 < 2s", None, Metric::Percentile(900), Less, 2000.0),
            ("p95 < 2s", None, Metric::Percentile(950), Less, 2000.0),
            ("mean < 100ms", None, Metric::Mean, Less, 100.0),
            ("max <= 2m", None, Metric::Max, LessOrEqual, 120_000.0),
            ("error_rate < 1%", None, Metric::ErrorRate, Less, 0.01),
            (
                "error_rate <= 0.05",
                None,
                Metric::ErrorRate,
                LessOrEqual,
                0.05,
            ),
            (
                "throughput >= 100/s",
                None,
                Metric::Throughput,
                GreaterOrEqual,
                100.0,
            ),
            ("throughput > 20", None, Metric::Throughput, Greater, 20.0),
            (
                "login.p99 < 250ms",
                Some(RequestId(3)),
                Metric::Percentile(990),
                Less,
                250.0,
            ),
            (
                "login.p99.9 < 1s",
                Some(RequestId(3)),
                Metric::Percentile(999),
                Less,
                1000.0,
            ),
            (
                "login.error_rate < 2%",
                Some(RequestId(3)),
                Metric::ErrorRate,
                Less,
                0.02,
            ),
        ];
        for (text, request, metric, op, bound) in ok {
            let t =
                parse_threshold(text, lookup, &["web"]).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(t.request, *request, "{text}");
            assert_eq!(t.metric, *metric, "{text}");
            assert_eq!(t.op, *op, "{text}");
            assert!((t.bound - bound).abs() < 1e-9, "{text}: {}", t.bound);
            assert_eq!(t.source, text.trim());
        }
    }

    #[test]
    fn errors_say_what_was_expected() {
        let err = |text: &str| parse_threshold(text, lookup, &["web"]).unwrap_err();
        assert_eq!(
            err("p99 250ms"),
            "expected a comparison like `p99 < 250ms`, found `p99 250ms`"
        );
        assert!(err("p98.55 < 1s").starts_with("expected a metric"));
        assert!(err("latency < 1s").contains("found `latency`"));
        assert_eq!(
            err("p99 < fast"),
            "expected a duration like `250ms` after `<`, found `fast`"
        );
        assert!(err("p99 < 250").contains("found `250`"));
        assert!(err("error_rate < 150%").contains("percentage"));
        assert!(err("throughput > lots").contains("`100/s`"));
        assert_eq!(err("logn.p99 < 1s"), "unknown request `logn`");
        assert!(err("login.p999x < 1s").contains("found `p999x`"));
        assert!(err("p42.42 < 1s").contains("found `p42.42`"));
        assert_eq!(
            err("cpu_ms < 5"),
            "`cpu_ms` is a tier's: write it after the tier's name, like `web.cpu_ms`"
        );
        assert_eq!(
            err("db.util < 50%"),
            "unknown tier `db` (the tiers of `servers:`: web)"
        );
        assert!(err("web.p99 < 1s").contains("the client's, not a tier's"));
        assert!(err("web.util < 150%").contains("percentage"));
        assert!(err("web.cpu_ms < soon").contains("CPU milliseconds"));
        assert!(parse_threshold("web.util < 50%", lookup, &[])
            .unwrap_err()
            .contains("no `servers:`"));
    }

    #[test]
    fn a_class_scopes_a_threshold_to_its_users_requests() {
        let t = parse_scoped("buyer.p99 < 300ms", lookup, &[], &["buyer"]).unwrap();
        assert_eq!(t.class.as_deref(), Some("buyer"));
        assert_eq!((t.request, t.metric), (None, Metric::Percentile(990)));
        let err = |s| parse_scoped(s, lookup, &[], &["buyer", "login"]).unwrap_err();
        assert!(err("buyer.checks > 99%").contains("per request, not per class"));
        assert!(err("login.p99 < 1s").contains("both a request and a class"));
        // Without classes, a class's name is an unknown request.
        assert!(parse_threshold("buyer.p99 < 1s", lookup, &[])
            .unwrap_err()
            .contains("unknown request `buyer`"));
    }

    #[test]
    fn a_consumer_groups_lag_and_its_trend() {
        let t = parse_threshold("lag_trend(my-app) < 100/s", lookup, &[]).unwrap();
        assert_eq!((t.metric, t.bound), (Metric::LagTrend, 100.0));
        assert_eq!(t.group.as_deref(), Some("my-app"));
        assert_eq!((t.request, t.tier), (None, None));
        // A lag that must shrink.
        let t = parse_threshold("lag_trend(g) <= -5", lookup, &[]).unwrap();
        assert_eq!((t.op, t.bound), (Comparison::LessOrEqual, -5.0));
        let t = parse_threshold("lag( g.v2 ) < 10_000", lookup, &[]).unwrap();
        assert_eq!((t.metric, t.bound), (Metric::Lag, 10_000.0));
        assert_eq!(t.group.as_deref(), Some("g.v2"));
        let err = |s| parse_threshold(s, lookup, &[]).unwrap_err();
        assert!(err("lag_trend(my app) < 1/s").contains("consumer group's name"));
        assert!(err("lag_trend() < 1/s").contains("consumer group's name"));
        assert!(err("lag_trend(g < 1/s").contains("expected `)`"));
        assert!(err("lag(g) < many").contains("number of records"));
        assert!(err("lag(g) < -1").contains("number of records"));
        assert!(err("lag_trend(g) < fast").contains("rate of records"));
    }

    #[test]
    fn a_tiers_cost_and_utilisation() {
        let t = parse_threshold("web.cpu_ms < 5", lookup, &["web"]).unwrap();
        assert_eq!(
            (t.tier.as_deref(), t.metric, t.bound),
            (Some("web"), Metric::CpuMs, 5.0)
        );
        let t = parse_threshold("web.cpu_ms <= 1.5ms", lookup, &["web"]).unwrap();
        assert_eq!(t.bound, 1.5);
        let t = parse_threshold("web.util < 60%", lookup, &["web"]).unwrap();
        assert_eq!((t.metric, t.bound, t.request), (Metric::Util, 0.6, None));
        let t = parse_threshold("web.memory < 1GiB", lookup, &["web"]).unwrap();
        assert_eq!((t.metric, t.bound), (Metric::Memory, (1u64 << 30) as f64));
        assert!(parse_threshold("web.memory < lots", lookup, &["web"])
            .unwrap_err()
            .contains("`512MiB`"));
    }
}
