//! Correlation: values taken from a response into the user's variables —
//! from the body (a regex, a JSON pointer or JSONPath), a header (whole, or
//! a regex on it) or a cookie — with what to do when one is missing.

use crate::protocol::Response;
use crate::scenario::{ExtractFrom, OnMissing, Request};

/// Binds what `request`'s extracts find in `response` (and the user's
/// cookies, through `cookie`) to `vars`; false when an extract that must
/// find its value (`on_missing: fail`) did not.
pub(crate) fn extract<'c>(
    request: &Request,
    response: &Response,
    cookie: impl Fn(&str) -> Option<&'c str>,
    vars: &mut [Vec<u8>],
) -> bool {
    let mut json: Option<Option<serde_json::Value>> = None;
    let mut complete = true;
    for ex in &request.extracts {
        let body = &response.body[..];
        let mut doc = || {
            json.get_or_insert_with(|| serde_json::from_slice(body).ok())
                .clone()
        };
        let value: Option<Vec<u8>> = match &ex.from {
            ExtractFrom::Regex(re) => first_group(re, body),
            ExtractFrom::JsonPointer(pointer) => doc()
                .as_ref()
                .and_then(|d| d.pointer(pointer))
                .map(json_text),
            ExtractFrom::JsonPath(path) => doc()
                .as_ref()
                .and_then(|d| path.query(d).first().map(json_text)),
            ExtractFrom::Header { name, regex } => {
                response.header(name).and_then(|v| match regex {
                    Some(re) => first_group(re, v.as_bytes()),
                    None => Some(v.as_bytes().to_vec()),
                })
            }
            ExtractFrom::Cookie(name) => cookie(name).map(|v| v.as_bytes().to_vec()),
        };
        match (value, &ex.on_missing) {
            (Some(v), _) => vars[ex.var.index()] = v,
            (None, OnMissing::Keep) => {}
            (None, OnMissing::Default(d)) => vars[ex.var.index()] = d.clone(),
            (None, OnMissing::Fail) => complete = false,
        }
    }
    complete
}

fn first_group(re: &regex::bytes::Regex, hay: &[u8]) -> Option<Vec<u8>> {
    re.captures(hay)
        .and_then(|c| c.get(1).or_else(|| c.get(0)).map(|m| m.as_bytes().to_vec()))
}

/// Strings unquoted, other values as JSON text.
fn json_text(v: &serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Action, Extract, HttpRequest, Template, VarId};

    fn request(extracts: Vec<(ExtractFrom, OnMissing)>) -> Request {
        Request {
            name: "r".into(),
            action: Action::Http(HttpRequest {
                method: "GET".into(),
                path: Template::literal("/"),
                headers: Vec::new(),
                body: None,
                follow_redirects: true,
            }),
            extracts: extracts
                .into_iter()
                .enumerate()
                .map(|(i, (from, on_missing))| Extract {
                    var: VarId(i as u32),
                    from,
                    on_missing,
                })
                .collect(),
            checks: Vec::new(),
            think_time: None,
            sets: Vec::new(),
            skip_if: None,
        }
    }

    #[test]
    fn from_body_headers_cookies_with_the_missing_rules() {
        let response = Response {
            head: b"HTTP/1.1 303 See Other\r\nLocation: /order/42\r\n\r\n".to_vec(),
            body: br#"{"token": "t-1", "items": [{"id": 5}, {"id": 6}]}"#.to_vec(),
            ..Response::default()
        };
        let r = request(vec![
            (
                ExtractFrom::JsonPath(serde_json_path::JsonPath::parse("$.items[1].id").unwrap()),
                OnMissing::Keep,
            ),
            (ExtractFrom::JsonPointer("/token".into()), OnMissing::Keep),
            (
                ExtractFrom::Header {
                    name: "location".into(),
                    regex: Some(regex::bytes::Regex::new(r"/order/(\d+)").unwrap()),
                },
                OnMissing::Keep,
            ),
            (ExtractFrom::Cookie("sid".into()), OnMissing::Keep),
            (
                ExtractFrom::Cookie("nope".into()),
                OnMissing::Default(b"none".to_vec()),
            ),
            (
                ExtractFrom::Header {
                    name: "x-nope".into(),
                    regex: None,
                },
                OnMissing::Keep,
            ),
        ]);
        let mut vars = vec![Vec::new(); 5];
        vars.push(b"old".to_vec());
        let cookie = |name: &str| (name == "sid").then_some("abc");
        assert!(extract(&r, &response, cookie, &mut vars));
        let text: Vec<String> = vars
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        assert_eq!(text, ["6", "t-1", "42", "abc", "none", "old"]);
        let must = request(vec![(ExtractFrom::Cookie("nope".into()), OnMissing::Fail)]);
        assert!(!extract(&must, &response, cookie, &mut vars));
    }
}
