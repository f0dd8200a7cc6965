//! Templates: text with `${…}` expansions, compiled once at load time and
//! rendered per request without allocating beyond the output buffer — but
//! for expressions (function calls, arithmetic), which evaluate into
//! buffers of their own.
//!
//! Syntax inside a string:
//! - `${random(1,5000)}`: a uniform integer, both bounds inclusive;
//!   `${random(0.0, 100.0)}` (a bound with a `.`): a uniform double in
//!   [lo, hi), written in the shortest form that reads back exactly;
//! - `${now_ms()}`: the wall clock as milliseconds since the Unix epoch;
//! - `${actors.name}`: column `name` of the current row of feeder `actors`;
//! - `${token}`: a per-user variable bound by some request's `extract`;
//! - `${env.NAME}`, `${env.NAME:-default}`: an environment variable, read
//!   once at load time (`env`);
//! - `${hmac_sha256(env.KEY, concat(ts, "\n", body))}`, `${n + 1}`: function
//!   calls, string and integer literals, integer arithmetic (`expr.rs`,
//!   the functions in `functions.rs`);
//! - `$$` writes one literal `$` (so `$${x}` is the text `${x}`); a `$` not
//!   followed by `{` or `$` is literal as it stands.
//!
//! The literal parts are stored joined in one buffer; the dynamic parts
//! remember where in it they go. Expansions are escaped for the place the
//! template is used (`Escape`); literal parts are escaped once, at compile
//! time, when the builder is told to.

mod expr;
pub(crate) mod functions;
mod lex;
mod parse;

pub(crate) use lex::closing_brace;

use super::diagnostic::TemplateError;
use super::ids::{FeederId, VarId};
use expr::Expr;

/// What is wrong in a `${…}`: message and hint.
type Problem = (String, Option<String>);

/// A value an expression could not be computed from (arithmetic on text
/// that is not an integer, a division by zero, an overflow): the request
/// is not sent and counts as `encode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadValue;

/// How expansions are written into the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// As they are (raw bodies).
    None,
    /// Percent-encode everything but RFC 3986 unreserved characters.
    Path,
    /// `application/x-www-form-urlencoded`: space as `+`, the rest but
    /// `*-._` and alphanumerics percent-encoded.
    Form,
    /// Escaped as the inside of a JSON string.
    Json,
    /// CR and LF removed, so a value cannot end the header.
    Header,
    /// `${raw(…)}` in a path: verbatim (`/`, `?`, `%`, `=` kept), except
    /// bytes no URI may hold — controls, space, non-ASCII and `"<>\^`{|}` —
    /// which are percent-encoded, so a value can never break the request
    /// line.
    Uri,
}

/// A dynamic part of a template.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Dynamic {
    Random {
        lo: i64,
        hi: i64,
    },
    RandomFloat {
        lo: f64,
        hi: f64,
    },
    NowMs,
    Column {
        feeder: FeederId,
        column: usize,
    },
    Var(VarId),
    /// Anything else: the template's expression of that index.
    Expr(u32),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Part {
    /// Offset in `Template::text` where the expansion goes.
    at: usize,
    value: Dynamic,
    /// `${raw(…)}`: the value goes in as it is, as far as its context
    /// allows (see `Escape::raw`).
    raw: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    text: Vec<u8>,
    parts: Vec<Part>,
    escape: Escape,
    feeders: Vec<FeederId>,
    exprs: Vec<Expr>,
}

/// What the engine supplies while rendering.
pub trait Bindings {
    /// A uniform integer in `lo..=hi`.
    fn random(&mut self, lo: i64, hi: i64) -> i64;
    /// A uniform draw from [0, 1).
    fn unit(&mut self) -> f64;
    /// Milliseconds since the Unix epoch.
    fn now_ms(&mut self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
    /// The value of `column` in the row chosen for `feeder` for this
    /// rendering (the engine picks one row per feeder per request).
    fn column(&mut self, feeder: FeederId, column: usize) -> &[u8];
    /// The variable's value; empty when not yet extracted.
    fn var(&self, var: VarId) -> &[u8];
    /// The whole HTTP request as rendered (HTTP/1.1 bytes), just before it
    /// is sent: a scenario's script may change it (`request(ctx)`). `Err`
    /// fails the request unsent; the engine keeps the reason.
    fn finish_request(&mut self, _request: &mut Vec<u8>) -> Result<(), ScriptFailed> {
        Ok(())
    }
}

/// The scenario's script failed a request before it was sent (the engine
/// keeps its reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptFailed;

impl Escape {
    /// What `${raw(…)}` does in a template escaped as `self`: verbatim in
    /// bodies (their length is counted after rendering), URI-safe in paths,
    /// still without CR or LF in headers.
    pub(crate) fn raw(self) -> Escape {
        match self {
            Escape::Path | Escape::Uri => Escape::Uri,
            Escape::Header => Escape::Header,
            Escape::None | Escape::Form | Escape::Json => Escape::None,
        }
    }
}

impl Template {
    /// A template without expansions: `text` as it stands.
    pub(crate) fn literal(text: &str) -> Template {
        let mut b = Builder::new(Escape::None);
        b.literal(text.as_bytes());
        b.finish()
    }

    /// Compiles `source` whose literal parts are kept as written.
    pub fn compile(
        source: &str,
        escape: Escape,
        names: &Names,
    ) -> Result<Template, Vec<TemplateError>> {
        let mut b = Builder::new(escape);
        let errors = b.source(source, Escape::None, names);
        if errors.is_empty() {
            Ok(b.finish())
        } else {
            Err(errors)
        }
    }

    /// The bytes, when there is nothing dynamic (the engine renders once).
    pub fn static_bytes(&self) -> Option<&[u8]> {
        self.parts.is_empty().then_some(&self.text[..])
    }

    /// Appends the rendered template to `out`; `Err` when an expression
    /// could not be computed (arithmetic on text that is not a number).
    pub fn render(&self, bindings: &mut impl Bindings, out: &mut Vec<u8>) -> Result<(), BadValue> {
        let mut from = 0;
        for part in &self.parts {
            out.extend_from_slice(&self.text[from..part.at]);
            from = part.at;
            match part.value {
                // Numbers need no escaping in any context.
                Dynamic::Random { .. } | Dynamic::RandomFloat { .. } | Dynamic::NowMs => {
                    expr::leaf(part.value, bindings, out)
                }
                Dynamic::Column { feeder, column } => {
                    escape(self.escape_of(part), bindings.column(feeder, column), out)
                }
                Dynamic::Var(var) => escape(self.escape_of(part), bindings.var(var), out),
                Dynamic::Expr(i) => {
                    let mut value = Vec::new();
                    expr::eval(&self.exprs[i as usize], bindings, &mut value)?;
                    escape(self.escape_of(part), &value, out);
                }
            }
        }
        out.extend_from_slice(&self.text[from..]);
        Ok(())
    }

    fn escape_of(&self, part: &Part) -> Escape {
        if part.raw {
            self.escape.raw()
        } else {
            self.escape
        }
    }

    /// The one expression this template is made of, with no text around
    /// it (`${random(0.0, 100.0)}`): typed encoders take its value as a
    /// number instead of printing and parsing it.
    pub(crate) fn only_dynamic(&self) -> Option<Dynamic> {
        match self.parts[..] {
            [part] if self.text.is_empty() => Some(part.value),
            _ => None,
        }
    }

    /// The literal text before the first value (all of it, when there is
    /// no value): escaped, and with `${env.…}` already in.
    pub(crate) fn literal_prefix(&self) -> &[u8] {
        let end = self.parts.first().map_or(self.text.len(), |p| p.at);
        &self.text[..end]
    }

    /// The value the template begins with, when nothing comes before it,
    /// and whether it is `raw`.
    pub(crate) fn leading(&self) -> Option<(Dynamic, bool)> {
        self.parts
            .first()
            .filter(|p| p.at == 0)
            .map(|p| (p.value, p.raw))
    }

    /// The feeders this template reads, each once.
    pub(crate) fn feeders(&self) -> impl Iterator<Item = FeederId> + '_ {
        self.feeders.iter().copied()
    }
}

/// The names a template may refer to.
pub struct Names<'a> {
    /// Feeders in `FeederId` order, with their columns; `None` when the
    /// file could not be read (then any column is accepted, the file's own
    /// error being reported already).
    pub feeders: Vec<(&'a str, Option<&'a [String]>)>,
    /// Variables in `VarId` order.
    pub variables: &'a [String],
}

/// Builds one template out of several pieces (a JSON body is many strings
/// and the punctuation between them).
pub(crate) struct Builder {
    text: Vec<u8>,
    parts: Vec<Part>,
    escape: Escape,
    exprs: Vec<Expr>,
}

impl Builder {
    /// `escape` applies to every expansion in the template.
    pub(crate) fn new(escape: Escape) -> Builder {
        Builder {
            text: Vec::new(),
            parts: Vec::new(),
            escape,
            exprs: Vec::new(),
        }
    }

    /// Appends bytes as they are.
    pub(crate) fn literal(&mut self, bytes: &[u8]) {
        self.text.extend_from_slice(bytes);
    }

    /// Appends template source; its literal parts are written with
    /// `literal_escape`. Returns every problem found in it.
    pub(crate) fn source(
        &mut self,
        src: &str,
        literal_escape: Escape,
        names: &Names,
    ) -> Vec<TemplateError> {
        let mut errors = Vec::new();
        let bytes = src.as_bytes();
        let mut literal_start = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'$' || i + 1 >= bytes.len() {
                i += 1;
                continue;
            }
            match bytes[i + 1] {
                b'$' => {
                    escape(literal_escape, &bytes[literal_start..=i], &mut self.text);
                    i += 2;
                    literal_start = i;
                }
                b'{' => {
                    escape(literal_escape, &bytes[literal_start..i], &mut self.text);
                    let Some(len) = lex::closing_brace(&src[i + 2..]) else {
                        errors.push(TemplateError {
                            offset: i,
                            message: "unclosed `${`: expected `}`".into(),
                            hint: Some("write `$${` for a literal `${`".into()),
                        });
                        return errors;
                    };
                    let inner = &src[i + 2..i + 2 + len];
                    let (raw, expr) = match raw_argument(inner) {
                        Some(expr) => (true, expr),
                        None => (false, inner),
                    };
                    // `${env.NAME}` (and `${env.NAME:-default}`) is known
                    // now: its value goes in as text, escaped like any
                    // expansion (unless a data feeder is called `env`).
                    let env = match names.feeders.iter().any(|(n, _)| *n == "env") {
                        true => None,
                        false if super::env::is_reference(expr) => super::env::resolve(expr),
                        false => None,
                    };
                    let how = if raw { self.escape.raw() } else { self.escape };
                    let parsed = match env {
                        Some(resolved) => resolved.map(|v| Expr::Text(v.into_bytes().into())),
                        None => parse::parse(expr, names),
                    };
                    match parsed {
                        Ok(Expr::Leaf(
                            value @ (Dynamic::Random { .. } | Dynamic::RandomFloat { .. } | Dynamic::NowMs),
                        )) if raw => errors.push(TemplateError {
                            offset: i,
                            message: format!(
                                "`raw(…)` takes a data column, a variable or a function, found `{}`",
                                expr.trim()
                            ),
                            hint: Some(match value {
                                Dynamic::NowMs => "the time needs no escaping: drop `raw`".into(),
                                _ => "numbers need no escaping: drop `raw`".into(),
                            }),
                        }),
                        Ok(Expr::Leaf(value)) => self.parts.push(Part {
                            at: self.text.len(),
                            value,
                            raw,
                        }),
                        // Known now: in as text, escaped like any value.
                        Ok(Expr::Text(text)) => escape(how, &text, &mut self.text),
                        Ok(Expr::Int(n)) => self.text.extend_from_slice(n.to_string().as_bytes()),
                        Ok(e) => {
                            self.parts.push(Part {
                                at: self.text.len(),
                                value: Dynamic::Expr(self.exprs.len() as u32),
                                raw,
                            });
                            self.exprs.push(e);
                        }
                        Err((message, hint)) => errors.push(TemplateError {
                            offset: i,
                            message,
                            hint,
                        }),
                    }
                    i += 2 + len + 1;
                    literal_start = i;
                }
                _ => i += 1,
            }
        }
        escape(literal_escape, &bytes[literal_start..], &mut self.text);
        errors
    }

    pub(crate) fn finish(self) -> Template {
        let mut feeders = Vec::new();
        let mut add = |d: &Dynamic| {
            if let Dynamic::Column { feeder, .. } = *d {
                if !feeders.contains(&feeder) {
                    feeders.push(feeder);
                }
            }
        };
        for part in &self.parts {
            add(&part.value);
        }
        for e in &self.exprs {
            e.leaves(&mut add);
        }
        Template {
            text: self.text,
            parts: self.parts,
            escape: self.escape,
            feeders,
            exprs: self.exprs,
        }
    }
}

/// The argument of `raw(…)`, when `inner` is one.
fn raw_argument(inner: &str) -> Option<&str> {
    inner
        .trim()
        .strip_prefix("raw")
        .map(str::trim_start)
        .and_then(|a| a.strip_prefix('('))
        .and_then(|a| a.strip_suffix(')'))
        // `raw(a) + raw(b)` is not one `raw(…)`: the parentheses inside
        // must balance (`env.` defaults are text, not expressions).
        .filter(|a| a.trim_start().starts_with("env.") || lex::parentheses_balance(a))
}

fn bad_expansion(inner: &str) -> (String, Option<String>) {
    (
        format!("expected `${{random(lo, hi)}}`, `${{now_ms()}}`, `${{feeder.column}}`, `${{variable}}`, `${{raw(feeder.column)}}`, a function call (`${{uuid()}}`) or arithmetic (`${{n + 1}}`), found `${{{inner}}}`"),
        Some("write `$${` for a literal `${`".into()),
    )
}

/// Writes `bytes` into `out` escaped as `how` says.
pub fn escape(how: Escape, bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let percent = |b: u8, out: &mut Vec<u8>| {
        out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]])
    };
    match how {
        Escape::None => out.extend_from_slice(bytes),
        Escape::Path => {
            for &b in bytes {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                    out.push(b)
                } else {
                    percent(b, out)
                }
            }
        }
        Escape::Form => {
            for &b in bytes {
                if b.is_ascii_alphanumeric() || matches!(b, b'*' | b'-' | b'.' | b'_') {
                    out.push(b)
                } else if b == b' ' {
                    out.push(b'+')
                } else {
                    percent(b, out)
                }
            }
        }
        Escape::Json => {
            for &b in bytes {
                match b {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0..=0x1f | 0x7f => {
                        out.extend_from_slice(b"\\u00");
                        out.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
                    }
                    _ => out.push(b),
                }
            }
        }
        Escape::Header => out.extend(bytes.iter().copied().filter(|&b| b != b'\r' && b != b'\n')),
        Escape::Uri => {
            for &b in bytes {
                if b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b) {
                    out.push(b)
                } else {
                    percent(b, out)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
