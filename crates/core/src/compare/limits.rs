//! What a comparison measures and how much worse each figure may get:
//! `--max-regression p99=10%,throughput=5%,errors=1%`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A figure compared between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Throughput,
    Mean,
    P50,
    P90,
    P95,
    P99,
    /// The share of requests that failed, compared in percentage points.
    Errors,
    /// A tier's CPU per request (its processes together, from the agents),
    /// compared per tier: a cost regression shows at low load long before
    /// it shows in a latency.
    CpuMs,
    /// A tier's resident memory (its processes together), the level's mean,
    /// compared per tier.
    Memory,
}

impl Metric {
    pub(crate) const ALL: [Metric; 9] = [
        Metric::Throughput,
        Metric::Mean,
        Metric::P50,
        Metric::P90,
        Metric::P95,
        Metric::P99,
        Metric::Errors,
        Metric::CpuMs,
        Metric::Memory,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Mean => "mean",
            Metric::P50 => "p50",
            Metric::P90 => "p90",
            Metric::P95 => "p95",
            Metric::P99 => "p99",
            Metric::Errors => "errors",
            Metric::CpuMs => "cpu_ms",
            Metric::Memory => "memory",
        }
    }

    /// How the figure is shown: its unit after the value.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Metric::Throughput => "req/s",
            Metric::Errors => "%",
            Metric::Memory => "MiB",
            _ => "ms",
        }
    }

    /// Whether the figure is a tier's (`servers:`), compared per tier.
    pub(crate) fn of_tier(self) -> bool {
        matches!(self, Metric::CpuMs | Metric::Memory)
    }

    fn parse(text: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == text)
    }

    /// How much worse `new` is than `base`, as a fraction: relative for
    /// throughput (a drop is worse) and response times (a rise is worse),
    /// absolute for the error share (0.01 = one percentage point more).
    /// `None` when the base is zero and a relative change means nothing.
    pub(crate) fn worsening(self, base: f64, new: f64) -> Option<f64> {
        match self {
            Metric::Errors => Some(new - base),
            Metric::Throughput if base > 0.0 => Some((base - new) / base),
            _ if base > 0.0 => Some((new - base) / base),
            _ => None,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest worsening each gated metric may show; metrics not named are
/// shown but never fail a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits(pub Vec<(Metric, f64)>);

impl Default for Limits {
    /// Response times 10% slower, throughput 5% lower, one percentage point
    /// more errors, 10% more CPU per request or memory at a tier.
    fn default() -> Limits {
        Limits(vec![
            (Metric::Throughput, 0.05),
            (Metric::Mean, 0.10),
            (Metric::P50, 0.10),
            (Metric::P90, 0.10),
            (Metric::P99, 0.10),
            (Metric::Errors, 0.01),
            (Metric::CpuMs, 0.10),
            (Metric::Memory, 0.10),
        ])
    }
}

impl Limits {
    /// Parses `p99=10%,throughput=5%` (a percentage, or a fraction like
    /// `0.1`), naming the part that is wrong and what is expected.
    pub fn parse(text: &str) -> Result<Limits, String> {
        let known = || {
            Metric::ALL
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut limits = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                return Err(format!("`{part}`: expected METRIC=PERCENT, e.g. p99=10%"));
            };
            let metric = Metric::parse(name.trim()).ok_or_else(|| {
                format!(
                    "`{part}`: unknown metric `{}`; expected one of {}",
                    name.trim(),
                    known()
                )
            })?;
            let value = value.trim();
            let fraction = match value.strip_suffix('%') {
                Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
                None => value.parse::<f64>(),
            }
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                format!(
                    "`{part}`: expected a limit like 10% (or 0.1), not negative, found `{value}`"
                )
            })?;
            if limits.iter().any(|(m, _)| *m == metric) {
                return Err(format!("`{part}`: {metric} is limited twice"));
            }
            limits.push((metric, fraction));
        }
        if limits.is_empty() {
            return Err("expected at least one METRIC=PERCENT, e.g. p99=10%".into());
        }
        limits.sort_by_key(|(m, _)| *m);
        Ok(Limits(limits))
    }

    pub(crate) fn of(&self, metric: Metric) -> Option<f64> {
        self.0.iter().find(|(m, _)| *m == metric).map(|(_, l)| *l)
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(m, l)| match m {
                Metric::Errors => format!("errors +{} pt", trim(l * 100.0)),
                Metric::Throughput => format!("throughput -{}%", trim(l * 100.0)),
                _ => format!("{m} +{}%", trim(l * 100.0)),
            })
            .collect();
        f.write_str(&parts.join(", "))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_percentages_and_fractions() {
        let l = Limits::parse("p99=10%, throughput=0.05").unwrap();
        assert_eq!(l.of(Metric::P99), Some(0.10));
        assert_eq!(l.of(Metric::Throughput), Some(0.05));
        assert_eq!(l.of(Metric::Mean), None);
        assert_eq!(l.to_string(), "throughput -5%, p99 +10%");
    }

    #[test]
    fn bad_limits_name_the_part_and_the_fix() {
        let e = Limits::parse("p98=10%").unwrap_err();
        assert!(
            e.contains("unknown metric `p98`") && e.contains("p99"),
            "{e}"
        );
        assert!(Limits::parse("p99").unwrap_err().contains("METRIC=PERCENT"));
        assert!(Limits::parse("p99=-3%")
            .unwrap_err()
            .contains("not negative"));
        assert!(Limits::parse("p99=1%,p99=2%")
            .unwrap_err()
            .contains("twice"));
        assert!(Limits::parse("").is_err());
    }

    #[test]
    fn worsening_points_the_right_way() {
        assert_eq!(Metric::P99.worsening(10.0, 13.0), Some(0.3));
        assert_eq!(Metric::Throughput.worsening(100.0, 90.0), Some(0.1));
        assert!((Metric::Errors.worsening(0.01, 0.03).unwrap() - 0.02).abs() < 1e-12);
        assert_eq!(Metric::P50.worsening(0.0, 1.0), None);
    }
}
