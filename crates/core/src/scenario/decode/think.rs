//! `think_time`: a duration, or a distribution (`constant`, `exponential`,
//! `uniform`, `lognormal`), for the scenario and for a single request.

use super::super::model::ThinkTime;
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(super) fn decode_think_time(ctx: &mut Ctx, node: &Node) -> Option<ThinkTime> {
    if let Node::Scalar { .. } = node {
        return ctx.duration(node).map(ThinkTime::Constant);
    }
    let Node::Map { entries, pos } = node else {
        ctx.error(
            node.pos(),
            format!("expected a duration or one of {{constant: D}}, {{exponential: D}}, {{uniform: [D, D]}}, {{lognormal: {{mean: D, cv: X}}}}, found {}", node.describe()),
        );
        return None;
    };
    let kinds = ["constant", "exponential", "uniform", "lognormal"];
    let errors_before = ctx.errors.len();
    ctx.map(node, "`think_time`", &kinds)?;
    if ctx.errors.len() > errors_before {
        return None;
    }
    if entries.len() != 1 {
        ctx.error(
            *pos,
            format!("expected exactly one of `constant`, `exponential`, `uniform` or `lognormal` in `think_time`, found {} keys", entries.len()),
        );
        return None;
    }
    let (key, value) = &entries[0];
    match key.name.as_str() {
        "constant" => ctx.duration(value).map(ThinkTime::Constant),
        "exponential" => ctx
            .duration(value)
            .map(|mean| ThinkTime::Exponential { mean }),
        "lognormal" => decode_lognormal(ctx, value),
        _ => {
            let items = match value {
                Node::Seq { items, .. } if items.len() == 2 => items,
                _ => {
                    ctx.error(
                        value.pos(),
                        format!(
                            "expected `[min, max]` durations, found {}",
                            value.describe()
                        ),
                    );
                    return None;
                }
            };
            let (min, max) = (ctx.duration(&items[0]), ctx.duration(&items[1]));
            let (min, max) = (min?, max?);
            if min > max {
                ctx.error(
                    value.pos(),
                    format!(
                        "expected `[min, max]` with min <= max, found min {min:?} > max {max:?}"
                    ),
                );
                return None;
            }
            Some(ThinkTime::Uniform { min, max })
        }
    }
}

/// `{lognormal: {mean: 20s, cv: 1.5}}`: the mean pause and its coefficient
/// of variation (standard deviation over mean).
fn decode_lognormal(ctx: &mut Ctx, node: &Node) -> Option<ThinkTime> {
    let fields = ctx.map(node, "`lognormal`", &["mean", "cv"])?;
    let mean = fields.required(ctx, "mean").and_then(|n| ctx.duration(n));
    let cv = fields.required(ctx, "cv").and_then(|n| {
        match n.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
            Some(cv) if cv > 0.0 && cv <= 100.0 => Some(cv),
            _ => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected a coefficient of variation above 0 (at most 100), found {}", n.describe()),
                    Some("cv is the standard deviation over the mean: 1 is as spread as an exponential".into()),
                );
                None
            }
        }
    });
    Some(ThinkTime::LogNormal {
        mean: mean?,
        cv: cv?,
    })
}
