use super::*;

struct Fixed {
    row: Vec<Vec<u8>>,
    vars: Vec<Vec<u8>>,
}

impl Bindings for Fixed {
    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(lo <= hi);
        hi
    }
    fn unit(&mut self) -> f64 {
        0.5
    }
    fn now_ms(&mut self) -> i64 {
        1_700_000_000_123
    }
    fn column(&mut self, _feeder: FeederId, column: usize) -> &[u8] {
        &self.row[column]
    }
    fn var(&self, var: VarId) -> &[u8] {
        self.vars.get(var.index()).map_or(&[], |v| &v[..])
    }
}

fn names<'a>(columns: &'a [String], vars: &'a [String]) -> Names<'a> {
    Names {
        feeders: vec![("actors", Some(columns))],
        variables: vars,
    }
}

fn render(src: &str, escape: Escape) -> String {
    let columns = vec!["name".to_string(), "id".to_string()];
    let vars = vec!["token".to_string()];
    let t = Template::compile(src, escape, &names(&columns, &vars)).unwrap();
    let mut b = Fixed {
        row: vec![b"A b/\"c\"\r\n&=".to_vec(), b"7".to_vec()],
        vars: vec![b"x y".to_vec()],
    };
    let mut out = b"prefix:".to_vec();
    t.render(&mut b, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn raw_keeps_a_path_as_written_but_never_breaks_the_line() {
    // The value is `A b/"c"` CR LF `&=`.
    assert_eq!(
        render("/${raw(actors.name)}", Escape::Path),
        "prefix:/A%20b/%22c%22%0D%0A&="
    );
    assert_eq!(
        render("/${actors.name}", Escape::Path),
        "prefix:/A%20b%2F%22c%22%0D%0A%26%3D"
    );
    assert_eq!(render("${ raw( token ) }", Escape::Path), "prefix:x%20y");
    // In a body, raw is verbatim; in a header, still without CR LF.
    assert_eq!(
        render("{\"a\": ${raw(actors.name)}}", Escape::Json),
        "prefix:{\"a\": A b/\"c\"\r\n&=}"
    );
    assert_eq!(
        render("${raw(actors.name)}", Escape::Header),
        "prefix:A b/\"c\"&="
    );
    let columns = vec!["name".to_string()];
    let err = Template::compile("/${raw(random(1, 2))}", Escape::Path, &names(&columns, &[]))
        .unwrap_err();
    assert!(err[0].message.contains("`raw(…)` takes"), "{err:?}");
}

#[test]
fn every_escape() {
    let src = "/a b?n=${actors.name}&t=${token}&r=${random(-5, 12)}";
    assert_eq!(
        render(src, Escape::None),
        "prefix:/a b?n=A b/\"c\"\r\n&=&t=x y&r=12"
    );
    assert_eq!(
        render(src, Escape::Path),
        "prefix:/a b?n=A%20b%2F%22c%22%0D%0A%26%3D&t=x%20y&r=12"
    );
    assert_eq!(
        render(src, Escape::Form),
        "prefix:/a b?n=A+b%2F%22c%22%0D%0A%26%3D&t=x+y&r=12"
    );
    assert_eq!(
        render(src, Escape::Json),
        "prefix:/a b?n=A b/\\\"c\\\"\\r\\n&=&t=x y&r=12"
    );
    assert_eq!(
        render(src, Escape::Header),
        "prefix:/a b?n=A b/\"c\"&=&t=x y&r=12"
    );
}

#[test]
fn literal_dollars_and_static() {
    let vars: Vec<String> = vec![];
    let n = names(&[], &vars);
    let t = Template::compile("cost $5, $${x} $$", Escape::None, &n).unwrap();
    assert_eq!(t.static_bytes(), Some(&b"cost $5, ${x} $"[..]));
    assert_eq!(Template::literal("/x").static_bytes(), Some(&b"/x"[..]));
    let columns = vec!["name".to_string()];
    let t = Template::compile(
        "${actors.name}${actors.name}",
        Escape::None,
        &names(&columns, &vars),
    )
    .unwrap();
    assert!(t.static_bytes().is_none());
    assert_eq!(t.feeders().collect::<Vec<_>>(), vec![FeederId(0)]);
}

#[test]
fn literal_parts_escaped_by_builder() {
    let vars = vec!["v".to_string()];
    let n = names(&[], &vars);
    let mut b = Builder::new(Escape::Json);
    b.literal(b"{\"k\":\"");
    assert!(b.source("a\"b ${v}", Escape::Json, &n).is_empty());
    b.literal(b"\"}");
    let t = b.finish();
    let mut out = Vec::new();
    t.render(
        &mut Fixed {
            row: vec![],
            vars: vec![b"q\"".to_vec()],
        },
        &mut out,
    )
    .unwrap();
    assert_eq!(out, b"{\"k\":\"a\\\"b q\\\"\"}");
}

#[test]
fn errors_with_offsets() {
    let columns = vec!["name".to_string()];
    let vars = vec!["token".to_string()];
    let n = names(&columns, &vars);
    let err = |src: &str| Template::compile(src, Escape::None, &n).unwrap_err();

    let e = err("ab ${tokn}");
    assert_eq!(e[0].offset, 3);
    assert_eq!(e[0].message, "unknown variable `tokn`");
    assert_eq!(e[0].hint.as_deref(), Some("did you mean `token`?"));

    let e = err("${actor.name} ${actors.nam}");
    assert_eq!(e.len(), 2);
    assert!(e[0].message.contains("unknown data feeder `actor`"));
    assert_eq!(e[0].hint.as_deref(), Some("did you mean `actors`?"));
    assert_eq!(e[1].offset, 14);
    assert_eq!(e[1].message, "data feeder `actors` has no column `nam`");
    assert_eq!(e[1].hint.as_deref(), Some("did you mean `name`?"));

    assert!(err("x${random(5,1)}")[0].message.contains("lo <= hi"));
    assert!(err("${random(1)}")[0].message.contains("two integers"));
    assert!(err("${random(a,2)}")[0].message.contains("two integers"));
    let e = err("a ${token");
    assert_eq!(
        (e[0].offset, e[0].message.as_str()),
        (2, "unclosed `${`: expected `}`")
    );
    assert!(err("${}")[0].message.starts_with("expected `${random"));
    assert!(err("${actors}")[0].message.contains("is a data feeder"));
}

#[test]
fn clock_and_decimals() {
    let vars: Vec<String> = vec![];
    let n = names(&[], &vars);
    let t = Template::compile(
        "${now_ms()} ${ now_ms( ) } ${random(0.0, 100.0)} ${random(-1.5,-1.5)}",
        Escape::None,
        &n,
    )
    .unwrap();
    let out = unbound(&t);
    assert_eq!(out, b"1700000000123 1700000000123 50 -1.5");
    let err = |src: &str| Template::compile(src, Escape::None, &n).unwrap_err();
    assert!(err("${now_ms(1)}")[0].message.contains("without arguments"));
    assert_eq!(
        err("${now_ms}")[0].hint.as_deref(),
        Some("write `${now_ms()}` for the time")
    );
    assert!(err("${random(2.0, 1.0)}")[0].message.contains("lo <= hi"));
    assert!(err("${random(x.0, 1.0)}")[0]
        .message
        .contains("two decimals"));
}

#[test]
fn unread_feeder_accepts_any_column() {
    let vars: Vec<String> = vec![];
    let n = Names {
        feeders: vec![("f", None)],
        variables: &vars,
    };
    assert!(Template::compile("${f.anything}", Escape::None, &n).is_ok());
}

/// `t` rendered with no row and no variable bound.
fn unbound(t: &Template) -> Vec<u8> {
    let mut out = Vec::new();
    t.render(
        &mut Fixed {
            row: vec![],
            vars: vec![],
        },
        &mut out,
    )
    .unwrap();
    out
}

/// Renders `src` (no escaping) with variables `n` and `s` bound as given.
fn compute(src: &str, n: &str, s: &str) -> Result<String, BadValue> {
    let vars = vec!["n".to_string(), "s".to_string()];
    let t = Template::compile(src, Escape::None, &names(&[], &vars)).unwrap();
    let mut b = Fixed {
        row: vec![],
        vars: vec![n.as_bytes().to_vec(), s.as_bytes().to_vec()],
    };
    let mut out = Vec::new();
    t.render(&mut b, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn functions_compute_known_values() {
    let f = |src: &str| compute(src, "41", "Hé \"x\"").unwrap();
    assert_eq!(
        f(r#"${sha256("abc")}"#),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // RFC 4231-style check value (Wikipedia's HMAC example).
    assert_eq!(
        f(r#"${hmac_sha256("key", "The quick brown fox jumps over the lazy dog")}"#),
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    );
    assert_eq!(
        f(r#"${hmac_sha256("key", "The quick brown fox jumps over the lazy dog", "base64")}"#),
        "97yD9DBThCSxMpjmqm+xQ+9NWaFJRhdZl0edvC0aPNg="
    );
    assert_eq!(
        f(r#"${base64("hello")} ${base64("??>")} ${base64url("??>")}"#),
        "aGVsbG8= Pz8+ Pz8-"
    );
    assert_eq!(f(r#"${urlencode("a b/é")}"#), "a%20b%2F%C3%A9");
    assert_eq!(
        f("${json(s)} ${upper(s)} ${lower(\"ÀB\")}"),
        "Hé \\\"x\\\" HÉ \"X\" àb"
    );
    assert_eq!(f(r#"${concat("a", n, "\n", 7)}"#), "a41\n7");
    // The clock reads 1_700_000_000_123 ms: 2023-11-14T22:13:20.123Z.
    assert_eq!(f("${now()}"), "2023-11-14T22:13:20Z");
    assert_eq!(f(r#"${now("rfc3339_ms")}"#), "2023-11-14T22:13:20.123Z");
    assert_eq!(f(r#"${now("epoch_s", "+1d")}"#), "1700086400");
    assert_eq!(f(r#"${now("-1h", "epoch_ms")}"#), "1699996400123");
    // Fixed's draws are the top of each range.
    assert_eq!(f("${random_string(5)} ${pick(\"a\", n, \"c\")}"), "99999 c");
    let uuid = f("${uuid()}");
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_eq!(&uuid[14..15], "4", "version 4: {uuid}");
    assert!("89ab".contains(&uuid[19..20]), "variant 10: {uuid}");
    // Nested calls.
    assert_eq!(
        f(r#"${upper(sha256(concat("a", "bc")))}"#),
        f(r#"${upper("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")}"#)
    );
}

#[test]
fn integer_arithmetic_on_values() {
    assert_eq!(compute("${n + 1}", "41", "").unwrap(), "42");
    assert_eq!(
        compute("${(n - 6) * 3 % 4} ${-2 * n}", " 41 ", "").unwrap(),
        "1 -82"
    );
    assert_eq!(compute("${n / 2}", "-7", "").unwrap(), "-3");
    // A value not bound yet counts as 0; text is not a number.
    assert_eq!(compute("${n + 1}", "", "").unwrap(), "1");
    assert_eq!(compute("${s + 1}", "", "abc"), Err(BadValue));
    assert_eq!(compute("${n / 0}", "1", ""), Err(BadValue));
    assert_eq!(
        compute("${n * 2}", "9223372036854775807", ""),
        Err(BadValue)
    );
    assert_eq!(compute("${random_string(n)}", "-1", ""), Err(BadValue));
}

#[test]
fn expression_values_are_escaped_for_their_place() {
    let vars = vec![];
    let t = Template::compile(
        r#"/p/${base64("??>")}?x=${raw(base64("??>"))}"#,
        Escape::Path,
        &names(&[], &vars),
    )
    .unwrap();
    let out = unbound(&t);
    assert_eq!(out, b"/p/Pz8%2B?x=Pz8+");
    // A quoted `}` does not end the expansion.
    let t = Template::compile(r#"${concat("}", "{")}"#, Escape::None, &names(&[], &vars)).unwrap();
    let out = unbound(&t);
    assert_eq!(out, b"}{");
}

#[test]
fn expression_errors_name_the_fix() {
    let vars = vec!["n".to_string()];
    let n = names(&[], &vars);
    let err = |src: &str| {
        Template::compile(src, Escape::None, &n)
            .unwrap_err()
            .remove(0)
    };
    let e = err("x ${uuidd()}");
    assert_eq!(
        (e.offset, e.message.as_str()),
        (2, "unknown function `uuidd` in `${uuidd()}`")
    );
    assert_eq!(e.hint.as_deref(), Some("did you mean `uuid`?"));
    assert!(err("${frobnicate(1)}")
        .hint
        .unwrap()
        .starts_with("the functions are: uuid, base64"));
    let e = err("${sha256()}");
    assert!(
        e.message
            .starts_with("`sha256` takes 1 argument (sha256(text), lowercase hex), found 0"),
        "{e:?}"
    );
    assert!(err("${hmac_sha256(n, n, \"b64\")}")
        .message
        .contains(r#""hex" or "base64""#));
    assert!(err(r#"${now("fortnight")}"#)
        .message
        .contains("unknown time format `fortnight`"));
    assert!(err(r#"${now("+1 fortnight")}"#)
        .message
        .contains("offset `+1 fortnight`"));
    assert_eq!(
        err("${n-1}").hint.as_deref(),
        Some("`-` is part of a name; to subtract, put spaces around it: `n - 1`")
    );
    assert_eq!(
        err("${sha256}").hint.as_deref(),
        Some("a function is called: `sha256(…)`")
    );
    assert!(err("${n + }")
        .message
        .contains("expected a value at the end"));
    assert!(err("${concat(n n)}")
        .message
        .contains("expected `,` or `)`"));
    assert!(err(r#"${concat("a)}"#).message.contains("unclosed string"));
    assert!(err("${1.5 + n}")
        .message
        .contains("arithmetic is on integers"));
}

#[test]
fn review_cases_resolve_as_a_user_expects() {
    let columns = ["first name".to_string(), "price(EUR)".to_string()];
    let vars = vec!["n".to_string()];
    let n = Names {
        feeders: vec![("f", Some(&columns[..]))],
        variables: &vars,
    };
    let compile = |src: &str| Template::compile(src, Escape::None, &n);
    // Columns named anything are still columns.
    let t = compile("${f.first name}|${f.price(EUR)}").unwrap();
    let mut out = Vec::new();
    let mut b = Fixed {
        row: vec![b"Ann".to_vec(), b"7".to_vec()],
        vars: vec![b"1".to_vec()],
    };
    t.render(&mut b, &mut out).unwrap();
    assert_eq!(out, b"Ann|7");
    // An apostrophe in an environment default is a letter.
    let t = compile("${env.AUTOPERF_SURELY_UNSET_VAR:-it's me}").unwrap();
    assert_eq!(unbound(&t), b"it's me");
    // `raw(a) + raw(b)` is not one raw.
    assert!(compile("${raw(n) + raw(n)}").is_err());
    // Arithmetic on what is always text is refused at load time.
    for src in [
        "${uuid() + 1}",
        "${\"abc\" + 1}",
        "${random(0.0, 1.0) * 100}",
        "${now() + 1}",
    ] {
        let e = compile(src).unwrap_err().remove(0);
        assert!(e.message.contains("computes on integers"), "{src}: {e:?}");
    }
    assert!(compile("${\"41\" + 1} ${now(\"epoch_s\") + 60}").is_ok());
    assert!(compile("${now(\"+200y\")}").unwrap_err()[0]
        .message
        .contains("more than 100 years"));
}

#[test]
fn second_review_cases() {
    let vars = vec!["n".to_string()];
    let n = names(&[], &vars);
    let compile = |src: &str| Template::compile(src, Escape::None, &n);
    // Quotes and environment defaults inside `raw(…)`.
    let t = compile(r#"${raw(concat(n, ":)"))}"#).unwrap();
    assert_eq!(unbound(&t), b":)");
    let t = compile("${raw(env.AUTOPERF_SURELY_UNSET_VAR:-it's (1))}'").unwrap();
    assert_eq!(unbound(&t), b"it's (1)'");
    // The fix named fits the case.
    let hint = |src: &str| compile(src).unwrap_err().remove(0).hint.unwrap();
    assert!(hint("${random(0.0, 1.0) * 100}").contains("integer bounds"));
    assert!(hint("${now() + 60}").contains("epoch_s"));
    assert!(compile("${json(n) + 1} ${urlencode(n) * 2}").is_ok());
    assert!(
        compile(r#"${now("+100y")}"#).is_ok(),
        "100 of humantime's years"
    );
    // A bad environment name is named as one.
    let e = compile("${env.MY VAR}").unwrap_err().remove(0);
    assert!(e.message.contains("environment variable name"), "{e:?}");
}
