//! `script:`: a Lua file whose `request(ctx)` and `response(ctx)` run
//! around every HTTP request, for what templates and conditions cannot say.
//! This file holds what the scenario knows of it and the one way it is
//! loaded — by `check` (a syntax error is reported with the script's line)
//! and by every generator thread (engine/hooks) alike. `library.rs`: the
//! `autoperf` table of functions a script may call.

mod library;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, VmState};

/// A scenario's script, read and checked at load time.
#[derive(Clone)]
pub struct Script {
    /// The file as the scenario names it, resolved from its directory.
    pub path: PathBuf,
    /// What Lua's messages call it: the name as written (`hooks.lua:5:`).
    pub chunk_name: String,
    pub source: Arc<[u8]>,
    /// Whether it defines `request(ctx)` and `response(ctx)`.
    pub has_request: bool,
    pub has_response: bool,
    /// The environment variables its top level read (`autoperf.env`), as
    /// the scenario's environment gave them: recorded and shipped to
    /// workers like `${env.…}`, so every host runs with the same values.
    pub env: BTreeMap<String, Option<String>>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's names only: its values hold keys.
        let env: Vec<&String> = self.env.keys().collect();
        f.debug_struct("Script")
            .field("path", &self.path)
            .field("has_request", &self.has_request)
            .field("has_response", &self.has_response)
            .field("env", &env)
            .finish()
    }
}

/// How long the script's top level may run, and one call of a hook: a
/// loop that never ends fails the request instead of holding the
/// generator thread (and its level's deadline) forever.
pub(crate) const TOP_LEVEL_BUDGET: Duration = Duration::from_secs(5);
pub(crate) const CALL_BUDGET: Duration = Duration::from_secs(1);

/// Instructions between two looks at the clock.
const INSTRUCTIONS_PER_LOOK: u32 = 100_000;

/// The most memory one Lua state may hold.
const MEMORY_LIMIT: usize = 256 << 20;

/// A Lua state for a script: the standard library but `io`, `package` and
/// what reaches the host (`os.execute`, `os.exit`, `os.getenv`, files), so
/// a script runs the same on every host — what it needs comes from the
/// scenario (`autoperf.env`, variables) — and cannot end the run.
pub(crate) fn new_state() -> Result<Lua, String> {
    let libs = StdLib::COROUTINE
        | StdLib::TABLE
        | StdLib::OS
        | StdLib::STRING
        | StdLib::UTF8
        | StdLib::MATH;
    let lua = Lua::new_with(libs, LuaOptions::default()).map_err(|e| lua_message(&e))?;
    lua.set_memory_limit(MEMORY_LIMIT)
        .map_err(|e| lua_message(&e))?;
    let globals = lua.globals();
    let remove = |table: &mlua::Table, names: &[&str]| -> Result<(), String> {
        for name in names {
            table
                .set(*name, mlua::Value::Nil)
                .map_err(|e| lua_message(&e))?;
        }
        Ok(())
    };
    remove(&globals, &["dofile", "loadfile", "require"])?;
    let os: mlua::Table = globals.get("os").map_err(|e| lua_message(&e))?;
    remove(
        &os,
        &["execute", "exit", "getenv", "remove", "rename", "tmpname"],
    )?;
    Ok(lua)
}

/// Holds a Lua state's code to a deadline: an instruction hook looks at
/// the clock every `INSTRUCTIONS_PER_LOOK` instructions, and once the
/// deadline has passed fails on every instruction — so a `pcall` that
/// caught the error cannot carry on past it.
#[derive(Clone)]
pub(crate) struct Watch {
    deadline: Rc<Cell<Instant>>,
    /// Failing on every instruction (until the next `start`).
    strict: Rc<Cell<bool>>,
}

impl Watch {
    fn new(lua: &Lua, budget: Duration) -> mlua::Result<Watch> {
        let watch = Watch {
            deadline: Rc::new(Cell::new(Instant::now() + budget)),
            strict: Rc::new(Cell::new(false)),
        };
        watch.arm(lua, INSTRUCTIONS_PER_LOOK)?;
        Ok(watch)
    }

    fn arm(&self, lua: &Lua, every: u32) -> mlua::Result<()> {
        let watch = self.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(every),
            move |lua, _| {
                if Instant::now() <= watch.deadline.get() {
                    return Ok(VmState::Continue);
                }
                if !watch.strict.replace(true) {
                    watch.arm(lua, 1)?;
                }
                Err(mlua::Error::runtime(
                    "the script ran past its time (1 s a hook, 5 s the top level): a loop that does not end?",
                ))
            },
        )
    }

    /// A new call may run for `budget`.
    pub(crate) fn start(&self, lua: &Lua, budget: Duration) -> mlua::Result<()> {
        self.deadline.set(Instant::now() + budget);
        if self.strict.replace(false) {
            self.arm(lua, INSTRUCTIONS_PER_LOOK)?;
        }
        Ok(())
    }
}

/// Where `autoperf.env(NAME)` reads.
pub(crate) enum Env {
    /// At load (`check`, the decoding a worker replays): the scenario's
    /// environment, noting each name read.
    Loading(Rc<RefCell<BTreeMap<String, Option<String>>>>),
    /// At run time: what the top level read when the scenario loaded.
    Loaded(BTreeMap<String, Option<String>>),
}

/// A script's two hooks, as one Lua state found them, and the watch
/// that holds the state's code to its time.
pub(crate) struct Loaded {
    pub request: Option<Function>,
    pub response: Option<Function>,
    pub watch: Watch,
}

/// Runs the script's top level in `lua` and finds its hooks; the error is
/// Lua's own message (`hooks.lua:3: '=' expected near 'x'`), without the
/// stack traceback.
pub(crate) fn load(lua: &Lua, chunk_name: &str, source: &[u8], env: Env) -> Result<Loaded, String> {
    let library = library::table(lua, env).map_err(|e| lua_message(&e))?;
    let globals = lua.globals();
    globals
        .set("autoperf", library)
        .map_err(|e| lua_message(&e))?;
    let watch = Watch::new(lua, TOP_LEVEL_BUDGET).map_err(|e| lua_message(&e))?;
    lua.load(source)
        .set_name(format!("@{chunk_name}"))
        .exec()
        .map_err(|e| lua_message(&e))?;
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
        watch,
    };
    if loaded.request.is_none() && loaded.response.is_none() {
        return Err(
            "defines neither `request(ctx)` nor `response(ctx)`: a script hooks requests through one of them"
                .into(),
        );
    }
    Ok(loaded)
}

/// What `check` learns of a script: which hooks it has and the
/// environment its top level read.
#[derive(Debug)]
pub(crate) struct Checked {
    pub has_request: bool,
    pub has_response: bool,
    pub env: BTreeMap<String, Option<String>>,
}

/// Loads `source` in a fresh state, as `check` does: Lua's message when it
/// will not load.
pub(crate) fn check(chunk_name: &str, source: &[u8]) -> Result<Checked, String> {
    let lua = new_state()?;
    let read = Rc::new(RefCell::new(BTreeMap::new()));
    let loaded = load(&lua, chunk_name, source, Env::Loading(read.clone()))?;
    let env = read.borrow().clone();
    Ok(Checked {
        has_request: loaded.request.is_some(),
        has_response: loaded.response.is_some(),
        env,
    })
}

/// The first line of a Lua error: where and what, without the traceback
/// (and without mlua's "runtime error: " or "syntax error: " prefix). An
/// error raised by one of `ctx`'s methods gets the script's place from
/// the traceback (`hooks.lua:7: ctx.path must start with /…`).
pub(crate) fn lua_message(e: &mlua::Error) -> String {
    let root = match e {
        mlua::Error::CallbackError { cause, traceback } => {
            let message = lua_message(cause);
            let place = traceback
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("[C]"))
                .find_map(place_of);
            return match place {
                Some(place) if !message.starts_with(&place) => format!("{place}: {message}"),
                _ => message,
            };
        }
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    root.lines().next().unwrap_or_default().trim().to_string()
}

/// `FILE:LINE` at the start of a traceback line (`hooks.lua:7: in
/// function 'request'`); FILE may hold `:` itself.
fn place_of(line: &str) -> Option<String> {
    let (head, _) = line.split_once(": ")?;
    let (file, number) = head.rsplit_once(':')?;
    let number: u32 = number.parse().ok()?;
    Some(format!("{file}:{number}"))
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
        let hooks = |lua: &[u8]| check("h.lua", lua).map(|c| (c.has_request, c.has_response));
        assert_eq!(hooks(b"function response(ctx) end"), Ok((false, true)));
        assert_eq!(
            hooks(b"function request(c) end function response(c) end"),
            Ok((true, true))
        );
        assert!(hooks(b"x = 1").unwrap_err().contains("neither"));
        assert!(hooks(b"request = 3")
            .unwrap_err()
            .contains("not a function"));
    }

    #[test]
    fn the_environment_read_at_load_is_recorded() {
        let c = check(
            "h.lua",
            b"KEY = autoperf.env('AUTOPERF_TEST_UNSET_X') or 'dflt'\nfunction request(c) end",
        )
        .unwrap();
        assert_eq!(c.env.get("AUTOPERF_TEST_UNSET_X"), Some(&None));
    }

    #[test]
    fn a_loop_that_never_ends_is_stopped_even_when_it_catches_the_error() {
        let lua = new_state().unwrap();
        let script = b"function request(c) while true do end end\nfunction response(c) while true do pcall(function() while true do end end) end end";
        let loaded = load(&lua, "h.lua", script, Env::Loaded(BTreeMap::new())).unwrap();
        for hook in [loaded.request.unwrap(), loaded.response.unwrap()] {
            loaded.watch.start(&lua, Duration::from_millis(50)).unwrap();
            let e = hook.call::<()>(()).unwrap_err();
            assert!(lua_message(&e).contains("ran past its time"), "{e}");
        }
    }

    #[test]
    fn the_host_is_out_of_reach() {
        let lua = new_state().unwrap();
        let script = b"assert(io == nil and require == nil and os.execute == nil and os.getenv == nil)\nassert(os.time() > 0)\nfunction request(c) end";
        load(&lua, "h.lua", script, Env::Loaded(BTreeMap::new())).unwrap();
    }

    #[test]
    fn a_place_is_read_from_the_right() {
        assert_eq!(
            place_of("hooks.lua:7: in function 'request'"),
            Some("hooks.lua:7".into())
        );
        assert_eq!(
            place_of("C:/x/h.lua:3: in upvalue 'f'"),
            Some("C:/x/h.lua:3".into())
        );
        assert_eq!(place_of("[C]: in ?"), None);
    }
}
