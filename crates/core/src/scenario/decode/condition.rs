//! A condition's text (`when:` of a transition, `skip_if:` of a request),
//! parsed with its errors placed in the scalar it came from.

use super::super::condition::Condition;
use super::super::template::Names;
use super::super::yaml::Node;
use super::ctx::{report, Ctx};

pub(super) fn decode_condition(ctx: &mut Ctx, node: &Node, names: &Names) -> Option<Condition> {
    let text = ctx.string(node, "a condition like `${count} < 5`")?;
    match Condition::parse(&text, names) {
        Ok(c) => Some(c),
        Err(errors) => {
            report(ctx, node, &text, errors);
            None
        }
    }
}
