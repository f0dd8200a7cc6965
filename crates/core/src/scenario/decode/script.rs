//! Decoding of `script`: `script: hooks.lua`, or `script: {file:
//! hooks.lua, vars: [token]}` when the hooks set variables the scenario's
//! templates read. The file is read and loaded now, so a syntax error is
//! reported here with the script's own line.

use std::path::Path;

use super::super::files;
use super::super::script::{self, Script};
use super::super::yaml::Node;
use super::ctx::{is_name, Ctx};

/// The keys of `script:` written as a mapping.
pub(crate) const SCRIPT_KEYS: &[&str] = &["file", "vars"];

/// The script, and the variables it declares it sets (names the requests'
/// templates may then read).
pub(super) fn decode_script(
    ctx: &mut Ctx,
    node: &Node,
    base_dir: &Path,
    feeders: &[&str],
) -> (Option<Script>, Vec<String>) {
    let (file, vars) = match node {
        Node::Map { .. } => {
            let Some(fields) = ctx.map(node, "`script`", SCRIPT_KEYS) else {
                return (None, Vec::new());
            };
            let vars = fields
                .get("vars")
                .map(|n| declared_vars(ctx, n, feeders))
                .unwrap_or_default();
            (fields.required(ctx, "file"), vars)
        }
        _ => (Some(node), Vec::new()),
    };
    let Some(file) = file else {
        return (None, vars);
    };
    let Some(name) = ctx.setting(file, "a Lua file's path, like `hooks.lua`") else {
        return (None, vars);
    };
    let path = base_dir.join(&name);
    let source = match files::read_bounded(&path, files::SMALL_FILE_LIMIT, "script") {
        Ok(source) => source,
        Err(e) => {
            ctx.error(file.pos(), e);
            return (None, vars);
        }
    };
    match script::check(&name, &source) {
        Ok(checked) => (
            Some(Script {
                path,
                chunk_name: name,
                source: source.into(),
                has_request: checked.has_request,
                has_response: checked.has_response,
                env: checked.env,
            }),
            vars,
        ),
        Err(e) => {
            ctx.error(file.pos(), format!("script `{name}` does not load: {e}"));
            (None, vars)
        }
    }
}

/// `vars: [token, signature]`: names, each once, none a feeder's.
fn declared_vars(ctx: &mut Ctx, node: &Node, feeders: &[&str]) -> Vec<String> {
    let mut vars: Vec<String> = Vec::new();
    for item in ctx.seq(node, "`script.vars`").unwrap_or_default() {
        let Some(name) = ctx.string(item, "a variable name") else {
            continue;
        };
        if !is_name(&name) {
            ctx.error(
                item.pos(),
                format!("expected a variable name of letters, digits, `_` or `-`, found `{name}`"),
            );
        } else if feeders.contains(&name.as_str()) {
            ctx.error(
                item.pos(),
                format!("`{name}` is a data feeder's name; a variable needs another"),
            );
        } else if vars.contains(&name) {
            ctx.error(item.pos(), format!("variable `{name}` is declared twice"));
        } else {
            vars.push(name);
        }
    }
    vars
}
