//! One logged request, whatever the format it was written in, and the
//! checks every format's parser applies to its parts: the request line,
//! the method, the target in origin form, the server's escapes.

/// One request as the server logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Seconds since the Unix epoch.
    pub time: f64,
    pub client: String,
    /// Empty when the format has none.
    pub agent: String,
    /// The value of the configured session field (JSON logs), if any.
    pub session: Option<String>,
    pub method: String,
    /// Path and query as sent (`/post/12?x=1`).
    pub target: String,
    pub status: u16,
}

/// A logged value as the client sent it: nginx writes unsafe bytes as
/// `\xHH` (a quote as `\x22`, UTF-8 byte by byte), Apache `\"` and `\\`.
pub(crate) fn unescape(v: &str) -> String {
    if !v.contains('\\') {
        return v.to_string();
    }
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            let hex = (b[i + 1] == b'x' && i + 3 < b.len())
                .then(|| std::str::from_utf8(&b[i + 2..i + 4]).ok())
                .flatten()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(byte) => {
                    out.push(byte);
                    i += 4;
                }
                None => {
                    out.push(b[i + 1]);
                    i += 2;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /x?y HTTP/1.1` into method and origin-form target.
pub(crate) fn request_line(line: &str) -> Result<(String, String), String> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(format!(
            "request `{}` is not METHOD TARGET PROTOCOL",
            excerpt(line, 60)
        ));
    };
    check_method(method)?;
    Ok((method.to_string(), origin_form(target)?))
}

pub(crate) fn check_method(method: &str) -> Result<(), String> {
    let token = !method.is_empty()
        && method.len() <= 16
        && method
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_');
    if token {
        Ok(())
    } else {
        Err(format!("`{}` is not an HTTP method", excerpt(method, 60)))
    }
}

/// `/x?y` as it stands; `http://host/x?y` (absolute form, proxies) as `/x?y`.
pub(crate) fn origin_form(target: &str) -> Result<String, String> {
    if target.starts_with('/') {
        return Ok(target.to_string());
    }
    if let Some(after) = target.split_once("://").map(|(_, a)| a) {
        return Ok(match after.find('/') {
            Some(i) => after[i..].to_string(),
            None => "/".to_string(),
        });
    }
    Err(format!("target `{}` is not a path", excerpt(target, 60)))
}

/// The first `chars` characters of a logged value, for a message.
pub(crate) fn excerpt(s: &str, chars: usize) -> String {
    let cut: String = s.chars().take(chars).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut
    }
}
