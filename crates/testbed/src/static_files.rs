//! `GET /static/*`: cacheable content, deterministic bytes derived from the
//! path, validated by ETag and Last-Modified.
//!
//! Nothing is read from disk: the content of a path is the same in every
//! process and every run, so a load test can check caching end to end.

use std::time::{Duration, SystemTime};

use hyper::header::{
    HeaderMap, HeaderValue, CACHE_CONTROL, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED,
};
use hyper::StatusCode;

use crate::http::{respond, Body};

/// When every static file was "last modified": 2024-01-01T00:00:00Z, fixed so
/// that validators agree between processes and runs.
const LAST_MODIFIED_UNIX: u64 = 1_704_067_200;

/// A static file: its bytes, content type and validators.
pub struct StaticFile {
    pub body: Vec<u8>,
    pub content_type: &'static str,
    pub etag: String,
}

/// FNV-1a: a stable hash to derive content and the ETag from.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn last_modified() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(LAST_MODIFIED_UNIX)
}

const INDEX_HTML: &str = "<!DOCTYPE html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<title>autoperf testbed</title>
<link rel=\"stylesheet\" href=\"/static/style.css\">
<script src=\"/static/app.js\" defer></script>
</head>
<body>
<h1>autoperf testbed</h1>
<p>A two-tier system whose costs are known by construction.</p>
<ul>
<li><a href=\"/cpu?ms=2\">/cpu?ms=2</a>: 2 ms of CPU on the web tier</li>
<li><a href=\"/db?web_ms=1&amp;db_ms=3\">/db?web_ms=1&amp;db_ms=3</a>: 1 ms on web, 3 ms on db</li>
<li><a href=\"/sleep?ms=100\">/sleep?ms=100</a>: 100 ms without CPU</li>
<li><a href=\"/bytes?n=1024\">/bytes?n=1024</a>: 1024 bytes</li>
<li><a href=\"/static/logo.svg\">/static/logo.svg</a>: cacheable content</li>
</ul>
</body>
</html>
";

/// The content of `/static/{name}`, or `None` for an empty name.
pub fn file(name: &str) -> Option<StaticFile> {
    if name.is_empty() {
        return None;
    }
    let content_type = content_type(name);
    let body = if name == "index.html" {
        INDEX_HTML.as_bytes().to_vec()
    } else {
        generated(name)
    };
    let etag = format!("\"{:016x}\"", fnv1a(&body));
    Some(StaticFile {
        body,
        content_type,
        etag,
    })
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// 2–8 KiB of printable text whose length and letters follow from the name.
fn generated(name: &str) -> Vec<u8> {
    let mut state = fnv1a(name.as_bytes());
    let len = 2048 + (state % 6144) as usize;
    let mut body = Vec::with_capacity(len);
    while body.len() < len {
        // xorshift64: deterministic, and every name gets different bytes.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let c = b'a' + (state % 26) as u8;
        body.push(if body.len() % 64 == 63 { b'\n' } else { c });
    }
    body
}

/// Does the client's cached copy still match? `If-None-Match` takes precedence
/// over `If-Modified-Since` when both are present (RFC 9110 §13.2.2).
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    if let Some(value) = headers.get(IF_NONE_MATCH) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        // Weak comparison: W/"x" matches "x".
        return value
            .split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == "*" || t == etag);
    }
    if let Some(value) = headers.get(IF_MODIFIED_SINCE) {
        if let Some(since) = value
            .to_str()
            .ok()
            .and_then(|v| httpdate::parse_http_date(v).ok())
        {
            return since >= last_modified();
        }
    }
    false
}

/// The response to `GET /static/{name}`: 200 with validators, or 304.
pub fn response(name: &str, headers: &HeaderMap) -> Option<hyper::Response<Body>> {
    let file = file(name)?;
    let validated = not_modified(headers, &file.etag);
    let mut resp = if validated {
        respond(StatusCode::NOT_MODIFIED, file.content_type, Vec::new())
    } else {
        respond(StatusCode::OK, file.content_type, file.body)
    };
    let h = resp.headers_mut();
    if validated {
        // A 304 carries no body and no Content-Type of its own.
        h.remove(hyper::header::CONTENT_TYPE);
    }
    h.insert(
        ETAG,
        HeaderValue::from_str(&file.etag).expect("hex is a valid header"),
    );
    h.insert(
        LAST_MODIFIED,
        HeaderValue::from_str(&httpdate::fmt_http_date(last_modified())).expect("http date"),
    );
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_deterministic_and_a_few_kib() {
        let a = file("app.js").unwrap();
        let b = file("app.js").unwrap();
        assert_eq!(a.body, b.body);
        assert_eq!(a.etag, b.etag);
        assert_ne!(a.etag, file("style.css").unwrap().etag);
        assert!((2048..8192).contains(&a.body.len()));
        assert_eq!(a.content_type, "text/javascript");
        assert!(file("index.html")
            .unwrap()
            .body
            .starts_with(b"<!DOCTYPE html>"));
        assert!(file("").is_none());
    }

    #[test]
    fn conditional_requests() {
        let etag = file("a.txt").unwrap().etag;
        let mut h = HeaderMap::new();
        assert!(!not_modified(&h, &etag));
        h.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"x\", W/{etag}")).unwrap(),
        );
        assert!(not_modified(&h, &etag));
        h.insert(IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        h.insert(
            IF_MODIFIED_SINCE,
            HeaderValue::from_static("Tue, 02 Jan 2024 00:00:00 GMT"),
        );
        assert!(
            !not_modified(&h, &etag),
            "If-None-Match wins over If-Modified-Since"
        );
        h.remove(IF_NONE_MATCH);
        assert!(not_modified(&h, &etag));
        h.insert(
            IF_MODIFIED_SINCE,
            HeaderValue::from_static("Sun, 31 Dec 2023 00:00:00 GMT"),
        );
        assert!(!not_modified(&h, &etag));
        h.insert(IF_MODIFIED_SINCE, HeaderValue::from_static("garbage"));
        assert!(!not_modified(&h, &etag));
    }
}
