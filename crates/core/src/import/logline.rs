//! One access-log line into an entry: the NCSA common and combined formats
//! (Apache's and nginx's defaults) and JSON lines with configurable field
//! names, and the detection of which one a file is written in.

use serde_json::Value;

use super::clock::{parse_clf_time, parse_rfc3339};
use super::custom::CustomFormat;
use super::entry::{check_method, excerpt, origin_form, request_line, unescape, LogEntry};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFormat {
    /// `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`, more
    /// fields after them allowed (nginx setups often add some).
    Combined,
    /// `%h %l %u %t "%r" %>s %b`.
    Common,
    Json(JsonFields),
    /// nginx's `log_format` or Apache's `LogFormat` as the server had it.
    Custom(CustomFormat),
}

impl LogFormat {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            LogFormat::Combined => "combined",
            LogFormat::Common => "common",
            LogFormat::Json(_) => "json",
            LogFormat::Custom(_) => "custom",
        }
    }

    pub fn parse(&self, line: &str) -> Result<LogEntry, String> {
        match self {
            LogFormat::Combined => parse_ncsa(line, true),
            LogFormat::Common => parse_ncsa(line, false),
            LogFormat::Json(fields) => fields.parse(line),
            LogFormat::Custom(f) => f.parse(line),
        }
    }
}

/// Which JSON field holds what. Each role tries its names in order; the
/// defaults cover nginx's and Apache's usual JSON log setups and common
/// log shippers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonFields {
    pub time: Vec<String>,
    pub client: Vec<String>,
    pub agent: Vec<String>,
    pub method: Vec<String>,
    pub path: Vec<String>,
    /// The whole request line (`GET /x HTTP/1.1`), used when method and
    /// path are not logged apart.
    pub request: Vec<String>,
    pub status: Vec<String>,
    /// Groups requests into sessions instead of client and agent (a
    /// session cookie or a user id the server logs).
    pub session: Vec<String>,
}

impl Default for JsonFields {
    fn default() -> Self {
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        JsonFields {
            time: v(&[
                "time",
                "timestamp",
                "@timestamp",
                "ts",
                "time_iso8601",
                "time_local",
                "msec",
            ]),
            client: v(&[
                "remote_addr",
                "client",
                "client_ip",
                "ip",
                "remote_ip",
                "clientip",
            ]),
            agent: v(&["http_user_agent", "user_agent", "agent", "ua", "useragent"]),
            method: v(&["request_method", "method", "verb"]),
            path: v(&["request_uri", "uri", "path", "url"]),
            request: v(&["request"]),
            status: v(&["status", "status_code", "code", "response"]),
            session: Vec::new(),
        }
    }
}

impl JsonFields {
    /// `role=name` pairs (`time=ts,client=addr`) put first in their role's
    /// list; `session=name` sets the session field.
    pub fn with_overrides(mut self, spec: &str) -> Result<JsonFields, String> {
        for pair in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (role, name) = pair
                .split_once('=')
                .ok_or_else(|| format!("expected ROLE=FIELD, found `{pair}`"))?;
            let list = match role.trim() {
                "time" => &mut self.time,
                "client" => &mut self.client,
                "agent" => &mut self.agent,
                "method" => &mut self.method,
                "path" => &mut self.path,
                "request" => &mut self.request,
                "status" => &mut self.status,
                "session" => &mut self.session,
                other => {
                    return Err(format!(
                        "unknown role `{other}`: expected time, client, agent, method, path, request, status or session"
                    ))
                }
            };
            list.insert(0, name.trim().to_string());
        }
        Ok(self)
    }

    fn parse(&self, line: &str) -> Result<LogEntry, String> {
        let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let obj = value.as_object().ok_or("not a JSON object")?;
        let find = |names: &[String]| names.iter().find_map(|n| obj.get(n.as_str()));
        let text = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let time = match find(&self.time).ok_or("no time field")? {
            Value::Number(n) => epoch_number(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => parse_time_text(s),
            _ => None,
        }
        .ok_or("a time field that is not a time")?;
        let client = find(&self.client).and_then(text).unwrap_or_default();
        let agent = find(&self.agent).and_then(text).unwrap_or_default();
        let session = find(&self.session)
            .and_then(text)
            .filter(|s| !s.is_empty() && s != "-");
        let (method, target) = match (
            find(&self.method).and_then(text),
            find(&self.path).and_then(text),
        ) {
            (Some(m), Some(p)) => (m, p),
            (m, p) => {
                let line = find(&self.request)
                    .and_then(text)
                    .ok_or("no method and path (nor a request line)")?;
                let (lm, lp) = request_line(&line)?;
                (m.unwrap_or(lm), p.unwrap_or(lp))
            }
        };
        let status = find(&self.status)
            .and_then(text)
            .and_then(|s| s.trim().parse::<u16>().ok())
            .ok_or("no status")?;
        check_method(&method)?;
        Ok(LogEntry {
            time,
            client,
            agent,
            session,
            method,
            target: origin_form(&target)?,
            status,
        })
    }
}

/// A number as epoch seconds, or milliseconds when too large to be seconds.
fn epoch_number(n: f64) -> Option<f64> {
    if !n.is_finite() || n <= 0.0 {
        None
    } else if n > 1e11 {
        Some(n / 1000.0)
    } else {
        Some(n)
    }
}

fn parse_time_text(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<f64>() {
        return epoch_number(n);
    }
    parse_rfc3339(s).or_else(|| parse_clf_time(s))
}

/// The NCSA formats, field by field; `combined` wants the referer and user
/// agent after the size.
fn parse_ncsa(line: &str, combined: bool) -> Result<LogEntry, String> {
    let mut rest = line.trim_end_matches(['\r', '\n']);
    let mut word = |what: &str| -> Result<&str, String> {
        let r = rest.trim_start_matches(' ');
        let end = r
            .find(' ')
            .ok_or_else(|| format!("the line ends before {what}"))?;
        rest = &r[end..];
        Ok(&r[..end])
    };
    let client = word("the ident field")?.to_string();
    word("the user field")?;
    // The user may hold spaces in odd setups: the time starts at the next `[`.
    let open = rest.find('[').ok_or("no [time]")?;
    let close = rest[open..].find(']').ok_or("no ] after the time")? + open;
    let time = parse_clf_time(&rest[open + 1..close]).ok_or_else(|| {
        format!(
            "`{}` is not a time like 10/Oct/2000:13:55:36 -0700",
            &rest[open + 1..close]
        )
    })?;
    rest = &rest[close + 1..];
    let (request, after) = quoted(rest).ok_or("no quoted request line")?;
    rest = after;
    let (method, target) = request_line(&request)?;
    let mut fields = rest.split_whitespace();
    let status = fields
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or("no status after the request")?;
    let size = fields.next().ok_or("no size after the status")?;
    if size != "-" && size.parse::<u64>().is_err() {
        return Err(format!("`{size}` is not a response size"));
    }
    let agent = if combined {
        let after_size = rest
            .trim_start()
            .split_once(' ')
            .and_then(|(_, r)| r.trim_start().split_once(' '))
            .map(|(_, r)| r)
            .ok_or("no referer and user agent (common format?)")?;
        let (_referer, r) = quoted(after_size).ok_or("no quoted referer (common format?)")?;
        let (agent, _) = quoted(r).ok_or("no quoted user agent")?;
        agent
    } else {
        String::new()
    };
    Ok(LogEntry {
        time,
        client,
        agent,
        session: None,
        method,
        target,
        status,
    })
}

/// The text of a leading `"…"` (escapes undone) and what follows.
fn quoted(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    let body = s.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some((unescape(&body[..i]), &body[i + 1..])),
            _ => {}
        }
    }
    None
}

/// The format most of `sample` (a file's first lines) parses in: the
/// first of combined, common and JSON that parses over half of them.
pub(crate) fn detect(sample: &[String], json: &JsonFields) -> Result<LogFormat, String> {
    let lines: Vec<&String> = sample.iter().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err("the file holds no log line".into());
    }
    let candidates = [
        LogFormat::Combined,
        LogFormat::Common,
        LogFormat::Json(json.clone()),
    ];
    let mut tried = Vec::new();
    for format in candidates {
        let mut first_error = None;
        let ok = lines
            .iter()
            .filter(|l| match format.parse(l) {
                Ok(_) => true,
                Err(e) => {
                    first_error.get_or_insert(e);
                    false
                }
            })
            .count();
        if ok * 2 > lines.len() {
            return Ok(format);
        }
        tried.push(format!(
            "{} ({ok} of {} lines; first failure: {})",
            format.name(),
            lines.len(),
            first_error.unwrap_or_default()
        ));
    }
    Err(format!(
        "no known log format fits its first lines; tried {}. First line: `{}`",
        tried.join(", "),
        excerpt(lines[0], 60)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMBINED: &str = r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?x=1 HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;

    #[test]
    fn combined_and_common_lines() {
        let e = LogFormat::Combined.parse(COMBINED).unwrap();
        assert_eq!(e.client, "127.0.0.1");
        assert_eq!(e.method, "GET");
        assert_eq!(e.target, "/apache_pb.gif?x=1");
        assert_eq!(e.status, 200);
        assert_eq!(e.agent, "Mozilla/4.08 [en] (Win98; I ;Nav)");
        // 2000-10-10T20:55:36Z
        assert_eq!(e.time, 971_211_336.0);
        let common = r#"10.0.0.2 - - [10/Oct/2000:13:55:36 +0000] "POST /login HTTP/1.1" 303 -"#;
        let c = LogFormat::Common.parse(common).unwrap();
        assert_eq!(
            (c.method.as_str(), c.target.as_str(), c.status),
            ("POST", "/login", 303)
        );
        assert!(LogFormat::Combined.parse(common).is_err());
        // An escaped quote in the agent; a proxy's absolute target.
        let odd = r#"::1 - - [01/Jan/2024:00:00:00 +0000] "GET http://h:80/a/b HTTP/1.1" 404 12 "-" "say \"hi\"" 0.003"#;
        let o = LogFormat::Combined.parse(odd).unwrap();
        assert_eq!(
            (o.target.as_str(), o.agent.as_str()),
            ("/a/b", "say \"hi\"")
        );
        // nginx's escapes: a quote and UTF-8 bytes.
        let nginx = r#"::1 - - [01/Jan/2024:00:00:00 +0000] "GET /caf\xC3\xA9 HTTP/1.1" 200 1 "-" "a \x22b\x22""#;
        let n = LogFormat::Combined.parse(nginx).unwrap();
        assert_eq!((n.target.as_str(), n.agent.as_str()), ("/café", "a \"b\""));
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        for (line, want) in [
            ("", "ends before"),
            (
                r#"1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 1 "-" "x""#,
                "not a time",
            ),
            (
                r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03\x01" 400 0 "-" "-""#,
                "not METHOD TARGET",
            ),
            (
                r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" abc 1 "-" "-""#,
                "no status",
            ),
        ] {
            let e = LogFormat::Combined.parse(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn json_lines_with_default_and_chosen_fields() {
        let f = JsonFields::default();
        let e = LogFormat::Json(f.clone())
            .parse(r#"{"time":"2024-03-01T12:00:00.250Z","remote_addr":"10.1.1.1","request":"GET /p/1 HTTP/2.0","status":"200","http_user_agent":"ua"}"#)
            .unwrap();
        assert_eq!(
            (e.method.as_str(), e.target.as_str(), e.status),
            ("GET", "/p/1", 200)
        );
        assert_eq!(e.time, 1_709_294_400.25);
        let f = f
            .with_overrides("time=t, client=who, session=user")
            .unwrap();
        let e = LogFormat::Json(f)
            .parse(r#"{"t":1709294400123,"who":"a","user":"u7","method":"POST","path":"/x","status":201}"#)
            .unwrap();
        assert_eq!(e.time, 1_709_294_400.123);
        assert_eq!((e.client.as_str(), e.session.as_deref()), ("a", Some("u7")));
        assert!(JsonFields::default().with_overrides("colour=red").is_err());
    }

    #[test]
    fn detection_names_what_it_tried() {
        let lines = vec![COMBINED.to_string(); 3];
        assert_eq!(
            detect(&lines, &JsonFields::default()).unwrap(),
            LogFormat::Combined
        );
        let common: Vec<String> =
            vec![r#"h - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5"#.into()];
        assert_eq!(
            detect(&common, &JsonFields::default()).unwrap(),
            LogFormat::Common
        );
        let e = detect(&["hello world".to_string()], &JsonFields::default()).unwrap_err();
        assert!(
            e.contains("combined") && e.contains("common") && e.contains("json"),
            "{e}"
        );
    }
}
