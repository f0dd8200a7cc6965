//! A small HTTP/1.1 client for the endpoints beside the target: the
//! Prometheus query API the profiler reads, and the push exporters'
//! receivers. One kept-alive connection per endpoint, TLS for `https://`;
//! failures come back as one line to quote in a message.

use super::http1::{self, Connection};
use super::tls::Tls;
use super::Response;
use crate::scenario::BaseUrl;

/// Percent-encodes a query parameter's value: all but RFC 3986's
/// unreserved characters.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Opens a connection to `base` (its host resolved now), over `tls` when
/// given.
pub(crate) async fn connect(base: &BaseUrl, tls: Option<&Tls>) -> Result<Connection, String> {
    let addr = tokio::net::lookup_host((base.host.as_str(), base.port))
        .await
        .map_err(|err| format!("cannot resolve {}: {err}", base.host))?
        .next()
        .ok_or_else(|| format!("cannot resolve {}", base.host))?;
    let name = |k: crate::measure::ErrorKind| k.name().replace('_', " ");
    match tls {
        None => http1::connect(addr, None).await.map_err(name),
        Some(tls) => {
            let tcp = super::net::connect(addr, None).await.map_err(name)?;
            let shaken = tls
                .connect(tcp)
                .await
                .map_err(|err| format!("TLS: {err}"))?;
            Ok(Connection::over_tls(shaken.stream))
        }
    }
}

/// Sends `request` on `conn` (opened to `base` first when `None`) and
/// returns the answer's status and body, of which at most `max_body` bytes
/// are kept. `conn` is left `None` when the server closes it or the
/// exchange failed, so the next call opens a fresh one.
pub(crate) async fn exchange(
    conn: &mut Option<Connection>,
    base: &BaseUrl,
    tls: Option<&Tls>,
    request: &[u8],
    max_body: usize,
) -> Result<(u16, Vec<u8>), String> {
    if conn.is_none() {
        *conn = Some(connect(base, tls).await?);
    }
    let c = conn.as_mut().expect("just opened");
    let mut response = Response {
        max_body,
        ..Response::default()
    };
    match c
        .exchange(request, false, Some(&mut response), &mut Vec::new())
        .await
    {
        Ok(reply) => {
            if reply.close {
                *conn = None;
            }
            Ok((reply.status, response.body))
        }
        Err(f) => {
            *conn = None;
            Err(f.kind.name().replace('_', " "))
        }
    }
}
