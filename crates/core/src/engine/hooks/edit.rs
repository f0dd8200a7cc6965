//! Reading and changing a rendered HTTP/1.1 request (`METHOD target
//! HTTP/1.1`, its headers, a blank line, the body) in place, as a script's
//! `request(ctx)` asks: the HTTP/2 client translates the same bytes, so
//! one form serves both. Each edit keeps the request well formed or is
//! refused with the reason.

use crate::protocol::request::header_value_ok;

/// The first CRLF in `bytes`. (A head is short: memchr's `memmem` spends
/// longer setting up than this takes.)
fn crlf(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\r', &bytes[from..]) {
        let i = from + i;
        if bytes.get(i + 1) == Some(&b'\n') {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

/// Where the head ends: the index of the blank line's CRLF.
fn blank_line(req: &[u8]) -> usize {
    let mut from = 0;
    while let Some(i) = crlf(&req[from..]) {
        let i = from + i;
        if req[i + 2..].starts_with(b"\r\n") {
            return i + 2;
        }
        from = i + 2;
    }
    req.len()
}

/// The end of the request line (the index of its CRLF).
fn line_end(req: &[u8]) -> usize {
    crlf(req).unwrap_or(req.len())
}

/// Puts `parts`, one after the other, at `at` (shifting what follows:
/// usually the blank line and a short body).
fn insert(req: &mut Vec<u8>, at: usize, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    for part in parts {
        req.extend_from_slice(part);
    }
    req[at..].rotate_right(len);
}

pub(crate) fn method(req: &[u8]) -> &[u8] {
    let line = &req[..line_end(req)];
    line.split(|&c| c == b' ').next().unwrap_or_default()
}

/// The request target: the path and query, as sent.
pub(crate) fn target(req: &[u8]) -> &[u8] {
    let (from, to) = target_span(req);
    &req[from..to]
}

fn target_span(req: &[u8]) -> (usize, usize) {
    let line = &req[..line_end(req)];
    let from = line.iter().position(|&c| c == b' ').map_or(0, |i| i + 1);
    let to = line.iter().rposition(|&c| c == b' ').unwrap_or(line.len());
    (from, to.max(from))
}

pub(crate) fn set_target(req: &mut Vec<u8>, target: &[u8]) -> Result<(), String> {
    let bad = |c: &u8| c.is_ascii_control() || *c == b' ' || !c.is_ascii();
    if !target.starts_with(b"/") || target.iter().any(bad) {
        return Err(format!(
            "ctx.path must start with `/` and hold no space, control character or byte past ASCII (percent-encode them: autoperf.urlencode), not {:?}",
            String::from_utf8_lossy(target)
        ));
    }
    let (from, to) = target_span(req);
    req.drain(from..to);
    insert(req, from, &[target]);
    Ok(())
}

/// The header lines' spans (each without its CRLF), in order.
fn header_lines(req: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let first = line_end(req) + 2;
    let blank = blank_line(req);
    let mut at = first.min(blank);
    std::iter::from_fn(move || {
        if at >= blank {
            return None;
        }
        let end = crlf(&req[at..blank]).map_or(blank, |i| at + i);
        let span = (at, end);
        at = end + 2;
        Some(span)
    })
}

fn split_header(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&c| c == b':')?;
    Some((&line[..colon], line[colon + 1..].trim_ascii()))
}

/// Every header, name and value, in order.
pub(crate) fn headers(req: &[u8]) -> Vec<(&[u8], &[u8])> {
    header_lines(req)
        .filter_map(|(a, b)| split_header(&req[a..b]))
        .collect()
}

pub(crate) fn header<'r>(req: &'r [u8], name: &str) -> Option<&'r [u8]> {
    headers(req)
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// Sets header `name` to `value` (replacing every line of that name), or
/// removes it when `value` is `None`.
pub(crate) fn set_header(
    req: &mut Vec<u8>,
    name: &str,
    value: Option<&[u8]>,
) -> Result<(), String> {
    let token = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(format!("`{name}` is not a header name"));
    }
    if ["content-length", "transfer-encoding"]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
    {
        return Err(format!(
            "`{name}` follows the body: set ctx.body and its length is sent"
        ));
    }
    if name.eq_ignore_ascii_case("accept-encoding") {
        // Whether answers are decoded is planned from the scenario.
        return Err("`Accept-Encoding` is the scenario's: set it in the request's `headers:` or `target.compression`, and answers are decoded".into());
    }
    if let Some(v) = value {
        if !header_value_ok(v) || !v.is_ascii() {
            return Err(format!(
                "the value of header `{name}` holds a control character or a byte past ASCII (encode it: autoperf.base64, autoperf.urlencode)"
            ));
        }
    }
    put_header(req, name, value);
    Ok(())
}

/// `set_header` without the checks.
fn put_header(req: &mut Vec<u8>, name: &str, value: Option<&[u8]>) {
    let named = |req: &[u8]| {
        header_lines(req).find(|&(a, b)| {
            split_header(&req[a..b]).is_some_and(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        })
    };
    // Where the first line of that name was; each goes (usually none).
    let mut at = None;
    while let Some((a, b)) = named(req) {
        at.get_or_insert(a);
        req.drain(a..b + 2);
    }
    let at = at.unwrap_or_else(|| blank_line(req));
    if let Some(v) = value {
        insert(req, at, &[name.as_bytes(), b": ", v, b"\r\n"]);
    }
}

pub(crate) fn body(req: &[u8]) -> &[u8] {
    let from = (blank_line(req) + 2).min(req.len());
    &req[from..]
}

/// Replaces the body; its `Content-Length` follows (added when the
/// request had none and now has a body).
pub(crate) fn set_body(req: &mut Vec<u8>, body: &[u8]) {
    let had_length = header(req, "content-length").is_some();
    let from = (blank_line(req) + 2).min(req.len());
    req.truncate(from);
    req.extend_from_slice(body);
    // Not through `set_header`, which keeps the framing from scripts.
    put_header(req, "Transfer-Encoding", None);
    if had_length || !body.is_empty() {
        let length = body.len().to_string();
        put_header(req, "Content-Length", Some(length.as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: &[u8] = b"GET /a?b=1 HTTP/1.1\r\nHost: h\r\nX-One: 1\r\n\r\n";
    const POST: &[u8] = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";

    fn text(req: &[u8]) -> &str {
        std::str::from_utf8(req).unwrap()
    }

    #[test]
    fn reads_the_request_line_headers_and_body() {
        assert_eq!(method(GET), b"GET");
        assert_eq!(target(GET), b"/a?b=1");
        assert_eq!(header(GET, "x-one"), Some(&b"1"[..]));
        assert_eq!(header(GET, "x-two"), None);
        assert_eq!(headers(POST).len(), 2);
        assert_eq!(body(POST), b"hi");
        assert_eq!(body(GET), b"");
    }

    #[test]
    fn a_header_is_replaced_added_or_removed_in_place() {
        let mut req = GET.to_vec();
        set_header(&mut req, "X-One", Some(b"uno")).unwrap();
        set_header(&mut req, "X-Two", Some(b"2")).unwrap();
        assert_eq!(
            text(&req),
            "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nX-One: uno\r\nX-Two: 2\r\n\r\n"
        );
        set_header(&mut req, "x-one", None).unwrap();
        assert_eq!(
            text(&req),
            "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nX-Two: 2\r\n\r\n"
        );
        assert!(set_header(&mut req, "X-Bad", Some(b"a\r\nb")).is_err());
        assert!(set_header(&mut req, "Bad Name", Some(b"a")).is_err());
        assert!(set_header(&mut req, "Content-Length", Some(b"9")).is_err());
        assert!(set_header(&mut req, "Accept-Encoding", Some(b"gzip")).is_err());
        assert!(set_header(&mut req, "X-Utf8", Some("é".as_bytes())).is_err());
    }

    #[test]
    fn the_path_and_body_change_with_their_length() {
        let mut req = POST.to_vec();
        set_target(&mut req, b"/q?x=%20").unwrap();
        set_body(&mut req, b"hello");
        assert_eq!(
            text(&req),
            "POST /q?x=%20 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        );
        let mut get = GET.to_vec();
        set_body(&mut get, b"{}");
        assert_eq!(header(&get, "content-length"), Some(&b"2"[..]));
        assert_eq!(body(&get), b"{}");
        assert!(set_target(&mut req, b"no-slash").is_err());
        assert!(set_target(&mut req, b"/a b").is_err());
        assert!(set_target(&mut req, "/é".as_bytes()).is_err());
    }
}
