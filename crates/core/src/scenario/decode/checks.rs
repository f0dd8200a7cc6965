//! `check`: what a correct response looks like — its status, a text or
//! regex in the body, a header matching a regex, a value at a JSONPath.

use super::super::model::{Check, CheckKind};
use super::super::template::{Escape, Names};
use super::super::yaml::Node;
use super::ctx::{compile_regex, template, Ctx};

pub(crate) const CHECK_KEYS: &[&str] = &["status", "body_contains", "body_regex", "header", "json"];

/// `check: {status: [200, 302], body_contains, body_regex, header: {Name:
/// regex}, json: {"$.path": value}}`.
pub(super) fn decode_checks(ctx: &mut Ctx, node: &Node, names: &Names) -> Option<Vec<Check>> {
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
