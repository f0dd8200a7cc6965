//! `${env.NAME}`: values from the environment, so credentials and targets
//! stay out of scenario files (k6's `__ENV`, JMeter's properties).
//! `${env.NAME:-text}` gives a default for an unset (or empty) variable,
//! as the shell does. An unset variable without a default is an error at
//! its line and column, so `autoperf check` finds it before a run.
//!
//! In templates (paths, headers, bodies, keys, values) the value goes in
//! escaped for its place, like any expansion; in settings (target URL, TLS
//! and Kafka settings, agent URLs, file paths) it goes in as it is, and
//! `$${` writes a literal `${` there — any other `$` is literal as written.

use super::diagnostic::TemplateError;

/// The value of an environment variable, empty counting as unset (as the
/// shell's `:-` does).
fn lookup(name: &str) -> Option<String> {
    super::sources::env(name).filter(|v| !v.is_empty())
}

/// Whether `expr`, the inside of `${…}`, is all an environment reference:
/// `env.NAME` or `env.NAME:-default` (not `env.N + 1`, an expression).
pub(crate) fn is_reference(expr: &str) -> bool {
    let Some(rest) = expr.trim().strip_prefix("env.") else {
        return false;
    };
    // A bad name (`env.MY VAR`) is still meant as one, and `resolve` says
    // what is wrong with it; operators, calls and strings make it an
    // expression.
    let name = rest.split_once(":-").map_or(rest, |(name, _)| name).trim();
    !name.is_empty()
        && !name.contains(['+', '*', '/', '%', '(', ')', ',', '"', '\''])
        && !name.contains(" -")
}

/// `expr`, the inside of `${…}`, when it names the environment: `Some`
/// with its value, or the error for an unset variable or a bad name.
pub(crate) fn resolve(expr: &str) -> Option<Result<String, (String, Option<String>)>> {
    let rest = expr.trim().strip_prefix("env.")?;
    let (name, default) = match rest.split_once(":-") {
        Some((name, default)) => (name.trim(), Some(default)),
        None => (rest.trim(), None),
    };
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return Some(Err((
            format!("expected an environment variable name of letters, digits and `_` in `${{{expr}}}`, found `{name}`"),
            None,
        )));
    }
    Some(match (lookup(name), default) {
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_string()),
        (None, None) => Err((
            format!("environment variable `{name}` is not set"),
            Some(format!(
                "set it (`export {name}=…`), or give a default: `${{env.{name}:-value}}`"
            )),
        )),
    })
}

/// A setting's text with its `${env.…}` expanded and `$${` made `${`;
/// errors carry byte offsets into `text`.
pub(crate) fn expand_setting(text: &str) -> Result<String, Vec<TemplateError>> {
    if !text.contains("${") {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut errors = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            offset += at + 3;
        } else if tail.starts_with("${env.") {
            let Some(end) = tail.find('}') else {
                errors.push(TemplateError {
                    offset: offset + at,
                    message: "unclosed `${`: expected `}`".into(),
                    hint: Some("write `$${` for a literal `${`".into()),
                });
                return Err(errors);
            };
            match resolve(&tail[2..end]).expect("starts with env.") {
                Ok(value) => out.push_str(&value),
                Err((message, hint)) => errors.push(TemplateError {
                    offset: offset + at,
                    message,
                    hint,
                }),
            }
            rest = &tail[end + 1..];
            offset += at + end + 1;
        } else {
            out.push('$');
            rest = &tail[1..];
            offset += at + 1;
        }
    }
    out.push_str(rest);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One variable no other test touches, set once for this module.
    fn set() {
        std::env::set_var("AUTOPERF_ENV_TEST_HOST", "127.0.0.1:9");
    }

    #[test]
    fn settings_expand_set_variables_and_defaults() {
        set();
        assert_eq!(
            expand_setting("http://${env.AUTOPERF_ENV_TEST_HOST}/x").unwrap(),
            "http://127.0.0.1:9/x"
        );
        assert_eq!(
            expand_setting(
                "${env.AUTOPERF_ENV_TEST_UNSET:-localhost}:${env.AUTOPERF_ENV_TEST_UNSET:-80}"
            )
            .unwrap(),
            "localhost:80"
        );
        assert_eq!(
            expand_setting("pa$$word $${env.X} $5").unwrap(),
            "pa$$word ${env.X} $5"
        );
    }

    #[test]
    fn an_unset_variable_is_an_error_at_its_offset_with_the_fix() {
        let errors = expand_setting("ab ${env.AUTOPERF_ENV_TEST_UNSET} ${env.9X}").unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].offset, 3);
        assert!(errors[0]
            .message
            .contains("`AUTOPERF_ENV_TEST_UNSET` is not set"));
        assert!(errors[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("export AUTOPERF_ENV_TEST_UNSET="));
        assert_eq!(errors[1].offset, 34);
        assert!(errors[1].message.contains("environment variable name"));
    }
}
