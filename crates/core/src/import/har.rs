//! A HAR recording (HTTP Archive 1.2, what browsers' developer tools and
//! proxies save) into a scenario of the one journey it holds:
//!
//! - the requests in order, on the recording's main origin (third-party
//!   hosts and static assets left out, counted);
//! - a redirect and the request that followed it are one step, since
//!   autoperf follows redirects itself (cookies too: its jar keeps them);
//! - headers worth keeping (not the ones the client sets itself), POST
//!   bodies as `form:`, `json:` or `body:`;
//! - correlation: a value a later request sends that an earlier answer
//!   gave — a JSON field, a hidden form field, a response header — becomes
//!   an `extract` on that answer and `${variable}` in the request, unless
//!   the user sent it before any answer had it (then it is typed input);
//! - a status check on every step, and the recording's pauses as each
//!   step's think time.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::scenario::decode::requests::is_token;

use super::classes::{identifier, looks_like_id, safe_name, unique_name, Template};
use super::clock::parse_rfc3339;
use super::graph::{Edge, Graph};
use super::report::{ImportReport, ReportClass, Skipped};
use super::write::{comment, literal, ms, q, uri_literal};
use super::{report, scenario_name, write_file, ImportError, Outputs};

#[derive(Debug, Clone, Default)]
pub struct HarOptions {
    /// Replaces the recording's origin as the scenario's base URL.
    pub base_url: Option<String>,
    /// Paths with these extensions are assets, left out (none when empty).
    pub static_extensions: Vec<String>,
}

#[derive(Deserialize)]
struct Har {
    log: HarLog,
}

#[derive(Deserialize)]
struct HarLog {
    #[serde(default)]
    entries: Vec<Entry>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    started_date_time: String,
    #[serde(default)]
    time: f64,
    request: HarRequest,
    response: HarResponse,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct HarRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<NameValue>,
    #[serde(default)]
    post_data: Option<PostData>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct PostData {
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    params: Vec<NameValue>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct HarResponse {
    #[serde(default)]
    status: u16,
    #[serde(default)]
    headers: Vec<NameValue>,
    #[serde(default)]
    content: Content,
    #[serde(default, rename = "redirectURL")]
    redirect_url: String,
}

#[derive(Deserialize, Clone, Default)]
#[serde(rename_all = "camelCase")]
struct Content {
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
}

#[derive(Deserialize, Clone)]
struct NameValue {
    name: String,
    #[serde(default)]
    value: String,
}

/// Headers the client sets itself, that would replay stale state, or
/// whose name no HTTP/1.1 message can carry (a broken recording's).
fn dropped_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    !is_token(&n)
        || n.starts_with("sec-")
        || [
            "host",
            "content-length",
            "connection",
            "cookie",
            "accept-encoding",
            "accept-language",
            "user-agent",
            "referer",
            "origin",
            "upgrade-insecure-requests",
            "priority",
            "te",
            "keep-alive",
            "cache-control",
            "pragma",
            "if-none-match",
            "if-modified-since",
            "dnt",
            "content-type",
            "transfer-encoding",
        ]
        .contains(&n.as_str())
}

/// One step of the journey: a request and, after its redirects, the
/// answer it ended with.
struct Step {
    method: String,
    origin: String,
    /// Path and query.
    target: String,
    headers: Vec<(String, String)>,
    body: Option<StepBody>,
    final_status: u16,
    final_headers: Vec<(String, String)>,
    final_body: String,
    final_mime: String,
    start: f64,
    end: f64,
    redirects: usize,
}

enum StepBody {
    Form(Vec<(String, String)>),
    Json(Value),
    Raw { mime: String, text: String },
}

/// An http(s) URL's origin (a base URL a scenario takes: a host, a port
/// other than 0) and its path and query.
fn split_url(url: &str) -> Option<(String, String)> {
    let u = url::Url::parse(url).ok()?;
    let web = matches!(u.scheme(), "http" | "https") && u.host().is_some();
    if !web || u.port() == Some(0) {
        return None;
    }
    let origin = u.origin().ascii_serialization();
    let mut target = u.path().to_string();
    if let Some(q) = u.query() {
        target.push('?');
        target.push_str(q);
    }
    Some((origin, target))
}

fn body_text(c: &Content) -> String {
    let Some(text) = &c.text else {
        return String::new();
    };
    if c.encoding.as_deref() == Some("base64") {
        use base64::Engine;
        return base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
    }
    text.clone()
}

fn time_of(e: &Entry) -> f64 {
    parse_rfc3339(&e.started_date_time).unwrap_or(0.0)
}

fn is_static(target: &str, mime: &str, exts: &[String]) -> bool {
    let path = target.split('?').next().unwrap_or("");
    let ext = path
        .rsplit('/')
        .next()
        .and_then(|l| l.rsplit_once('.'))
        .map(|(_, x)| x.to_ascii_lowercase());
    ext.is_some_and(|x| exts.contains(&x))
        || mime.starts_with("image/")
        || mime.starts_with("font/")
        || mime.starts_with("text/css")
        || mime.contains("javascript")
}

/// The journey's steps, redirects folded.
fn steps(
    entries: Vec<Entry>,
    exts: &[String],
    skipped: &mut BTreeMap<&'static str, u64>,
) -> Vec<Step> {
    let mut entries = entries;
    entries.sort_by(|a, b| time_of(a).total_cmp(&time_of(b)));
    let main = entries
        .iter()
        .find(|e| e.response.content.mime_type.contains("html"))
        .or(entries.first())
        .and_then(|e| split_url(&e.request.url))
        .map(|(o, _)| o)
        .unwrap_or_default();
    let mut out: Vec<Step> = Vec::new();
    // The step a redirect of the last one leads to, if any.
    let mut pending: Option<String> = None;
    for e in entries {
        let Some((origin, target)) = split_url(&e.request.url) else {
            *skipped.entry("not an http(s) URL").or_default() += 1;
            continue;
        };
        if origin != main {
            *skipped.entry("third-party hosts").or_default() += 1;
            continue;
        }
        if super::entry::check_method(&e.request.method.to_ascii_uppercase()).is_err() {
            *skipped.entry("requests with an odd method").or_default() += 1;
            continue;
        }
        if !(100..=599).contains(&e.response.status) {
            // Blocked or aborted in the browser (0), or no HTTP status at
            // all: no answer to replay.
            *skipped.entry("requests without an answer").or_default() += 1;
            continue;
        }
        let start = time_of(&e);
        let end = start + e.time.max(0.0) / 1000.0;
        let status = e.response.status;
        let headers: Vec<(String, String)> = e
            .response
            .headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        let location = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.clone())
            .or_else(|| {
                (!e.response.redirect_url.is_empty()).then(|| e.response.redirect_url.clone())
            });
        let next_location = if (300..400).contains(&status) {
            location.and_then(|l| {
                url::Url::parse(&e.request.url)
                    .ok()?
                    .join(&l)
                    .ok()
                    .map(|u| u.to_string())
            })
        } else {
            None
        };
        if pending.as_deref() == Some(e.request.url.as_str()) {
            // The hop autoperf makes itself: it completes the last step.
            let last = out.last_mut().expect("a pending redirect has a step");
            last.final_status = status;
            last.final_headers = headers;
            last.final_body = body_text(&e.response.content);
            last.final_mime = e.response.content.mime_type.clone();
            last.end = last.end.max(end);
            last.redirects += 1;
            pending = next_location;
            continue;
        }
        pending = None;
        if is_static(&target, &e.response.content.mime_type, exts) {
            *skipped.entry("static assets").or_default() += 1;
            continue;
        }
        let body = e.request.post_data.as_ref().and_then(|p| {
            let text = p.text.clone().unwrap_or_default();
            if p.mime_type.contains("x-www-form-urlencoded") {
                let pairs: Vec<(String, String)> = if p.params.is_empty() {
                    url::form_urlencoded::parse(text.as_bytes())
                        .into_owned()
                        .collect()
                } else {
                    p.params
                        .iter()
                        .map(|nv| (nv.name.clone(), nv.value.clone()))
                        .collect()
                };
                Some(StepBody::Form(pairs))
            } else if p.mime_type.contains("json") {
                // Not JSON after all (NDJSON, a broken recording): as written.
                Some(match serde_json::from_str(&text) {
                    Ok(v) => StepBody::Json(v),
                    Err(_) => StepBody::Raw {
                        mime: p.mime_type.clone(),
                        text,
                    },
                })
            } else if text.is_empty() {
                None
            } else {
                Some(StepBody::Raw {
                    mime: p.mime_type.clone(),
                    text,
                })
            }
        });
        out.push(Step {
            method: e.request.method.to_ascii_uppercase(),
            origin,
            target,
            headers: e
                .request
                .headers
                .iter()
                .filter(|h| !dropped_header(&h.name))
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            body,
            final_status: status,
            final_headers: headers,
            final_body: body_text(&e.response.content),
            final_mime: e.response.content.mime_type.clone(),
            start,
            end,
            redirects: 0,
        });
        pending = next_location;
    }
    out
}

/// A value an answer gave, and how to take it from there.
struct Source {
    step: usize,
    value: String,
    /// The variable's name (from the field that held it).
    hint: String,
    extract: String,
}

/// Worth correlating: an identifier or token, not a word like `true`.
/// Numbers of three digits or more, identifiers mixing letters and
/// digits, and long digit-free tokens: not `20` (a page size), not
/// `products` (a word of the site).
fn correlatable(v: &str) -> bool {
    let n = v.len();
    if n > 4096 || v.contains(['\n', '\r']) {
        return false;
    }
    let digits = v.bytes().filter(u8::is_ascii_digit).count();
    if digits == n {
        n >= 3
    } else if digits > 0 {
        n >= 2
    } else {
        n >= 16 && !v.contains(' ')
    }
}

fn json_sources(v: &Value, path: &mut String, hint: &str, step: usize, out: &mut Vec<Source>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let len = path.len();
                let simple =
                    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty();
                if simple {
                    let _ = write!(path, ".{k}");
                } else {
                    let _ = write!(
                        path,
                        "[{}]",
                        serde_json::to_string(k)
                            .unwrap_or_default()
                            .replace('"', "'")
                    );
                }
                json_sources(x, path, k, step, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                json_sources(x, path, hint, step, out);
                path.truncate(len);
            }
        }
        Value::String(s) if correlatable(s) => out.push(Source {
            step,
            value: s.clone(),
            hint: hint.to_string(),
            extract: format!("{{json: {}}}", q(path)),
        }),
        Value::Number(n) if correlatable(&n.to_string()) => out.push(Source {
            step,
            value: n.to_string(),
            hint: hint.to_string(),
            extract: format!("{{json: {}}}", q(path)),
        }),
        _ => {}
    }
}

/// Values each step's answer carried: JSON fields, hidden inputs of a
/// form, response headers other than cookies.
fn sources(steps: &[Step]) -> Vec<Source> {
    // Hidden inputs (name before value, or after) and meta tags such as
    // Rails' and Laravel's `<meta name="csrf-token" content="…">`.
    let forms = [
        (
            r#"<input[^>]*name="([^"]+)"[^>]*value="([^"]*)""#,
            r#"name="{}"[^>]*value="([^"]*)""#,
            false,
        ),
        (
            r#"<input[^>]*value="([^"]*)"[^>]*name="([^"]+)""#,
            r#"value="([^"]*)"[^>]*name="{}""#,
            true,
        ),
        (
            r#"<meta[^>]*name="([^"]+)"[^>]*content="([^"]*)""#,
            r#"name="{}"[^>]*content="([^"]*)""#,
            false,
        ),
    ]
    .map(|(find, take, value_first)| {
        (
            regex::Regex::new(find).expect("a valid regex"),
            take,
            value_first,
        )
    });
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        if s.final_mime.contains("json") {
            if let Ok(v) = serde_json::from_str::<Value>(&s.final_body) {
                json_sources(&v, &mut "$".to_string(), "value", i, &mut out);
            }
        } else if s.final_mime.contains("html") {
            for (find, take, value_first) in &forms {
                for c in find.captures_iter(&s.final_body) {
                    let (name, value) = if *value_first {
                        (&c[2], &c[1])
                    } else {
                        (&c[1], &c[2])
                    };
                    let value = value.replace("&amp;", "&");
                    if correlatable(&value) {
                        out.push(Source {
                            step: i,
                            value,
                            hint: name.to_string(),
                            extract: format!(
                                "{{regex: {}}}",
                                q(&take.replace("{}", &regex::escape(name)))
                            ),
                        });
                    }
                }
            }
        }
        for (name, value) in &s.final_headers {
            // An application's own headers carry tokens; standard ones
            // (content-type, server, date…) only coincide with requests.
            let n = name.to_ascii_lowercase();
            let own = n.starts_with("x-")
                || ["token", "csrf", "auth", "key", "session"]
                    .iter()
                    .any(|w| n.contains(w));
            if !own || n == "set-cookie" || !is_token(&n) {
                continue;
            }
            if correlatable(value) {
                out.push(Source {
                    step: i,
                    value: value.clone(),
                    hint: n.replace('-', "_"),
                    extract: format!("{{header: {}}}", q(name)),
                });
            }
        }
    }
    out
}

/// A variable name from a field name: `csrf`, `product_id`.
fn var_name(hint: &str, used: &mut HashSet<String>) -> String {
    unique_name(safe_name(identifier(hint)), used)
}

/// The correlations made: on each step, the variables it extracts; and the
/// variable each value of a request is replaced by.
struct Correlator<'a> {
    sources: Vec<Source>,
    /// Values the user sent before an answer held them (typed input).
    typed: Vec<(String, usize)>,
    steps: &'a [Step],
    vars: HashSet<String>,
    /// (source index) → variable.
    bound: BTreeMap<usize, String>,
    extracts: BTreeMap<usize, Vec<(String, String)>>,
    notes: Vec<String>,
}

impl Correlator<'_> {
    /// The variable for `value` sent by step `at`, if an earlier answer
    /// gave it.
    fn var_for(&mut self, value: &str, at: usize) -> Option<String> {
        if !correlatable(value) {
            return None;
        }
        // The latest answer that had it, and there its first place.
        let step = self
            .sources
            .iter()
            .filter(|s| s.step < at && s.value == value)
            .map(|s| s.step)
            .max()?;
        let idx = self
            .sources
            .iter()
            .position(|s| s.step == step && s.value == value)?;
        let src_step = self.sources[idx].step;
        // Sent before that answer came: the user's own input.
        if self
            .typed
            .iter()
            .any(|(v, step)| v == value && *step <= src_step)
        {
            return None;
        }
        if let Some(v) = self.bound.get(&idx) {
            return Some(v.clone());
        }
        let name = var_name(&self.sources[idx].hint, &mut self.vars);
        self.extracts
            .entry(src_step)
            .or_default()
            .push((name.clone(), self.sources[idx].extract.clone()));
        self.notes.push(format!(
            "`{value}` from the answer to step {} ({} {}) into `${{{name}}}`",
            src_step + 1,
            self.steps[src_step].method,
            self.steps[src_step].target
        ));
        self.bound.insert(idx, name.clone());
        Some(name)
    }

    /// A part of a URL: as `template`, bytes no URI may hold encoded.
    fn uri_template(&mut self, text: &str, at: usize) -> String {
        if let Some(v) = self.var_for(text, at) {
            return format!("${{raw({v})}}");
        }
        // Percent-encoded in the URL (a token with `+/=`): the answer had
        // it decoded; the template encodes it again.
        let decoded = url::form_urlencoded::parse(format!("x={text}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if decoded != text {
            if let Some(v) = self.var_for(&decoded, at) {
                return format!("${{{v}}}");
            }
        }
        uri_literal(text)
    }

    /// `text` with whole values replaced by `${var}` (and `$` escaped).
    fn template(&mut self, text: &str, at: usize) -> String {
        match self.var_for(text, at) {
            Some(v) => format!("${{{v}}}"),
            None => literal(text),
        }
    }
}

/// Every value a request sends, for telling typed input from answers'.
fn sent_values(s: &Step) -> Vec<String> {
    let mut v: Vec<String> = s
        .target
        .split(['/', '?', '&', '='])
        .map(str::to_string)
        .collect();
    v.extend(s.headers.iter().map(|(_, x)| x.clone()));
    match &s.body {
        Some(StepBody::Form(pairs)) => v.extend(pairs.iter().map(|(_, x)| x.clone())),
        Some(StepBody::Json(j)) => collect_strings(j, &mut v),
        Some(StepBody::Raw { text, .. }) => v.push(text.clone()),
        None => {}
    }
    v
}

fn collect_strings(j: &Value, out: &mut Vec<String>) {
    match j {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// A JSON body as a template: string leaves that an answer gave become
/// `${var}` inside their quotes; `numbers` is set when a number did.
fn json_template(j: &Value, c: &mut Correlator, at: usize, numbers: &mut bool) -> String {
    match j {
        Value::String(s) => {
            let t = match c.var_for(s, at) {
                Some(v) => format!("${{{v}}}"),
                None => {
                    let quoted = serde_json::to_string(s).unwrap_or_default();
                    return literal(&quoted);
                }
            };
            format!("\"{t}\"")
        }
        Value::Number(n) => match c.var_for(&n.to_string(), at) {
            // A number from an answer stays a number: its digits go in
            // unquoted, which only a raw body can hold.
            Some(v) => {
                *numbers = true;
                format!("${{{v}}}")
            }
            None => n.to_string(),
        },
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|x| json_template(x, c, at, numbers))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!(
                    "{}: {}",
                    // Keys are not templates: as they are.
                    serde_json::to_string(k).unwrap_or_default(),
                    json_template(x, c, at, numbers)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// What the HAR import found and wrote.
pub struct HarSummary {
    pub steps: usize,
    pub correlations: Vec<String>,
    pub skipped: BTreeMap<&'static str, u64>,
    /// The scenario's text.
    pub yaml: String,
    pub report: ImportReport,
}

/// Reads `source`, writes the scenario, the page and its JSON.
pub fn import_har(
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
) -> Result<HarSummary, ImportError> {
    let text = std::fs::read_to_string(source).map_err(|e| ImportError::Read {
        path: source.to_path_buf(),
        source: e,
    })?;
    let summary = har_scenario(&text, source, options, out).map_err(|reason| ImportError::Har {
        path: source.to_path_buf(),
        reason,
    })?;
    write_file(&out.scenario, &summary.yaml)?;
    write_file(&out.report, &report::render(&summary.report))?;
    write_file(
        &out.json,
        &serde_json::to_string_pretty(&summary.report).expect("the report serialises"),
    )?;
    Ok(summary)
}

/// The scenario of the recording `text` (named after `source`, its report
/// as `out` says), nothing written.
pub fn har_scenario(
    text: &str,
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
) -> Result<HarSummary, String> {
    let har: Har = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a HAR recording (line {}, column {}: {e}); save one from the browser's developer tools (Network, \"Save all as HAR\")",
            e.line(),
            e.column()
        )
    })?;
    let exts = &options.static_extensions;
    let mut skipped = BTreeMap::new();
    let entries = har.log.entries.len();
    let steps = steps(har.log.entries, exts, &mut skipped);
    if steps.is_empty() {
        return Err(format!(
            "none of its {entries} entries is a request to import"
        ));
    }
    let base_url = options
        .base_url
        .clone()
        .unwrap_or_else(|| steps[0].origin.clone());

    let mut c = Correlator {
        sources: sources(&steps),
        typed: Vec::new(),
        steps: &steps,
        vars: HashSet::new(),
        bound: BTreeMap::new(),
        extracts: BTreeMap::new(),
        notes: Vec::new(),
    };
    // Values sent before any answer had them are the user's.
    {
        let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, s) in steps.iter().enumerate() {
            for v in sent_values(s) {
                first_seen.entry(v).or_insert(i);
            }
        }
        let answered: BTreeMap<&str, usize> = c
            .sources
            .iter()
            .rev()
            .map(|s| (s.value.as_str(), s.step))
            .collect();
        c.typed = first_seen
            .into_iter()
            .filter(|(v, at)| answered.get(v.as_str()).is_none_or(|&src| *at <= src))
            .collect();
    }

    // Names.
    let mut used = HashSet::new();
    let names: Vec<String> = steps
        .iter()
        .map(|s| {
            let segs: Vec<Option<String>> = super::classes::segments(&s.target)
                .into_iter()
                .map(|seg| (!looks_like_id(seg)).then(|| seg.to_string()))
                .collect();
            let t = Template {
                method: s.method.clone(),
                segments: segs,
                count: 1,
            };
            let base = if s.method == "GET" {
                t.base_name()
            } else {
                safe_name(format!("{}_{}", identifier(&s.method), t.base_name()))
            };
            unique_name(base, &mut used)
        })
        .collect();

    // The requests' text (templates first, so extractions are known).
    let mut bodies = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let mut r = String::new();
        if s.method != "GET" {
            let _ = writeln!(r, "    method: {}", q(&s.method));
        }
        let path: String = {
            let (path, query) = match s.target.split_once('?') {
                Some((p, q)) => (p, Some(q)),
                None => (s.target.as_str(), None),
            };
            let mut t: String = path
                .split('/')
                .map(|seg| {
                    if seg.is_empty() {
                        String::new()
                    } else {
                        c.uri_template(seg, i)
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            if let Some(query) = query {
                t.push('?');
                let parts: Vec<String> = query
                    .split('&')
                    .map(|kv| match kv.split_once('=') {
                        Some((k, v)) => format!("{}={}", uri_literal(k), c.uri_template(v, i)),
                        None => uri_literal(kv),
                    })
                    .collect();
                t.push_str(&parts.join("&"));
            }
            t
        };
        let _ = writeln!(r, "    path: {}", q(&path));
        let mut headers: Vec<(String, String)> = s
            .headers
            .iter()
            .map(|(name, value)| {
                let v = match value.split_once(' ') {
                    // `Bearer <token>`: the token alone is the value.
                    Some((scheme, token)) if name.eq_ignore_ascii_case("authorization") => {
                        format!("{} {}", literal(scheme), c.template(token, i))
                    }
                    _ => c.template(value, i),
                };
                (name.clone(), v)
            })
            .collect();
        let mut body = String::new();
        match &s.body {
            Some(StepBody::Form(pairs)) => {
                body.push_str("    form:\n");
                for (k, v) in pairs {
                    let _ = writeln!(body, "      {}: {}", q(k), q(&c.template(v, i)));
                }
            }
            Some(StepBody::Json(j)) => {
                let mut numbers = false;
                let t = json_template(j, &mut c, i, &mut numbers);
                if numbers {
                    headers.push(("Content-Type".into(), "application/json".into()));
                    let _ = writeln!(body, "    body: {}", q(&t));
                } else {
                    // JSON text is YAML too: `json:` takes it as written.
                    let _ = writeln!(body, "    json: {t}");
                }
            }
            Some(StepBody::Raw { mime, text }) => {
                headers.push(("Content-Type".into(), literal(mime)));
                let _ = writeln!(body, "    body: {}", q(&c.template(text, i)));
            }
            None => {}
        }
        if !headers.is_empty() {
            r.push_str("    headers:\n");
            for (name, value) in &headers {
                let _ = writeln!(r, "      {}: {}", q(name), q(value));
            }
        }
        r.push_str(&body);
        let _ = writeln!(
            r,
            "    check: {{status: [{}]}}{}",
            // The browser's cache made it a 304; the replay asks afresh.
            if s.final_status == 304 {
                "200, 304".to_string()
            } else {
                s.final_status.to_string()
            },
            if s.redirects > 0 {
                format!(
                    "   # after {} redirect{}",
                    s.redirects,
                    if s.redirects == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            }
        );
        if (300..400).contains(&s.final_status) && s.final_status != 304 {
            // The recording did not follow it here (off the origin, or a
            // hop left out): neither does the replay.
            r.push_str("    follow_redirects: false\n");
        }
        if let Some(next) = steps.get(i + 1) {
            let _ = writeln!(r, "    think_time: {}", ms((next.start - s.end).max(0.0)));
        }
        bodies.push(r);
    }

    let name = scenario_name(source);
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Imported by `autoperf import` from {} (HAR): one recorded journey of {} steps\n\
         # ({} entries; {}). Cookies and redirects are autoperf's own; values the\n\
         # answers gave are extracted and sent again ({} correlations). Report: {}",
        comment(&Outputs::name_of(source)),
        steps.len(),
        entries,
        if skipped.is_empty() {
            "nothing skipped".to_string()
        } else {
            skipped
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
                + " skipped"
        },
        c.notes.len(),
        comment(&Outputs::name_of(&out.report))
    );
    let _ = writeln!(y, "name: {}", q(&name));
    let _ = writeln!(y, "target:\n  base_url: {}", q(&base_url));
    y.push_str("think_time: 0s   # each step has the recording's own pause\nrequests:\n");
    for (i, body) in bodies.iter().enumerate() {
        let _ = writeln!(
            y,
            "  {}:   # {} {}",
            names[i],
            steps[i].method,
            comment(&steps[i].target)
        );
        y.push_str(body);
        if let Some(ex) = c.extracts.get(&i) {
            y.push_str("    extract:\n");
            for (var, how) in ex {
                let _ = writeln!(y, "      {var}: {how}");
            }
        }
    }
    let _ = writeln!(y, "session:\n  start: {}\n  transitions:", names[0]);
    for i in 0..steps.len() {
        match names.get(i + 1) {
            Some(next) => {
                let _ = writeln!(y, "    {}: {{{next}: 1}}", names[i]);
            }
            None => {
                let _ = writeln!(y, "    {}: {{}}", names[i]);
            }
        }
    }

    let n = steps.len();
    let graph = Graph {
        entries: vec![Edge {
            to: 0,
            probability: 1.0,
            count: 1,
        }],
        edges: (0..n)
            .map(|i| {
                if i + 1 < n {
                    vec![Edge {
                        to: i + 1,
                        probability: 1.0,
                        count: 1,
                    }]
                } else {
                    Vec::new()
                }
            })
            .collect(),
        exits: (0..n)
            .map(|i| if i + 1 == n { (1.0, 1) } else { (0.0, 0) })
            .collect(),
        out: vec![1; n],
        sessions: 1,
        arrivals_by_hour: Vec::new(),
    };
    let report = ImportReport {
        source: Outputs::name_of(source),
        kind: "HAR recording".into(),
        scenario: Outputs::name_of(&out.scenario),
        facts: vec![
            ("entries".into(), entries.to_string()),
            ("steps".into(), n.to_string()),
            (
                "redirects folded".into(),
                steps.iter().map(|s| s.redirects).sum::<usize>().to_string(),
            ),
            ("correlations".into(), c.notes.len().to_string()),
            (
                "recorded".into(),
                format!(
                    "{:.1} s",
                    steps.last().map_or(0.0, |l| l.end) - steps[0].start
                ),
            ),
        ],
        classes: steps
            .iter()
            .zip(&names)
            .map(|(s, name)| ReportClass {
                name: name.clone(),
                method: s.method.clone(),
                pattern: s.target.clone(),
                requests: 1,
                share: 1.0 / n as f64,
                statuses: s.final_status.to_string(),
                data_rows: 0,
            })
            .collect(),
        graph,
        think: None,
        skipped: skipped
            .iter()
            .map(|(k, v)| Skipped {
                what: k.to_string(),
                count: *v,
                why: match *k {
                    "third-party hosts" => "not the recording's main origin".into(),
                    "static assets" => "a browser fetches them with the page".into(),
                    _ => String::new(),
                },
            })
            .collect(),
        examples: Vec::new(),
        correlations: c.notes.clone(),
        notes: Vec::new(),
    };
    Ok(HarSummary {
        steps: n,
        correlations: c.notes,
        skipped,
        yaml: y,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A HAR entry's fields, in the order a recording gives them.
    #[allow(clippy::too_many_arguments)]
    fn entry(
        t: &str,
        method: &str,
        url: &str,
        req: Value,
        status: u16,
        headers: Value,
        mime: &str,
        body: &str,
    ) -> Value {
        let mut e = serde_json::json!({
            "startedDateTime": t, "time": 10,
            "request": {"method": method, "url": url, "headers": req},
            "response": {"status": status, "headers": headers, "content": {"mimeType": mime, "text": body}},
        });
        if method == "POST" {
            e["request"]["postData"] = serde_json::json!({"mimeType": "application/json", "text": "{\"n\":4711,\"who\":\"typed123\"}"});
        }
        e
    }

    #[test]
    fn typed_values_stay_answers_values_are_extracted() {
        let h = |n: &str, v: &str| serde_json::json!([{"name": n, "value": v}]);
        let mut b64 = entry(
            "2024-01-01T00:00:04Z",
            "GET",
            "http://a/b64",
            serde_json::json!([]),
            200,
            serde_json::json!([]),
            "application/json",
            "eyJrIjoidjEyMzQ1Njc4In0=",
        );
        b64["response"]["content"]["encoding"] = "base64".into();
        let entries = vec![
            // The user types `typed123`; the answer echoes it and gives 4711.
            entry(
                "2024-01-01T00:00:00Z",
                "GET",
                "http://a/find?who=typed123",
                h("Cookie", "s=1"),
                200,
                h("X-Token", "tk-99887766"),
                "application/json",
                "{\"who\":\"typed123\",\"order\":4711}",
            ),
            entry(
                "2024-01-01T00:00:01Z",
                "POST",
                "http://a/orders/4711",
                h("Authorization", "Bearer tk-99887766"),
                200,
                serde_json::json!([]),
                "",
                "",
            ),
            entry(
                "2024-01-01T00:00:02Z",
                "GET",
                "http://a/page",
                serde_json::json!([]),
                304,
                serde_json::json!([]),
                "",
                "",
            ),
            entry(
                "2024-01-01T00:00:03Z",
                "GET",
                "http://a/blocked",
                serde_json::json!([]),
                0,
                serde_json::json!([]),
                "",
                "",
            ),
            b64,
        ];
        let har = serde_json::json!({"log": {"entries": entries}});
        let out = Outputs::for_scenario(Path::new("/nonexistent/j.yaml"));
        let s = har_scenario(
            &har.to_string(),
            Path::new("j.har"),
            &HarOptions::default(),
            &out,
        )
        .unwrap();
        let y = &s.yaml;
        assert!(
            y.contains("path: \"/find?who=typed123\""),
            "typed input stays: {y}"
        );
        assert!(y.contains("path: \"/orders/${raw(order)}\""), "{y}");
        assert!(y.contains("order: {json: \"$.order\"}"), "{y}");
        assert!(
            y.contains("\"Authorization\": \"Bearer ${x_token}\""),
            "{y}"
        );
        assert!(y.contains("x_token: {header: \"X-Token\"}"), "{y}");
        // A number from an answer in a JSON body: raw JSON text keeps it a number.
        assert!(
            y.contains(r#"body: "{\"n\": ${order}, \"who\": \"typed123\"}""#),
            "{y}"
        );
        assert!(y.contains("check: {status: [200, 304]}"), "{y}");
        assert!(
            !y.contains("/blocked") && s.skipped["requests without an answer"] == 1,
            "{y}"
        );
        assert!(!y.contains("\"Cookie\":"), "{y}");
        assert_eq!(s.steps, 4);
        if let Err(d) = crate::scenario::decode::decode(y, Path::new("/nonexistent/j.yaml"), &[]) {
            panic!("{d:?}\n{y}");
        }
    }

    #[test]
    fn header_names_no_message_can_carry_are_left_out() {
        let bad = serde_json::json!([{"name": "X-CSR?-Token", "value": "tk-12345678"}]);
        let entries = vec![
            entry(
                "2024-01-01T00:00:00Z",
                "GET",
                "http://a/x",
                bad.clone(),
                200,
                bad.clone(),
                "",
                "",
            ),
            entry(
                "2024-01-01T00:00:01Z",
                "GET",
                "http://a/y",
                bad.clone(),
                200,
                serde_json::json!([]),
                "",
                "",
            ),
        ];
        let har = serde_json::json!({"log": {"entries": entries}});
        let out = Outputs::for_scenario(Path::new("/nonexistent/j.yaml"));
        let s = har_scenario(
            &har.to_string(),
            Path::new("j.har"),
            &HarOptions::default(),
            &out,
        )
        .unwrap();
        assert!(!s.yaml.contains("CSR?"), "{}", s.yaml);
        if let Err(d) =
            crate::scenario::decode::decode(&s.yaml, Path::new("/nonexistent/j.yaml"), &[])
        {
            panic!("{d:?}\n{}", s.yaml);
        }
    }

    #[test]
    fn not_a_har_says_so() {
        let out = Outputs::for_scenario(Path::new("/nonexistent/j.yaml"));
        let e = har_scenario(
            "{\"log\": 3}",
            Path::new("j.har"),
            &HarOptions::default(),
            &out,
        )
        .err()
        .unwrap();
        assert!(
            e.contains("not a HAR recording") && e.contains("line 1"),
            "{e}"
        );
        let e = har_scenario(
            "{\"log\": {\"entries\": []}}",
            Path::new("j.har"),
            &HarOptions::default(),
            &out,
        )
        .err()
        .unwrap();
        assert!(e.contains("none of its 0 entries"), "{e}");
    }
}
