//! Conditions: a transition's `when:` and a request's `skip_if:`, over the
//! user's values and what the request before answered.
//!
//! ```text
//! ${cart_count} < 5
//! status == 200 && ${token} != ""
//! !ok || ${retries} >= 3
//! ```
//!
//! An operand is a template (`${…}`, any expression a template takes), an
//! integer, a quoted string, `status` (the last response's status, 0 when
//! none came) or `ok` (the last request got a response and passed its
//! checks). Comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`) are between
//! integers when both sides read as one; otherwise `==` and `!=` compare
//! text and an ordering does not hold (a variable not yet extracted is
//! empty, and `${n} < 5` must not hold for it by accident). An operand
//! alone holds when it is not empty, `0` or `false`. `&&` binds tighter
//! than `||`; `!` negates; parentheses group; `and`, `or`, `not` are the
//! same as words (YAML reads a leading `!` as a tag unless quoted). A
//! value that cannot be computed makes its comparison false.

use super::diagnostic::TemplateError;
use super::template::{closing_brace, Bindings, Escape, Names, Template};
use super::{FeederId, VarId};

/// A parsed condition, its templates compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition(Test);

/// What a condition sees of the request before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Last {
    /// Its response's status; 0 when none came (or before any request).
    pub status: u16,
    /// It got a response and passed its checks.
    pub ok: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    Any(Vec<Test>),
    All(Vec<Test>),
    Not(Box<Test>),
    Compare(Operand, Cmp, Operand),
    Truthy(Operand),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Value(Template),
    Int(i64),
    Text(Vec<u8>),
    Status,
    Ok,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Condition {
    /// Parses `source`; errors carry byte offsets into it.
    pub(crate) fn parse(source: &str, names: &Names) -> Result<Condition, Vec<TemplateError>> {
        let tokens = tokens(source, names)?;
        let mut p = Parser {
            tokens,
            at: 0,
            end: source.len(),
        };
        let test = p.any()?;
        match p.tokens.get(p.at) {
            None => Ok(Condition(test)),
            Some((offset, Tok::Close)) => Err(error(*offset, "unmatched `)`", None)),
            Some((offset, _)) => Err(error(
                *offset,
                "expected `&&`, `||` or the end of the condition",
                Some("compare two values with `==`, `!=`, `<`, `<=`, `>` or `>=`"),
            )),
        }
    }

    /// Whether it holds for a user whose values `bindings` renders, after
    /// `last`.
    pub fn holds(&self, bindings: &mut impl Bindings, last: Last) -> bool {
        self.0.holds(bindings, last)
    }

    /// Its value when nothing it reads changes while a test runs (literals,
    /// `${env.…}`): known at load time.
    pub(crate) fn constant(&self) -> Option<bool> {
        self.0
            .is_constant()
            .then(|| self.0.holds(&mut Constant, Last::default()))
    }
}

impl Test {
    fn holds(&self, b: &mut impl Bindings, last: Last) -> bool {
        match self {
            Test::Any(tests) => tests.iter().any(|t| t.holds(b, last)),
            Test::All(tests) => tests.iter().all(|t| t.holds(b, last)),
            Test::Not(t) => !t.holds(b, last),
            Test::Truthy(Operand::Ok) => last.ok,
            Test::Truthy(o) => match o.value(b, last) {
                Some(Value::Int(n)) => n != 0,
                Some(Value::Text(t)) => !t.is_empty() && t != b"false",
                None => false,
            },
            Test::Compare(l, cmp, r) => match (l.value(b, last), r.value(b, last)) {
                (Some(l), Some(r)) => cmp.holds(l, r),
                _ => false,
            },
        }
    }

    fn is_constant(&self) -> bool {
        match self {
            Test::Any(tests) | Test::All(tests) => tests.iter().all(Test::is_constant),
            Test::Not(t) => t.is_constant(),
            Test::Truthy(o) => o.is_constant(),
            Test::Compare(l, _, r) => l.is_constant() && r.is_constant(),
        }
    }
}

/// An operand's value: an integer when it reads as one.
enum Value {
    Int(i64),
    Text(Vec<u8>),
}

impl Value {
    fn of(text: Vec<u8>) -> Value {
        match std::str::from_utf8(&text).ok().and_then(|s| s.parse().ok()) {
            Some(n) => Value::Int(n),
            None => Value::Text(text),
        }
    }
}

impl Operand {
    fn value(&self, b: &mut impl Bindings, last: Last) -> Option<Value> {
        Some(match self {
            Operand::Value(t) => {
                let mut out = Vec::new();
                t.render(b, &mut out).ok()?;
                Value::of(out)
            }
            Operand::Int(n) => Value::Int(*n),
            Operand::Text(t) => Value::of(t.clone()),
            Operand::Status => Value::Int(i64::from(last.status)),
            Operand::Ok => Value::Int(i64::from(last.ok)),
        })
    }

    fn is_constant(&self) -> bool {
        match self {
            Operand::Value(t) => t.static_bytes().is_some(),
            Operand::Int(_) | Operand::Text(_) => true,
            Operand::Status | Operand::Ok => false,
        }
    }
}

impl Cmp {
    fn holds(self, l: Value, r: Value) -> bool {
        let order = match (&l, &r) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            _ => {
                let (a, b) = (text(&l), text(&r));
                return match self {
                    Cmp::Eq => a == b,
                    Cmp::Ne => a != b,
                    // Text has no order here: an empty (not yet
                    // extracted) value must not pass `< 5`.
                    _ => false,
                };
            }
        };
        match self {
            Cmp::Eq => order.is_eq(),
            Cmp::Ne => order.is_ne(),
            Cmp::Lt => order.is_lt(),
            Cmp::Le => order.is_le(),
            Cmp::Gt => order.is_gt(),
            Cmp::Ge => order.is_ge(),
        }
    }
}

fn text(v: &Value) -> std::borrow::Cow<'_, [u8]> {
    match v {
        Value::Int(n) => n.to_string().into_bytes().into(),
        Value::Text(t) => t.as_slice().into(),
    }
}

/// Bindings for a condition that reads nothing a user has.
struct Constant;

impl Bindings for Constant {
    fn random(&mut self, lo: i64, _: i64) -> i64 {
        lo
    }
    fn unit(&mut self) -> f64 {
        0.0
    }
    fn column(&mut self, _: FeederId, _: usize) -> &[u8] {
        &[]
    }
    fn var(&self, _: VarId) -> &[u8] {
        &[]
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(Vec<Vec<u8>>);

    impl Bindings for Vars {
        fn random(&mut self, lo: i64, _: i64) -> i64 {
            lo
        }
        fn unit(&mut self) -> f64 {
            0.0
        }
        fn column(&mut self, _: FeederId, _: usize) -> &[u8] {
            &[]
        }
        fn var(&self, v: VarId) -> &[u8] {
            &self.0[v.index()]
        }
    }

    fn names(vars: &[String]) -> Names<'_> {
        Names {
            feeders: Vec::new(),
            variables: vars,
        }
    }

    fn holds(source: &str, count: &str, last: Last) -> bool {
        let vars = vec!["count".to_string(), "token".to_string()];
        let c = Condition::parse(source, &names(&vars)).unwrap_or_else(|e| panic!("{e:?}"));
        c.holds(&mut Vars(vec![count.into(), b"abc".to_vec()]), last)
    }

    #[test]
    fn comparisons_are_numeric_between_integers_and_textual_otherwise() {
        let ok = Last {
            status: 200,
            ok: true,
        };
        assert!(holds("${count} < 5", "4", ok));
        assert!(!holds("${count} < 5", "5", ok));
        assert!(holds("${count} <= 5", "5", ok));
        assert!(holds("${count} > 10", "11", ok));
        // 10 > 9 as integers, though "10" < "9" as text.
        assert!(holds("${count} > 9", "10", ok));
        assert!(holds("${token} == 'abc'", "", ok));
        assert!(holds(r#"${token} != "abd""#, "", ok));
        // Not yet extracted: empty, and no ordering holds for it.
        assert!(!holds("${count} < 5", "", ok));
        assert!(!holds("${count} >= 5", "", ok));
        assert!(holds("${count} == ''", "", ok));
        assert!(holds("${count + 1} == 3", "2", ok));
    }

    #[test]
    fn status_ok_and_logic() {
        let failed = Last {
            status: 500,
            ok: false,
        };
        assert!(holds("status == 500 && !ok", "", failed));
        assert!(holds("not ok or ${count} < 1", "7", failed));
        assert!(!holds("ok || status == 200", "", failed));
        assert!(holds(
            "status >= 500 && (${count} == 1 || ${count} == 2)",
            "2",
            failed
        ));
        // && binds tighter than ||.
        assert!(holds("ok && ok || status == 500", "", failed));
        assert!(holds("${token}", "", failed));
        assert!(!holds("${count}", "0", failed));
        assert!(!holds("${count}", "", failed));
    }

    #[test]
    fn constants_are_known_at_load_time() {
        let vars = Vec::new();
        let n = names(&vars);
        assert_eq!(
            Condition::parse("1 < 2", &n).unwrap().constant(),
            Some(true)
        );
        assert_eq!(
            Condition::parse("'a' == 'b'", &n).unwrap().constant(),
            Some(false)
        );
        assert_eq!(
            Condition::parse("status == 200", &n).unwrap().constant(),
            None
        );
        assert_eq!(
            Condition::parse("${random(1, 2)} == 1", &n)
                .unwrap()
                .constant(),
            None
        );
    }

    #[test]
    fn errors_point_at_the_place_and_name_the_fix() {
        let vars = vec!["count".to_string()];
        let n = names(&vars);
        let err = |s: &str| Condition::parse(s, &n).unwrap_err().remove(0);
        let e = err("count < 5");
        assert_eq!(
            (e.offset, e.message.as_str()),
            (0, "unknown name `count` in a condition")
        );
        assert!(e.hint.unwrap().contains("${count}"));
        let e = err("${cuont} < 5");
        assert!(e.message.contains("cuont"), "{e:?}");
        assert_eq!(err("${count} = 5").offset, 9);
        assert_eq!(
            err("${count} <").message,
            "the condition ends where a value was expected"
        );
        assert_eq!(err("(${count} < 5").message, "expected `)`");
        assert_eq!(err("${count} < 5)").message, "unmatched `)`");
        assert_eq!(err("${count} 5").offset, 9);
        assert_eq!(err("'open").message, "a string is never closed");
    }
}
