//! Reading and changing a rendered HTTP/1.1 request (`METHOD target
//! HTTP/1.1`, its headers, a blank line, the body) in place, as a script's
//! `request(ctx)` asks: the HTTP/2 client translates the same bytes, so
//! one form serves both. Each edit keeps the request well formed or is
//! refused with the reason.

use crate::protocol::request::header_value_ok;

/// Where the head ends: the index of the blank line's CRLF.
fn blank_line(req: &[u8]) -> usize {
    req.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(req.len(), |i| i + 2)
}

/// The end of the request line (the index of its CRLF).
fn line_end(req: &[u8]) -> usize {
    req.windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(req.len())
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
    if !target.starts_with(b"/") || target.iter().any(|&c| c.is_ascii_control() || c == b' ') {
        return Err(format!(
            "ctx.path must start with `/` and hold no space or control character, not {:?}",
            String::from_utf8_lossy(target)
        ));
    }
    let (from, to) = target_span(req);
    req.splice(from..to, target.iter().copied());
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
        let end = req[at..blank]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(blank, |i| at + i);
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
    if let Some(v) = value {
        if !header_value_ok(v) {
            return Err(format!(
                "the value of header `{name}` holds a control character"
            ));
        }
    }
    put_header(req, name, value);
    Ok(())
}

/// `set_header` without the checks.
fn put_header(req: &mut Vec<u8>, name: &str, value: Option<&[u8]>) {
    let named: Vec<(usize, usize)> = header_lines(req)
        .filter(|&(a, b)| {
            split_header(&req[a..b]).is_some_and(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        })
        .collect();
    let at = named.first().map_or(blank_line(req), |&(a, _)| a);
    for &(a, b) in named.iter().rev() {
        req.drain(a..b + 2);
    }
    if let Some(v) = value {
        let mut line = Vec::with_capacity(name.len() + v.len() + 4);
        line.extend_from_slice(name.as_bytes());
        line.extend_from_slice(b": ");
        line.extend_from_slice(v);
        line.extend_from_slice(b"\r\n");
        req.splice(at..at, line);
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
    if had_length || !body.is_empty() {
        // Not through `set_header`, which keeps the length from scripts.
        put_header(
            req,
            "Content-Length",
            Some(body.len().to_string().as_bytes()),
        );
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
    }
}
