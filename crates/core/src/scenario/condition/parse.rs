//! A condition's text to its tree: tokens (templates compiled as they are
//! met), then `||` over `&&` over `!`, parentheses and comparisons.

use super::super::diagnostic::TemplateError;
use super::super::template::{closing_brace, Escape, Names, Template};
use super::{Cmp, Operand, Test};

/// Parses `source`; errors carry byte offsets into it.
pub(super) fn parse(source: &str, names: &Names) -> Result<Test, Vec<TemplateError>> {
    let tokens = tokens(source, names)?;
    let mut p = Parser {
        tokens,
        at: 0,
        end: source.len(),
    };
    let test = p.any()?;
    match p.tokens.get(p.at) {
        None => Ok(test),
        Some((offset, Tok::Close)) => Err(error(*offset, "unmatched `)`", None)),
        Some((offset, _)) => Err(error(
            *offset,
            "expected `&&`, `||` or the end of the condition",
            Some("compare two values with `==`, `!=`, `<`, `<=`, `>` or `>=`"),
        )),
    }
}

#[derive(Debug)]
enum Tok {
    Operand(Operand),
    Cmp(Cmp),
    And,
    Or,
    Not,
    Open,
    Close,
}

fn error(offset: usize, message: &str, hint: Option<&str>) -> Vec<TemplateError> {
    vec![TemplateError {
        offset,
        message: message.into(),
        hint: hint.map(Into::into),
    }]
}

fn tokens(s: &str, names: &Names) -> Result<Vec<(usize, Tok)>, Vec<TemplateError>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let two = s.get(i..i + 2).unwrap_or("");
        let (tok, len) = match (c, two) {
            (b'$', "${") => {
                let Some(close) = closing_brace(&s[i + 2..]) else {
                    return Err(error(i, "`${` is never closed", Some("add `}`")));
                };
                let len = close + 3;
                let t = Template::compile(&s[i..i + len], Escape::None, names).map_err(|es| {
                    es.into_iter()
                        .map(|e| TemplateError {
                            offset: e.offset + i,
                            ..e
                        })
                        .collect::<Vec<_>>()
                })?;
                (Tok::Operand(Operand::Value(t)), len)
            }
            (_, "&&") => (Tok::And, 2),
            (_, "||") => (Tok::Or, 2),
            (_, "==") => (Tok::Cmp(Cmp::Eq), 2),
            (_, "!=") => (Tok::Cmp(Cmp::Ne), 2),
            (_, "<=") => (Tok::Cmp(Cmp::Le), 2),
            (_, ">=") => (Tok::Cmp(Cmp::Ge), 2),
            (b'<', _) => (Tok::Cmp(Cmp::Lt), 1),
            (b'>', _) => (Tok::Cmp(Cmp::Gt), 1),
            (b'!', _) => (Tok::Not, 1),
            (b'(', _) => (Tok::Open, 1),
            (b')', _) => (Tok::Close, 1),
            (b'=', _) => return Err(error(i, "expected `==`, found `=`", None)),
            (b'"' | b'\'', _) => {
                let (text, len) = quoted(&s[i..]).ok_or_else(|| {
                    error(i, "a string is never closed", Some("end it with its quote"))
                })?;
                (Tok::Operand(Operand::Text(text)), len)
            }
            (b'0'..=b'9' | b'-', _) => {
                let len = s[i + 1..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(s.len() - i, |n| n + 1);
                let n = s[i..i + len].parse().map_err(|_| {
                    error(
                        i,
                        &format!("expected an integer, found `{}`", &s[i..i + len]),
                        None,
                    )
                })?;
                (Tok::Operand(Operand::Int(n)), len)
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let len = s[i..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(s.len() - i);
                (word(&s[i..i + len], i, names)?, len)
            }
            _ => {
                let found = s[i..].chars().next().unwrap_or(' ');
                return Err(error(
                    i,
                    &format!("unexpected `{found}` in a condition"),
                    Some("write values as `${name}`, integers or quoted strings"),
                ));
            }
        };
        out.push((i, tok));
        i += len;
    }
    Ok(out)
}

fn word(w: &str, at: usize, names: &Names) -> Result<Tok, Vec<TemplateError>> {
    Ok(match w {
        "and" => Tok::And,
        "or" => Tok::Or,
        "not" => Tok::Not,
        "status" => Tok::Operand(Operand::Status),
        "true" => Tok::Operand(Operand::Bool(true)),
        "false" => Tok::Operand(Operand::Bool(false)),
        "ok" => Tok::Operand(Operand::Ok),
        _ => {
            let hint = if names.variables.iter().any(|v| v == w) {
                format!("a variable is read as `${{{w}}}`")
            } else {
                "a condition reads `${variable}`, `status` (the last response's) and `ok` (it passed its checks)".into()
            };
            return Err(error(
                at,
                &format!("unknown name `{w}` in a condition"),
                Some(&hint),
            ));
        }
    })
}

/// A string in `'…'` or `"…"` at the start of `s`, with `\` escaping the
/// next character; its text and length.
fn quoted(s: &str) -> Option<(Vec<u8>, usize)> {
    let quote = s.as_bytes()[0];
    let mut text = Vec::new();
    let mut bytes = s.bytes().enumerate().skip(1);
    while let Some((i, c)) = bytes.next() {
        match c {
            b'\\' => text.push(bytes.next()?.1),
            _ if c == quote => return Some((text, i + 1)),
            _ => text.push(c),
        }
    }
    None
}

struct Parser {
    tokens: Vec<(usize, Tok)>,
    at: usize,
    /// The source's length: where "the end" is reported.
    end: usize,
}

impl Parser {
    fn here(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(o, _)| *o)
    }

    fn eat(&mut self, want: fn(&Tok) -> bool) -> bool {
        let hit = self.tokens.get(self.at).is_some_and(|(_, t)| want(t));
        self.at += usize::from(hit);
        hit
    }

    fn any(&mut self) -> Result<Test, Vec<TemplateError>> {
        self.joined(|t| matches!(t, Tok::Or), Parser::all, Test::Any)
    }

    fn all(&mut self) -> Result<Test, Vec<TemplateError>> {
        self.joined(|t| matches!(t, Tok::And), Parser::unary, Test::All)
    }

    /// One or more of `part` separated by `sep`; several are `join`ed.
    fn joined(
        &mut self,
        sep: fn(&Tok) -> bool,
        part: fn(&mut Parser) -> Result<Test, Vec<TemplateError>>,
        join: fn(Vec<Test>) -> Test,
    ) -> Result<Test, Vec<TemplateError>> {
        let mut tests = vec![part(self)?];
        while self.eat(sep) {
            tests.push(part(self)?);
        }
        Ok(if tests.len() == 1 {
            tests.pop().unwrap()
        } else {
            join(tests)
        })
    }

    fn unary(&mut self) -> Result<Test, Vec<TemplateError>> {
        if self.eat(|t| matches!(t, Tok::Not)) {
            return Ok(Test::Not(Box::new(self.unary()?)));
        }
        if self.eat(|t| matches!(t, Tok::Open)) {
            let inner = self.any()?;
            if !self.eat(|t| matches!(t, Tok::Close)) {
                return Err(error(self.here(), "expected `)`", None));
            }
            return Ok(inner);
        }
        let left = self.operand()?;
        let Some((_, Tok::Cmp(cmp))) = self.tokens.get(self.at) else {
            return Ok(Test::Truthy(left));
        };
        let cmp = *cmp;
        self.at += 1;
        Ok(Test::Compare(left, cmp, self.operand()?))
    }

    fn operand(&mut self) -> Result<Operand, Vec<TemplateError>> {
        let at = self.here();
        match self.tokens.get_mut(self.at) {
            Some((_, Tok::Operand(o))) => {
                let o = std::mem::replace(o, Operand::Int(0));
                self.at += 1;
                Ok(o)
            }
            _ if at == self.end => Err(error(
                at,
                "the condition ends where a value was expected",
                None,
            )),
            _ => Err(error(
                at,
                "expected a value: `${name}`, `status`, `ok`, an integer or a quoted string",
                None,
            )),
        }
    }
}
