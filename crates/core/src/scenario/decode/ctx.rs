//! The error collector and the typed accessors every decoder uses: each
//! turns a wrong shape into a located message saying what was expected and
//! what was found, and reports unknown keys with a close match. Templates
//! and regular expressions are compiled here too, their errors placed in
//! the scalar they came from.

use std::path::Path;
use std::time::Duration;

use super::super::diagnostic::TemplateError;
use super::super::diagnostic::{did_you_mean, Diagnostic};
use super::super::duration::parse_duration;
use super::super::ids::VarId;
use super::super::model::RequestId;
use super::super::template::{Builder, Escape, Names, Template};
use super::super::threshold::parse_rate;
use super::super::yaml::{Key, Node, Pos, Style};

/// The error collector and typed accessors shared by the decoders.
pub(crate) struct Ctx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub errors: Vec<Diagnostic>,
    /// The `--set` texts, named in messages about the values they set
    /// (nodes at line 0, column N come from the N-th).
    pub overrides: &'a [String],
}

/// A mapping whose keys have been checked against the known ones.
pub(crate) struct Fields<'n> {
    pub pos: Pos,
    pub entries: &'n [(Key, Node)],
    /// How the mapping is named in messages, e.g. "`target`".
    pub what: String,
}

impl<'n> Fields<'n> {
    /// The value of `key`, treating an explicit null like an absent key.
    pub(crate) fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())
    }

    pub(crate) fn key(&self, key: &str) -> Option<&'n Key> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(k, _)| k)
    }

    /// The value of a key that must be there; reports its absence at the
    /// mapping.
    pub(crate) fn required(&self, ctx: &mut Ctx, key: &str) -> Option<&'n Node> {
        let value = self.get(key);
        if value.is_none() {
            ctx.error(
                self.pos,
                format!("missing required key `{key}` in {}", self.what),
            );
        }
        value
    }
}

impl<'a> Ctx<'a> {
    pub(crate) fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.error_hint(pos, message, None);
    }

    pub(crate) fn error_hint(
        &mut self,
        pos: Pos,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        let mut message = message.into();
        if pos.line == 0 {
            if let Some(set) = pos
                .column
                .checked_sub(1)
                .and_then(|i| self.overrides.get(i))
            {
                message = format!("--set {set}: {message}");
            }
        }
        let source_line = self
            .text
            .lines()
            .nth(pos.line.wrapping_sub(1))
            .map(|l| l.trim_end_matches('\r').to_string());
        self.errors.push(Diagnostic {
            file: self.file.to_path_buf(),
            line: pos.line,
            column: if pos.line == 0 { 0 } else { pos.column },
            message,
            hint,
            source_line,
        });
    }

    /// Reports a name that is not among `known`, with a close match if any.
    pub(crate) fn unknown(&mut self, pos: Pos, message: String, found: &str, known: &[&str]) {
        let hint = did_you_mean(found, known.iter().copied());
        self.error_hint(pos, message, hint);
    }

    /// `node` as a mapping, with an error for each key not in `known`.
    pub(crate) fn map<'n>(
        &mut self,
        node: &'n Node,
        what: &str,
        known: &[&str],
    ) -> Option<Fields<'n>> {
        let Node::Map { entries, pos } = node else {
            self.error(
                node.pos(),
                format!("expected a mapping for {what}, found {}", node.describe()),
            );
            return None;
        };
        for (key, _) in entries {
            if !known.contains(&key.name.as_str()) {
                let hint = did_you_mean(&key.name, known.iter().copied())
                    .or_else(|| Some(format!("expected one of: {}", known.join(", "))));
                self.error_hint(
                    key.pos,
                    format!("unknown key `{}` in {what}", key.name),
                    hint,
                );
            }
        }
        Some(Fields {
            pos: *pos,
            entries,
            what: what.to_string(),
        })
    }

    /// `node` as a mapping whose keys are names chosen by the user.
    pub(crate) fn named_map<'n>(
        &mut self,
        node: &'n Node,
        what: &str,
    ) -> Option<&'n [(Key, Node)]> {
        match node {
            Node::Map { entries, .. } => Some(entries),
            _ if node.is_null() => Some(&[]),
            _ => {
                self.error(
                    node.pos(),
                    format!("expected a mapping for {what}, found {}", node.describe()),
                );
                None
            }
        }
    }

    pub(crate) fn seq<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [Node]> {
        match node {
            Node::Seq { items, .. } => Some(items),
            _ => {
                self.error(
                    node.pos(),
                    format!("expected a list for {what}, found {}", node.describe()),
                );
                None
            }
        }
    }

    pub(crate) fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match node {
            Node::Scalar { value, .. } if !node.is_null() => Some(value.clone()),
            _ => {
                self.error(
                    node.pos(),
                    format!("expected {what}, found {}", node.describe()),
                );
                None
            }
        }
    }

    /// A setting's text (not a template): `${env.NAME}` expanded, an unset
    /// variable reported at its column.
    pub(crate) fn setting(&mut self, node: &Node, what: &str) -> Option<String> {
        let text = self.string(node, what)?;
        match super::super::env::expand_setting(&text) {
            Ok(value) => Some(value),
            Err(errors) => {
                report(self, node, &text, errors);
                None
            }
        }
    }

    pub(crate) fn duration(&mut self, node: &Node) -> Option<Duration> {
        let Some(text) = node.as_str() else {
            self.error(
                node.pos(),
                format!(
                    "expected a duration like `500ms`, found {}",
                    node.describe()
                ),
            );
            return None;
        };
        parse_duration(text)
            .map_err(|e| self.error(node.pos(), e))
            .ok()
    }

    /// An integer of at least `min`.
    pub(crate) fn integer(&mut self, node: &Node, min: u64, what: &str) -> Option<u64> {
        match node.as_str().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(n) if n >= min => Some(n),
            _ => {
                self.error(
                    node.pos(),
                    format!("expected {what}, found {}", node.describe()),
                );
                None
            }
        }
    }

    /// A size in bytes of at least `min`: `4MiB`, `512KiB`, `1GB`, `65536`.
    pub(crate) fn byte_size(&mut self, node: &Node, min: u64, what: &str) -> Option<u64> {
        let parsed = node
            .as_str()
            .and_then(|s| s.trim().parse::<bytesize::ByteSize>().ok())
            .map(|b| b.as_u64());
        match parsed {
            Some(n) if n >= min => Some(n),
            _ => {
                self.error_hint(
                    node.pos(),
                    format!("expected {what}, found {}", node.describe()),
                    Some("a number of bytes, or one with a unit: KiB, MiB, GiB (1024s) or KB, MB, GB (1000s)".into()),
                );
                None
            }
        }
    }

    /// A fraction in [0, 1], written `0.1` or `10%`.
    pub(crate) fn fraction(&mut self, node: &Node, what: &str) -> Option<f64> {
        let value = node.as_str().and_then(|s| parse_rate(s.trim()));
        if value.is_none() {
            self.error(
                node.pos(),
                format!(
                    "expected {what} between 0 and 1 (or a percentage like `10%`), found {}",
                    node.describe()
                ),
            );
        }
        value
    }
}

/// The id of the request `node` names, or a reported error.
pub(crate) fn lookup_request(
    ctx: &mut Ctx,
    node: &Node,
    names: &[&str],
    what: &str,
) -> Option<RequestId> {
    let name = ctx.string(node, &format!("a request name for the {what}"))?;
    match names.iter().position(|n| *n == name) {
        Some(i) => Some(RequestId(i as u32)),
        None => {
            ctx.unknown(
                node.pos(),
                format!("unknown request `{name}` in {what}"),
                &name,
                names,
            );
            None
        }
    }
}
/// A name a scenario may give a request, feeder or variable: a letter or
/// `_`, then letters, digits, `_` or `-`.
pub(super) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The id of variable `var`, a key of `extract` or `set`: an error when
/// its name is not a name, or is a feeder's (None then, and for a name
/// `variables` lacks, whose key was reported already).
pub(super) fn bound_variable(
    ctx: &mut Ctx,
    var: &Key,
    names: &Names,
    variables: &[String],
) -> Option<VarId> {
    if !is_name(&var.name) || names.feeders.iter().any(|(f, _)| *f == var.name) {
        ctx.error(
            var.pos,
            format!("expected a variable name of letters, digits, `_` or `-` that is not a feeder's name, found `{}`", var.name),
        );
        return None;
    }
    let id = variables.iter().position(|v| *v == var.name)?;
    Some(VarId(id as u32))
}

/// Reports a template's errors at their place in the scalar they came from.
pub(super) fn report(ctx: &mut Ctx, node: &Node, text: &str, errors: Vec<TemplateError>) {
    for e in errors {
        ctx.error_hint(offset_pos(node, text, e.offset), e.message, e.hint);
    }
}

/// Compiles one scalar's text as a template, reporting its errors at their
/// place in the file.
pub(super) fn template(
    ctx: &mut Ctx,
    node: &Node,
    text: &str,
    escape: Escape,
    literal: Escape,
    names: &Names,
) -> Option<Template> {
    let mut b = Builder::new(escape);
    let errors = b.source(text, literal, names);
    let ok = errors.is_empty();
    report(ctx, node, text, errors);
    ok.then(|| b.finish())
}

/// A regular expression, or its error at `node` with the regex crate's
/// last line of explanation.
pub(super) fn compile_regex<R>(
    ctx: &mut Ctx,
    node: &Node,
    text: &str,
    compile: impl Fn(&str) -> Result<R, String>,
) -> Option<R> {
    match compile(text) {
        Ok(re) => Some(re),
        Err(e) => {
            let detail = e.lines().last().unwrap_or_default().trim().to_string();
            ctx.error(
                node.pos(),
                format!("expected a valid regular expression, found `{text}`: {detail}"),
            );
            None
        }
    }
}

/// The position of byte `offset` of a scalar's value. Exact for plain and
/// quoted scalars on one line without escapes; otherwise the scalar's start.
fn offset_pos(node: &Node, text: &str, offset: usize) -> Pos {
    let Node::Scalar { style, pos, .. } = node else {
        return node.pos();
    };
    if pos.line == 0 {
        // A `--set` value: its column names the override.
        return *pos;
    }
    let before = &text[..offset.min(text.len())];
    if before.contains('\n') {
        return *pos;
    }
    let chars = before.chars().count();
    match style {
        Style::Plain => pos.advance(chars),
        Style::Quoted => pos.advance(1 + chars),
        Style::Block => *pos,
    }
}
