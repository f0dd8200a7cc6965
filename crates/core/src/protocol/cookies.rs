//! One virtual user's cookie jar: RFC 6265's rules (domain, path, expiry
//! and Max-Age, Secure, HttpOnly) by the `cookie_store` crate, fed the
//! `Set-Cookie` headers of responses and asked for the `Cookie` header of
//! each request. A user that never received a cookie has no jar, and its
//! requests cost nothing more.
//!
//! A cookie with a control character is dropped (RFC 6265bis 5.6: it could
//! smuggle a header into the next request), and a jar keeps at most
//! `MAX_COOKIES` (a response of 5,000 `Set-Cookie`s once became a 62 KB
//! `Cookie:` header): the ones past it are dropped, every time alike.

use cookie_store::CookieStore;
use url::Url;

/// Cookies one user keeps at most (browsers keep 180 per domain; RFC 6265
/// asks for at least 50).
const MAX_COOKIES: usize = 180;

#[derive(Default)]
pub(crate) struct Jar {
    store: CookieStore,
}

impl Jar {
    /// Stores every `Set-Cookie` of a response head (status line and
    /// headers, as received) to a request for `url`.
    pub(crate) fn take_from(&mut self, head: &[u8], url: &Url) {
        let Ok(head) = std::str::from_utf8(head) else {
            return;
        };
        for line in head.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("set-cookie") {
                let value = value.trim();
                if !super::request::header_value_ok(value.as_bytes())
                    || self.store.iter_any().count() >= MAX_COOKIES
                {
                    continue;
                }
                // A cookie the rules reject (another domain, a Secure one
                // over http) is dropped, as a browser drops it.
                let _ = self.store.parse(value, url);
            }
        }
    }

    /// Appends `Cookie: a=1; b=2\r\n` for a request to `url`, when any
    /// cookie applies.
    pub(crate) fn write_header(&self, url: &Url, out: &mut Vec<u8>) {
        let mut first = true;
        for (name, value) in self.store.get_request_values(url) {
            out.extend_from_slice(if first { b"Cookie: " } else { b"; " });
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
            first = false;
        }
        if !first {
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The value of an unexpired cookie called `name` (any domain, path).
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.store
            .iter_unexpired()
            .find(|c| c.name() == name)
            .map(|c| c.value())
    }

    pub(crate) fn clear(&mut self) {
        self.store.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_6265_rules_decide_what_goes_back() {
        let mut jar = Jar::default();
        let login = Url::parse("http://shop.example/shop/login").unwrap();
        jar.take_from(
            b"HTTP/1.1 303 See Other\r\nSet-Cookie: sid=abc; Path=/shop; HttpOnly\r\nset-cookie: theme=dark; Path=/\r\nSet-Cookie: cart=3\r\nSet-Cookie: secure=1; Secure\r\nSet-Cookie: gone=1; Max-Age=0\r\n\r\n",
            &login,
        );
        let mut out = Vec::new();
        jar.write_header(
            &Url::parse("http://shop.example/shop/home").unwrap(),
            &mut out,
        );
        let header = String::from_utf8(out).unwrap();
        assert!(
            header.starts_with("Cookie: ") && header.ends_with("\r\n"),
            "{header}"
        );
        assert!(
            header.contains("sid=abc")
                && header.contains("theme=dark")
                && header.contains("cart=3"),
            "{header}"
        );
        // Secure cookies only over https (loopback counts as secure, as in
        // browsers, hence a name here); expired ones never.
        assert!(
            !header.contains("secure=1") && !header.contains("gone"),
            "{header}"
        );
        // Path rules: /shop's cookies (cart's default path is /shop, the
        // login's directory) do not go to /other.
        let mut out = Vec::new();
        jar.write_header(&Url::parse("http://shop.example/other").unwrap(), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "Cookie: theme=dark\r\n");
        assert_eq!(jar.value("sid"), Some("abc"));
        jar.clear();
        assert_eq!(jar.value("sid"), None);
    }

    #[test]
    fn cookies_with_control_characters_are_dropped_and_a_jar_holds_so_many() {
        let mut jar = Jar::default();
        let url = Url::parse("http://shop.example/").unwrap();
        jar.take_from(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: bell=a\x07b\r\nSet-Cookie: ok=1\r\n\r\n",
            &url,
        );
        assert_eq!(jar.value("bell"), None);
        assert_eq!(jar.value("ok"), Some("1"));
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..5_000 {
            head.extend_from_slice(format!("Set-Cookie: c{i}=v\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        for _ in 0..2 {
            jar.take_from(&head, &url);
            assert_eq!(jar.store.iter_any().count(), MAX_COOKIES);
        }
        // The first ones kept, the same every time.
        assert_eq!(jar.value("c0"), Some("v"));
        assert_eq!(jar.value("c4999"), None);
    }
}
