//! Decoding of `requests` (method, path, headers, body, extracts — or a
//! Kafka `produce`), compiling every template against the feeders' columns
//! and the variables bound by `extract`. This file finds the variables and
//! decodes an HTTP request's method, path and headers; its body is
//! `body.rs`'s, its checks `checks.rs`'s, each extract `extract.rs`'s, and a
//! Kafka request `produce.rs`'s.

use std::path::Path;

use super::super::model::*;
use super::super::template::{closing_brace, Builder, Dynamic, Escape, Names, Template};
use super::super::yaml::{Key, Node};
use super::body::{decode_form, json_body};
use super::checks::decode_checks;
use super::condition::decode_condition;
use super::ctx::{bound_variable, is_name, template, Ctx};
use super::data::DecodedFeeder;
use super::extract::decode_extract;
use super::produce::decode_produce;
use super::set::decode_set;
use super::think::decode_think_time;

// The key lists, for the test that every key is documented.
#[cfg(test)]
pub(crate) use super::{
    checks::CHECK_KEYS,
    produce::{PRODUCE_KEYS, VALUE_KEYS},
};
// The keys of a request's parts, where they have always been named.

pub(crate) const REQUEST_KEYS: &[&str] = &[
    "method",
    "path",
    "headers",
    "form",
    "json",
    "body",
    "extract",
    "check",
    "follow_redirects",
    "produce",
    "think_time",
    "set",
    "skip_if",
];

/// What the target accepts, so a request of the other kind is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetKind {
    Http,
    Kafka,
}

#[derive(Default)]
pub(crate) struct DecodedRequests {
    pub requests: Vec<Request>,
    pub variables: Vec<String>,
    /// The request names as written, in `RequestId` order.
    pub keys: Vec<Key>,
}

/// Cookies named by `${cookie.NAME}` anywhere in `node`, as the implicit
/// variables `cookie.NAME` the engine keeps current from the user's jar.
fn cookie_variables(node: &Node, out: &mut Vec<String>) {
    match node {
        Node::Scalar { value, .. } => {
            // `cookie.NAME` anywhere inside a `${…}`: alone, or an argument
            // (`$$` is a literal `$`, as templates read it).
            let mut rest = value.as_str();
            while let Some(at) = rest.find('$') {
                if rest[at + 1..].starts_with('$') {
                    rest = &rest[at + 2..];
                    continue;
                }
                if !rest[at + 1..].starts_with('{') {
                    rest = &rest[at + 1..];
                    continue;
                }
                let inner = &rest[at + 2..];
                let end = closing_brace(inner).unwrap_or(inner.len());
                let inner = &inner[..end];
                let ident = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
                for (i, _) in inner.match_indices("cookie.") {
                    if inner[..i].ends_with(ident) {
                        continue;
                    }
                    let tail = &inner[i..];
                    let name = &tail[..tail.find(|c: char| !ident(c)).unwrap_or(tail.len())];
                    if name.len() > "cookie.".len() && !out.iter().any(|v| v == name) {
                        out.push(name.to_string());
                    }
                }
                rest = &rest[at + 2 + end..];
            }
        }
        Node::Seq { items, .. } => items.iter().for_each(|n| cookie_variables(n, out)),
        Node::Map { entries, .. } => entries.iter().for_each(|(_, n)| cookie_variables(n, out)),
    }
}

/// The variable names bound by any request's `extract` or `set`, in order
/// of first appearance, then those the script declares it sets, then the
/// cookies templates name (`cookie.NAME`, the sessions' conditions
/// included); problems are reported later, by `decode_requests`.
fn collect_variables(
    entries: &[(Key, Node)],
    graphs: &[Option<&Node>],
    script_vars: &[String],
) -> Vec<String> {
    let mut variables: Vec<String> = Vec::new();
    for (_, request) in entries {
        let Node::Map { entries, .. } = request else {
            continue;
        };
        for (key, extract) in entries {
            let binds = key.name == "extract" || key.name == "set";
            if let (true, Node::Map { entries, .. }) = (binds, extract) {
                for (var, _) in entries {
                    if !variables.contains(&var.name) {
                        variables.push(var.name.clone());
                    }
                }
            }
        }
    }
    for var in script_vars {
        if !variables.contains(var) {
            variables.push(var.clone());
        }
    }
    for (_, request) in entries {
        cookie_variables(request, &mut variables);
    }
    for graph in graphs.iter().flatten() {
        cookie_variables(graph, &mut variables);
    }
    variables
}

/// What templates may name: the feeders (with their columns, when their
/// file could be read) and the variables.
pub(super) fn template_names<'a>(
    feeders: &'a [DecodedFeeder],
    variables: &'a [String],
) -> Names<'a> {
    Names {
        feeders: feeders
            .iter()
            .map(|f| {
                (
                    f.feeder.name.as_str(),
                    f.readable.then_some(&f.feeder.columns[..]),
                )
            })
            .collect(),
        variables,
    }
}

pub(crate) fn decode_requests(
    ctx: &mut Ctx,
    node: &Node,
    feeders: &[DecodedFeeder],
    target: Option<TargetKind>,
    base_dir: &Path,
    graphs: &[Option<&Node>],
    script_vars: &[String],
) -> DecodedRequests {
    let Some(entries) = ctx.named_map(node, "`requests`") else {
        return DecodedRequests::default();
    };
    let variables = collect_variables(entries, graphs, script_vars);
    let names = template_names(feeders, &variables);
    let mut requests = Vec::new();
    for (key, value) in entries {
        if !is_name(&key.name) {
            ctx.error(
                key.pos,
                format!(
                    "expected a request name of letters, digits, `_` or `-`, found `{}`",
                    key.name
                ),
            );
        }
        let produce = match value {
            Node::Map { entries, .. } => entries.iter().find(|(k, _)| k.name == "produce"),
            _ => None,
        };
        let request = match produce {
            Some((produce_key, produce)) => {
                if let Node::Map { entries, .. } = value {
                    let own = |k: &str| matches!(k, "produce" | "think_time" | "set" | "skip_if");
                    for (other, _) in entries.iter().filter(|(k, _)| !own(&k.name)) {
                        ctx.error(
                            other.pos,
                            format!("expected only `produce` in request `{}` (a Kafka request), found `{}` too", key.name, other.name),
                        );
                    }
                }
                if target == Some(TargetKind::Http) {
                    ctx.error_hint(
                        produce_key.pos,
                        format!(
                            "request `{}` produces to Kafka, but the target is an HTTP server",
                            key.name
                        ),
                        Some("a `produce` request needs `target: {kafka: {bootstrap: …}}`".into()),
                    );
                }
                decode_produce(ctx, &key.name, produce, &names, base_dir)
            }
            None => {
                if target == Some(TargetKind::Kafka) {
                    ctx.error_hint(
                        key.pos,
                        format!(
                            "request `{}` is an HTTP request, but the target is Kafka",
                            key.name
                        ),
                        Some(
                            "with a Kafka target every request is `produce: {topic, key, value}`"
                                .into(),
                        ),
                    );
                }
                decode_request(ctx, key, value, &names, &variables, feeders)
            }
        };
        let think_time = match value {
            Node::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.name == "think_time")
                .and_then(|(_, n)| decode_think_time(ctx, n)),
            _ => None,
        };
        let sets = match value {
            Node::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.name == "set")
                .map(|(_, n)| decode_set(ctx, n, &names, &variables))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let skip_if = match value {
            Node::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.name == "skip_if")
                .and_then(|(_, n)| decode_condition(ctx, n, &names)),
            _ => None,
        };
        let mut request = request.unwrap_or_else(|| placeholder(&key.name));
        request.think_time = think_time;
        request.sets = sets;
        request.skip_if = skip_if;
        requests.push(request);
    }
    DecodedRequests {
        requests,
        variables,
        keys: entries.iter().map(|(k, _)| k.clone()).collect(),
    }
}

/// Stands in for a request that had errors, so that ids stay aligned while
/// the rest of the file is checked; never returned to the caller.
fn placeholder(name: &str) -> Request {
    Request {
        name: name.to_string(),
        action: Action::Http(HttpRequest {
            method: "GET".into(),
            path: Template::literal("/"),
            headers: Vec::new(),
            body: None,
            follow_redirects: true,
        }),
        extracts: Vec::new(),
        checks: Vec::new(),
        think_time: None,
        sets: Vec::new(),
        skip_if: None,
    }
}

fn decode_request(
    ctx: &mut Ctx,
    key: &Key,
    node: &Node,
    names: &Names,
    variables: &[String],
    feeders: &[DecodedFeeder],
) -> Option<Request> {
    let what = format!("request `{}`", key.name);
    if node.is_null() {
        ctx.error(key.pos, format!("missing required key `path` in {what}"));
        return None;
    }
    let fields = ctx.map(node, &what, REQUEST_KEYS)?;
    let errors_before = ctx.errors.len();

    let method = match fields.get("method") {
        None => Some("GET".to_string()),
        Some(n) => ctx.string(n, "an HTTP method like `GET`").and_then(|m| {
            let ok = is_token(&m);
            if !ok {
                ctx.error(
                    n.pos(),
                    format!("expected an HTTP method like `GET` or `POST`, found `{m}`"),
                );
            }
            ok.then(|| m.to_ascii_uppercase())
        }),
    };
    let path = fields.required(ctx, "path").and_then(|n| {
        let text = ctx.string(n, "a path starting with `/`")?;
        if !text.starts_with('/') && !text.starts_with("${") {
            ctx.error_hint(
                n.pos(),
                format!("expected a path starting with `/`, found `{text}`"),
                Some("a path may also begin with `${raw(feeder.column)}` when every value of the column starts with `/`".into()),
            );
            return None;
        }
        if text.contains(|c: char| c.is_whitespace() || c.is_control()) {
            ctx.error(
                n.pos(),
                format!(
                    "expected a path without spaces or control characters (write a space as `%20`), found {}",
                    n.describe()
                ),
            );
            return None;
        }
        let path = template(ctx, n, &text, Escape::Path, Escape::None, names)?;
        if !text.starts_with('/') {
            leading_value_is_a_path(ctx, n, &text, &path, feeders)?;
        }
        Some(path)
    });

    let mut headers = Vec::new();
    if let Some(node) = fields.get("headers") {
        for (name, value) in ctx.named_map(node, "`headers`").unwrap_or_default() {
            if !is_token(&name.name) {
                ctx.error(
                    name.pos,
                    format!(
                        "expected a header name like `Authorization`, found `{}`",
                        name.name
                    ),
                );
                continue;
            }
            let Some(text) = ctx.string(value, "a header value") else {
                continue;
            };
            // A line break would end the header and start another (or a
            // second request): never sent, whatever the server makes of it.
            // NUL and other control characters (RFC 9110 allows the tab)
            // are refused by servers or cut the value short.
            if text.contains(['\r', '\n']) {
                ctx.error(
                    value.pos(),
                    format!(
                        "header `{}` holds a line break, which would end the header early",
                        name.name
                    ),
                );
                continue;
            }
            if text.contains(|c: char| c.is_control() && c != '\t') {
                ctx.error(
                    value.pos(),
                    format!(
                        "header `{}` holds a control character (NUL, escape, …), which no header value may hold",
                        name.name
                    ),
                );
                continue;
            }
            if let Some(t) = template(ctx, value, &text, Escape::Header, Escape::None, names) {
                headers.push((name.name.clone(), t));
            }
        }
    }

    let bodies: Vec<&Key> = ["form", "json", "body"]
        .iter()
        .filter_map(|k| fields.key(k))
        .collect();
    if bodies.len() > 1 {
        ctx.error(
            bodies[1].pos,
            format!("expected one body per request (`form`, `json` or `body`), found both `{}` and `{}`", bodies[0].name, bodies[1].name),
        );
    }
    let body = if let Some(node) = fields.get("form") {
        decode_form(ctx, node, names).map(Body::Form)
    } else if let Some(node) = fields.get("json") {
        let mut b = Builder::new(Escape::Json);
        json_body(ctx, node, &mut b, names);
        Some(Body::Json(b.finish()))
    } else if let Some(node) = fields.get("body") {
        ctx.string(node, "a body text")
            .and_then(|text| template(ctx, node, &text, Escape::None, Escape::None, names))
            .map(Body::Raw)
    } else {
        None
    };

    let mut extracts = Vec::new();
    if let Some(node) = fields.get("extract") {
        for (var, how) in ctx.named_map(node, "`extract`").unwrap_or_default() {
            let Some(var_id) = bound_variable(ctx, var, names, variables) else {
                continue;
            };
            if let Some((from, on_missing)) = decode_extract(ctx, &var.name, how) {
                extracts.push(Extract {
                    var: var_id,
                    from,
                    on_missing,
                });
            }
        }
    }

    let checks = match fields.get("check") {
        Some(node) => decode_checks(ctx, node, names).unwrap_or_default(),
        None => Vec::new(),
    };
    let follow_redirects = match fields.get("follow_redirects") {
        Some(Node::Scalar { value, .. }) if value == "true" => true,
        Some(Node::Scalar { value, .. }) if value == "false" => false,
        Some(other) => {
            ctx.error(
                other.pos(),
                "expected `true` or `false` for `follow_redirects`",
            );
            true
        }
        None => true,
    };

    if ctx.errors.len() > errors_before {
        return None;
    }
    Some(Request {
        name: key.name.clone(),
        action: Action::Http(HttpRequest {
            method: method?,
            path: path?,
            headers,
            body,
            follow_redirects,
        }),
        extracts,
        checks,
        think_time: None,
        sets: Vec::new(),
        skip_if: None,
    })
}

/// A path that begins with a value (`${raw(pages.path)}`, a site's
/// permalinks) is a path when every value it can take starts with `/`:
/// checked against the data now, the first row that does not named.
fn leading_value_is_a_path(
    ctx: &mut Ctx,
    node: &Node,
    text: &str,
    path: &Template,
    feeders: &[DecodedFeeder],
) -> Option<()> {
    let refuse = |ctx: &mut Ctx, message: String, hint: &str| {
        ctx.error_hint(node.pos(), message, Some(hint.to_string()));
        None
    };
    // `${raw(env.BASE)}/users`: known now, and a path.
    let known = path.literal_prefix();
    if known.starts_with(b"/") {
        return Some(());
    }
    if known.starts_with(b"%2F") {
        return refuse(
            ctx,
            format!("the path `{text}` begins with a value whose `/` would be encoded as `%2F`"),
            "wrap the value in `raw(…)`, `${raw(env.BASE)}`: it goes in as written",
        );
    }
    let Some((Dynamic::Column { feeder, column }, raw)) = path.leading() else {
        return refuse(
            ctx,
            format!("expected a path starting with `/`, found `{text}`"),
            "a path may begin with `${raw(feeder.column)}` when every value of the column starts with `/`; other values cannot be checked before the run: write `/` first",
        );
    };
    let DecodedFeeder {
        feeder: f,
        readable,
    } = &feeders[feeder.index()];
    if let FeederSource::Range { .. } = f.source {
        return refuse(
            ctx,
            format!("the path `{text}` cannot begin with a `range` value: a range feeds numbers"),
            "write `/` first: `/items/${…}`",
        );
    }
    if !raw {
        return refuse(
            ctx,
            format!("the path `{text}` begins with a value whose `/` would be encoded as `%2F`"),
            "wrap the value in `raw(…)`: `${raw(feeder.column)}` goes in as written",
        );
    }
    if !readable {
        return Some(()); // the data's own error is reported already
    }
    let bad = f
        .rows
        .iter()
        .position(|row| !row.get(column).is_some_and(|v| v.starts_with('/')));
    match (bad, &f.source) {
        (None, _) | (Some(_), FeederSource::Range { .. }) => Some(()),
        (Some(i), FeederSource::Csv(file)) => refuse(
            ctx,
            format!(
                "the path `{text}` needs every value of `{}.{}` to start with `/`, but data row {} of {} is `{}`",
                f.name,
                f.columns.get(column).map_or("?", String::as_str),
                i + 1,
                file.display(),
                f.rows[i].get(column).map_or("", String::as_str)
            ),
            "fix the data, or write `/` first and strip it from the data",
        ),
    }
}

/// Whether `s` is an RFC 9110 token: what a method or header name is.
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_token_byte)
}

/// RFC 9110 `tchar`: what a method or header name may be made of.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
