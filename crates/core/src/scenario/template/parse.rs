//! Parsing the inside of `${…}` into an `Expr`: references (`token`,
//! `actors.name`, `cookie.sid`, `env.KEY`), literals (`"text"`, `42`),
//! function calls (`hmac_sha256(env.KEY, concat(ts, "\n", body))`, nested
//! as deep as wanted) and integer arithmetic (`n + 1`, `(a - b) * 2 % 7`).
//!
//! Names are resolved here, once, when the scenario is loaded, so `check`
//! names an unknown function or variable with a suggestion. A reference
//! alone (`${token}`) stays a leaf: the template keeps its fast path.
//!
//! `-` is also a character of names (`${user-id}`), so subtraction needs
//! spaces around it: `${n - 1}`.

use super::expr::{Expr, Op};
use super::functions;
use super::lex::{describe, tokens, Token};
use super::{Dynamic, Names, Problem};
use crate::scenario::diagnostic::did_you_mean;
use crate::scenario::ids::{FeederId, VarId};

/// Parses and resolves the inside of `${…}`.
pub(crate) fn parse(inner: &str, names: &Names) -> Result<Expr, Problem> {
    // A CSV column may be named anything (`first name`, `price(EUR)`): a
    // known `feeder.column` is that column, whatever its characters.
    if let Some((feeder, column)) = inner.trim().split_once('.') {
        let known = names.feeders.iter().find(|(n, _)| *n == feeder);
        if let Some((_, Some(columns))) = known {
            if columns.iter().any(|c| c == column) {
                return reference(inner.trim(), names, inner);
            }
        }
    }
    let tokens = tokens(inner)?;
    let mut p = Parser {
        tokens,
        at: 0,
        names,
        inner,
    };
    let e = p.sum()?;
    match p.tokens.get(p.at) {
        None => Ok(e),
        Some(t) => Err((
            format!("unexpected {} in `${{{inner}}}`", describe(t)),
            match t {
                Token::Open => Some("a function is called by its name: `name(…)`".into()),
                _ => Some("join values with `concat(a, b)`; compute with `+ - * / %`".into()),
            },
        )),
    }
}

struct Parser<'a, 'n> {
    tokens: Vec<Token>,
    at: usize,
    names: &'a Names<'n>,
    inner: &'a str,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    /// `term (('+' | '-') term)*`
    fn sum(&mut self) -> Result<Expr, Problem> {
        let mut left = self.product()?;
        while let Some(&Token::Op(op @ (Op::Add | Op::Sub))) = self.peek() {
            self.at += 1;
            let right = self.product()?;
            left = self.arith(op, left, right)?;
        }
        Ok(left)
    }

    /// `left op right`, refused when a side can never be an integer.
    fn arith(&self, op: Op, left: Expr, right: Expr) -> Result<Expr, Problem> {
        for side in [&left, &right] {
            if let Some((what, fix)) = never_integer(side) {
                return Err((
                    format!(
                        "`{}` computes on integers, but {what} is text, in `${{{}}}`",
                        op.symbol(),
                        self.inner.trim()
                    ),
                    Some(fix.into()),
                ));
            }
        }
        Ok(Expr::Arith(op, Box::new([left, right])))
    }

    /// `atom (('*' | '/' | '%') atom)*`
    fn product(&mut self) -> Result<Expr, Problem> {
        let mut left = self.atom()?;
        while let Some(&Token::Op(op @ (Op::Mul | Op::Div | Op::Rem))) = self.peek() {
            self.at += 1;
            let right = self.atom()?;
            left = self.arith(op, left, right)?;
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Expr, Problem> {
        let inner = self.inner;
        match self.next() {
            Some(Token::Int(n)) => Ok(Expr::Int(n)),
            Some(Token::Str(s)) => Ok(Expr::Text(s.into())),
            Some(Token::Float(x)) => Err((
                format!("`{x}`: arithmetic is on integers, in `${{{inner}}}`"),
                Some("decimals go only in `random(lo, hi)`".into()),
            )),
            Some(Token::Open) => {
                let e = self.sum()?;
                match self.next() {
                    Some(Token::Close) => Ok(e),
                    _ => Err((format!("expected `)` in `${{{inner}}}`"), None)),
                }
            }
            Some(Token::Name(name)) => {
                if self.peek() == Some(&Token::Open) {
                    self.at += 1;
                    let args = match name.as_str() {
                        // Their arguments are settings, never values.
                        "random" | "now_ms" => self.settings()?,
                        _ => self.arguments()?,
                    };
                    self.call(&name, args)
                } else {
                    reference(&name, self.names, inner)
                }
            }
            Some(t) => Err((
                format!("expected a value, found {} in `${{{inner}}}`", describe(&t)),
                None,
            )),
            None if inner.trim().is_empty() => Err(super::bad_expansion(inner)),
            None => Err((
                format!("expected a value at the end of `${{{inner}}}`"),
                None,
            )),
        }
    }

    /// The arguments after `(`, through the `)`, as their tokens (for
    /// functions whose arguments are settings) and as expressions.
    fn arguments(&mut self) -> Result<Vec<Arg>, Problem> {
        let inner = self.inner;
        let mut args = Vec::new();
        if self.peek() == Some(&Token::Close) {
            self.at += 1;
            return Ok(args);
        }
        loop {
            let from = self.at;
            // A lone number (a float too: `random`'s bounds) stays a token.
            let lone = match (self.tokens.get(from), self.tokens.get(from + 1)) {
                (
                    Some(t @ (Token::Int(_) | Token::Float(_) | Token::Str(_))),
                    Some(Token::Comma | Token::Close),
                ) => Some(t.clone()),
                _ => None,
            };
            let expr = match lone {
                Some(Token::Float(_)) => {
                    self.at += 1;
                    None
                }
                _ => Some(self.sum()?),
            };
            args.push(Arg { lone, expr });
            match self.next() {
                Some(Token::Comma) => continue,
                Some(Token::Close) => return Ok(args),
                _ => return Err((format!("expected `,` or `)` in `${{{inner}}}`"), None)),
            }
        }
    }

    /// The arguments after `(`, through the `)`, as tokens: each a lone
    /// token or not (`expr` None).
    fn settings(&mut self) -> Result<Vec<Arg>, Problem> {
        let inner = self.inner;
        let mut args = Vec::new();
        let mut group: Vec<Token> = Vec::new();
        loop {
            let t = self
                .next()
                .ok_or_else(|| (format!("expected `)` in `${{{inner}}}`"), None))?;
            match t {
                Token::Comma | Token::Close => {
                    let ended = t == Token::Close;
                    if !(ended && args.is_empty() && group.is_empty()) {
                        let lone = match group.as_slice() {
                            [one @ (Token::Int(_) | Token::Float(_) | Token::Str(_))] => {
                                Some(one.clone())
                            }
                            _ => None,
                        };
                        args.push(Arg { lone, expr: None });
                    }
                    group.clear();
                    if ended {
                        return Ok(args);
                    }
                }
                Token::Open => {
                    return Err((
                        format!("expected settings, not a call, in `${{{inner}}}`"),
                        None,
                    ))
                }
                t => group.push(t),
            }
        }
    }

    fn call(&self, name: &str, args: Vec<Arg>) -> Result<Expr, Problem> {
        let inner = self.inner.trim();
        match name {
            "random" => return random(&args, inner).map(Expr::Leaf),
            "now_ms" if args.is_empty() => return Ok(Expr::Leaf(Dynamic::NowMs)),
            "now_ms" => {
                return Err((
                    format!("expected `now_ms()` without arguments, found `{inner}`"),
                    None,
                ))
            }
            "raw" => {
                return Err((
                    format!("`raw(…)` goes around the whole expression, found `{inner}`"),
                    Some("write `${raw(…)}`".into()),
                ))
            }
            _ => {}
        }
        let Some(spec) = functions::lookup(name) else {
            let known = functions::names().chain(["random", "now_ms", "raw"]);
            return Err((
                format!("unknown function `{name}` in `${{{inner}}}`"),
                did_you_mean(name, known).or_else(|| {
                    Some(format!(
                        "the functions are: {}",
                        functions::names().collect::<Vec<_>>().join(", ")
                    ))
                }),
            ));
        };
        if args.len() < spec.min || args.len() > spec.max {
            let count = match (spec.min, spec.max) {
                (a, b) if a == b => format!("{a}"),
                (a, b) => format!("{a} to {b}"),
            };
            return Err((
                format!(
                    "`{name}` takes {count} argument{} ({}), found {} in `${{{inner}}}`",
                    if spec.max == 1 { "" } else { "s" },
                    spec.usage,
                    args.len()
                ),
                None,
            ));
        }
        let literals: Vec<Option<Vec<u8>>> = args
            .iter()
            .map(|a| match &a.lone {
                Some(Token::Str(s)) => Some(s.clone()),
                _ => None,
            })
            .collect();
        let settings: Vec<Option<&[u8]>> = literals.iter().map(Option::as_deref).collect();
        let exprs = args
            .into_iter()
            .map(|a| {
                a.expr.ok_or_else(|| {
                    (
                        format!("`{name}` takes no decimals, in `${{{inner}}}`"),
                        Some(format!("`{name}`: {}", spec.usage)),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let func = (spec.resolve)(&settings).map_err(|message| {
            (
                format!("{message}, in `${{{inner}}}`"),
                Some(format!("`{name}`: {}", spec.usage)),
            )
        })?;
        // Arguments that were settings are not evaluated again.
        let exprs = exprs
            .into_iter()
            .take(func.evaluated_arguments(settings.len()))
            .collect();
        Ok(Expr::Call(func, exprs))
    }
}

/// What `e` is when it can never be an integer (a string that is not a
/// number, a decimal, a function whose value is always text).
fn never_integer(e: &Expr) -> Option<(String, &'static str)> {
    use super::functions::{Func, TimeFormat};
    let join = "join text with `concat(a, b)`";
    match e {
        Expr::Text(t) => {
            let text = String::from_utf8_lossy(t);
            let text = text.trim();
            (!text.is_empty() && text.parse::<i64>().is_err())
                .then(|| (format!("`\"{text}\"`"), join))
        }
        Expr::Leaf(Dynamic::RandomFloat { .. }) => Some((
            "a decimal `random`".into(),
            "give `random` integer bounds: `random(0, 100)`",
        )),
        Expr::Call(f, _) => match f {
            Func::Uuid => Some(("`uuid()`".into(), join)),
            Func::Base64 { .. } => Some(("base64".into(), join)),
            Func::Sha256 | Func::HmacSha256 { .. } => Some(("a digest".into(), join)),
            Func::RandomString => Some(("`random_string`".into(), join)),
            Func::Now {
                format: TimeFormat::Rfc3339 | TimeFormat::Rfc3339Ms,
                ..
            } => Some((
                "an RFC 3339 date".into(),
                "compute on `now(\"epoch_s\")`, or give `now` an offset: `now(\"+60s\")`",
            )),
            _ => None,
        },
        _ => None,
    }
}

struct Arg {
    /// The argument when it is one literal token.
    lone: Option<Token>,
    /// The argument as an expression (None for a decimal, which only
    /// `random` takes).
    expr: Option<Expr>,
}

fn random(args: &[Arg], inner: &str) -> Result<Dynamic, Problem> {
    let bad = || {
        (
            format!("expected `random(lo, hi)` with two integers (or two decimals like `0.0`), found `{inner}`"),
            None,
        )
    };
    let [lo, hi] = args else { return Err(bad()) };
    match (&lo.lone, &hi.lone) {
        (Some(Token::Int(lo)), Some(Token::Int(hi))) => {
            if lo > hi {
                return Err((
                    format!("expected `random(lo, hi)` with lo <= hi, found `{inner}`"),
                    Some(format!("write `random({hi}, {lo})`")),
                ));
            }
            Ok(Dynamic::Random { lo: *lo, hi: *hi })
        }
        (
            Some(a @ (Token::Int(_) | Token::Float(_))),
            Some(b @ (Token::Int(_) | Token::Float(_))),
        ) => {
            let float = |t: &Token| match *t {
                Token::Int(n) => n as f64,
                Token::Float(x) => x,
                _ => unreachable!(),
            };
            let (lo, hi) = (float(a), float(b));
            if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                return Err((
                    format!("expected `random(lo, hi)` with finite lo <= hi, found `{inner}`"),
                    None,
                ));
            }
            Ok(Dynamic::RandomFloat { lo, hi })
        }
        _ => Err(bad()),
    }
}

/// A name outside a call: a variable, `feeder.column`, `cookie.NAME` or
/// `env.NAME`.
pub(crate) fn reference(name: &str, names: &Names, inner: &str) -> Result<Expr, Problem> {
    let inner = inner.trim();
    let has_feeder = |f: &str| names.feeders.iter().any(|(n, _)| *n == f);
    if !has_feeder("env") {
        if let Some(resolved) = crate::scenario::env::resolve(name) {
            return resolved
                .map(|v| Expr::Text(v.into_bytes().into()))
                .map_err(|(message, hint)| {
                    let inside = format!("a default inside an expression goes through `set:`: `key: \"${{{name}:-value}}\"`, then use `key`");
                    (message, hint.map(|_| inside))
                });
        }
    }
    // `${cookie.NAME}`: an implicit variable the engine keeps from the jar.
    if name.starts_with("cookie.") && !has_feeder("cookie") {
        if let Some(id) = names.variables.iter().position(|v| v == name) {
            return Ok(Expr::Leaf(Dynamic::Var(VarId(id as u32))));
        }
    }
    if let Some((feeder, column)) = name.split_once('.') {
        if column.is_empty() || feeder.is_empty() {
            return Err(super::bad_expansion(inner));
        }
        let Some(id) = names.feeders.iter().position(|(n, _)| *n == feeder) else {
            let hint = did_you_mean(feeder, names.feeders.iter().map(|(n, _)| *n))
                .or_else(|| Some("data feeders are declared under `data:`".into()));
            return Err((
                format!("unknown data feeder `{feeder}` in `${{{inner}}}`"),
                hint,
            ));
        };
        let column = match names.feeders[id].1 {
            None => 0,
            Some(columns) => match columns.iter().position(|c| c == column) {
                Some(c) => c,
                None => {
                    let hint = did_you_mean(column, columns.iter().map(String::as_str))
                        .or_else(|| Some(format!("its columns are: {}", columns.join(", "))));
                    return Err((
                        format!("data feeder `{feeder}` has no column `{column}`"),
                        hint,
                    ));
                }
            },
        };
        return Ok(Expr::Leaf(Dynamic::Column {
            feeder: FeederId(id as u32),
            column,
        }));
    }
    if let Some(id) = names.variables.iter().position(|v| v == name) {
        return Ok(Expr::Leaf(Dynamic::Var(VarId(id as u32))));
    }
    if has_feeder(name) {
        return Err((
            format!("`{name}` is a data feeder, expected one of its columns"),
            Some(format!("write `${{{name}.COLUMN}}`")),
        ));
    }
    let hint = match name {
        "now_ms" => Some("write `${now_ms()}` for the time".into()),
        "random" => Some("write `${random(lo, hi)}` for a random number".into()),
        n if functions::lookup(n).is_some() => Some(format!("a function is called: `{n}(…)`")),
        n if n.contains('-') && n.split('-').all(|p| !p.is_empty()) => {
            did_you_mean(name, names.variables.iter().map(String::as_str)).or_else(|| {
                Some(format!(
                    "`-` is part of a name; to subtract, put spaces around it: `{}`",
                    n.replace('-', " - ")
                ))
            })
        }
        _ => did_you_mean(name, names.variables.iter().map(String::as_str))
            .or_else(|| Some("variables are bound by a request's `extract` or `set`".into())),
    };
    Err((format!("unknown variable `{name}`"), hint))
}
