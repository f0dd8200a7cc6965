//! Turns a scenario request into HTTP/1.1 bytes. Everything that does not
//! depend on the user is rendered once, at plan time; per request only the
//! templates are expanded, into a buffer the user reuses.

use std::io::Write;

use crate::measure::ErrorKind;
use crate::scenario::template::{Bindings, ScriptFailed};
use crate::scenario::{BaseUrl, Body, HttpRequest, Template};

/// A request with its static parts pre-rendered.
#[derive(Debug, Clone)]
pub(crate) struct RequestPlan {
    /// `METHOD /prefix`
    start: Vec<u8>,
    path: Template,
    /// ` HTTP/1.1\r\nHost: …\r\nUser-Agent: …\r\n` plus every header
    /// without a template.
    fixed_headers: Vec<u8>,
    /// `Name: ` and the value's template.
    templated_headers: Vec<(Vec<u8>, Template)>,
    body: Option<BodyPlan>,
    pub head: bool,
    pub follow_redirects: bool,
    /// The request asks for compressed answers (`Accept-Encoding`), so
    /// their bodies are read and decoded.
    pub decodes: bool,
}

#[derive(Debug, Clone)]
enum BodyPlan {
    Form(Vec<(Vec<u8>, Template)>),
    Whole(Template),
}

impl RequestPlan {
    pub(crate) fn new(request: &HttpRequest, base: &BaseUrl) -> RequestPlan {
        let mut start = Vec::new();
        write!(start, "{} {}", request.method, base.path_prefix).unwrap();
        // The scenario's own Host or User-Agent replaces ours rather than
        // being sent beside it; an empty User-Agent sends none.
        let given = |header: &str| {
            request
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(header))
        };
        let mut fixed_headers = b" HTTP/1.1\r\n".to_vec();
        if !given("host") {
            write!(fixed_headers, "Host: {}\r\n", base.authority()).unwrap();
        }
        if !given("user-agent") {
            write!(
                fixed_headers,
                "User-Agent: autoperf/{}\r\n",
                env!("CARGO_PKG_VERSION")
            )
            .unwrap();
        }
        let mut templated_headers = Vec::new();
        let mut has_content_type = false;
        for (name, value) in &request.headers {
            has_content_type |= name.eq_ignore_ascii_case("content-type");
            match value.static_bytes() {
                // An empty User-Agent: none at all (ours was left out above).
                Some([]) if name.eq_ignore_ascii_case("user-agent") => {}
                Some(v) => {
                    fixed_headers.extend_from_slice(name.as_bytes());
                    fixed_headers.extend_from_slice(b": ");
                    fixed_headers.extend_from_slice(v);
                    fixed_headers.extend_from_slice(b"\r\n");
                }
                None => templated_headers.push((format!("{name}: ").into_bytes(), value.clone())),
            }
        }
        if let Some(ct) = request.body.as_ref().and_then(Body::content_type) {
            if !has_content_type {
                write!(fixed_headers, "Content-Type: {ct}\r\n").unwrap();
            }
        }
        let body = request.body.as_ref().map(|b| match b {
            Body::Form(fields) => BodyPlan::Form(
                fields
                    .iter()
                    .map(|(k, v)| (form_encode(k).into_bytes(), v.clone()))
                    .collect(),
            ),
            Body::Json(t) | Body::Raw(t) => BodyPlan::Whole(t.clone()),
        });
        RequestPlan {
            start,
            path: request.path.clone(),
            fixed_headers,
            templated_headers,
            body,
            head: request.method == "HEAD",
            follow_redirects: request.follow_redirects,
            decodes: given("accept-encoding"),
        }
    }

    /// Asks for compressed answers with `accept` (`target.compression`),
    /// unless the scenario's own `Accept-Encoding` already does.
    pub(crate) fn accept_encoding(mut self, accept: &str) -> RequestPlan {
        if !self.decodes {
            write!(self.fixed_headers, "Accept-Encoding: {accept}\r\n").unwrap();
            self.decodes = true;
        }
        self
    }

    /// Writes the whole request into `out` (cleared first), then lets the
    /// bindings finish it (a script's `request(ctx)`). `scratch` holds the
    /// body while its length is not yet known. `Err(Encode)` when a value
    /// bound into the path or a header (an extracted value, a data row,
    /// `${env.X}`) holds bytes its place cannot carry: a control character
    /// (CR, LF: a header or request smuggled in) or, in the path, a space;
    /// `Err(ScriptRequest)` when the script failed it.
    pub(crate) fn render(
        &self,
        b: &mut impl Bindings,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), ErrorKind> {
        self.render_templates(b, out, scratch)
            .map_err(|Unsendable| ErrorKind::Encode)?;
        b.finish_request(out)
            .map_err(|ScriptFailed| ErrorKind::ScriptRequest)
    }

    fn render_templates(
        &self,
        b: &mut impl Bindings,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), Unsendable> {
        out.clear();
        out.extend_from_slice(&self.start);
        let from = out.len();
        self.path.render(b, out).map_err(|_| Unsendable)?;
        if out[from..]
            .iter()
            .any(|&c| c.is_ascii_control() || c == b' ')
        {
            return Err(Unsendable);
        }
        out.extend_from_slice(&self.fixed_headers);
        for (name, value) in &self.templated_headers {
            out.extend_from_slice(name);
            let from = out.len();
            value.render(b, out).map_err(|_| Unsendable)?;
            if !header_value_ok(&out[from..]) {
                return Err(Unsendable);
            }
            out.extend_from_slice(b"\r\n");
        }
        match &self.body {
            None => out.extend_from_slice(b"\r\n"),
            Some(body) => {
                scratch.clear();
                match body {
                    BodyPlan::Whole(t) => t.render(b, scratch).map_err(|_| Unsendable)?,
                    BodyPlan::Form(fields) => {
                        for (i, (k, v)) in fields.iter().enumerate() {
                            if i > 0 {
                                scratch.push(b'&');
                            }
                            scratch.extend_from_slice(k);
                            scratch.push(b'=');
                            v.render(b, scratch).map_err(|_| Unsendable)?;
                        }
                    }
                }
                write!(out, "Content-Length: {}\r\n\r\n", scratch.len()).unwrap();
                out.extend_from_slice(scratch);
            }
        }
        Ok(())
    }
}

/// A request that cannot be sent as its values make it (see `render`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsendable;

/// Whether `value` may stand as a header's value (RFC 9110 5.5): no
/// control character but horizontal tab.
pub(crate) fn header_value_ok(value: &[u8]) -> bool {
    !value
        .iter()
        .any(|&c| (c.is_ascii_control() && c != b'\t') || c == 0x7f)
}

/// application/x-www-form-urlencoded encoding of a static string.
pub(crate) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(c as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{c:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{FeederId, VarId};

    /// For requests without templates.
    struct Unused;

    impl Bindings for Unused {
        fn random(&mut self, _: i64, _: i64) -> i64 {
            unreachable!()
        }
        fn unit(&mut self) -> f64 {
            unreachable!()
        }
        fn now_ms(&mut self) -> i64 {
            unreachable!()
        }
        fn column(&mut self, _: FeederId, _: usize) -> &[u8] {
            unreachable!()
        }
        fn var(&self, _: VarId) -> &[u8] {
            unreachable!()
        }
    }

    fn rendered(headers: &[(&str, &str)]) -> String {
        let request = HttpRequest {
            method: "GET".into(),
            path: Template::literal("/a"),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), Template::literal(v)))
                .collect(),
            body: None,
            follow_redirects: true,
        };
        let base = BaseUrl {
            tls: false,
            host: "127.0.0.1".into(),
            port: 8080,
            path_prefix: String::new(),
        };
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        RequestPlan::new(&request, &base)
            .render(&mut Unused, &mut out, &mut scratch)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_header_value_holds_no_control_character_but_a_tab() {
        assert!(header_value_ok(b"Bearer abc\tdef"));
        for bad in [&b"a\rb"[..], b"a\nb", b"a\x00b", b"a\x1bb", b"a\x7fb"] {
            assert!(!header_value_ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn host_and_user_agent_by_default() {
        assert_eq!(
            rendered(&[("Accept", "*/*")]),
            format!(
                "GET /a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: autoperf/{}\r\nAccept: */*\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn the_scenarios_host_and_user_agent_replace_the_defaults() {
        assert_eq!(
            rendered(&[("user-agent", "wrk"), ("Host", "shop.example")]),
            "GET /a HTTP/1.1\r\nuser-agent: wrk\r\nHost: shop.example\r\n\r\n"
        );
        assert_eq!(
            rendered(&[("User-Agent", "")]),
            "GET /a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
    }
}
