//! Decoding of `requests` (method, path, headers, body, extracts — or a
//! Kafka `produce`), compiling every template against the feeders' columns
//! and the variables bound by `extract`.

use std::path::Path;

use super::super::model::*;
use super::super::template::{escape, Builder, Escape, Names, Template};
use super::super::yaml::{Key, Node, Style};
use super::ctx::{is_name, report, Ctx};
use super::data::DecodedFeeder;

pub const REQUEST_KEYS: &[&str] = &[
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
];
pub const CHECK_KEYS: &[&str] = &["status", "body_contains", "body_regex", "header", "json"];
pub const PRODUCE_KEYS: &[&str] = &["topic", "key", "value"];
pub const VALUE_KEYS: &[&str] = &["json", "raw", "avro"];

/// What the target accepts, so a request of the other kind is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Http,
    Kafka,
}
pub const EXTRACT_KEYS: &[&str] = &["regex", "json", "header", "cookie", "on_missing", "default"];

#[derive(Default)]
pub struct DecodedRequests {
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
            let mut rest = value.as_str();
            while let Some(at) = rest.find("${cookie.") {
                let after = &rest[at + 2..];
                let Some(end) = after.find('}') else { break };
                let name = after[..end].trim().to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
                rest = &after[end..];
            }
        }
        Node::Seq { items, .. } => items.iter().for_each(|n| cookie_variables(n, out)),
        Node::Map { entries, .. } => entries.iter().for_each(|(_, n)| cookie_variables(n, out)),
    }
}

/// The variable names bound by any request's `extract`, in order of first
/// appearance, then the cookies templates name (`cookie.NAME`); problems
/// are reported later, by `decode_requests`.
fn collect_variables(entries: &[(Key, Node)]) -> Vec<String> {
    let mut variables: Vec<String> = Vec::new();
    for (_, request) in entries {
        let Node::Map { entries, .. } = request else {
            continue;
        };
        for (key, extract) in entries {
            if let (true, Node::Map { entries, .. }) = (key.name == "extract", extract) {
                for (var, _) in entries {
                    if !variables.contains(&var.name) {
                        variables.push(var.name.clone());
                    }
                }
            }
        }
    }
    for (_, request) in entries {
        cookie_variables(request, &mut variables);
    }
    variables
}

pub fn decode_requests(
    ctx: &mut Ctx,
    node: &Node,
    feeders: &[DecodedFeeder],
    target: Option<TargetKind>,
    base_dir: &Path,
) -> DecodedRequests {
    let Some(entries) = ctx.named_map(node, "`requests`") else {
        return DecodedRequests::default();
    };
    let variables = collect_variables(entries);
    let names = Names {
        feeders: feeders
            .iter()
            .map(|f| {
                (
                    f.feeder.name.as_str(),
                    f.readable.then_some(&f.feeder.columns[..]),
                )
            })
            .collect(),
        variables: &variables,
    };
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
                    let own = |k: &str| k == "produce" || k == "think_time";
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
                decode_request(ctx, key, value, &names, &variables)
            }
        };
        let think_time = match value {
            Node::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.name == "think_time")
                .and_then(|(_, n)| super::decode_think_time(ctx, n)),
            _ => None,
        };
        let mut request = request.unwrap_or_else(|| placeholder(&key.name));
        request.think_time = think_time;
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
    }
}

fn decode_request(
    ctx: &mut Ctx,
    key: &Key,
    node: &Node,
    names: &Names,
    variables: &[String],
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
        if !text.starts_with('/') {
            ctx.error(
                n.pos(),
                format!("expected a path starting with `/`, found `{text}`"),
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
        template(ctx, n, &text, Escape::Path, Escape::None, names)
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
            if !is_name(&var.name) || names.feeders.iter().any(|(f, _)| *f == var.name) {
                ctx.error(
                    var.pos,
                    format!("expected a variable name of letters, digits, `_` or `-` that is not a feeder's name, found `{}`", var.name),
                );
                continue;
            }
            let Some(id) = variables.iter().position(|v| *v == var.name) else {
                continue;
            };
            if let Some((from, on_missing)) = decode_extract(ctx, &var.name, how) {
                extracts.push(Extract {
                    var: VarId(id as u32),
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
    })
}

/// `check: {status: [200, 302], body_contains, body_regex, header: {Name:
/// regex}, json: {"$.path": value}}`.
fn decode_checks(ctx: &mut Ctx, node: &Node, names: &Names) -> Option<Vec<Check>> {
    let fields = ctx.map(node, "`check`", CHECK_KEYS)?;
    let mut checks = Vec::new();
    for (key, value) in fields.entries {
        match key.name.as_str() {
            "status" => {
                let items: Vec<&Node> = match value {
                    Node::Seq { items, .. } => items.iter().collect(),
                    scalar => vec![scalar],
                };
                let mut codes = Vec::new();
                for item in items {
                    let code = ctx.integer(item, 100, "an HTTP status like 200")?;
                    if code > 599 {
                        ctx.error(
                            item.pos(),
                            format!("expected an HTTP status in 100..599, found `{code}`"),
                        );
                        return None;
                    }
                    codes.push(code as u16);
                }
                checks.push(Check {
                    name: "status".into(),
                    kind: CheckKind::Status(codes),
                });
            }
            "body_contains" => {
                let text = ctx.string(value, "the text the body must contain")?;
                let text = template(ctx, value, &text, Escape::None, Escape::None, names)?;
                checks.push(Check {
                    name: "body_contains".into(),
                    kind: CheckKind::BodyContains(text),
                });
            }
            "body_regex" => {
                let text = ctx.string(value, "a regular expression")?;
                let regex = compile_regex(ctx, value, &text, |t| {
                    regex::bytes::Regex::new(t).map_err(|e| e.to_string())
                })?;
                checks.push(Check {
                    name: "body_regex".into(),
                    kind: CheckKind::BodyRegex(regex),
                });
            }
            "header" => {
                for (name, pattern) in ctx.named_map(value, "`check.header`")? {
                    let text = ctx.string(pattern, "a regular expression")?;
                    let regex = compile_regex(ctx, pattern, &text, |t| {
                        regex::Regex::new(t).map_err(|e| e.to_string())
                    })?;
                    checks.push(Check {
                        name: format!("header {}", name.name),
                        kind: CheckKind::Header {
                            name: name.name.clone(),
                            regex,
                        },
                    });
                }
            }
            "json" => {
                for (path, expected) in ctx.named_map(value, "`check.json`")? {
                    let parsed = match serde_json_path::JsonPath::parse(&path.name) {
                        Ok(p) => p,
                        Err(e) => {
                            ctx.error(
                                path.pos,
                                format!(
                                    "expected a JSONPath like `$.user.id`, found `{}`: {e}",
                                    path.name
                                ),
                            );
                            return None;
                        }
                    };
                    let Node::Scalar { value: text, .. } = expected else {
                        ctx.error(
                            expected.pos(),
                            "expected the value the path must hold (a string, number or boolean)",
                        );
                        return None;
                    };
                    let expected =
                        template(ctx, expected, text, Escape::None, Escape::None, names)?;
                    checks.push(Check {
                        name: format!("json {}", path.name),
                        kind: CheckKind::Json {
                            path: parsed,
                            expected,
                        },
                    });
                }
            }
            _ => {}
        }
    }
    Some(checks)
}

/// A regular expression, or its error at `node` with the regex crate's
/// last line of explanation.
fn compile_regex<R>(
    ctx: &mut Ctx,
    node: &Node,
    text: &str,
    compile: impl Fn(&str) -> Result<R, String>,
) -> Option<R> {
    match compile(text) {
        Ok(re) => Some(re),
        Err(e) => {
            let detail = e.lines().last().unwrap_or_default().trim().to_string();
            ctx.error(
                node.pos(),
                format!("expected a valid regular expression, found `{text}`: {detail}"),
            );
            None
        }
    }
}

/// `produce: {topic, key, value}`.
fn decode_produce(
    ctx: &mut Ctx,
    name: &str,
    node: &Node,
    names: &Names,
    base_dir: &Path,
) -> Option<Request> {
    let fields = ctx.map(
        node,
        &format!("`produce` of request `{name}`"),
        PRODUCE_KEYS,
    )?;
    let errors_before = ctx.errors.len();
    let topic = fields.required(ctx, "topic").and_then(|n| {
        let topic = ctx.setting(n, "a topic name")?;
        // Kafka's rule for topic names.
        let ok = !topic.is_empty()
            && topic.len() <= 249
            && topic != "."
            && topic != ".."
            && topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !ok {
            ctx.error(
                n.pos(),
                format!(
                    "expected a topic name of letters, digits, `.`, `_` or `-`, found `{topic}`"
                ),
            );
        }
        ok.then_some(topic)
    });
    let key = fields.get("key").and_then(|n| {
        let text = ctx.string(n, "a key template")?;
        template(ctx, n, &text, Escape::None, Escape::None, names)
    });
    let value = fields.required(ctx, "value").and_then(|n| {
        let what = "`value` (one of `json`, `raw` or `avro`)";
        let value_fields = ctx.map(n, what, VALUE_KEYS)?;
        if value_fields.entries.len() != 1 {
            ctx.error(
                value_fields.pos,
                format!(
                    "expected exactly one of `json`, `raw` or `avro` in `value`, found {} keys",
                    value_fields.entries.len()
                ),
            );
            return None;
        }
        let (kind, v) = &value_fields.entries[0];
        match kind.name.as_str() {
            "json" => {
                let mut b = Builder::new(Escape::Json);
                json_body(ctx, v, &mut b, names);
                Some(RecordValue::Json(b.finish()))
            }
            "raw" => ctx
                .string(v, "a value text")
                .and_then(|text| template(ctx, v, &text, Escape::None, Escape::None, names))
                .map(RecordValue::Raw),
            "avro" => super::avro::decode_avro(ctx, v, names, base_dir, topic.as_deref())
                .map(RecordValue::Avro),
            _ => None, // reported by `map`
        }
    });
    if ctx.errors.len() > errors_before {
        return None;
    }
    Some(Request {
        name: name.to_string(),
        action: Action::Produce(Produce {
            topic: topic?,
            key,
            value: value?,
        }),
        extracts: Vec::new(),
        checks: Vec::new(),
        think_time: None,
    })
}

/// Whether `s` is an RFC 9110 token: what a method or header name is.
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_token_byte)
}

/// RFC 9110 `tchar`: what a method or header name may be made of.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn decode_extract(ctx: &mut Ctx, var: &str, node: &Node) -> Option<(ExtractFrom, OnMissing)> {
    let what = format!("the extract of `{var}`");
    let fields = ctx.map(node, &what, EXTRACT_KEYS)?;
    let text = |ctx: &mut Ctx, key: &str| {
        let n = fields.get(key)?;
        ctx.string(n, "a text").map(|t| (t, n))
    };
    let regex = match text(ctx, "regex") {
        Some((t, n)) => Some(compile_regex(ctx, n, &t, |t| {
            regex::bytes::Regex::new(t).map_err(|e| e.to_string())
        })?),
        None => None,
    };
    let json = text(ctx, "json");
    let header = text(ctx, "header");
    let cookie = text(ctx, "cookie");
    let from = match (json, header, cookie, regex) {
        (Some((path, n)), None, None, None) => {
            if path.is_empty() || path.starts_with('/') {
                ExtractFrom::JsonPointer(path)
            } else if path.starts_with('$') {
                match serde_json_path::JsonPath::parse(&path) {
                    Ok(p) => ExtractFrom::JsonPath(p),
                    Err(e) => {
                        ctx.error(
                            n.pos(),
                            format!("expected a JSONPath like `$.token`, found `{path}`: {e}"),
                        );
                        return None;
                    }
                }
            } else {
                ctx.error(
                    n.pos(),
                    format!("expected a JSON pointer like `/token`, found `{path}` (or a JSONPath like `$.token`)"),
                );
                return None;
            }
        }
        (None, Some((name, _)), None, regex) => ExtractFrom::Header { name, regex },
        (None, None, Some((name, _)), None) => ExtractFrom::Cookie(name),
        (None, None, None, Some(regex)) => ExtractFrom::Regex(regex),
        _ => {
            ctx.error_hint(
                fields.pos,
                format!("expected one source in {what}: `regex` (on the body), `json`, `header` (with an optional `regex`) or `cookie`"),
                None,
            );
            return None;
        }
    };
    let default = text(ctx, "default");
    let on_missing = match (text(ctx, "on_missing"), default) {
        (None, None) => OnMissing::Keep,
        (Some((m, _)), None) if m == "keep" => OnMissing::Keep,
        (Some((m, _)), None) if m == "fail" => OnMissing::Fail,
        (Some((m, _)), Some((d, _))) if m == "default" => OnMissing::Default(d.into_bytes()),
        (None, Some((d, _))) => OnMissing::Default(d.into_bytes()),
        (Some((m, n)), _) => {
            ctx.error_hint(
                n.pos(),
                format!("expected `keep`, `fail` or `default` for `on_missing`, found `{m}`"),
                Some("`default` takes its value from `default:`".into()),
            );
            return None;
        }
    };
    Some((from, on_missing))
}

/// Form fields: keys and literal parts are encoded now, expansions at
/// render time, so the engine joins `key=value` pairs with `&` as they are.
fn decode_form(ctx: &mut Ctx, node: &Node, names: &Names) -> Option<Vec<(String, Template)>> {
    let mut fields = Vec::new();
    let mut ok = true;
    for (key, value) in ctx.named_map(node, "`form`")? {
        let text = match value {
            Node::Scalar { value: v, .. } => v.clone(),
            _ => {
                ctx.error(
                    value.pos(),
                    format!(
                        "expected a form value (a string or number), found {}",
                        value.describe()
                    ),
                );
                ok = false;
                continue;
            }
        };
        let mut encoded_key = Vec::new();
        escape(Escape::Form, key.name.as_bytes(), &mut encoded_key);
        match template(ctx, value, &text, Escape::Form, Escape::Form, names) {
            Some(t) => fields.push((String::from_utf8_lossy(&encoded_key).into_owned(), t)),
            None => ok = false,
        }
    }
    ok.then_some(fields)
}

/// Writes `node` as compact JSON into `b`: strings are templates whose
/// expansions are JSON-escaped; unquoted numbers, booleans and nulls stay
/// JSON literals.
fn json_body(ctx: &mut Ctx, node: &Node, b: &mut Builder, names: &Names) {
    match node {
        Node::Map { entries, .. } => {
            b.literal(b"{");
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    b.literal(b",");
                }
                let mut quoted = b"\"".to_vec();
                escape(Escape::Json, key.name.as_bytes(), &mut quoted);
                quoted.extend_from_slice(b"\":");
                b.literal(&quoted);
                json_body(ctx, value, b, names);
            }
            b.literal(b"}");
        }
        Node::Seq { items, .. } => {
            b.literal(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    b.literal(b",");
                }
                json_body(ctx, item, b, names);
            }
            b.literal(b"]");
        }
        Node::Scalar { value, style, .. } => {
            if *style == Style::Plain {
                if node.is_null() {
                    return b.literal(b"null");
                }
                if let Some(literal) = json_literal(value) {
                    return b.literal(literal.as_bytes());
                }
                if is_numeric_expansion(value) {
                    // Unquoted, a number-valued expansion stays a number.
                    let errors = b.source(value, Escape::Json, names);
                    return report(ctx, node, value, errors);
                }
            }
            b.literal(b"\"");
            let errors = b.source(value, Escape::Json, names);
            report(ctx, node, value, errors);
            b.literal(b"\"");
        }
    }
}

/// `${random(…)}` or `${now_ms()}` alone: their expansions are numbers.
fn is_numeric_expansion(text: &str) -> bool {
    text.trim()
        .strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .is_some_and(|inner| {
            let inner = inner.trim();
            !inner.contains(['$', '{', '}'])
                && (inner.starts_with("random") || inner.starts_with("now_ms"))
        })
}

/// A plain YAML scalar that is a boolean or a number, as JSON text.
fn json_literal(text: &str) -> Option<String> {
    match text {
        "true" | "True" | "TRUE" => return Some("true".into()),
        "false" | "False" | "FALSE" => return Some("false".into()),
        _ => {}
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
        || !text.bytes().any(|b| b.is_ascii_digit())
    {
        return None;
    }
    if serde_json::from_str::<serde_json::Number>(text).is_ok() {
        return Some(text.to_string());
    }
    // YAML numbers JSON spells differently: `+1`, `1.`, `.5`, `007`.
    if let Ok(i) = text.parse::<i64>() {
        return Some(i.to_string());
    }
    let f = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(|n| n.to_string())
}

/// Compiles one scalar's text as a template, reporting its errors at their
/// place in the file.
fn template(
    ctx: &mut Ctx,
    node: &Node,
    text: &str,
    escape: Escape,
    literal: Escape,
    names: &Names,
) -> Option<Template> {
    let mut b = Builder::new(escape);
    let errors = b.source(text, literal, names);
    let ok = errors.is_empty();
    report(ctx, node, text, errors);
    ok.then(|| b.finish())
}
