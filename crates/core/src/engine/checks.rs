//! A request's `check:`s run on its complete response: each counted passed
//! or failed, and the verdict that turns the response into a success or a
//! `check_failed` error.

use crate::measure::{ErrorKind, RequestStats};
use crate::protocol::Response;
use crate::scenario::template::{Bindings, Template};
use crate::scenario::{Check, CheckKind};

/// Runs `checks` on a response with `status`, counting each in `stats`;
/// returns what the request came to: `result` as the transport saw it,
/// overruled by the checks. A `status` check decides success by itself
/// (an expected 404 is a success); any failed check makes the request a
/// `check_failed` error, unless it already failed on its status. Values
/// with templates render with `bindings`.
pub(crate) fn judge(
    checks: &[Check],
    status: u16,
    result: Result<u16, ErrorKind>,
    response: &Response,
    bindings: &mut impl Bindings,
    stats: &mut RequestStats,
) -> Result<u16, ErrorKind> {
    let mut json: Option<Option<serde_json::Value>> = None;
    let mut scratch = Vec::new();
    let mut all_passed = true;
    let mut status_checked = false;
    for (i, check) in checks.iter().enumerate() {
        let passed = match &check.kind {
            CheckKind::Status(codes) => {
                status_checked = true;
                codes.contains(&status)
            }
            CheckKind::BodyContains(needle) => value(needle, bindings, &mut scratch)
                .is_some_and(|needle| contains(&response.body, needle)),
            CheckKind::BodyRegex(re) => re.is_match(&response.body),
            CheckKind::Header { name, regex } => {
                response.header(name).is_some_and(|v| regex.is_match(v))
            }
            CheckKind::Json { path, expected } => {
                let expected = value(expected, bindings, &mut scratch);
                let doc = json.get_or_insert_with(|| serde_json::from_slice(&response.body).ok());
                match (doc.as_ref(), expected) {
                    (Some(doc), Some(expected)) => path.query(doc).all().iter().any(|v| match v {
                        serde_json::Value::String(s) => s.as_bytes() == expected,
                        other => other.to_string().as_bytes() == expected,
                    }),
                    _ => false,
                }
            }
        };
        stats.record_check(i, passed);
        all_passed &= passed;
    }
    match (all_passed, status_checked, result) {
        (true, true, _) => Ok(status),
        (true, false, result) => result,
        (false, false, Err(kind)) => Err(kind),
        (false, _, _) => Err(ErrorKind::CheckFailed),
    }
}

/// A check's value: its text, or its rendering when it has templates
/// (None when an expression in it could not be computed: the check fails).
fn value<'a>(
    t: &'a Template,
    bindings: &mut impl Bindings,
    scratch: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    match t.static_bytes() {
        Some(bytes) => Some(bytes),
        None => {
            scratch.clear();
            t.render(bindings, scratch).ok()?;
            Some(scratch)
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::template::{Escape, Names};
    use crate::scenario::{FeederId, VarId};

    /// Bindings where the one variable holds `ann`.
    struct NoValues;

    impl Bindings for NoValues {
        fn random(&mut self, lo: i64, _hi: i64) -> i64 {
            lo
        }
        fn unit(&mut self) -> f64 {
            0.0
        }
        fn column(&mut self, _feeder: FeederId, _column: usize) -> &[u8] {
            b""
        }
        fn var(&self, _var: VarId) -> &[u8] {
            b"ann"
        }
    }

    fn check(name: &str, kind: CheckKind) -> Check {
        Check {
            name: name.into(),
            kind,
        }
    }

    fn response(head: &str, body: &str) -> Response {
        Response {
            head: head.as_bytes().to_vec(),
            body: body.as_bytes().to_vec(),
            ..Response::default()
        }
    }

    #[test]
    fn every_kind_of_check() {
        let r = response(
            "HTTP/1.1 302 Found\r\nLocation: /shop/home\r\nSet-Cookie: s=1\r\n\r\n",
            r#"{"user": {"id": 7, "name": "ann"}, "ok": true}"#,
        );
        let checks = vec![
            check("status", CheckKind::Status(vec![200, 302])),
            check(
                "body_contains",
                CheckKind::BodyContains(Template::literal("ann")),
            ),
            check(
                "body_regex",
                CheckKind::BodyRegex(regex::bytes::Regex::new(r#""id": \d+"#).unwrap()),
            ),
            check(
                "header location",
                CheckKind::Header {
                    name: "location".into(),
                    regex: regex::Regex::new("^/shop/").unwrap(),
                },
            ),
            check(
                "json $.user.id",
                CheckKind::Json {
                    path: serde_json_path::JsonPath::parse("$.user.id").unwrap(),
                    expected: Template::literal("7"),
                },
            ),
            check(
                "json $.user.name",
                CheckKind::Json {
                    path: serde_json_path::JsonPath::parse("$.user.name").unwrap(),
                    expected: Template::literal("ann"),
                },
            ),
        ];
        let mut stats = RequestStats::default();
        assert_eq!(
            judge(&checks, 302, Ok(302), &r, &mut NoValues, &mut stats),
            Ok(302)
        );
        assert!(stats.checks.iter().all(|c| c.passed == 1 && c.failed == 0));
        // The same response to a request that wanted other things.
        let wrong = vec![
            check(
                "body_contains",
                CheckKind::BodyContains(Template::literal("bob")),
            ),
            check(
                "header x-missing",
                CheckKind::Header {
                    name: "x-missing".into(),
                    regex: regex::Regex::new(".").unwrap(),
                },
            ),
        ];
        let mut stats = RequestStats::default();
        assert_eq!(
            judge(&wrong, 302, Ok(302), &r, &mut NoValues, &mut stats),
            Err(ErrorKind::CheckFailed)
        );
        assert_eq!(stats.checks[0].failed, 1);
        assert_eq!(stats.checks[1].failed, 1);
    }

    #[test]
    fn a_status_check_decides_success_by_itself() {
        let r = response("HTTP/1.1 404 Not Found\r\n\r\n", "");
        let expect_404 = vec![check("status", CheckKind::Status(vec![404]))];
        let mut stats = RequestStats::default();
        assert_eq!(
            judge(
                &expect_404,
                404,
                Err(ErrorKind::Http4xx),
                &r,
                &mut NoValues,
                &mut stats
            ),
            Ok(404)
        );
        // Without a status check, a 404 stays a 4xx error, and a failed
        // body check does not hide it.
        let body = vec![check(
            "body_contains",
            CheckKind::BodyContains(Template::literal("x")),
        )];
        assert_eq!(
            judge(
                &body,
                404,
                Err(ErrorKind::Http4xx),
                &r,
                &mut NoValues,
                &mut stats
            ),
            Err(ErrorKind::Http4xx)
        );
        let expect_200 = vec![check("status", CheckKind::Status(vec![200]))];
        assert_eq!(
            judge(
                &expect_200,
                404,
                Err(ErrorKind::Http4xx),
                &r,
                &mut NoValues,
                &mut stats
            ),
            Err(ErrorKind::CheckFailed)
        );
    }

    #[test]
    fn check_values_may_hold_the_users_values() {
        let r = response("HTTP/1.1 200 OK\r\n\r\n", r#"{"user": {"name": "ann"}}"#);
        let variables = vec!["who".to_string()];
        let names = Names {
            feeders: Vec::new(),
            variables: &variables,
        };
        let who = || Template::compile("${who}", Escape::None, &names).unwrap();
        let checks = vec![
            check("body_contains", CheckKind::BodyContains(who())),
            check(
                "json $.user.name",
                CheckKind::Json {
                    path: serde_json_path::JsonPath::parse("$.user.name").unwrap(),
                    expected: who(),
                },
            ),
        ];
        let mut stats = RequestStats::default();
        assert_eq!(
            judge(&checks, 200, Ok(200), &r, &mut NoValues, &mut stats),
            Ok(200)
        );
        assert!(
            stats.checks.iter().all(|c| c.passed == 1),
            "{:?}",
            stats.checks
        );
        let other = response("HTTP/1.1 200 OK\r\n\r\n", r#"{"user": {"name": "bob"}}"#);
        let mut stats = RequestStats::default();
        assert_eq!(
            judge(&checks, 200, Ok(200), &other, &mut NoValues, &mut stats),
            Err(ErrorKind::CheckFailed)
        );
    }
}
