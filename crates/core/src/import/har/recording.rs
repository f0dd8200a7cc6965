//! The HAR schema (the part of HTTP Archive 1.2 an import reads) and the
//! recording read into the journey's steps: entries in time order, a
//! redirect folded into the step it answered, third-party hosts, static
//! assets and requests without an answer left out and counted.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::import::clock::parse_rfc3339;
use crate::import::entry::check_method;
use crate::scenario::decode::requests::is_token;

use super::{tell, HarProgress, HarStage};

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
pub(super) struct Step {
    pub(super) method: String,
    pub(super) origin: String,
    /// Path and query.
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Option<StepBody>,
    pub(super) final_status: u16,
    pub(super) final_headers: Vec<(String, String)>,
    pub(super) final_body: String,
    pub(super) final_mime: String,
    pub(super) start: f64,
    pub(super) end: f64,
    pub(super) redirects: usize,
}

pub(super) enum StepBody {
    Form(Vec<(String, String)>),
    Json(Value),
    Raw { mime: String, text: String },
}

/// What a recording holds: its steps (never none), and what was left out.
pub(super) struct Recording {
    /// The entries it held, imported or not.
    pub(super) entries: usize,
    pub(super) steps: Vec<Step>,
    /// Entries left out, by why.
    pub(super) skipped: BTreeMap<&'static str, u64>,
}

/// The recording `text` read into steps; the error says why there are
/// none (not a HAR recording, or nothing in it to import).
pub(super) fn read(
    text: &str,
    exts: &[String],
    progress: &mut dyn HarProgress,
) -> Result<Recording, String> {
    progress.update(HarStage::Parsing, 0, text.len() as u64);
    let har: Har = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a HAR recording (line {}, column {}: {e}); save one from the browser's developer tools (Network, \"Save all as HAR\")",
            e.line(),
            e.column()
        )
    })?;
    progress.update(HarStage::Parsing, text.len() as u64, text.len() as u64);
    let mut skipped = BTreeMap::new();
    let entries = har.log.entries.len();
    let steps = steps(har.log.entries, exts, &mut skipped, progress);
    if steps.is_empty() {
        return Err(format!(
            "none of its {entries} entries is a request to import"
        ));
    }
    Ok(Recording {
        entries,
        steps,
        skipped,
    })
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

/// Where the redirect `e` answered with sends the browser next (an
/// absolute URL), if it is one.
fn next_hop(e: &Entry, headers: &[(String, String)]) -> Option<String> {
    if !(300..400).contains(&e.response.status) {
        return None;
    }
    let location = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("location"))
        .map(|(_, v)| v.clone())
        .or_else(|| {
            (!e.response.redirect_url.is_empty()).then(|| e.response.redirect_url.clone())
        })?;
    url::Url::parse(&e.request.url)
        .ok()?
        .join(&location)
        .ok()
        .map(|u| u.to_string())
}

/// A POST body as the scenario sends it: a form's pairs, JSON, or the
/// text as written.
fn request_body(p: &PostData) -> Option<StepBody> {
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
}

/// The journey's steps, redirects folded.
fn steps(
    entries: Vec<Entry>,
    exts: &[String],
    skipped: &mut BTreeMap<&'static str, u64>,
    progress: &mut dyn HarProgress,
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
    let total = entries.len();
    for (read, e) in entries.into_iter().enumerate() {
        tell(progress, HarStage::Reading, read, total);
        let Some((origin, target)) = split_url(&e.request.url) else {
            *skipped.entry("not an http(s) URL").or_default() += 1;
            continue;
        };
        if origin != main {
            *skipped.entry("third-party hosts").or_default() += 1;
            continue;
        }
        if check_method(&e.request.method.to_ascii_uppercase()).is_err() {
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
        let next_location = next_hop(&e, &headers);
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
            body: e.request.post_data.as_ref().and_then(request_body),
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
    tell(progress, HarStage::Reading, total, total);
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::import::har::fixture::Exchange;
    use crate::import::{har_scenario, HarOptions, Outputs};

    #[test]
    fn header_names_no_message_can_carry_are_left_out() {
        let bad = serde_json::json!([{"name": "X-CSR?-Token", "value": "tk-12345678"}]);
        let entries = vec![
            Exchange {
                started: "2024-01-01T00:00:00Z",
                url: "http://a/x",
                request_headers: bad.clone(),
                response_headers: bad.clone(),
                ..Exchange::default()
            }
            .json(),
            Exchange {
                started: "2024-01-01T00:00:01Z",
                url: "http://a/y",
                request_headers: bad.clone(),
                ..Exchange::default()
            }
            .json(),
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
