//! One virtual user's cookie jar: RFC 6265's rules (domain, path, expiry
//! and Max-Age, Secure, HttpOnly) by the `cookie_store` crate, fed the
//! `Set-Cookie` headers of responses and asked for the `Cookie` header of
//! each request. A user that never received a cookie has no jar, and its
//! requests cost nothing more.

use cookie_store::CookieStore;
use url::Url;

#[derive(Default)]
pub struct Jar {
    store: CookieStore,
}

impl Jar {
    /// Stores every `Set-Cookie` of a response head (status line and
    /// headers, as received) to a request for `url`.
    pub fn take_from(&mut self, head: &[u8], url: &Url) {
        let Ok(head) = std::str::from_utf8(head) else {
            return;
        };
        for line in head.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("set-cookie") {
                // A cookie the rules reject (another domain, a Secure one
                // over http) is dropped, as a browser drops it.
                let _ = self.store.parse(value.trim(), url);
            }
        }
    }

    /// Appends `Cookie: a=1; b=2\r\n` for a request to `url`, when any
    /// cookie applies.
    pub fn write_header(&self, url: &Url, out: &mut Vec<u8>) {
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
    pub fn value(&self, name: &str) -> Option<&str> {
        self.store
            .iter_unexpired()
            .find(|c| c.name() == name)
            .map(|c| c.value())
    }

    pub fn clear(&mut self) {
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
}
