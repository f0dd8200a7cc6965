//! A scenario's `script:` at run time: one Lua state per generator thread
//! (shards are single-threaded, so no lock is taken per call), its
//! `request(ctx)` run on each request as rendered and its `response(ctx)`
//! on each answer. The hooks' CPU is the generator's own, so the client
//! bottleneck check sees a slow script as it sees any other cost.
//!
//! `ctx.rs`: the object a hook is handed; `edit.rs`: the changes it may
//! make to a rendered request.

mod ctx;
mod edit;

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{AnyUserData, Function, Lua, Table};

use crate::protocol::Response;
use crate::scenario::script::{self, lua_message};
use crate::scenario::{RequestId, Scenario};
use ctx::{Ctx, Phase, State};

/// A user's own table (`ctx.user`), kept between its requests.
pub(crate) type UserTable = Option<Table>;

/// The script, loaded in this thread's Lua state — or why it would not
/// load here (it loaded at `check`, so only a script whose top level
/// depends on where it runs gets here): then every request fails with
/// the reason, rather than running without the hooks.
pub(crate) struct Hooks(Result<Live, String>);

struct Live {
    /// The state the functions below live in.
    lua: Lua,
    request: Option<Function>,
    response: Option<Function>,
    ctx: AnyUserData,
    state: Rc<RefCell<State>>,
    names: Vec<Rc<str>>,
    /// Holds each call to `script::CALL_BUDGET`.
    watch: script::Watch,
}

impl Hooks {
    /// The scenario's hooks, loaded afresh (each thread runs the script's
    /// top level once); `None` when it has no script.
    pub(crate) fn load(scenario: &Scenario) -> Option<Hooks> {
        let s = scenario.script.as_ref()?;
        let live = Live::load(scenario, s).map_err(|e| format!("script `{}`: {e}", s.chunk_name));
        if let Err(e) = &live {
            eprintln!("autoperf: {e}; every request of this generator thread fails");
        }
        Some(Hooks(live))
    }

    /// Whether `response(ctx)` reads answers: they are then kept.
    pub(crate) fn reads_responses(&self) -> bool {
        self.0.as_ref().is_ok_and(|l| l.response.is_some())
    }

    /// Runs `request(ctx)` on `out`, the request as rendered; `Err` with
    /// the reason when it failed the request (by `ctx:fail` or an error).
    pub(crate) fn on_request(
        &self,
        id: RequestId,
        out: &mut Vec<u8>,
        vars: &mut Vec<Vec<u8>>,
        user: &mut UserTable,
    ) -> Result<(), String> {
        let live = self.0.as_ref().map_err(String::clone)?;
        let Some(hook) = &live.request else {
            return Ok(());
        };
        live.call(hook, Phase::Request, id, vars, user, |s| {
            std::mem::swap(&mut s.out, out)
        })
    }

    /// Runs `response(ctx)` on the answer to request `id`; `Err` with the
    /// reason when it failed the request.
    pub(crate) fn on_response(
        &self,
        id: RequestId,
        status: u16,
        response: &mut Response,
        vars: &mut Vec<Vec<u8>>,
        user: &mut UserTable,
    ) -> Result<(), String> {
        let live = self.0.as_ref().map_err(String::clone)?;
        let Some(hook) = &live.response else {
            return Ok(());
        };
        live.call(hook, Phase::Response, id, vars, user, |s| {
            s.status = status;
            std::mem::swap(&mut s.response, response)
        })
    }
}

impl Live {
    fn load(scenario: &Scenario, s: &crate::scenario::Script) -> Result<Live, String> {
        let lua = script::new_state()?;
        let env = script::Env::Loaded(s.env.clone());
        let loaded = script::load(&lua, &s.chunk_name, &s.source, env)?;
        let var_ids = scenario
            .variables
            .iter()
            .enumerate()
            .map(|(i, v)| (v.clone(), i))
            .collect();
        let state = Rc::new(RefCell::new(State::new(var_ids)));
        let ctx = lua
            .create_userdata(Ctx(state.clone()))
            .map_err(|e| lua_message(&e))?;
        Ok(Live {
            request: loaded.request,
            response: loaded.response,
            ctx,
            state,
            names: scenario
                .requests
                .iter()
                .map(|r| r.name.as_str().into())
                .collect(),
            watch: loaded.watch,
            lua,
        })
    }

    /// Moves the user's variables and table in (and, by `swap`, what the
    /// phase works on), calls `hook`, moves them back.
    fn call(
        &self,
        hook: &Function,
        phase: Phase,
        id: RequestId,
        vars: &mut Vec<Vec<u8>>,
        user: &mut UserTable,
        mut swap: impl FnMut(&mut State),
    ) -> Result<(), String> {
        {
            let mut s = self.state.borrow_mut();
            s.phase = phase;
            swap(&mut s);
            s.name = self.names[id.index()].clone();
            std::mem::swap(&mut s.vars, vars);
            s.user = user.take();
            s.failure = None;
        }
        let called = self
            .watch
            .start(&self.lua, script::CALL_BUDGET)
            .and_then(|()| hook.call::<()>(&self.ctx));
        let mut s = self.state.borrow_mut();
        std::mem::swap(&mut s.vars, vars);
        swap(&mut s);
        *user = s.user.take();
        s.phase = Phase::Idle;
        let failure = s.failure.take();
        match called {
            Err(e) => Err(lua_message(&e)),
            Ok(()) => failure.map_or(Ok(()), Err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(lua: &str, vars: &[&str]) -> Hooks {
        let dir = std::env::temp_dir().join(format!("autoperf-hooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("h{}.lua", fastrand::u64(..)));
        std::fs::write(&file, lua).unwrap();
        let text = format!(
            "target: {{base_url: 'http://h'}}\nscript: {{file: {}, vars: [{}]}}\nrequests:\n  a: {{path: /a}}\n",
            file.display(),
            vars.join(", ")
        );
        let scenario = crate::scenario::parse(&text, &dir.join("s.yaml")).unwrap();
        let _ = std::fs::remove_file(&file);
        Hooks::load(&scenario).unwrap()
    }

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";

    #[test]
    fn request_edits_the_rendered_request_and_keeps_state_per_user() {
        let h = hooks(
            "function request(ctx)\n  local u = ctx.user\n  u.n = (u.n or 0) + 1\n  ctx:set_header('X-N', u.n)\n  ctx.path = ctx.path .. '?m=' .. ctx.method\n  ctx.vars.token = 'T' .. u.n\nend\n",
            &["token"],
        );
        let (mut vars, mut alice, mut bob) = (vec![Vec::new()], None, None);
        for _ in 0..2 {
            let mut out = GET.to_vec();
            h.on_request(RequestId(0), &mut out, &mut vars, &mut alice)
                .unwrap();
        }
        let mut out = GET.to_vec();
        h.on_request(RequestId(0), &mut out, &mut vars, &mut bob)
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "GET /a?m=GET HTTP/1.1\r\nHost: h\r\nX-N: 1\r\n\r\n"
        );
        assert_eq!(vars[0], b"T1");
        let mut out = GET.to_vec();
        h.on_request(RequestId(0), &mut out, &mut vars, &mut alice)
            .unwrap();
        assert_eq!(edit::header(&out, "x-n"), Some(&b"3"[..]));
    }

    #[test]
    fn a_number_is_sent_as_lua_writes_it() {
        let h = hooks(
            "function request(ctx)\n  ctx:set_header('X-Int', 7)\n  ctx:set_header('X-Half', 10/2)\n  ctx:set_header('X-Third', 1/3)\nend\n",
            &[],
        );
        let (mut vars, mut user) = (Vec::new(), None);
        let mut out = GET.to_vec();
        h.on_request(RequestId(0), &mut out, &mut vars, &mut user)
            .unwrap();
        assert_eq!(edit::header(&out, "x-int"), Some(&b"7"[..]));
        assert_eq!(edit::header(&out, "x-half"), Some(&b"5.0"[..]));
        assert_eq!(
            edit::header(&out, "x-third"),
            Some(&b"0.33333333333333"[..])
        );
    }

    #[test]
    fn response_reads_the_answer_and_fails_with_a_reason_or_an_error() {
        let h = hooks(
            "function response(ctx)\n  if ctx.status ~= 200 then ctx:fail('status ' .. ctx.status) end\n  if ctx:header('x-boom') then error('boom') end\n  ctx.vars.seen = ctx.body\nend\n",
            &["seen"],
        );
        let mut vars = vec![Vec::new()];
        let mut user = None;
        let mut r = Response {
            head: b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n".to_vec(),
            body: b"hello".to_vec(),
            ..Response::default()
        };
        h.on_response(RequestId(0), 200, &mut r, &mut vars, &mut user)
            .unwrap();
        assert_eq!(vars[0], b"hello");
        assert_eq!(r.body, b"hello", "the answer is moved back");
        let e = h.on_response(RequestId(0), 503, &mut r, &mut vars, &mut user);
        assert_eq!(e, Err("status 503".into()));
        r.head = b"HTTP/1.1 200 OK\r\nX-Boom: 1\r\n\r\n".to_vec();
        let e = h
            .on_response(RequestId(0), 200, &mut r, &mut vars, &mut user)
            .unwrap_err();
        assert!(e.contains(".lua:3:") && e.contains("boom"), "{e}");
    }

    #[test]
    fn a_hook_cannot_set_what_its_phase_does_not_have_or_an_unknown_variable() {
        let h = hooks(
            "function response(ctx) ctx.path = '/x' end\nfunction request(ctx) ctx.vars.nope = 1 end\n",
            &[],
        );
        let (mut vars, mut user) = (Vec::new(), None);
        let mut r = Response::default();
        let e = h
            .on_response(RequestId(0), 200, &mut r, &mut vars, &mut user)
            .unwrap_err();
        assert!(e.contains("request(ctx)"), "{e}");
        let mut out = GET.to_vec();
        let e = h
            .on_request(RequestId(0), &mut out, &mut vars, &mut user)
            .unwrap_err();
        assert!(e.contains("vars: [nope]"), "{e}");
    }
}
