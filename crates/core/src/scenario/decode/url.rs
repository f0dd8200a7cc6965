//! Base URLs: `http://host[:port][/prefix]` and `https://…`, for the target
//! and (plain HTTP only) for agents and schema registries.

use super::super::model::BaseUrl;

/// `http://host[:port][/prefix]` or `https://host[:port][/prefix]`.
pub(crate) fn parse_base_url(text: &str) -> Result<BaseUrl, String> {
    let expected = "expected a base URL like `http://127.0.0.1:8080` or `https://shop.example`";
    let trimmed = text.trim();
    let (tls, rest) = match (
        trimmed.strip_prefix("http://"),
        trimmed.strip_prefix("https://"),
    ) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(format!("{expected}, found `{text}`")),
    };
    if rest.contains(['?', '#']) {
        return Err(format!(
            "{expected} without a query or fragment, found `{text}`"
        ));
    }
    // A space or control character would break the request line.
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{expected}, found `{text}`: a URL has no spaces or control characters (write a space in a path as %20)"
        ));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{expected}, found `{text}`"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains('@') {
        return Err(format!("{expected}, found `{text}` (no valid host)"));
    }
    let port =
        match port {
            None if tls => 443,
            None => 80,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                format!("{expected}, found `{text}` (port `{p}` is not in 1..65535)")
            })?,
        };
    Ok(BaseUrl {
        tls,
        host: host.to_string(),
        port,
        path_prefix: path.trim_end_matches('/').to_string(),
    })
}

/// A plain-HTTP base URL, for autoperf's own agents and a schema registry
/// (their clients speak no TLS).
pub(crate) fn parse_plain_base_url(text: &str) -> Result<BaseUrl, String> {
    let url = parse_base_url(text)?;
    if url.tls {
        return Err(format!(
            "expected an `http://` URL, found `{text}`: this client speaks plain HTTP only"
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_ports_and_bad_urls() {
        let u = parse_base_url("https://shop.example/app/").unwrap();
        assert_eq!((u.tls, u.port, u.path_prefix.as_str()), (true, 443, "/app"));
        assert_eq!(u.to_string(), "https://shop.example:443/app");
        let u = parse_base_url("http://[::1]:8080").unwrap();
        assert_eq!((u.tls, u.host.as_str(), u.port), (false, "::1", 8080));
        assert!(parse_base_url("ftp://x").is_err());
        assert!(parse_base_url("http://127.0.0.1/a b")
            .unwrap_err()
            .contains("no spaces"));
        assert!(parse_base_url("http://127.0.0.1/a\r\nX: y").is_err());
        assert!(parse_plain_base_url("https://127.0.0.1:9870").is_err());
    }
}
