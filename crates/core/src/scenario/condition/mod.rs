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
//! integer, a quoted string, `true`/`false`, `status` (the last response's
//! status, 0 when none came — and on Kafka, where `ok` says it) or `ok`
//! (the last request got a response and passed its checks). Comparisons
//! (`==`, `!=`, `<`, `<=`, `>`, `>=`) are between integers when both sides
//! are written as one (a quoted string never is: `'01234'` is text);
//! otherwise `==` and `!=` compare text and an ordering does not hold (a
//! variable not yet extracted is empty, and `${n} < 5` must not hold for
//! it by accident). An operand alone holds when it is not empty, `0` or
//! `false`. `&&` binds tighter
//! than `||`; `!` negates; parentheses group; `and`, `or`, `not` are the
//! same as words (YAML reads a leading `!` as a tag unless quoted). A
//! value that cannot be computed makes its comparison false.

mod parse;

use std::borrow::Cow;

use super::diagnostic::TemplateError;
use super::template::{Bindings, Names, Template};
use super::{FeederId, VarId};

/// A parsed condition, its templates compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    test: Test,
    /// As written, for a trace to say why.
    source: String,
}

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
    Bool(bool),
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
        Ok(Condition {
            test: parse::parse(source, names)?,
            source: source.trim().to_string(),
        })
    }

    /// Whether it holds for a user whose values `bindings` renders, after
    /// `last`.
    pub fn holds(&self, bindings: &mut impl Bindings, last: Last) -> bool {
        self.test.holds(bindings, last)
    }

    /// The templates it reads.
    pub(crate) fn templates(&self) -> Vec<&Template> {
        let mut out = Vec::new();
        self.test.templates(&mut out);
        out
    }

    /// The condition as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Its value when nothing it reads changes while a test runs (literals,
    /// `${env.…}`): known at load time.
    pub(crate) fn constant(&self) -> Option<bool> {
        self.test
            .is_constant()
            .then(|| self.test.holds(&mut Constant, Last::default()))
    }
}

impl Test {
    fn holds(&self, b: &mut impl Bindings, last: Last) -> bool {
        match self {
            Test::Any(tests) => tests.iter().any(|t| t.holds(b, last)),
            Test::All(tests) => tests.iter().all(|t| t.holds(b, last)),
            Test::Not(t) => !t.holds(b, last),
            Test::Truthy(Operand::Ok) => last.ok,
            Test::Truthy(o) => o.value(b, last).is_some_and(|v| match v.int {
                Some(n) => n != 0,
                None => {
                    let text = v.text();
                    !text.is_empty() && *text != *b"false"
                }
            }),
            Test::Compare(l, cmp, r) => match (l.value(b, last), r.value(b, last)) {
                (Some(l), Some(r)) => cmp.holds(l, r),
                _ => false,
            },
        }
    }

    fn templates<'t>(&'t self, out: &mut Vec<&'t Template>) {
        match self {
            Test::Any(tests) | Test::All(tests) => tests.iter().for_each(|t| t.templates(out)),
            Test::Not(t) => t.templates(out),
            Test::Truthy(o) => out.extend(o.template()),
            Test::Compare(l, _, r) => out.extend(l.template().into_iter().chain(r.template())),
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

/// An operand's value: its text, and the integer it is when it is written
/// as one (digits, a `-` before them at most: `+5` and `1e3` are text).
struct Value<'a> {
    /// `None`: the integer's digits (made only when text is compared).
    text: Option<Cow<'a, [u8]>>,
    int: Option<i64>,
}

impl<'a> Value<'a> {
    fn of(text: Vec<u8>) -> Value<'a> {
        let digits = text.strip_prefix(b"-").unwrap_or(&text);
        let int = (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(&text).ok()?.parse().ok())
            .flatten();
        Value {
            text: Some(Cow::Owned(text)),
            int,
        }
    }

    fn int(n: i64) -> Value<'a> {
        Value {
            text: None,
            int: Some(n),
        }
    }

    fn text(&self) -> Cow<'_, [u8]> {
        match &self.text {
            Some(t) => Cow::Borrowed(t),
            None => Cow::Owned(self.int.unwrap_or(0).to_string().into_bytes()),
        }
    }
}

impl Operand {
    fn value(&self, b: &mut impl Bindings, last: Last) -> Option<Value<'_>> {
        Some(match self {
            Operand::Value(t) => {
                let mut out = Vec::new();
                t.render(b, &mut out).ok()?;
                Value::of(out)
            }
            Operand::Int(n) => Value::int(*n),
            // A quoted string is text, even of digits: `'01234'` is a zip
            // code, not 1234.
            Operand::Text(t) => Value {
                text: Some(Cow::Borrowed(t)),
                int: None,
            },
            // `true`/`false` are 1/0 beside an integer (`ok == true`) and
            // their words beside text.
            Operand::Bool(v) => Value {
                text: Some(Cow::Borrowed(if *v { b"true" } else { b"false" })),
                int: Some(i64::from(*v)),
            },
            Operand::Status => Value::int(i64::from(last.status)),
            Operand::Ok => Value::int(i64::from(last.ok)),
        })
    }

    fn is_constant(&self) -> bool {
        match self {
            Operand::Value(t) => t.static_bytes().is_some(),
            Operand::Int(_) | Operand::Text(_) | Operand::Bool(_) => true,
            Operand::Status | Operand::Ok => false,
        }
    }

    /// Its templates (what it reads of the data).
    fn template(&self) -> Option<&Template> {
        match self {
            Operand::Value(t) => Some(t),
            _ => None,
        }
    }
}

impl Cmp {
    fn holds(self, l: Value, r: Value) -> bool {
        let (Some(a), Some(b)) = (l.int, r.int) else {
            return match self {
                Cmp::Eq => l.text() == r.text(),
                Cmp::Ne => l.text() != r.text(),
                // Text has no order here: an empty (not yet extracted)
                // value must not pass `< 5`.
                _ => false,
            };
        };
        let order = a.cmp(&b);
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
        // Quoted digits are text; a value is an integer only as digits.
        assert!(!holds("${count} == '01234'", "1234", ok));
        assert!(holds("${count} == '01234'", "01234", ok));
        assert!(!holds("${count} == 5", "+5", ok));
        assert!(holds("${count} == '3'", "3", ok));
        assert!(holds("true && !false", "", ok));
        assert!(holds("${count} == true", "true", ok));
        assert!(holds("ok == true && ok != false", "", ok));
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
