//! `/signed/*`: an API that takes only signed requests, the way payment and
//! cloud APIs do. A request carries `X-Timestamp` (Unix seconds) and
//! `X-Signature`, the lowercase hex HMAC-SHA256, under [`SIGNING_KEY`], of
//!
//! ```text
//! METHOD "\n" PATH "\n" TIMESTAMP "\n" BODY
//! ```
//!
//! (PATH with its query, as sent). A timestamp more than [`MAX_SKEW_S`] off
//! the testbed's clock, or a signature that does not match, is refused with
//! 401 and the reason; a signed request is answered 200 with the body's
//! length.

use std::time::{SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use crate::http::{json, BadRequest, Body};

/// The key the testbed verifies with (a test key: it is in the source).
pub const SIGNING_KEY: &str = "testbed-signing-key";

/// How far a request's timestamp may be from the testbed's clock.
pub const MAX_SKEW_S: i64 = 30;

/// Largest body a signed request may carry.
const MAX_BODY: usize = 1 << 20;

pub async fn handle(req: Request<Incoming>) -> Result<Response<Body>, BadRequest> {
    let method = req.method().as_str().to_string();
    let target = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (Some(timestamp), Some(signature)) = (header("x-timestamp"), header("x-signature")) else {
        return Ok(refuse("missing X-Timestamp or X-Signature"));
    };
    let body: Bytes = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| BadRequest(format!("reading the body: {e}")))?
        .to_bytes();
    let Ok(at) = timestamp.trim().parse::<i64>() else {
        return Ok(refuse("X-Timestamp is not Unix seconds"));
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if now.abs_diff(at) > MAX_SKEW_S as u64 {
        return Ok(refuse("X-Timestamp is more than 30 s off"));
    }
    let Some(tag) = unhex(signature.trim()) else {
        return Ok(refuse("X-Signature is not hex"));
    };
    let mut signed = format!("{method}\n{target}\n{timestamp}\n").into_bytes();
    signed.extend_from_slice(&body);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SIGNING_KEY.as_bytes());
    if ring::hmac::verify(&key, &signed, &tag).is_err() {
        return Ok(refuse("bad signature"));
    }
    Ok(json(
        StatusCode::OK,
        &json!({ "signed": true, "bytes": body.len() }),
    ))
}

fn refuse(why: &str) -> Response<Body> {
    json(StatusCode::UNAUTHORIZED, &json!({ "error": why }))
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
