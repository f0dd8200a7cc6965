//! What `run --trace` prints: each exchange, skip and transition a traced
//! user hands it, a line at a time, and the count of what it saw.

use std::io::Write;
use std::time::Duration;

use crate::measure::{printable, ErrorKind};
use crate::protocol::Hop;

/// The most of a body a trace prints.
const BODY_EXCERPT: usize = 600;

/// What a trace saw, for its last line and exit code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceSummary {
    pub exchanges: u64,
    pub failed: u64,
    pub skipped: u64,
}

/// Where a traced user's events are written, and what they add up to.
pub(crate) struct Tracer {
    out: Box<dyn Write>,
    summary: TraceSummary,
}

/// One exchange as a trace prints it.
pub(crate) struct Exchange<'a> {
    pub request: &'a str,
    pub hops: Vec<Hop>,
    pub result: Result<u16, ErrorKind>,
    pub response_time: Duration,
    pub body: &'a [u8],
    pub checks: Vec<(&'a str, bool)>,
    pub extracted: Vec<(&'a str, String)>,
    /// Why the script failed it, when it did.
    pub script_failure: Option<&'a str>,
}

/// A transition a user could take: its request, probability, and its
/// condition with whether it held.
pub(crate) type Way<'a> = (&'a str, f64, Option<(&'a str, bool)>);

/// One transition drawn: where it could go, and where it went.
pub(crate) struct Choice<'a> {
    pub from: &'a str,
    pub options: Vec<Way<'a>>,
    pub exit: f64,
    pub to: Option<&'a str>,
}

impl Tracer {
    pub(crate) fn new(out: Box<dyn Write>) -> Tracer {
        Tracer {
            out,
            summary: TraceSummary::default(),
        }
    }

    /// What it has seen so far.
    pub(crate) fn summary(&self) -> TraceSummary {
        self.summary
    }

    fn line(&mut self, text: std::fmt::Arguments) {
        // A closed pipe (`| head`) ends the output, not the trace.
        let _ = self.out.write_fmt(text);
        let _ = self.out.write_all(b"\n");
    }

    pub(crate) fn session(&mut self, user: u32, session: u32, class: Option<&str>) {
        match class {
            Some(class) => self.line(format_args!(
                "\n== user {user} ({class}), session {session}"
            )),
            None => self.line(format_args!("\n== user {user}, session {session}")),
        }
    }

    pub(crate) fn skipped(&mut self, request: &str, condition: &str) {
        self.summary.skipped += 1;
        self.line(format_args!(
            "-- {request}: skipped (skip_if `{condition}` held)"
        ));
    }

    pub(crate) fn exchange(&mut self, e: Exchange) {
        self.summary.exchanges += 1;
        self.summary.failed += u64::from(e.result.is_err());
        self.line(format_args!("-- {}", e.request));
        for (i, hop) in e.hops.iter().enumerate() {
            if i > 0 {
                self.line(format_args!("   (redirect followed)"));
            }
            self.message("> ", &hop.request);
            self.message("< ", &hop.head);
        }
        if !e.body.is_empty() {
            self.line(format_args!("<"));
            self.body("< ", e.body);
        }
        let ms = e.response_time.as_secs_f64() * 1e3;
        match e.result {
            Ok(status) => self.line(format_args!("   = {status} in {ms:.2} ms")),
            Err(kind) => self.line(format_args!(
                "   = FAILED: {} after {ms:.2} ms",
                kind.name()
            )),
        }
        if let Some(reason) = e.script_failure {
            self.line(format_args!("   script failed it: {reason}"));
        }
        for (check, passed) in e.checks {
            let mark = if passed { "passed" } else { "FAILED" };
            self.line(format_args!("   check {check}: {mark}"));
        }
        for (var, value) in e.extracted {
            self.line(format_args!("   extracted {var} = {value:?}"));
        }
    }

    /// The session was ended after `steps` requests.
    pub(crate) fn cut(&mut self, steps: u32) {
        self.line(format_args!(
            "   session ended by the trace after {steps} requests (its conditions never ended it)"
        ));
    }

    pub(crate) fn think(&mut self, think: Duration) {
        if !think.is_zero() {
            self.line(format_args!(
                "   think {:.3} s (not waited in a trace)",
                think.as_secs_f64()
            ));
        }
    }

    pub(crate) fn transition(&mut self, c: Choice) {
        let mut options: Vec<String> = c
            .options
            .iter()
            .map(|(to, p, when)| match when {
                Some((source, held)) => {
                    let verdict = if *held { "held" } else { "did not hold" };
                    format!("{to} {} when `{source}` {verdict}", round(*p))
                }
                None => format!("{to} {}", round(*p)),
            })
            .collect();
        if c.exit > 1e-9 || options.is_empty() {
            options.push(format!("end {}", round(c.exit)));
        }
        let to = c.to.unwrap_or("end of session");
        self.line(format_args!(
            "   next: {to}  (from {}: {})",
            c.from,
            options.join(", ")
        ));
    }

    /// An HTTP message's head (and a body, if it carries one) a line at a
    /// time, after `mark`.
    fn message(&mut self, mark: &str, bytes: &[u8]) {
        if bytes.is_empty() {
            self.line(format_args!("{mark}(no answer)"));
            return;
        }
        let (head, body) = match bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => (&bytes[..at], &bytes[at + 4..]),
            None => (bytes, &[][..]),
        };
        for line in String::from_utf8_lossy(head).lines() {
            self.line(format_args!("{mark}{}", printable(line)));
        }
        if !body.is_empty() {
            self.line(format_args!("{}", mark.trim_end()));
            self.body(mark, body);
        }
    }

    fn body(&mut self, mark: &str, body: &[u8]) {
        let shown = &body[..body.len().min(BODY_EXCERPT)];
        // Control bytes are escaped: a binary body cannot drive the
        // terminal.
        for line in String::from_utf8_lossy(shown).lines() {
            self.line(format_args!("{mark}{}", printable(line)));
        }
        if body.len() > shown.len() {
            self.line(format_args!(
                "{mark}… ({} more bytes)",
                body.len() - shown.len()
            ));
        }
    }
}

/// A probability as a trace prints it: at most 4 decimals.
fn round(p: f64) -> f64 {
    (p * 1e4).round() / 1e4
}
