//! `set:` of a request: variables it computes before it is rendered, in the
//! order written, each a template (`ts: '${now("epoch_s")}'`,
//! `count: '${count + 1}'`). A set value stays the user's until set or
//! extracted again, so the request's own templates, its checks and every
//! later request read it.

use super::super::ids::VarId;
use super::super::template::{Escape, Names, Template};
use super::super::yaml::Node;
use super::ctx::{bound_variable, template, Ctx};

pub(super) fn decode_set(
    ctx: &mut Ctx,
    node: &Node,
    names: &Names,
    variables: &[String],
) -> Vec<(VarId, Template)> {
    let mut sets = Vec::new();
    for (var, value) in ctx.named_map(node, "`set`").unwrap_or_default() {
        let Some(id) = bound_variable(ctx, var, names, variables) else {
            continue;
        };
        let Some(text) = ctx.string(value, "a value (a template like `${n + 1}`)") else {
            continue;
        };
        // Stored as computed; escaped where it is used.
        if let Some(t) = template(ctx, value, &text, Escape::None, Escape::None, names) {
            sets.push((id, t));
        }
    }
    sets
}
