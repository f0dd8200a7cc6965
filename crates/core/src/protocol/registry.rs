//! The one call autoperf makes to a Confluent-style schema registry:
//! register a subject's schema and learn its id (`POST
//! /subjects/{subject}/versions`), once when a run starts. A blocking
//! HTTP/1.1 exchange with `Connection: close` is all it takes.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::TargetError;
use crate::scenario::template::escape;
use crate::scenario::{BaseUrl, Escape};

/// Registers `schema` (Avro schema JSON) under `subject`; returns its id.
pub(crate) fn register(
    url: &BaseUrl,
    subject: &str,
    schema: &str,
    timeout: Duration,
) -> Result<u32, TargetError> {
    let fail = |reason: String| TargetError::Registry {
        url: url.to_string(),
        subject: subject.to_string(),
        reason,
    };
    let body = serde_json::json!({ "schema": schema }).to_string();
    let mut encoded = Vec::new();
    escape(Escape::Path, subject.as_bytes(), &mut encoded);
    let path = format!(
        "{}/subjects/{}/versions",
        url.path_prefix,
        String::from_utf8_lossy(&encoded)
    );
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\nAccept: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}",
        host = url.authority(),
        len = body.len(),
    );
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| fail("cannot resolve: no address".into()))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| fail(format!("cannot connect: {e}")))?;
    let io = |e: std::io::Error| fail(format!("the exchange failed: {e}"));
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(io)?;
    let (status, body) =
        parse_response(&response).ok_or_else(|| fail("not an HTTP response".into()))?;
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    if status != 200 {
        let message = json
            .as_ref()
            .and_then(|j| j.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
        return Err(fail(format!("HTTP {status}: {message}")));
    }
    json.as_ref()
        .and_then(|j| j.get("id"))
        .and_then(|id| id.as_u64())
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| {
            fail(format!(
                "expected `{{\"id\": N}}`, found `{}`",
                String::from_utf8_lossy(&body)
            ))
        })
}

/// The status and body of a complete response (read to the close).
fn parse_response(bytes: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
        })
    });
    let rest = &bytes[end + 4..];
    if !chunked {
        return Some((status, rest.to_vec()));
    }
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + rest[at..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[at..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            return Some((status, body));
        }
        body.extend_from_slice(rest.get(at..at + size)?);
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Answers one request with `reply`, handing back what it received.
    fn one_shot(reply: &'static str) -> (BaseUrl, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Until the end of the JSON body (`{"schema":"…}"}`).
            while !String::from_utf8_lossy(&got).contains("}\"}") {
                let n = conn.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            conn.write_all(reply.as_bytes()).unwrap();
            String::from_utf8(got).unwrap()
        });
        let url = crate::scenario::decode::parse_base_url(&format!("http://127.0.0.1:{port}/reg"))
            .unwrap();
        (url, server)
    }

    #[test]
    fn registers_and_reads_the_id() {
        let (url, server) = one_shot("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"id\":42}");
        let schema = r#"{"type":"string"}"#;
        let id = register(&url, "in put-value", schema, Duration::from_secs(5)).unwrap();
        assert_eq!(id, 42);
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /reg/subjects/in%20put-value/versions HTTP/1.1\r\n"),
            "{request}"
        );
        let body = request.split("\r\n\r\n").nth(1).unwrap();
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["schema"], schema);
    }

    #[test]
    fn a_refusal_carries_the_registrys_message() {
        let (url, server) = one_shot(
            "HTTP/1.1 422 Unprocessable\r\nContent-Length: 47\r\n\r\n{\"error_code\":42201,\"message\":\"Invalid schema\"}",
        );
        let e = register(&url, "s", "{}", Duration::from_secs(5)).unwrap_err();
        server.join().unwrap();
        let shown = e.to_string();
        assert!(
            shown.contains("subject `s`") && shown.contains("HTTP 422: Invalid schema"),
            "{shown}"
        );
    }

    #[test]
    fn plain_and_chunked_bodies() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{\"id\":3}";
        assert_eq!(parse_response(plain), Some((200, b"{\"id\":3}".to_vec())));
        let chunked =
            b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n2\r\n\":\r\n1\r\n1\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Some((409, b"{\"a\":1}".to_vec())));
        assert_eq!(parse_response(b"garbage"), None);
    }
}
