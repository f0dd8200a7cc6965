//! The tokens inside `${…}`: names (letters, digits, `_`, `-`, `.`),
//! integers and decimals, quoted strings with their escapes, parentheses,
//! commas and the arithmetic operators; and where a `${…}` ends.

use super::expr::Op;
use super::Problem;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Name(String),
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Open,
    Close,
    Comma,
    Op(Op),
}

pub(super) fn describe(t: &Token) -> String {
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

/// The byte where the `}` closing an expression that starts at `s` is: the
/// first one outside a quoted string. `${env.NAME:-text}` holds text, not
/// strings (an apostrophe in a default is a letter), and a string left
/// open ends at the first `}` (the parser then says it is unclosed).
pub(crate) fn closing_brace(s: &str) -> Option<usize> {
    let first = s.find('}')?;
    let head = s.trim_start();
    let head = head.strip_prefix("raw(").map_or(head, str::trim_start);
    if head.starts_with("env.") && s[..first].contains(":-") {
        return Some(first);
    }
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
    Some(first)
}

pub(super) fn tokens(inner: &str) -> Result<Vec<Token>, Problem> {
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

/// Whether the parentheses of `s` balance, those inside quoted strings
/// aside.
pub(crate) fn parentheses_balance(s: &str) -> bool {
    let mut depth = 0i32;
    let mut quote = None;
    let mut escaped = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            (None, _) => {}
        }
    }
    depth == 0
}
