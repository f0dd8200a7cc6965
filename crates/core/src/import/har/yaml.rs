//! The scenario's text: each step's request named, printed with its
//! values correlated (printing a request is what correlates it), and the
//! journey as a session that walks the steps in order.

use std::fmt::Write;
use std::path::Path;

use crate::import::classes::{
    identifier, looks_like_id, safe_name, segments, Template, UniqueNames,
};
use crate::import::write::{comment, literal, ms, q, uri_literal};
use crate::import::{scenario_name, Outputs};

use super::correlate::{json_template, Correlator};
use super::recording::{Recording, Step, StepBody};
use super::{tell, HarProgress, HarStage};

/// What the scenario says around its requests' text: the recording it
/// came from and what that held, where it is sent, the requests' names.
pub(super) struct Journey<'a> {
    pub(super) source: &'a Path,
    /// The import report's page, which the scenario's head names.
    pub(super) report: &'a Path,
    pub(super) recording: &'a Recording,
    pub(super) base_url: &'a str,
    /// Each step's request name.
    pub(super) names: &'a [String],
}

/// A request name for each step, from its method and the words of its
/// path (identifiers left out): `home`, `post_login`, `items_2`.
pub(super) fn request_names(steps: &[Step]) -> Vec<String> {
    let mut used = UniqueNames::default();
    steps
        .iter()
        .map(|s| {
            let segs: Vec<Option<String>> = segments(&s.target)
                .into_iter()
                .map(|seg| (!looks_like_id(seg)).then(|| seg.to_string()))
                .collect();
            let t = Template {
                method: s.method.clone(),
                segments: segs,
                count: 1,
            };
            let base = if s.method == "GET" {
                t.base_name()
            } else {
                safe_name(format!("{}_{}", identifier(&s.method), t.base_name()))
            };
            used.name(base)
        })
        .collect()
}

/// The scenario's text. The requests are printed first, in order: that
/// makes the correlations `c` holds after, which the head counts and the
/// answers' `extract`s list.
pub(super) fn print(j: &Journey, c: &mut Correlator, progress: &mut dyn HarProgress) -> String {
    let steps = &j.recording.steps;
    let requests: Vec<String> = (0..steps.len())
        .map(|i| {
            tell(progress, HarStage::Correlating, i, steps.len());
            request(steps, i, c)
        })
        .collect();
    tell(progress, HarStage::Correlating, steps.len(), steps.len());
    let mut y = head(j, c.notes.len());
    for (i, text) in requests.iter().enumerate() {
        let _ = writeln!(
            y,
            "  {}:   # {} {}",
            j.names[i],
            steps[i].method,
            comment(&steps[i].target)
        );
        y.push_str(text);
        if let Some(ex) = c.extracts.get(&i) {
            y.push_str("    extract:\n");
            for (var, how) in ex {
                let _ = writeln!(y, "      {var}: {how}");
            }
        }
    }
    y.push_str(&session(j.names));
    y
}

/// The comment saying where the scenario came from, its name, target and
/// think time, up to its `requests:`.
fn head(j: &Journey, correlations: usize) -> String {
    let r = j.recording;
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Imported by `autoperf import` from {} (HAR): one recorded journey of {} steps\n\
         # ({} entries; {}). Cookies and redirects are autoperf's own; values the\n\
         # answers gave are extracted and sent again ({} correlations). Report: {}",
        comment(&Outputs::name_of(j.source)),
        r.steps.len(),
        r.entries,
        if r.skipped.is_empty() {
            "nothing skipped".to_string()
        } else {
            r.skipped
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
                + " skipped"
        },
        correlations,
        comment(&Outputs::name_of(j.report))
    );
    let _ = writeln!(y, "name: {}", q(&scenario_name(j.source)));
    let _ = writeln!(y, "target:\n  base_url: {}", q(j.base_url));
    y.push_str("think_time: 0s   # each step has the recording's own pause\nrequests:\n");
    y
}

/// Step `at`'s request, after its name: method, path, headers, body, its
/// check and the pause before the next step.
fn request(steps: &[Step], at: usize, c: &mut Correlator) -> String {
    let s = &steps[at];
    let mut r = String::new();
    if s.method != "GET" {
        let _ = writeln!(r, "    method: {}", q(&s.method));
    }
    let _ = writeln!(r, "    path: {}", q(&path(&s.target, at, c)));
    let mut headers = headers(s, at, c);
    let body = body(s, at, c, &mut headers);
    if !headers.is_empty() {
        r.push_str("    headers:\n");
        for (name, value) in &headers {
            let _ = writeln!(r, "      {}: {}", q(name), q(value));
        }
    }
    r.push_str(&body);
    r.push_str(&check(s));
    if let Some(next) = steps.get(at + 1) {
        let _ = writeln!(r, "    think_time: {}", ms((next.start - s.end).max(0.0)));
    }
    r
}

/// A path and query as a template: each segment and each query value a
/// whole value an answer may have given.
fn path(target: &str, at: usize, c: &mut Correlator) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut t: String = path
        .split('/')
        .map(|seg| {
            if seg.is_empty() {
                String::new()
            } else {
                c.uri_template(seg, at)
            }
        })
        .collect::<Vec<_>>()
        .join("/");
    if let Some(query) = query {
        t.push('?');
        let parts: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => format!("{}={}", uri_literal(k), c.uri_template(v, at)),
                None => uri_literal(kv),
            })
            .collect();
        t.push_str(&parts.join("&"));
    }
    t
}

/// The headers the step sends, their values templates.
fn headers(s: &Step, at: usize, c: &mut Correlator) -> Vec<(String, String)> {
    s.headers
        .iter()
        .map(|(name, value)| {
            let v = match value.split_once(' ') {
                // `Bearer <token>`: the token alone is the value.
                Some((scheme, token)) if name.eq_ignore_ascii_case("authorization") => {
                    format!("{} {}", literal(scheme), c.template(token, at))
                }
                _ => c.template(value, at),
            };
            (name.clone(), v)
        })
        .collect()
}

/// The body's lines (`form:`, `json:` or `body:`); a body sent as text
/// adds its `Content-Type` to `headers`.
fn body(s: &Step, at: usize, c: &mut Correlator, headers: &mut Vec<(String, String)>) -> String {
    let mut body = String::new();
    match &s.body {
        Some(StepBody::Form(pairs)) => {
            body.push_str("    form:\n");
            for (k, v) in pairs {
                let _ = writeln!(body, "      {}: {}", q(k), q(&c.template(v, at)));
            }
        }
        Some(StepBody::Json(j)) => {
            let mut numbers = false;
            let t = json_template(j, c, at, &mut numbers);
            if numbers {
                headers.push(("Content-Type".into(), "application/json".into()));
                let _ = writeln!(body, "    body: {}", q(&t));
            } else {
                // JSON text is YAML too: `json:` takes it as written.
                let _ = writeln!(body, "    json: {t}");
            }
        }
        Some(StepBody::Raw { mime, text }) => {
            headers.push(("Content-Type".into(), literal(mime)));
            let _ = writeln!(body, "    body: {}", q(&c.template(text, at)));
        }
        None => {}
    }
    body
}

/// The status the replay expects, and a redirect the recording did not
/// follow left unfollowed.
fn check(s: &Step) -> String {
    let mut r = String::new();
    let _ = writeln!(
        r,
        "    check: {{status: [{}]}}{}",
        // The browser's cache made it a 304; the replay asks afresh.
        if s.final_status == 304 {
            "200, 304".to_string()
        } else {
            s.final_status.to_string()
        },
        if s.redirects > 0 {
            format!(
                "   # after {} redirect{}",
                s.redirects,
                if s.redirects == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        }
    );
    if (300..400).contains(&s.final_status) && s.final_status != 304 {
        // The recording did not follow it here (off the origin, or a
        // hop left out): neither does the replay.
        r.push_str("    follow_redirects: false\n");
    }
    r
}

/// The session: the steps one after the other, once each.
fn session(names: &[String]) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "session:\n  start: {}\n  transitions:", names[0]);
    for (i, name) in names.iter().enumerate() {
        match names.get(i + 1) {
            Some(next) => {
                let _ = writeln!(y, "    {name}: {{{next}: 1}}");
            }
            None => {
                let _ = writeln!(y, "    {name}: {{}}");
            }
        }
    }
    y
}
