//! Problems found in a scenario file, each with its place in the file, and
//! their compiler-style rendering:
//!
//! ```text
//! shop.yaml:3:3: error: unknown key `timout` in `target`
//!   |
//! 3 |   timout: 5s
//!   |   ^
//!   = help: did you mean `timeout`?
//! ```

use std::fmt;
use std::path::PathBuf;

/// A problem in a template's source (a value with `${…}`): where in that
/// text, what, and what might fix it. The decoder places it in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte offset of the problem in the template's source.
    pub offset: usize,
    pub message: String,
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    /// 1-based; 0 when the problem concerns the whole file (it could not be
    /// read), and then `column` is 0 too.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// What was expected and what was found.
    pub message: String,
    /// A suggestion, such as a close name.
    pub hint: Option<String>,
    /// The text of line `line`, shown under the message with a caret; `None`
    /// when there is no such line.
    pub source_line: Option<String>,
}

impl Diagnostic {
    /// A problem with the whole file, such as one that cannot be read.
    pub(crate) fn file(file: PathBuf, message: String) -> Diagnostic {
        Diagnostic {
            file,
            line: 0,
            column: 0,
            message,
            hint: None,
            source_line: None,
        }
    }
}

/// Every problem found in one file, in the order they appear in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        if self.line == 0 {
            write!(f, "{file}: error: {}", self.message)?;
        } else {
            write!(
                f,
                "{file}:{}:{}: error: {}",
                self.line, self.column, self.message
            )?;
        }
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        let shown = self.source_line.is_some() && self.line > 0;
        if let (Some(source), true) = (&self.source_line, shown) {
            // Keep tabs as tabs so the caret lines up under them.
            let indent: String = source
                .chars()
                .take(self.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "\n{gutter} |\n{number} | {source}\n{gutter} | {indent}^")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n{gutter} = help: {hint}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        if self.0.len() > 1 {
            write!(f, "\n\n{} errors", self.0.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// `did you mean `x`?` when a known name is close enough to `found` to be a
/// likely typo.
pub(crate) fn did_you_mean<'a>(
    found: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in known {
        // Jaro-Winkler favours shared prefixes; one edit (or a swap of two
        // neighbours) also counts as close, for short names.
        let mut score = strsim::jaro_winkler(found, candidate);
        if found.chars().count() > 2 && strsim::osa_distance(found, candidate) == 1 {
            score = score.max(0.8);
        }
        if score > best.map_or(0.0, |(s, _)| s) {
            best = Some((score, candidate));
        }
    }
    match best {
        Some((score, name)) if score >= 0.8 => Some(format!("did you mean `{name}`?")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_a_compiler() {
        let d = Diagnostic {
            file: PathBuf::from("shop.yaml"),
            line: 3,
            column: 3,
            message: "unknown key `timout` in `target`".into(),
            hint: Some("did you mean `timeout`?".into()),
            source_line: Some("  timout: 5s".into()),
        };
        assert_eq!(
            d.to_string(),
            "shop.yaml:3:3: error: unknown key `timout` in `target`\n  |\n3 |   timout: 5s\n  |   ^\n  = help: did you mean `timeout`?"
        );
    }

    #[test]
    fn whole_file_problem_omits_position() {
        let d = Diagnostics(vec![Diagnostic::file(
            PathBuf::from("x.yaml"),
            "cannot read `x.yaml`: not found".into(),
        )]);
        assert_eq!(
            d.to_string(),
            "x.yaml: error: cannot read `x.yaml`: not found"
        );
    }

    #[test]
    fn suggestions() {
        let known = ["timeout", "base_url"];
        assert_eq!(
            did_you_mean("timout", known).as_deref(),
            Some("did you mean `timeout`?")
        );
        assert_eq!(did_you_mean("zzz", known), None);
    }
}
