//! `script:`: a Lua file whose `request(ctx)` and `response(ctx)` run
//! around every HTTP request, for what templates and conditions cannot say.
//! This file holds what the scenario knows of it and the one way it is
//! loaded — by `check` (a syntax error is reported with the script's line)
//! and by every generator thread (engine/hooks) alike. `library.rs`: the
//! `autoperf` table of functions a script may call.

mod library;

use std::path::PathBuf;
use std::sync::Arc;

use mlua::{Function, Lua};

/// A scenario's script, read and checked at load time.
#[derive(Debug, Clone)]
pub struct Script {
    /// The file as the scenario names it, resolved from its directory.
    pub path: PathBuf,
    /// What Lua's messages call it: the name as written (`hooks.lua:5:`).
    pub chunk_name: String,
    pub source: Arc<[u8]>,
    /// Whether it defines `request(ctx)` and `response(ctx)`.
    pub has_request: bool,
    pub has_response: bool,
}

/// A script's two hooks, as one Lua state found them.
pub(crate) struct Loaded {
    pub request: Option<Function>,
    pub response: Option<Function>,
}

/// Runs the script's top level in `lua` and finds its hooks; the error is
/// Lua's own message (`hooks.lua:3: '=' expected near 'x'`), without the
/// stack traceback.
pub(crate) fn load(lua: &Lua, chunk_name: &str, source: &[u8]) -> Result<Loaded, String> {
    let library = library::table(lua).map_err(|e| lua_message(&e))?;
    lua.globals()
        .set("autoperf", library)
        .map_err(|e| lua_message(&e))?;
    lua.load(source)
        .set_name(format!("@{chunk_name}"))
        .exec()
        .map_err(|e| lua_message(&e))?;
    let globals = lua.globals();
    let hook = |name: &str| -> Result<Option<Function>, String> {
        match globals.get::<mlua::Value>(name) {
            Ok(mlua::Value::Nil) => Ok(None),
            Ok(mlua::Value::Function(f)) => Ok(Some(f)),
            Ok(other) => Err(format!(
                "`{name}` is a {}, not a function: the hook is `function {name}(ctx) … end`",
                other.type_name()
            )),
            Err(e) => Err(lua_message(&e)),
        }
    };
    let loaded = Loaded {
        request: hook("request")?,
        response: hook("response")?,
    };
    if loaded.request.is_none() && loaded.response.is_none() {
        return Err(
            "defines neither `request(ctx)` nor `response(ctx)`: a script hooks requests through one of them"
                .into(),
        );
    }
    Ok(loaded)
}

/// Loads `source` in a fresh state, as `check` does: Lua's message when it
/// will not load, else which hooks it has.
pub(crate) fn check(chunk_name: &str, source: &[u8]) -> Result<(bool, bool), String> {
    let lua = Lua::new();
    let loaded = load(&lua, chunk_name, source)?;
    Ok((loaded.request.is_some(), loaded.response.is_some()))
}

/// The first line of a Lua error: where and what, without the traceback
/// (and without mlua's "runtime error: " or "syntax error: " prefix).
pub(crate) fn lua_message(e: &mlua::Error) -> String {
    let root = match e {
        mlua::Error::CallbackError { cause, .. } => return lua_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    root.lines().next().unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syntax_error_names_the_scripts_line() {
        let e = check("hooks.lua", b"function request(ctx)\n  x =\nend\n").unwrap_err();
        assert!(e.starts_with("hooks.lua:3:"), "{e}");
    }

    #[test]
    fn a_runtime_error_at_the_top_level_names_its_line() {
        let e = check("h.lua", b"local t = nil\nprint(t.x)\n").unwrap_err();
        assert!(e.starts_with("h.lua:2:") && e.contains("nil"), "{e}");
    }

    #[test]
    fn hooks_are_found_and_a_script_without_one_is_refused() {
        assert_eq!(
            check("h.lua", b"function response(ctx) end"),
            Ok((false, true))
        );
        assert_eq!(
            check("h.lua", b"function request(c) end function response(c) end"),
            Ok((true, true))
        );
        assert!(check("h.lua", b"x = 1").unwrap_err().contains("neither"));
        assert!(check("h.lua", b"request = 3")
            .unwrap_err()
            .contains("not a function"));
    }
}
