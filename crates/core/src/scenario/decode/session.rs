//! Decoding of `session`: the start request and the transitions, checked
//! for unknown names, probabilities outside [0, 1] or summing above 1,
//! requests never reached from `start`, and loops a session can never leave.
//! A transition is a probability or `{p, when}`; a `when` known at load
//! time is applied to the probabilities here (see `session.rs`).

use super::super::condition::Condition;
use super::super::model::RequestId;
use super::super::session::Cbmg;
use super::super::template::Names;
use super::super::yaml::{Key, Node, Pos};
use super::condition::decode_condition;
use super::ctx::{lookup_request, Ctx, Fields};

/// The keys of a transition written as a mapping.
const TRANSITION_KEYS: &[&str] = &["p", "when"];

/// The keys of `session:`.
pub(crate) const SESSION_KEYS: &[&str] = &["start", "transitions"];

/// The session graph, with the requests it reaches (as written, before
/// load-time conditions). `unreached`: report a request it never reaches
/// (a class's session need not reach every request: some class must).
pub(crate) fn decode_session(
    ctx: &mut Ctx,
    node: Option<&Node>,
    top: &Fields,
    requests: &[Key],
    template_names: &Names,
    unreached: bool,
) -> Option<(Cbmg, Vec<bool>)> {
    let names: Vec<&str> = requests.iter().map(|k| k.name.as_str()).collect();
    let errors_before = ctx.errors.len();
    let Some(node) = node else {
        if names.len() == 1 {
            return Some((Cbmg::single(RequestId(0), 1), vec![true]));
        }
        ctx.error(top.pos, "missing required key `session` in the scenario: with several requests, `session.start` says where a session begins");
        return None;
    };
    let fields = ctx.map(node, "`session`", SESSION_KEYS)?;
    let start = match fields.get("start") {
        Some(n @ Node::Map { .. }) => decode_entries(ctx, n, &names),
        Some(n) => lookup_request(ctx, n, &names, "`session.start`").map(|r| vec![(r, 1.0)]),
        None if names.len() == 1 => Some(vec![(RequestId(0), 1.0)]),
        None => {
            ctx.error(fields.pos, "missing required key `start` in `session` (required when there are several requests)");
            None
        }
    };
    let mut transitions = vec![Vec::new(); names.len()];
    // As written, conditions known at load time aside: a request that an
    // `${env.…}` switch turns off is not a mistake in the graph.
    let mut written = vec![Vec::new(); names.len()];
    let mut conditions: Vec<Vec<Option<Condition>>> = vec![Vec::new(); names.len()];
    // Where each request's transitions were written, for loop errors.
    let mut written_at: Vec<Option<Pos>> = vec![None; names.len()];
    let entries = fields
        .get("transitions")
        .and_then(|n| ctx.named_map(n, "`session.transitions`"));
    for (from_key, targets) in entries.unwrap_or_default() {
        let from = names.iter().position(|n| *n == from_key.name);
        if from.is_none() {
            ctx.unknown(
                from_key.pos,
                format!(
                    "unknown request `{}` in `session.transitions`",
                    from_key.name
                ),
                &from_key.name,
                &names,
            );
        }
        let map_pos = if targets.is_null() {
            from_key.pos
        } else {
            targets.pos()
        };
        let Some(targets) = ctx.named_map(
            targets,
            &format!("the transitions from `{}`", from_key.name),
        ) else {
            continue;
        };
        let mut sum = 0.0;
        let mut edges = Vec::new();
        let mut whens = Vec::new();
        let mut written_edges = Vec::new();
        // The probability of transitions whose condition never holds.
        let mut never = 0.0;
        for (to_key, p) in targets {
            let to = names.iter().position(|n| *n == to_key.name);
            if to.is_none() {
                ctx.unknown(
                    to_key.pos,
                    format!(
                        "unknown request `{}` in the transitions from `{}`",
                        to_key.name, from_key.name
                    ),
                    &to_key.name,
                    &names,
                );
            }
            let (p, when) = match p {
                Node::Map { .. } => {
                    let what = format!(
                        "the transition from `{}` to `{}`",
                        from_key.name, to_key.name
                    );
                    let Some(fields) = ctx.map(p, &what, TRANSITION_KEYS) else {
                        continue;
                    };
                    let when = fields
                        .get("when")
                        .and_then(|n| decode_condition(ctx, n, template_names));
                    let Some(p) = fields.required(ctx, "p") else {
                        continue;
                    };
                    (p, when)
                }
                _ => (p, None),
            };
            let value = p.as_str().and_then(|s| s.trim().parse::<f64>().ok());
            match value {
                Some(v) if (0.0..=1.0).contains(&v) => {
                    sum += v;
                    if let Some(to) = to {
                        written_edges.push((RequestId(to as u32), v));
                    }
                    match (to, when.as_ref().map(Condition::constant)) {
                        (_, Some(Some(false))) => never += v,
                        (Some(to), constant) => {
                            edges.push((RequestId(to as u32), v));
                            whens.push(when.filter(|_| constant != Some(Some(true))));
                        }
                        (None, _) => {}
                    }
                }
                _ => ctx.error(
                    p.pos(),
                    format!(
                        "expected a probability between 0 and 1, found {}",
                        p.describe()
                    ),
                ),
            }
        }
        if sum > 1.0 + 1e-9 {
            ctx.error_hint(
                map_pos,
                format!(
                    "the transitions from `{}` sum to {}, expected at most 1",
                    from_key.name,
                    round(sum)
                ),
                Some(
                    "whatever is left below 1 is the probability that the session ends there"
                        .into(),
                ),
            );
        }
        if never > 0.0 {
            // Left out for good: the rest renormalised with the exit.
            let kept = 1.0 - never;
            edges.retain(|_| kept > 1e-12);
            whens.truncate(edges.len());
            edges.iter_mut().for_each(|(_, p)| *p /= kept);
        }
        if let Some(from) = from {
            transitions[from] = edges;
            written[from] = written_edges;
            conditions[from] = whens;
            written_at[from] = Some(map_pos);
        }
    }
    let start = start?;
    let start_name = start
        .iter()
        .map(|(r, _)| names[r.index()])
        .collect::<Vec<_>>()
        .join(", ");
    let cbmg = Cbmg::with_entries(start, transitions).with_conditions(conditions);
    if ctx.errors.len() > errors_before {
        return None;
    }
    let reachable = Cbmg::with_entries(cbmg.entries().to_vec(), written).reachable();
    for (i, key) in requests.iter().enumerate() {
        if unreached && !reachable[i] {
            ctx.error_hint(
                key.pos,
                format!(
                    "request `{}` is never reached from `start` ({start_name})",
                    key.name
                ),
                Some(format!(
                    "add a transition to `{}` under `session.transitions`",
                    key.name
                )),
            );
        }
    }
    let can_end = cbmg.can_end();
    let stuck: Vec<usize> = (0..names.len())
        .filter(|&i| reachable[i] && !can_end[i])
        .collect();
    if let Some(&first) = stuck.first() {
        let list: Vec<String> = stuck.iter().map(|&i| format!("`{}`", names[i])).collect();
        ctx.error_hint(
            written_at[first].unwrap_or(fields.pos),
            format!("the session can never end once it reaches {}: every path from there loops with probability 1", list.join(", ")),
            Some("let the transitions of some request in the loop sum below 1".into()),
        );
    }
    (ctx.errors.len() == errors_before).then_some((cbmg, reachable))
}

/// `start: {home: 0.7, product: 0.3}`: where sessions begin, and how
/// often; the probabilities sum to 1 (a session always begins somewhere).
fn decode_entries(ctx: &mut Ctx, node: &Node, names: &[&str]) -> Option<Vec<(RequestId, f64)>> {
    let errors_before = ctx.errors.len();
    let entries = ctx.named_map(node, "`session.start`")?;
    let mut start = Vec::new();
    let mut sum = 0.0;
    for (key, p) in entries {
        let to = names.iter().position(|n| *n == key.name);
        if to.is_none() {
            ctx.unknown(
                key.pos,
                format!("unknown request `{}` in `session.start`", key.name),
                &key.name,
                names,
            );
        }
        match p.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
            Some(v) if (0.0..=1.0).contains(&v) => {
                sum += v;
                if let Some(to) = to {
                    start.push((RequestId(to as u32), v));
                }
            }
            _ => ctx.error(
                p.pos(),
                format!(
                    "expected a probability between 0 and 1, found {}",
                    p.describe()
                ),
            ),
        }
    }
    if ctx.errors.len() > errors_before {
        return None;
    }
    if start.is_empty() || (sum - 1.0).abs() > 1e-3 {
        ctx.error_hint(
            node.pos(),
            format!(
                "the probabilities of `session.start` sum to {}, expected 1",
                round(sum)
            ),
            Some("a session always begins somewhere: give each first request its share, e.g. `start: {home: 0.7, search: 0.3}`".into()),
        );
        return None;
    }
    // Rounded shares are scaled to sum to exactly 1.
    Some(start.into_iter().map(|(r, p)| (r, p / sum)).collect())
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
