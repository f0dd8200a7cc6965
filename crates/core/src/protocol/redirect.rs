//! Following a redirect (RFC 9110 15.4): where the next request goes and
//! with which method, and the next request's bytes made from the last one.
//!
//! | status | next method |
//! |---|---|
//! | 303 | GET (HEAD stays HEAD), no body |
//! | 301, 302 | GET after a POST (what every browser does), else the same |
//! | 307, 308 | the same method and body |
//!
//! Only locations on the target itself are followed: autoperf's traffic
//! goes where the user aimed it and nowhere else.

use crate::scenario::BaseUrl;

/// At most this many hops per request (then `redirect_limit`).
pub(crate) const MAX_HOPS: u8 = 10;

/// The request target (path and query) a `Location` value points at, when
/// it is on the target's own origin; `None` for another host, port or
/// scheme.
pub(crate) fn same_origin_target(location: &str, base: &BaseUrl, current: &str) -> Option<String> {
    let location = location.trim();
    // Bytes a request line cannot carry are no place to go.
    if location.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return None;
    }
    // With a scheme (RFC 3986 3.1: `javascript:`, `mailto:`, `HTTP:`) it
    // is absolute: the target's own scheme and origin, or nowhere.
    if let Some(scheme) = scheme_of(location) {
        let ours = if base.tls { "https" } else { "http" };
        let rest = location[scheme.len() + 1..].strip_prefix("//")?;
        if !scheme.eq_ignore_ascii_case(ours) {
            return None;
        }
        let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        let default_port = if base.tls { 443 } else { 80 };
        let same = authority == base.authority()
            || (base.port == default_port && authority == bracketed(&base.host));
        return same.then(|| match path.strip_prefix('/') {
            Some(_) => path.into(),
            None => format!("/{path}"),
        });
    }
    if location.starts_with("//") {
        return None;
    }
    if location.starts_with('/') {
        return Some(location.to_string());
    }
    // Relative to the current path's directory.
    let path = current.split(['?', '#']).next().unwrap_or("/");
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    Some(format!(
        "{}{location}",
        if dir.is_empty() { "/" } else { dir }
    ))
}

/// The scheme a URI reference starts with, if it has one: letters,
/// digits, `+`, `-`, `.`, starting with a letter, before the first `:`
/// that comes before any `/`, `?` or `#`.
fn scheme_of(location: &str) -> Option<&str> {
    let end = location.find([':', '/', '?', '#'])?;
    let scheme = &location[..end];
    let valid = location[end..].starts_with(':')
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The method of the next hop, and whether it keeps the body.
pub(crate) fn next_method(status: u16, method: &str) -> (&str, bool) {
    match (status, method) {
        (303, "HEAD") => ("HEAD", false),
        (303, _) => ("GET", false),
        (301 | 302, "POST") => ("GET", false),
        (307 | 308, m) => (m, true),
        (_, m) => (m, true),
    }
}

/// Rewrites the request in `request` (a whole HTTP/1.1 request) into the
/// next hop's: `method` to `target`, without its body (and the headers
/// that describe it) unless `keep_body`, and without its `Cookie` header
/// (the jar writes the next hop's). Returns the request's method and
/// target as they were.
pub(crate) fn rewrite(request: &mut Vec<u8>, method: &str, target: &str, keep_body: bool) {
    let line_end = find(request, b"\r\n").unwrap_or(request.len());
    let head_end = find(request, b"\r\n\r\n").map_or(request.len(), |i| i + 4);
    let mut next = Vec::with_capacity(request.len());
    next.extend_from_slice(method.as_bytes());
    next.push(b' ');
    next.extend_from_slice(target.as_bytes());
    next.extend_from_slice(b" HTTP/1.1\r\n");
    let headers = &request[(line_end + 2).min(head_end)..head_end.saturating_sub(2)];
    for line in headers.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        let drop = name.eq_ignore_ascii_case(b"cookie")
            || (!keep_body
                && (name.eq_ignore_ascii_case(b"content-length")
                    || name.eq_ignore_ascii_case(b"content-type")));
        if !drop {
            next.extend_from_slice(line);
            next.extend_from_slice(b"\r\n");
        }
    }
    next.extend_from_slice(b"\r\n");
    if keep_body {
        next.extend_from_slice(&request[head_end..]);
    }
    *request = next;
}

/// The method and target of a request's first line.
pub(crate) fn request_line(request: &[u8]) -> (&str, &str) {
    let line_end = find(request, b"\r\n").unwrap_or(request.len());
    let line = std::str::from_utf8(&request[..line_end]).unwrap_or("");
    let mut parts = line.split(' ');
    (parts.next().unwrap_or(""), parts.next().unwrap_or("/"))
}

/// Inserts `header` (whole lines, CRLF-ended) at the end of the request's
/// header block.
pub(crate) fn insert_header(request: &mut Vec<u8>, header: &[u8]) {
    if header.is_empty() {
        return;
    }
    let at = find(request, b"\r\n\r\n").map_or(request.len(), |i| i + 2);
    request.splice(at..at, header.iter().copied());
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(tls: bool, port: u16) -> BaseUrl {
        BaseUrl {
            tls,
            host: "127.0.0.1".into(),
            port,
            path_prefix: String::new(),
        }
    }

    #[test]
    fn only_the_targets_own_origin_is_followed() {
        let b = base(false, 8080);
        assert_eq!(
            same_origin_target("/a?b=1", &b, "/x"),
            Some("/a?b=1".into())
        );
        assert_eq!(
            same_origin_target("http://127.0.0.1:8080/home", &b, "/x"),
            Some("/home".into())
        );
        assert_eq!(
            same_origin_target("http://127.0.0.1:8080", &b, "/x"),
            Some("/".into())
        );
        assert_eq!(
            same_origin_target("next", &b, "/shop/cart?x"),
            Some("/shop/next".into())
        );
        assert_eq!(same_origin_target("http://127.0.0.1:9/home", &b, "/"), None);
        assert_eq!(
            same_origin_target("https://127.0.0.1:8080/home", &b, "/"),
            None
        );
        assert_eq!(same_origin_target("//evil.example/x", &b, "/"), None);
        // Another scheme is never a path on the target.
        assert_eq!(same_origin_target("javascript:alert(1)", &b, "/"), None);
        assert_eq!(same_origin_target("mailto:a@b.example", &b, "/"), None);
        assert_eq!(same_origin_target("ftp://127.0.0.1:8080/x", &b, "/"), None);
        // The scheme's case does not matter; a query right after the
        // authority keeps its path.
        assert_eq!(
            same_origin_target("HTTP://127.0.0.1:8080/home", &b, "/x"),
            Some("/home".into())
        );
        assert_eq!(
            same_origin_target("http://127.0.0.1:8080?q=1", &b, "/x"),
            Some("/?q=1".into())
        );
        // A colon after the first slash is a path's.
        assert_eq!(same_origin_target("/a:b", &b, "/x"), Some("/a:b".into()));
        // Control bytes never reach a request line.
        assert_eq!(same_origin_target("/a\r\nX: 1", &b, "/x"), None);
        let https = base(true, 443);
        assert_eq!(
            same_origin_target("https://127.0.0.1/home", &https, "/"),
            Some("/home".into())
        );
    }

    #[test]
    fn method_rules() {
        assert_eq!(next_method(303, "POST"), ("GET", false));
        assert_eq!(next_method(303, "HEAD"), ("HEAD", false));
        assert_eq!(next_method(302, "POST"), ("GET", false));
        assert_eq!(next_method(301, "GET"), ("GET", true));
        assert_eq!(next_method(307, "POST"), ("POST", true));
        assert_eq!(next_method(308, "PUT"), ("PUT", true));
    }

    #[test]
    fn the_next_hop_drops_the_body_and_cookies_unless_kept() {
        let original = b"POST /login HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\nX-Trace: 7\r\n\r\na=b".to_vec();
        let mut r = original.clone();
        rewrite(&mut r, "GET", "/home", false);
        assert_eq!(
            String::from_utf8(r.clone()).unwrap(),
            "GET /home HTTP/1.1\r\nHost: h\r\nX-Trace: 7\r\n\r\n"
        );
        assert_eq!(request_line(&r), ("GET", "/home"));
        insert_header(&mut r, b"Cookie: s=2\r\n");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "GET /home HTTP/1.1\r\nHost: h\r\nX-Trace: 7\r\nCookie: s=2\r\n\r\n"
        );
        let mut r = original;
        rewrite(&mut r, "POST", "/again", true);
        let text = String::from_utf8(r).unwrap();
        assert!(
            text.starts_with("POST /again HTTP/1.1\r\n")
                && text.ends_with("Content-Length: 3\r\nX-Trace: 7\r\n\r\na=b"),
            "{text}"
        );
    }
}
