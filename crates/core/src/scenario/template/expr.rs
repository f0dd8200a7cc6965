//! Expressions inside `${…}`, as resolved at load time (`parse.rs`), and
//! their evaluation per rendering: references, literals, function calls
//! (`functions.rs`), integer arithmetic.

use super::functions::{self, Func};
use super::{BadValue, Bindings, Dynamic};
/// A resolved expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Text(Box<[u8]>),
    Int(i64),
    /// A reference or one of the numeric leaves the fast path knows.
    Leaf(Dynamic),
    Call(Func, Box<[Expr]>),
    Arith(Op, Box<[Expr; 2]>),
}

impl Expr {
    /// Calls `f` on every leaf (references and numeric leaves).
    pub(crate) fn leaves(&self, f: &mut impl FnMut(&Dynamic)) {
        match self {
            Expr::Leaf(d) => f(d),
            Expr::Call(_, args) => args.iter().for_each(|a| a.leaves(f)),
            Expr::Arith(_, sides) => sides.iter().for_each(|a| a.leaves(f)),
            Expr::Text(_) | Expr::Int(_) => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Op {
    pub(crate) fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
            Op::Div => '/',
            Op::Rem => '%',
        }
    }
}

/// Appends the value of `e` to `out`.
pub(crate) fn eval(e: &Expr, b: &mut impl Bindings, out: &mut Vec<u8>) -> Result<(), BadValue> {
    use std::io::Write as _;
    match e {
        Expr::Text(t) => out.extend_from_slice(t),
        Expr::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Expr::Leaf(d) => leaf(*d, b, out),
        Expr::Arith(..) => {
            let n = integer(e, b)?;
            let _ = write!(out, "{n}");
        }
        Expr::Call(f, args) => {
            let mut values = Vec::with_capacity(args.len());
            for a in args.iter() {
                let mut v = Vec::new();
                eval(a, b, &mut v)?;
                values.push(v);
            }
            functions::apply(*f, &values, b, out)?
        }
    }
    Ok(())
}

/// The value of a leaf, unescaped.
pub(crate) fn leaf(d: Dynamic, b: &mut impl Bindings, out: &mut Vec<u8>) {
    use std::io::Write as _;
    match d {
        Dynamic::Random { lo, hi } => {
            let _ = write!(out, "{}", b.random(lo, hi));
        }
        Dynamic::RandomFloat { lo, hi } => {
            // `{}` on f64 is the shortest text that parses back to the
            // same double: no `e`, digits, `.` and `-` only.
            let _ = write!(out, "{}", lo + (hi - lo) * b.unit());
        }
        Dynamic::NowMs => {
            let _ = write!(out, "{}", b.now_ms());
        }
        Dynamic::Column { feeder, column } => out.extend_from_slice(b.column(feeder, column)),
        Dynamic::Var(var) => out.extend_from_slice(b.var(var)),
        Dynamic::Expr(_) => unreachable!("a template's expressions are evaluated by the template"),
    }
}

/// The value of `e` as an integer: a value not yet bound (empty) is 0;
/// text that is not an integer is a `BadValue`.
pub(crate) fn integer(e: &Expr, b: &mut impl Bindings) -> Result<i64, BadValue> {
    match e {
        Expr::Int(n) => Ok(*n),
        Expr::Arith(op, sides) => {
            let l = integer(&sides[0], b)?;
            let r = integer(&sides[1], b)?;
            match op {
                Op::Add => l.checked_add(r),
                Op::Sub => l.checked_sub(r),
                Op::Mul => l.checked_mul(r),
                Op::Div => l.checked_div(r),
                Op::Rem => l.checked_rem(r),
            }
            .ok_or(BadValue)
        }
        Expr::Leaf(Dynamic::Random { lo, hi }) => Ok(b.random(*lo, *hi)),
        Expr::Leaf(Dynamic::NowMs) => Ok(b.now_ms()),
        _ => {
            let mut text = Vec::new();
            eval(e, b, &mut text)?;
            functions::integer_of(&text)
        }
    }
}
