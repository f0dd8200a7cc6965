//! Decoding of `classes:`: each class's share, session and think time,
//! checked for shares that do not add up to 100% and for requests no
//! class's session reaches. A class without its own `session` or
//! `think_time` takes the scenario's.

use super::super::model::{ThinkTime, UserClass, MAX_CLASSES};
use super::super::session::Cbmg;
use super::super::template::Names;
use super::super::yaml::{Key, Node};
use super::ctx::{is_name, Ctx};
use super::session::decode_session;
use super::think::decode_think_time;

/// The keys of a class.
pub(crate) const CLASS_KEYS: &[&str] = &["share", "session", "think_time"];

/// What classes fall back on: the scenario's session (with the requests
/// it reaches) and think time.
pub(super) struct Defaults<'a> {
    pub session: Option<&'a (Cbmg, Vec<bool>)>,
    pub think_time: &'a ThinkTime,
}

pub(super) fn decode_classes(
    ctx: &mut Ctx,
    node: &Node,
    requests: &[Key],
    template_names: &Names,
    defaults: Defaults,
) -> Option<Vec<UserClass>> {
    let errors_before = ctx.errors.len();
    let entries = ctx.named_map(node, "`classes`")?;
    if entries.is_empty() {
        ctx.error_hint(
            node.pos(),
            "expected at least one class under `classes`",
            Some("e.g. `classes: {browser: {share: 70%}, buyer: {share: 30%, session: …}}`".into()),
        );
        return None;
    }
    if entries.len() > MAX_CLASSES {
        ctx.error(
            node.pos(),
            format!(
                "expected at most {MAX_CLASSES} classes, found {}",
                entries.len()
            ),
        );
        return None;
    }
    let mut classes = Vec::new();
    let mut reached = vec![false; requests.len()];
    for (key, value) in entries {
        if !is_name(&key.name) {
            ctx.error(
                key.pos,
                format!(
                    "expected a class name of letters, digits, `_` or `-`, beginning with a letter or `_`, found `{}`",
                    key.name
                ),
            );
        }
        let what = format!("class `{}`", key.name);
        let Some(fields) = ctx.map(value, &what, CLASS_KEYS) else {
            continue;
        };
        let share = fields.required(ctx, "share").and_then(|n| {
            let share = ctx.fraction(n, "a class's share of the users")?;
            if share <= 0.0 {
                ctx.error(
                    n.pos(),
                    format!(
                        "class `{}` has a share of 0: leave it out instead",
                        key.name
                    ),
                );
                return None;
            }
            Some(share)
        });
        let think_time = match fields.get("think_time") {
            Some(n) => decode_think_time(ctx, n),
            None => Some(*defaults.think_time),
        };
        let session = match (fields.get("session"), defaults.session) {
            (Some(n), _) => decode_session(ctx, Some(n), &fields, requests, template_names, false),
            (None, Some(default)) => Some(default.clone()),
            (None, None) => {
                ctx.error_hint(
                    fields.pos,
                    format!("class `{}` has no `session`, and the scenario has none for it to take", key.name),
                    Some("give the class a `session: {start: …, transitions: …}`, or the scenario a `session`".into()),
                );
                None
            }
        };
        let (Some(share), Some(think_time), Some((session, reaches))) =
            (share, think_time, session)
        else {
            continue;
        };
        for (r, &yes) in reached.iter_mut().zip(&reaches) {
            *r |= yes;
        }
        classes.push(UserClass {
            name: key.name.clone(),
            share,
            session,
            think_time,
        });
    }
    if ctx.errors.len() > errors_before {
        return None;
    }
    let total: f64 = classes.iter().map(|c| c.share).sum();
    // Three classes of 33.3% are meant to be a third each.
    if (total - 1.0).abs() > 1e-3 + 1e-9 {
        let percent = |x: f64| (x * 1e4).round() / 1e2;
        let each: Vec<String> = classes
            .iter()
            .map(|c| format!("{} {}%", c.name, percent(c.share)))
            .collect();
        ctx.error_hint(
            node.pos(),
            format!(
                "the classes' shares add up to {}% ({}), expected 100%",
                percent(total),
                each.join(" + ")
            ),
            Some("each share is the class's part of the users (or of the arrivals); with `--set`, set every share that changes".into()),
        );
        return None;
    }
    for class in &mut classes {
        class.share /= total;
    }
    for (key, reached) in requests.iter().zip(reached) {
        if !reached {
            ctx.error_hint(
                key.pos,
                format!(
                    "request `{}` is never reached by any class's session",
                    key.name
                ),
                Some(format!(
                    "add a transition to `{}` under some class's `session.transitions`",
                    key.name
                )),
            );
        }
    }
    (ctx.errors.len() == errors_before).then_some(classes)
}
