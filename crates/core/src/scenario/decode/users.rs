//! `users:` — a closed workload's users over time, for `autoperf run`
//! without `--users`: straight lines from 0 through each stage's count,
//! holds in between; the level lasts as long as the stages.
//!
//! ```yaml
//! users: [{to: 500, over: 2m}, {hold: 5m}, {to: 0, over: 30s}]
//! users: 50            # all at once
//! ```

use std::time::Duration;

use super::super::model::{UserStage, UserStages};
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(crate) const STAGE_KEYS: &[&str] = &["to", "over", "hold"];

/// The most users a ramp may reach (as many connections as one host can
/// open from many addresses).
const MAX_USERS: u64 = 1_000_000;

pub(crate) fn decode_users(ctx: &mut Ctx, node: &Node) -> Option<UserStages> {
    if let Node::Scalar { .. } = node {
        let users = ctx.integer(
            node,
            1,
            "a number of users of at least 1, or stages like `[{to: 500, over: 2m}, {hold: 5m}]`",
        )?;
        return Some(UserStages::All(users.min(MAX_USERS) as u32));
    }
    let items = ctx.seq(
        node,
        "`users` (stages like `[{to: 500, over: 2m}, {hold: 5m}]`)",
    )?;
    if items.is_empty() {
        ctx.error(
            node.pos(),
            "expected at least one stage in `users`, found none",
        );
        return None;
    }
    let mut stages = Vec::new();
    let mut reached = 0u32;
    let mut ok = true;
    for item in items {
        match stage(ctx, item, reached) {
            Some(s) => {
                reached = s.to;
                stages.push(s);
            }
            None => ok = false,
        }
    }
    if ok && stages.iter().all(|s| s.to == 0) {
        ctx.error(
            node.pos(),
            "expected a stage that reaches at least 1 user in `users`, found none",
        );
        return None;
    }
    ok.then_some(UserStages::Ramp(stages))
}

fn stage(ctx: &mut Ctx, node: &Node, reached: u32) -> Option<UserStage> {
    let fields = ctx.map(node, "a stage of `users`", STAGE_KEYS)?;
    match (fields.get("to"), fields.get("over"), fields.get("hold")) {
        (None, None, Some(hold)) => Some(UserStage {
            to: reached,
            over: length(ctx, hold)?,
        }),
        (Some(to), Some(over), None) => {
            let to = ctx.integer(to, 0, "a number of users")?;
            if to > MAX_USERS {
                ctx.error(
                    node.pos(),
                    format!("expected at most {MAX_USERS} users, found {to}"),
                );
                return None;
            }
            Some(UserStage {
                to: to as u32,
                over: length(ctx, over)?,
            })
        }
        (Some(to), None, None) => {
            // A step: straight to the count.
            let to = ctx.integer(to, 0, "a number of users")?;
            Some(UserStage {
                to: to.min(MAX_USERS) as u32,
                over: Duration::ZERO,
            })
        }
        _ => {
            ctx.error(
                node.pos(),
                "expected `{to: 500, over: 2m}` (a ramp), `{to: 500}` (a step) or `{hold: 5m}` in a stage of `users`",
            );
            None
        }
    }
}

fn length(ctx: &mut Ctx, node: &Node) -> Option<Duration> {
    let d = ctx.duration(node)?;
    if d > Duration::from_secs(7 * 24 * 3600) {
        ctx.error(node.pos(), "expected a stage of at most a week");
        return None;
    }
    Some(d)
}
