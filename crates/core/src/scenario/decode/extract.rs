//! One `extract`: where a per-user variable's value comes from (a body
//! regex, a JSON pointer or JSONPath, a header, a cookie) and what happens
//! when the response does not have it (`on_missing`).

use super::super::model::{ExtractFrom, OnMissing};
use super::super::yaml::Node;
use super::ctx::{compile_regex, Ctx};

pub(crate) const EXTRACT_KEYS: &[&str] =
    &["regex", "json", "header", "cookie", "on_missing", "default"];

pub(super) fn decode_extract(
    ctx: &mut Ctx,
    var: &str,
    node: &Node,
) -> Option<(ExtractFrom, OnMissing)> {
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
