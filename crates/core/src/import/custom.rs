//! Log formats as the server was told to write them: nginx's `log_format`
//! (`$remote_addr - $remote_user [$time_local] "$request" … "$cookie_sid"`)
//! or Apache's `LogFormat` (`%h %l %u %t \"%r\" %>s %b \"%{sid}C\"`), so a
//! log with extra fields — a session cookie above all — imports as well
//! as the defaults, its sessions grouped by that cookie.

use super::clock::{parse_clf_time, parse_rfc3339};
use super::entry::{check_method, excerpt, origin_form, request_line, unescape, LogEntry};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Client,
    ClfTime,
    IsoTime,
    EpochTime,
    Request,
    Method,
    /// Path and query (`$request_uri`).
    Target,
    /// Path alone (`$uri`, `%U`).
    Path,
    /// The query without `?` (`$args`), or with it (`%q`).
    Query,
    Status,
    Agent,
    /// A cookie's value (`$cookie_NAME`, `%{NAME}C`): the session's, if
    /// it is the chosen one.
    SessionCookie(String),
    /// The whole Cookie header, the session cookie taken from it.
    CookieHeader,
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(Role),
}

/// A compiled `log_format` or `LogFormat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomFormat {
    parts: Vec<Part>,
    /// The cookie that names the session, read from a Cookie header field.
    session_cookie: Option<String>,
}

impl CustomFormat {
    /// `spec` in nginx's syntax when it holds `$`, Apache's when `%`.
    /// `session_cookie`: the cookie whose value groups requests into
    /// sessions, when the format logs the Cookie header.
    pub fn compile(spec: &str, session_cookie: Option<&str>) -> Result<CustomFormat, String> {
        let parts = if spec.contains('$') {
            nginx(spec)?
        } else if spec.contains('%') {
            apache(spec)?
        } else {
            return Err(format!(
                "`{spec}` has no field: write nginx's log_format ($remote_addr …) or Apache's LogFormat (%h …)"
            ));
        };
        // The session is the cookie named by `session_cookie`, else the
        // first one logged; other cookies are only fields.
        let chosen = session_cookie.map(str::to_string).or_else(|| {
            parts.iter().find_map(|p| match p {
                Part::Field(Role::SessionCookie(n)) => Some(n.clone()),
                _ => None,
            })
        });
        let mut parts = parts;
        for p in &mut parts {
            if let Part::Field(Role::SessionCookie(n)) = p {
                if Some(&*n) != chosen.as_ref() {
                    *p = Part::Field(Role::Skip);
                }
            }
        }
        let cookie_field = parts
            .iter()
            .any(|p| matches!(p, Part::Field(Role::SessionCookie(_))));
        let has = |r: Role| parts.contains(&Part::Field(r));
        if !has(Role::Client) && !cookie_field && !has(Role::CookieHeader) {
            return Err("the format logs neither the client ($remote_addr, %h) nor a cookie: requests cannot be grouped into sessions".into());
        }
        if !has(Role::ClfTime) && !has(Role::IsoTime) && !has(Role::EpochTime) {
            return Err("the format logs no time ($time_local, $time_iso8601, $msec, %t)".into());
        }
        if !has(Role::Request) && !(has(Role::Method) && (has(Role::Target) || has(Role::Path))) {
            return Err("the format logs no request ($request, or $request_method with $request_uri; %r, or %m with %U)".into());
        }
        if !has(Role::Status) {
            return Err("the format logs no status ($status, %>s)".into());
        }
        if has(Role::CookieHeader) && session_cookie.is_none() && !cookie_field {
            return Err("the format logs the Cookie header: say which cookie is the session with --session-cookie NAME".into());
        }
        for pair in parts.windows(2) {
            if let [Part::Field(_), Part::Field(_)] = pair {
                return Err("two fields with nothing between them cannot be told apart".into());
            }
        }
        Ok(CustomFormat {
            parts,
            session_cookie: session_cookie.map(str::to_string),
        })
    }

    pub(crate) fn parse(&self, line: &str) -> Result<LogEntry, String> {
        let mut rest = line.trim_end_matches(['\r', '\n']);
        let mut e = LogEntry {
            time: f64::NAN,
            client: String::new(),
            agent: String::new(),
            session: None,
            method: String::new(),
            target: String::new(),
            status: 0,
        };
        let (mut path, mut query) = (None::<String>, None::<String>);
        let mut i = 0;
        while i < self.parts.len() {
            match &self.parts[i] {
                Part::Literal(l) => {
                    rest = rest
                        .strip_prefix(l.as_str())
                        .ok_or_else(|| format!("expected `{l}` at `{}`", excerpt(rest, 40)))?;
                }
                Part::Field(role) => {
                    let value = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => {
                            let end = find_unescaped(rest, next).ok_or_else(|| {
                                format!(
                                    "expected `{next}` after a field at `{}`",
                                    excerpt(rest, 40)
                                )
                            })?;
                            let v = &rest[..end];
                            rest = &rest[end..];
                            v
                        }
                        _ => std::mem::take(&mut rest),
                    };
                    let value = unescape(value);
                    let dash = value == "-";
                    match role {
                        Role::Client => e.client = value,
                        Role::ClfTime => {
                            let t = value.trim_start_matches('[').trim_end_matches(']');
                            e.time = parse_clf_time(t).ok_or_else(|| {
                                format!("`{t}` is not a time like 10/Oct/2000:13:55:36 -0700")
                            })?;
                        }
                        Role::IsoTime => {
                            e.time = parse_rfc3339(&value)
                                .ok_or_else(|| format!("`{value}` is not an ISO 8601 time"))?;
                        }
                        Role::EpochTime => {
                            e.time = value
                                .parse::<f64>()
                                .ok()
                                .filter(|t| t.is_finite() && *t > 0.0)
                                .ok_or_else(|| {
                                    format!("`{value}` is not seconds since the epoch")
                                })?;
                        }
                        Role::Request => {
                            let (m, t) = request_line(&value)?;
                            e.method = m;
                            e.target = t;
                        }
                        Role::Method => {
                            check_method(&value)?;
                            e.method = value;
                        }
                        Role::Target => e.target = origin_form(&value)?,
                        Role::Path => path = Some(value),
                        Role::Query => query = (!dash && !value.is_empty()).then_some(value),
                        Role::Status => {
                            e.status = value
                                .parse::<u16>()
                                .ok()
                                .filter(|s| (100..1000).contains(s))
                                .ok_or_else(|| format!("`{value}` is not a status"))?;
                        }
                        Role::Agent => e.agent = value,
                        Role::SessionCookie(_) => {
                            e.session = (!dash && !value.is_empty()).then_some(value)
                        }
                        Role::CookieHeader => {
                            if let Some(name) = &self.session_cookie {
                                e.session = cookie_value(&value, name);
                            }
                        }
                        Role::Skip => {}
                    }
                }
            }
            i += 1;
        }
        if e.target.is_empty() {
            if let Some(p) = path {
                let mut t = origin_form(&p)?;
                if let Some(q) = query {
                    t.push('?');
                    t.push_str(q.trim_start_matches('?'));
                }
                e.target = t;
            }
        }
        if e.method.is_empty() || e.target.is_empty() {
            return Err("no method and path in the line".into());
        }
        Ok(e)
    }
}

/// The byte offset of the first `needle` in `s` not escaped by a backslash.
fn find_unescaped(s: &str, needle: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = s[from..].find(needle) {
        let at = from + at;
        let backslashes = s[..at].bytes().rev().take_while(|&b| b == b'\\').count();
        if backslashes % 2 == 0 {
            return Some(at);
        }
        from = at + needle.len().max(1);
    }
    None
}

fn cookie_value(header: &str, name: &str) -> Option<String> {
    header
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

fn push_literal(parts: &mut Vec<Part>, text: &str) {
    if text.is_empty() {
        return;
    }
    match parts.last_mut() {
        Some(Part::Literal(l)) => l.push_str(text),
        _ => parts.push(Part::Literal(text.to_string())),
    }
}

fn nginx_role(name: &str) -> Role {
    match name {
        "remote_addr" | "binary_remote_addr" => Role::Client,
        "time_local" => Role::ClfTime,
        "time_iso8601" => Role::IsoTime,
        "msec" => Role::EpochTime,
        "request" => Role::Request,
        "request_method" => Role::Method,
        "request_uri" => Role::Target,
        "uri" | "document_uri" => Role::Path,
        "args" | "query_string" => Role::Query,
        "status" => Role::Status,
        "http_user_agent" => Role::Agent,
        "http_cookie" => Role::CookieHeader,
        n if n.starts_with("cookie_") => Role::SessionCookie(n["cookie_".len()..].to_string()),
        _ => Role::Skip,
    }
}

fn nginx(spec: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = spec;
    while let Some(at) = rest.find('$') {
        push_literal(&mut parts, &rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').ok_or("a `${` without its `}`")?;
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name.is_empty() {
            return Err("a `$` without a variable name".into());
        }
        parts.push(Part::Field(nginx_role(name)));
        rest = tail;
    }
    push_literal(&mut parts, rest);
    Ok(parts)
}

fn apache(spec: &str) -> Result<Vec<Part>, String> {
    let spec = spec.replace("\\\"", "\"");
    let mut parts = Vec::new();
    let mut rest = spec.as_str();
    while let Some(at) = rest.find('%') {
        push_literal(&mut parts, &rest[..at]);
        let mut after = &rest[at + 1..];
        if let Some(t) = after.strip_prefix('%') {
            push_literal(&mut parts, "%");
            rest = t;
            continue;
        }
        // Modifiers: `%>s`, `%<s`, `%400,501{…}i`.
        after = after.trim_start_matches([
            '>', '<', '!', ',', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
        ]);
        let (arg, after) = match after.strip_prefix('{') {
            Some(b) => {
                let end = b.find('}').ok_or("a `%{` without its `}`")?;
                (Some(&b[..end]), &b[end + 1..])
            }
            None => (None, after),
        };
        let directive = after
            .chars()
            .next()
            .ok_or("a `%` at the end of the format")?;
        let role = match (directive, arg) {
            ('h' | 'a', _) => Role::Client,
            ('t', None) => Role::ClfTime,
            ('t', Some(_)) => {
                return Err("`%{…}t` time formats are not read: log %t or $time_iso8601".into())
            }
            ('r', _) => Role::Request,
            ('m', _) => Role::Method,
            ('U', _) => Role::Path,
            ('q', _) => Role::Query,
            ('s', _) => Role::Status,
            ('i', Some(h)) if h.eq_ignore_ascii_case("user-agent") => Role::Agent,
            ('i', Some(h)) if h.eq_ignore_ascii_case("cookie") => Role::CookieHeader,
            ('C', Some(name)) => Role::SessionCookie(name.to_string()),
            _ => Role::Skip,
        };
        parts.push(Part::Field(role));
        rest = &after[directive.len_utf8()..];
    }
    push_literal(&mut parts, rest);
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_format_with_a_session_cookie() {
        let f = CustomFormat::compile(
            r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time sid=$cookie_sid"#,
            None,
        )
        .unwrap();
        let e = f
            .parse(r#"10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /p/1?x=2 HTTP/1.1" 200 51 "-" "Mozilla \x22quoted\x22" rt=0.003 sid=abc123"#)
            .unwrap();
        assert_eq!(
            (e.method.as_str(), e.target.as_str(), e.status),
            ("GET", "/p/1?x=2", 200)
        );
        assert_eq!(e.agent, "Mozilla \"quoted\"");
        assert_eq!(e.session.as_deref(), Some("abc123"));
        // With several cookies logged, the one named is the session.
        let two = "$remote_addr [$time_local] \"$request\" $status $cookie_lang $cookie_sid";
        let line = r#"1.2.3.4 [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 en s9"#;
        assert_eq!(
            CustomFormat::compile(two, None)
                .unwrap()
                .parse(line)
                .unwrap()
                .session
                .as_deref(),
            Some("en")
        );
        assert_eq!(
            CustomFormat::compile(two, Some("sid"))
                .unwrap()
                .parse(line)
                .unwrap()
                .session
                .as_deref(),
            Some("s9")
        );
        assert_eq!(e.time, 971_211_336.0);
        assert!(f.parse("garbage").is_err());
    }

    #[test]
    fn apache_format_with_the_cookie_header() {
        let f = CustomFormat::compile(
            r#"%h %l %u %t \"%r\" %>s %b \"%{User-agent}i\" \"%{Cookie}i\""#,
            Some("JSESSIONID"),
        )
        .unwrap();
        let e = f
            .parse(r#"::1 - bob [01/Mar/2024:10:00:00 +0000] "POST /cart HTTP/1.1" 303 - "curl/8" "a=1; JSESSIONID=s77; b=2""#)
            .unwrap();
        assert_eq!(
            (e.method.as_str(), e.target.as_str(), e.status),
            ("POST", "/cart", 303)
        );
        assert_eq!(
            (e.client.as_str(), e.session.as_deref()),
            ("::1", Some("s77"))
        );
        // Method, path and query apart; an ISO time.
        let f = CustomFormat::compile(
            "$time_iso8601 $remote_addr $request_method $uri $args $status",
            None,
        )
        .unwrap();
        let e = f
            .parse("2024-03-01T10:00:00+00:00 1.2.3.4 GET /s q=shoes 200")
            .unwrap();
        assert_eq!(e.target, "/s?q=shoes");
    }

    #[test]
    fn formats_that_cannot_work_are_refused() {
        for (spec, cookie, want) in [
            ("plain text", None, "no field"),
            ("$remote_addr $status", None, "no time"),
            ("$remote_addr [$time_local] $status", None, "no request"),
            ("$remote_addr [$time_local] \"$request\"", None, "no status"),
            (
                "$remote_addr [$time_local] \"$request\" $status \"$http_cookie\"",
                None,
                "--session-cookie",
            ),
            (
                "$remote_addr$remote_user [$time_local] \"$request\" $status",
                None,
                "nothing between",
            ),
            ("%h %{%d/%b}t \"%r\" %>s", None, "time formats"),
        ] {
            let e = CustomFormat::compile(spec, cookie).unwrap_err();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }
}
