//! The template engine: any source compiles or gives errors at offsets
//! inside it; a compiled template renders; and every escaping keeps its
//! promise for any value (percent-encoding and JSON decode back to the
//! value, headers hold no line break, a raw URI no byte that breaks the
//! request line).
//!
//! Input: byte 0 picks the escaping; up to the first 0xFF byte is the
//! template source, the rest the value every expansion renders.
#![no_main]
use autoperf_core::scenario::ids::{FeederId, VarId};
use autoperf_core::scenario::template::{escape, Bindings, Escape, Names, Template};
use libfuzzer_sys::fuzz_target;

const ESCAPES: [Escape; 6] = [
    Escape::None,
    Escape::Path,
    Escape::Form,
    Escape::Json,
    Escape::Header,
    Escape::Uri,
];

struct Fixed<'a>(&'a [u8]);

impl Bindings for Fixed<'_> {
    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(lo <= hi, "random({lo}, {hi}) compiled");
        lo
    }
    fn unit(&mut self) -> f64 {
        0.5
    }
    fn now_ms(&mut self) -> i64 {
        0
    }
    fn column(&mut self, _feeder: FeederId, _column: usize) -> &[u8] {
        self.0
    }
    fn var(&self, _var: VarId) -> &[u8] {
        self.0
    }
}

fn unpercent(text: &[u8], plus_is_space: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'%' => {
                let hex = std::str::from_utf8(&text[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
                continue;
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [pick, rest @ ..] = data else { return };
    let how = ESCAPES[*pick as usize % ESCAPES.len()];
    let (source, value) = match rest.iter().position(|&b| b == 0xFF) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };

    // The escaping alone, checked against its contract.
    let mut out = Vec::new();
    escape(how, value, &mut out);
    match how {
        Escape::None => assert_eq!(out, value),
        Escape::Path => assert_eq!(unpercent(&out, false), value),
        Escape::Form => assert_eq!(unpercent(&out, true), value),
        Escape::Json => {
            if let Ok(text) = std::str::from_utf8(value) {
                let quoted = [b"\"", &out[..], b"\""].concat();
                let back: String = serde_json::from_slice(&quoted).expect("escaped JSON parses");
                assert_eq!(back, text);
            }
        }
        Escape::Header => assert!(!out.iter().any(|&b| b == b'\r' || b == b'\n')),
        Escape::Uri => assert!(!out
            .iter()
            .any(|&b| b <= b' ' || b >= 0x7f || b"\"<>\\^`{|}".contains(&b))),
    }

    // A whole template.
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let columns = ["name".to_string(), "id".to_string()];
    let variables = ["token".to_string()];
    let names = Names {
        feeders: vec![("users", Some(&columns[..])), ("any", None)],
        variables: &variables,
    };
    match Template::compile(source, how, &names) {
        Ok(template) => {
            let mut rendered = Vec::new();
            let rendered_ok = template.render(&mut Fixed(value), &mut rendered).is_ok();
            if let Some(bytes) = template.static_bytes() {
                assert!(rendered_ok, "a template without expansions cannot fail");
                assert_eq!(rendered, bytes);
            }
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in errors {
                assert!(
                    e.offset <= source.len(),
                    "error at {} past {}",
                    e.offset,
                    source.len()
                );
            }
        }
    }
});
