//! `capacity`: the capacity analysis's tunables over the paper's defaults,
//! each checked for its range, and `min_duration` against `max_duration`.

use super::super::model::{CapacitySettings, SearchStrategy};
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(crate) const CAPACITY_KEYS: &[&str] = &[
    "epsilon",
    "rho_min",
    "tolerance",
    "k_ovld",
    "think_gap",
    "min_duration",
    "max_duration",
    "window",
    "demand_epsilon",
    "p_max",
    "s_low",
    "levels_beyond",
    "search",
    "min_achieved",
    "rate_precision",
    "rate_factor",
    "max_error_rate",
    "precision",
];

pub(super) fn decode_capacity(ctx: &mut Ctx, node: &Node) -> Option<CapacitySettings> {
    let fields = ctx.map(node, "`capacity`", CAPACITY_KEYS)?;
    let mut c = CapacitySettings::default();
    let errors_before = ctx.errors.len();
    for (key, value) in fields.entries {
        if value.is_null() {
            continue;
        }
        let count = |ctx: &mut Ctx, min| {
            ctx.integer(
                value,
                min,
                if min == 0 {
                    "a whole number"
                } else {
                    "a positive whole number"
                },
            )
            .map(|n| n.min(u32::MAX as u64) as u32)
        };
        match key.name.as_str() {
            "epsilon" => c.epsilon = ctx.fraction(value, "a fraction").unwrap_or(c.epsilon),
            "rho_min" => c.rho_min = ctx.fraction(value, "a fraction").unwrap_or(c.rho_min),
            "tolerance" => c.tolerance = ctx.fraction(value, "a fraction").unwrap_or(c.tolerance),
            "think_gap" => c.think_gap = ctx.fraction(value, "a fraction").unwrap_or(c.think_gap),
            "max_error_rate" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 => c.max_error_rate = f,
                Some(_) => ctx.error(
                    value.pos(),
                    "expected an error rate above 0 (like `50%`): at 0 one failed request would void a level",
                ),
                None => {}
            },
            "min_achieved" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 => c.min_achieved = f,
                Some(_) => ctx.error(value.pos(), "expected a fraction above 0, like `95%`, found 0"),
                None => {}
            },
            "rate_precision" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 && f < 1.0 => c.rate_precision = f,
                Some(_) => ctx.error(
                    value.pos(),
                    format!("expected a precision between 0 and 100% (like `2%`), found {}", value.describe()),
                ),
                None => {}
            },
            "precision" => match value.as_str().map(str::trim) {
                Some("off") => c.precision = None,
                _ => match ctx.fraction(value, "a precision (or `off`)") {
                    Some(f) if f > 0.0 && f < 1.0 => c.precision = Some(f),
                    Some(_) => ctx.error(
                        value.pos(),
                        format!("expected a precision between 0 and 100% (like `3%`), or `off`, found {}", value.describe()),
                    ),
                    None => {}
                },
            },
            "rate_factor" => match value.as_str().and_then(|t| t.trim().parse::<f64>().ok()) {
                Some(f) if f > 1.0 && f <= 100.0 => c.rate_factor = f,
                _ => ctx.error(
                    value.pos(),
                    format!("expected the ramp's factor, a number above 1 and at most 100 (like `2`), found {}", value.describe()),
                ),
            },
            "demand_epsilon" => {
                // In percent, like the paper: `5` and `5%` both mean 5 %.
                let text = value.as_str().unwrap_or("");
                match text.trim_end_matches('%').trim().parse::<f64>() {
                    Ok(v) if v > 0.0 && v <= 100.0 => c.demand_epsilon = v,
                    _ => ctx.error(
                        value.pos(),
                        format!(
                            "expected a percentage like `5%`, found {}",
                            value.describe()
                        ),
                    ),
                }
            }
            "k_ovld" => c.k_ovld = count(ctx, 1).unwrap_or(c.k_ovld),
            "p_max" => c.p_max = count(ctx, 1).unwrap_or(c.p_max),
            "levels_beyond" => c.levels_beyond = count(ctx, 0).unwrap_or(c.levels_beyond),
            "min_duration" => c.min_duration = ctx.duration(value).unwrap_or(c.min_duration),
            "max_duration" => c.max_duration = ctx.duration(value).unwrap_or(c.max_duration),
            "window" => c.window = ctx.duration(value).unwrap_or(c.window),
            "s_low" => c.s_low = ctx.duration(value).unwrap_or(c.s_low),
            "search" => match value.as_str().and_then(SearchStrategy::parse) {
                Some(strategy) => c.search = strategy,
                None => ctx.error(
                    value.pos(),
                    format!(
                        "expected `model` or `bisection`, found {}",
                        value.describe()
                    ),
                ),
            },
            _ => {} // reported by `map`
        }
    }
    if c.min_duration > c.max_duration {
        let pos = fields
            .key("min_duration")
            .or(fields.key("max_duration"))
            .map_or(fields.pos, |k| k.pos);
        ctx.error(
            pos,
            format!(
                "expected `min_duration` <= `max_duration`, found {:?} > {:?}",
                c.min_duration, c.max_duration
            ),
        );
    }
    (ctx.errors.len() == errors_before).then_some(c)
}
