//! `arrivals:` — an open workload: a constant `rate` or `stages` of rates,
//! spaced as a Poisson process or evenly, with an optional cap on sessions
//! in flight.
//!
//! ```yaml
//! arrivals: {rate: 500/s, spacing: poisson}
//! arrivals:
//!   stages: [{rate: 100/s, for: 30s}, {rate: 1000/s, for: 60s}]
//!   spacing: even
//!   max_in_flight: 2000
//! ```

use super::super::model::{ArrivalSpacing, ArrivalStage, Arrivals};
use super::super::rate::parse_per_second;
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(crate) const ARRIVALS_KEYS: &[&str] = &["rate", "stages", "spacing", "max_in_flight"];
pub(crate) const STAGE_KEYS: &[&str] = &["rate", "for"];

pub(crate) fn decode_arrivals(ctx: &mut Ctx, node: &Node) -> Option<Arrivals> {
    let fields = ctx.map(node, "`arrivals`", ARRIVALS_KEYS)?;
    let rate = fields.get("rate").map(|n| rate(ctx, n));
    let stages = fields.get("stages").map(|n| stages(ctx, n));
    let shape = match (rate, stages) {
        (Some(rate), None) => rate.map(|r| {
            vec![ArrivalStage {
                rate_per_s: r,
                length: None,
            }]
        }),
        (None, Some(stages)) => stages,
        (Some(_), Some(_)) => {
            ctx.error(
                node.pos(),
                "expected either `rate` or `stages` in `arrivals`, found both",
            );
            None
        }
        (None, None) => {
            ctx.error(
                node.pos(),
                "expected `rate: 500/s` or `stages: [{rate: 100/s, for: 30s}, …]` in `arrivals`, found neither",
            );
            None
        }
    };
    let spacing = match fields.get("spacing") {
        None => Some(ArrivalSpacing::Poisson),
        Some(n) => match n.as_str() {
            Some("poisson") => Some(ArrivalSpacing::Poisson),
            Some("even") => Some(ArrivalSpacing::Even),
            _ => {
                ctx.error(
                    n.pos(),
                    format!("expected `poisson` or `even`, found {}", n.describe()),
                );
                None
            }
        },
    };
    let max_in_flight = match fields.get("max_in_flight") {
        None => Some(None),
        Some(n) => ctx
            .integer(n, 1, "a number of sessions of at least 1")
            .map(|v| Some(v.min(u32::MAX as u64) as u32)),
    };
    Some(Arrivals {
        stages: shape?,
        spacing: spacing?,
        max_in_flight: max_in_flight?,
    })
}

fn rate(ctx: &mut Ctx, node: &Node) -> Option<f64> {
    let Some(text) = node.as_str() else {
        ctx.error(
            node.pos(),
            format!("expected a rate like `500/s`, found {}", node.describe()),
        );
        return None;
    };
    parse_per_second(text)
        .map_err(|e| ctx.error(node.pos(), e))
        .ok()
}

fn stages(ctx: &mut Ctx, node: &Node) -> Option<Vec<ArrivalStage>> {
    let items = ctx.seq(node, "a list of stages like `[{rate: 100/s, for: 30s}]`")?;
    if items.is_empty() {
        ctx.error(
            node.pos(),
            "expected at least one stage, found an empty list",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(f) = ctx.map(item, "a stage `{rate: 100/s, for: 30s}`", STAGE_KEYS) else {
            ok = false;
            continue;
        };
        let r = f.required(ctx, "rate").and_then(|n| rate(ctx, n));
        let d = f.required(ctx, "for").and_then(|n| ctx.duration(n));
        match (r, d) {
            (Some(rate_per_s), Some(length)) => out.push(ArrivalStage {
                rate_per_s,
                length: Some(length),
            }),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::scenario::{parse, ArrivalSpacing};

    const HEAD: &str = "target: {base_url: \"http://127.0.0.1:1\"}\nrequests:\n  a: {path: /}\n";

    #[test]
    fn constant_rate_and_stages() {
        let s = parse(
            &format!("{HEAD}arrivals: {{rate: 30000/min}}\n"),
            Path::new("a.yaml"),
        )
        .unwrap();
        let a = s.arrivals.unwrap();
        assert_eq!(a.stages.len(), 1);
        assert_eq!(a.stages[0].rate_per_s, 500.0);
        assert_eq!(a.spacing, ArrivalSpacing::Poisson);
        assert_eq!(a.total(), None);

        let s = parse(
            &format!("{HEAD}arrivals:\n  stages: [{{rate: 100/s, for: 30s}}, {{rate: 1000/s, for: 1m}}]\n  spacing: even\n  max_in_flight: 50\n"),
            Path::new("a.yaml"),
        )
        .unwrap();
        let a = s.arrivals.unwrap();
        assert_eq!(a.stages[1].rate_per_s, 1000.0);
        assert_eq!(a.total(), Some(Duration::from_secs(90)));
        assert_eq!(a.spacing, ArrivalSpacing::Even);
        assert_eq!(a.max_in_flight, Some(50));
    }

    #[test]
    fn bad_arrivals_say_where_and_what() {
        let errors = |yaml: &str| {
            parse(&format!("{HEAD}{yaml}"), Path::new("a.yaml"))
                .unwrap_err()
                .to_string()
        };
        let e = errors("arrivals: {rate: fast}\n");
        assert!(e.contains("a.yaml:4:") && e.contains("500/s"), "{e}");
        let e = errors("arrivals: {rate: 1/s, stages: [{rate: 1/s, for: 1s}]}\n");
        assert!(e.contains("both"), "{e}");
        let e = errors("arrivals: {stages: [{rate: 1/s}]}\n");
        assert!(e.contains("for"), "{e}");
        let e = errors("arrivals: {rate: 1/s, spacing: random}\n");
        assert!(e.contains("poisson") && e.contains("even"), "{e}");
        let e = errors("arrivals: {rat: 1/s}\n");
        assert!(e.contains("rate"), "{e}");
    }
}
