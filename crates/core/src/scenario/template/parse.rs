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
use super::{Dynamic, Names};
use crate::scenario::diagnostic::did_you_mean;
use crate::scenario::ids::{FeederId, VarId};

/// A parse or resolution error: message and hint.
pub(crate) type Problem = (String, Option<String>);

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Open,
    Close,
    Comma,
    Op(Op),
}

/// Parses and resolves the inside of `${…}`.
pub(crate) fn parse(inner: &str, names: &Names) -> Result<Expr, Problem> {
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

fn describe(t: &Token) -> String {
    match t {
        Token::Name(n) => format!("`{n}`"),
        Token::Int(n) => format!("`{n}`"),
        Token::Float(x) => format!("`{x}`"),
        Token::Str(_) => "a string".into(),
        Token::Open => "`(`".into(),
        Token::Close => "`)`".into(),
        Token::Comma => "`,`".into(),
        Token::Op(op) => format!("`{}`", op.symbol()),
    }
}

impl Op {
    fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
            Op::Div => '/',
            Op::Rem => '%',
        }
    }
}

/// The byte where the `}` closing an expression that starts at `s` is: the
/// first one outside a quoted string.
pub(crate) fn closing_brace(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut quote = None;
    let mut i = 0;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(_), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, q @ (b'"' | b'\'')) => quote = Some(q),
            (None, b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn tokens(inner: &str) -> Result<Vec<Token>, Problem> {
    let b = inner.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push(Token::Open);
                i += 1;
            }
            b')' => {
                out.push(Token::Close);
                i += 1;
            }
            b',' => {
                out.push(Token::Comma);
                i += 1;
            }
            b'+' | b'*' | b'/' | b'%' => {
                let op = match c {
                    b'+' => Op::Add,
                    b'*' => Op::Mul,
                    b'/' => Op::Div,
                    _ => Op::Rem,
                };
                out.push(Token::Op(op));
                i += 1;
            }
            b'-' => {
                // A minus right before a digit, where no value precedes it,
                // is the number's sign.
                let after_value = matches!(
                    out.last(),
                    Some(
                        Token::Name(_)
                            | Token::Int(_)
                            | Token::Float(_)
                            | Token::Str(_)
                            | Token::Close
                    )
                );
                if !after_value && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    let (t, end) = number(inner, i)?;
                    out.push(t);
                    i = end;
                } else {
                    out.push(Token::Op(Op::Sub));
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                let (t, end) = number(inner, i)?;
                out.push(t);
                i = end;
            }
            b'"' | b'\'' => {
                let (s, end) = string(inner, i)?;
                out.push(Token::Str(s));
                i = end;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-' | b'.'))
                {
                    i += 1;
                }
                out.push(Token::Name(inner[start..i].to_string()));
            }
            _ => {
                let ch = inner[i..].chars().next().unwrap_or('?');
                return Err((
                    format!("unexpected `{ch}` in `${{{inner}}}`"),
                    Some("write `$${` for a literal `${`".into()),
                ));
            }
        }
    }
    Ok(out)
}

fn number(inner: &str, start: usize) -> Result<(Token, usize), Problem> {
    let b = inner.as_bytes();
    let mut end = start + 1;
    while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'.' || b[end] == b'_') {
        end += 1;
    }
    let text = &inner[start..end];
    let bad = || {
        (
            format!("expected a number, found `{text}` in `${{{inner}}}`"),
            None,
        )
    };
    if text.contains('.') {
        text.parse()
            .map(|x| (Token::Float(x), end))
            .map_err(|_| bad())
    } else {
        text.parse()
            .map(|n| (Token::Int(n), end))
            .map_err(|_| bad())
    }
}

fn string(inner: &str, start: usize) -> Result<(Vec<u8>, usize), Problem> {
    let b = inner.as_bytes();
    let q = b[start];
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            c if c == q => return Ok((out, i + 1)),
            b'\\' => {
                let escaped = match b.get(i + 1) {
                    Some(b'n') => b'\n',
                    Some(b't') => b'\t',
                    Some(b'r') => b'\r',
                    Some(&c @ (b'\\' | b'"' | b'\'')) => c,
                    _ => {
                        return Err((
                            format!("unknown escape in a string in `${{{inner}}}`"),
                            Some(r#"strings know `\n`, `\t`, `\r`, `\\`, `\"` and `\'`"#.into()),
                        ))
                    }
                };
                out.push(escaped);
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err((
        format!("unclosed string in `${{{inner}}}`"),
        Some(format!("end it with `{}`", q as char)),
    ))
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
            left = Expr::Arith(op, Box::new([left, right]));
        }
        Ok(left)
    }

    /// `atom (('*' | '/' | '%') atom)*`
    fn product(&mut self) -> Result<Expr, Problem> {
        let mut left = self.atom()?;
        while let Some(&Token::Op(op @ (Op::Mul | Op::Div | Op::Rem))) = self.peek() {
            self.at += 1;
            let right = self.atom()?;
            left = Expr::Arith(op, Box::new([left, right]));
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
            return resolved.map(|v| Expr::Text(v.into_bytes().into()));
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
