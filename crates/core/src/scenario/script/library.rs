//! `autoperf.NAME(…)`: the template functions (`${sha256(…)}`,
//! `${hmac_sha256(key, text)}`, `${uuid()}`…) for scripts, with the same
//! arguments and results, so a hook signs a request as a template would;
//! and `autoperf.env(NAME)`, the environment as `${env.NAME}` reads it.

use mlua::{Lua, Table, Variadic};

use super::Env;

use crate::scenario::template::functions::{self, SPECS};
use crate::scenario::template::Bindings;
use crate::scenario::{FeederId, VarId};

/// The `autoperf` table, with one function per template function, and
/// `env`.
pub(super) fn table(lua: &Lua, env: Env) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.set("env", env_function(lua, env)?)?;
    for spec in SPECS {
        let f = lua.create_function(move |lua, args: Variadic<mlua::String>| {
            let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
            if !(spec.min..=spec.max).contains(&args.len()) {
                return Err(mlua::Error::runtime(format!(
                    "autoperf.{}: {}",
                    spec.name, spec.usage
                )));
            }
            let settings: Vec<Option<&[u8]>> = args.iter().map(|a| Some(&a[..])).collect();
            let func = (spec.resolve)(&settings)
                .map_err(|e| mlua::Error::runtime(format!("autoperf.{}: {e}", spec.name)))?;
            let evaluated = func.evaluated_arguments(args.len());
            let mut out = Vec::new();
            functions::apply(func, &args[..evaluated], &mut Unbound, &mut out).map_err(|_| {
                mlua::Error::runtime(format!("autoperf.{}: {}", spec.name, spec.usage))
            })?;
            lua.create_string(&out)
        })?;
        table.set(spec.name, f)?;
    }
    Ok(table)
}

/// `autoperf.env(NAME)`: the variable's value, or nil when unset. At load
/// it reads (and, for workers, records) the scenario's environment; at
/// run time it gives what the load read, so every host gets the same.
fn env_function(lua: &Lua, env: Env) -> mlua::Result<mlua::Function> {
    lua.create_function(move |_, name: String| match &env {
        Env::Loading(read) => {
            let value = super::super::sources::env(&name);
            read.borrow_mut().insert(name, value.clone());
            Ok(value)
        }
        Env::Loaded(read) => match read.get(&name) {
            Some(value) => Ok(value.clone()),
            None => Err(mlua::Error::runtime(format!(
                "autoperf.env(\"{name}\") was not read when the script loaded: read it at the top level (`local v = autoperf.env(\"{name}\")`), so workers get it too"
            ))),
        },
    })
}

/// What the functions draw on outside a template: the thread's random
/// numbers and the clock; no data rows or variables.
struct Unbound;

impl Bindings for Unbound {
    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        fastrand::i64(lo..=hi)
    }

    fn unit(&mut self) -> f64 {
        fastrand::f64()
    }

    fn column(&mut self, _: FeederId, _: usize) -> &[u8] {
        &[]
    }

    fn var(&self, _: VarId) -> &[u8] {
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_functions_are_there_with_their_results_and_usage() {
        let lua = super::super::new_state().unwrap();
        let env = Env::Loaded(Default::default());
        super::super::load(&lua, "t.lua", b"function request(ctx) end", env).unwrap();
        let hex: String = lua
            .load(
                "return autoperf.hmac_sha256('key', 'The quick brown fox jumps over the lazy dog')",
            )
            .eval()
            .unwrap();
        assert_eq!(
            hex,
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
        let id: String = lua.load("return autoperf.uuid()").eval().unwrap();
        assert_eq!((id.len(), &id[14..15]), (36, "4"));
        let e = lua
            .load("return autoperf.sha256()")
            .eval::<String>()
            .unwrap_err();
        assert!(e.to_string().contains("autoperf.sha256"), "{e}");
    }
}
