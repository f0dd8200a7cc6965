//! A request's body: `form` fields, encoded as they render, and `json`,
//! a YAML tree written as compact JSON whose strings are templates (a
//! Kafka record's `json` value is written the same way). A raw `body` is
//! one template, compiled in `requests.rs`.

use super::super::template::{escape, Builder, Escape, Names, Template};
use super::super::yaml::{Node, Style};
use super::ctx::{report, template, Ctx};

/// Form fields: keys and literal parts are encoded now, expansions at
/// render time, so the engine joins `key=value` pairs with `&` as they are.
pub(super) fn decode_form(
    ctx: &mut Ctx,
    node: &Node,
    names: &Names,
) -> Option<Vec<(String, Template)>> {
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
pub(super) fn json_body(ctx: &mut Ctx, node: &Node, b: &mut Builder, names: &Names) {
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
            // The call itself, not a name that begins the same way
            // (`random_string(8)`, a variable `randomness`).
            let name_end = inner
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(inner.len());
            !inner.contains(['$', '{', '}'])
                && matches!(&inner[..name_end], "random" | "now_ms")
                && inner[name_end..].trim_start().starts_with('(')
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
