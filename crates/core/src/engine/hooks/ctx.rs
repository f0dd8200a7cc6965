//! `ctx`, what a hook sees of the request it runs for: one Lua object per
//! generator thread, handed to every call. Between calls it holds nothing;
//! during one, the user's request (or response), variables and own table
//! are moved into it (swaps, no copies) and moved back after.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use std::io::Write as _;

use mlua::{Lua, MetaMethod, Table, UserData, UserDataFields, UserDataMethods, Value};

use super::edit;
use crate::protocol::Response;

/// Which hook is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    Request,
    Response,
}

/// What the running hook works on.
pub(super) struct State {
    pub phase: Phase,
    /// The request's name.
    pub name: Rc<str>,
    /// `request(ctx)`: the request as rendered, HTTP/1.1 bytes.
    pub out: Vec<u8>,
    /// `response(ctx)`: its status and what was kept of the answer.
    pub status: u16,
    pub response: Response,
    /// The user's variables, indexed by `VarId`, and their names.
    pub vars: Vec<Vec<u8>>,
    pub var_ids: Rc<HashMap<String, usize>>,
    /// The user's own table (`ctx.user`), made when first asked for.
    pub user: Option<Table>,
    /// `ctx:fail(reason)` was called.
    pub failure: Option<String>,
}

impl State {
    pub(super) fn new(var_ids: HashMap<String, usize>) -> State {
        State {
            phase: Phase::Idle,
            name: "".into(),
            out: Vec::new(),
            status: 0,
            response: Response::default(),
            vars: Vec::new(),
            var_ids: Rc::new(var_ids),
            user: None,
            failure: None,
        }
    }
}

/// The `ctx` object.
pub(super) struct Ctx(pub Rc<RefCell<State>>);

/// `ctx.vars`: the user's variables by name.
struct Vars(Rc<RefCell<State>>);

fn misuse(what: &str, hook: &str) -> mlua::Error {
    mlua::Error::runtime(format!("{what} is for {hook}(ctx)"))
}

fn bytes(lua: &Lua, b: &[u8]) -> mlua::Result<mlua::String> {
    lua.create_string(b)
}

/// The head a header is read from: the request's or the response's.
fn head_of(state: &State) -> &[u8] {
    match state.phase {
        Phase::Response => &state.response.head,
        _ => &state.out,
    }
}

impl UserData for Ctx {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("name", |lua, this| {
            lua.create_string(&*state(&this.0)?.name)
        });
        fields.add_field_method_get("method", |lua, this| {
            let s = state(&this.0)?;
            match s.phase {
                Phase::Request => bytes(lua, edit::method(&s.out)),
                _ => Err(misuse("ctx.method", "request")),
            }
        });
        fields.add_field_method_get("path", |lua, this| {
            let s = state(&this.0)?;
            match s.phase {
                Phase::Request => bytes(lua, edit::target(&s.out)),
                _ => Err(misuse("ctx.path", "request")),
            }
        });
        fields.add_field_method_set("path", |_, this, path: mlua::String| {
            let mut s = state_mut(&this.0)?;
            if s.phase != Phase::Request {
                return Err(misuse("setting ctx.path", "request"));
            }
            edit::set_target(&mut s.out, &path.as_bytes()).map_err(mlua::Error::runtime)
        });
        fields.add_field_method_get("body", |lua, this| {
            let s = state(&this.0)?;
            match s.phase {
                Phase::Request => bytes(lua, edit::body(&s.out)),
                _ => bytes(lua, &s.response.body),
            }
        });
        fields.add_field_method_set("body", |_, this, body: mlua::String| {
            let mut s = state_mut(&this.0)?;
            if s.phase != Phase::Request {
                return Err(misuse("setting ctx.body", "request"));
            }
            edit::set_body(&mut s.out, &body.as_bytes());
            Ok(())
        });
        fields.add_field_method_get("status", |_, this| {
            let s = state(&this.0)?;
            match s.phase {
                Phase::Response => Ok(s.status),
                _ => Err(misuse("ctx.status", "response")),
            }
        });
        fields.add_field_method_get("headers", |lua, this| {
            // A header sent more than once is its values joined by ", "
            // (as `fetch` shows them); `ctx:header` gives the first.
            let mut joined: Vec<(String, Vec<u8>)> = Vec::new();
            let s = state(&this.0)?;
            for (name, value) in edit::headers(head_of(&s)) {
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                match joined.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => {
                        v.extend_from_slice(b", ");
                        v.extend_from_slice(value);
                    }
                    None => joined.push((name, value.to_vec())),
                }
            }
            // Made outside the borrow: an allocation may run finalizers.
            drop(s);
            let table = lua.create_table()?;
            for (name, value) in joined {
                table.set(name, bytes(lua, &value)?)?;
            }
            Ok(table)
        });
        fields.add_field_method_get("vars", |lua, this| {
            lua.create_userdata(Vars(this.0.clone()))
        });
        fields.add_field_method_get("user", |lua, this| {
            if let Some(t) = &state(&this.0)?.user {
                return Ok(t.clone());
            }
            // Made outside the borrow: an allocation may run finalizers.
            let t = lua.create_table()?;
            state_mut(&this.0)?.user = Some(t.clone());
            Ok(t)
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("header", |lua, this, name: String| {
            let s = state(&this.0)?;
            edit::header(head_of(&s), &name)
                .map(|v| bytes(lua, v))
                .transpose()
        });
        methods.add_method(
            "set_header",
            |lua, this, (name, value): (mlua::String, Value)| {
                let name = name.to_str()?;
                // An integer is written here (Lua's coercion to a string
                // would cost more than the rest of the call); a float as
                // Lua writes it (`5.0`, `0.33333333333333`), so a value
                // signed as text is sent the same.
                let mut number = [0u8; 24];
                let coerced;
                let value = match &value {
                    Value::Nil | Value::Boolean(false) => None,
                    Value::Integer(i) => Some(Bytes::Short(format_integer(*i, &mut number))),
                    Value::String(v) => Some(Bytes::Lua(v.as_bytes())),
                    Value::Number(_) => {
                        coerced = lua.coerce_string(value.clone())?;
                        coerced.as_ref().map(|s| Bytes::Lua(s.as_bytes()))
                    }
                    other => {
                        return Err(mlua::Error::runtime(format!(
                            "ctx:set_header: the value is a string or a number (nil removes the header), not a {}",
                            other.type_name()
                        )))
                    }
                };
                let mut s = state_mut(&this.0)?;
                if s.phase != Phase::Request {
                    return Err(misuse("ctx:set_header", "request"));
                }
                edit::set_header(&mut s.out, &name, value.as_ref().map(Bytes::get))
                    .map_err(mlua::Error::runtime)
            },
        );
        methods.add_method("fail", |_, this, reason: Option<mlua::String>| {
            let reason = reason.map_or_else(
                || "failed by the script".into(),
                |r| r.to_string_lossy().to_string(),
            );
            state_mut(&this.0)?.failure = Some(reason);
            Ok(())
        });
    }
}

impl UserData for Vars {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, name: String| {
            let s = state(&this.0)?;
            let id = var_id(&s, &name)?;
            match s.vars.get(id) {
                Some(v) if !v.is_empty() => Ok(Value::String(bytes(lua, v)?)),
                _ => Ok(Value::Nil),
            }
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |_, this, (name, value): (String, Option<mlua::String>)| {
                let mut s = state_mut(&this.0)?;
                let id = var_id(&s, &name)?;
                let Some(slot) = s.vars.get_mut(id) else {
                    return Err(misuse("ctx.vars", "request or response"));
                };
                slot.clear();
                if let Some(v) = value {
                    slot.extend_from_slice(&v.as_bytes());
                }
                Ok(())
            },
        );
    }
}

/// A header's value as the script gave it.
enum Bytes<'a> {
    Short(&'a [u8]),
    Lua(mlua::BorrowedBytes<'a>),
}

impl Bytes<'_> {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::Short(b) => b,
            Bytes::Lua(b) => b,
        }
    }
}

/// The state, borrowed; an error rather than a panic when code the hook
/// set off (a `__gc` finalizer run by an allocation) reaches `ctx` while
/// it is borrowed.
fn state(s: &RefCell<State>) -> mlua::Result<std::cell::Ref<'_, State>> {
    s.try_borrow().map_err(|_| in_use())
}

fn state_mut(s: &RefCell<State>) -> mlua::Result<std::cell::RefMut<'_, State>> {
    s.try_borrow_mut().map_err(|_| in_use())
}

fn in_use() -> mlua::Error {
    mlua::Error::runtime("ctx is in use (by a finalizer?): read it in the hook itself")
}

/// `i` in decimal, in `buf`.
fn format_integer(i: i64, buf: &mut [u8; 24]) -> &[u8] {
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{i}");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// A variable's index, or an error naming the fix.
fn var_id(s: &State, name: &str) -> mlua::Result<usize> {
    s.var_ids.get(name).copied().ok_or_else(|| {
        mlua::Error::runtime(format!(
            "ctx.vars.{name}: no such variable (a script's own are declared in `script: {{file: …, vars: [{name}]}}`)"
        ))
    })
}
