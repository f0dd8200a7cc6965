//! Correlation: a value a later request sends that an earlier answer gave
//! — a JSON field, a hidden form field or meta tag, an application's own
//! response header — becomes an `extract` on that answer and `${variable}`
//! in the request, unless the user sent it before any answer had it (then
//! it is typed input and stays as recorded).

#[cfg(test)]
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde_json::Value;

use crate::import::classes::{identifier, safe_name, UniqueNames};
use crate::import::write::{literal, q, uri_literal};
use crate::scenario::decode::requests::is_token;

use super::recording::{Step, StepBody};
use super::{tell, HarProgress, HarStage};

/// A value an answer gave, and how to take it from there.
struct Source {
    step: usize,
    value: String,
    /// The variable's name (from the field that held it).
    hint: String,
    extract: String,
}

/// Worth correlating: an identifier or token, not a word like `true`.
/// Numbers of three digits or more, identifiers mixing letters and
/// digits, and long digit-free tokens: not `20` (a page size), not
/// `products` (a word of the site).
fn correlatable(v: &str) -> bool {
    let n = v.len();
    if n > 4096 || v.contains(['\n', '\r']) {
        return false;
    }
    let digits = v.bytes().filter(u8::is_ascii_digit).count();
    if digits == n {
        n >= 3
    } else if digits > 0 {
        n >= 2
    } else {
        n >= 16 && !v.contains(' ')
    }
}

fn json_sources(v: &Value, path: &mut String, hint: &str, step: usize, out: &mut Vec<Source>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let len = path.len();
                let simple =
                    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty();
                if simple {
                    let _ = write!(path, ".{k}");
                } else {
                    let _ = write!(
                        path,
                        "[{}]",
                        serde_json::to_string(k)
                            .unwrap_or_default()
                            .replace('"', "'")
                    );
                }
                json_sources(x, path, k, step, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                json_sources(x, path, hint, step, out);
                path.truncate(len);
            }
        }
        Value::String(s) if correlatable(s) => out.push(Source {
            step,
            value: s.clone(),
            hint: hint.to_string(),
            extract: format!("{{json: {}}}", q(path)),
        }),
        Value::Number(n) if correlatable(&n.to_string()) => out.push(Source {
            step,
            value: n.to_string(),
            hint: hint.to_string(),
            extract: format!("{{json: {}}}", q(path)),
        }),
        _ => {}
    }
}

/// Values each step's answer carried, in step order: JSON fields, hidden
/// inputs of a form, response headers other than cookies.
fn sources(steps: &[Step], progress: &mut dyn HarProgress) -> Vec<Source> {
    // Hidden inputs (name before value, or after) and meta tags such as
    // Rails' and Laravel's `<meta name="csrf-token" content="…">`.
    let forms = [
        (
            r#"<input[^>]*name="([^"]+)"[^>]*value="([^"]*)""#,
            r#"name="{}"[^>]*value="([^"]*)""#,
            false,
        ),
        (
            r#"<input[^>]*value="([^"]*)"[^>]*name="([^"]+)""#,
            r#"value="([^"]*)"[^>]*name="{}""#,
            true,
        ),
        (
            r#"<meta[^>]*name="([^"]+)"[^>]*content="([^"]*)""#,
            r#"name="{}"[^>]*content="([^"]*)""#,
            false,
        ),
    ]
    .map(|(find, take, value_first)| {
        (
            regex::Regex::new(find).expect("a valid regex"),
            take,
            value_first,
        )
    });
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        tell(progress, HarStage::Answers, i, steps.len());
        if s.final_mime.contains("json") {
            if let Ok(v) = serde_json::from_str::<Value>(&s.final_body) {
                json_sources(&v, &mut "$".to_string(), "value", i, &mut out);
            }
        } else if s.final_mime.contains("html") {
            for (find, take, value_first) in &forms {
                for c in find.captures_iter(&s.final_body) {
                    let (name, value) = if *value_first {
                        (&c[2], &c[1])
                    } else {
                        (&c[1], &c[2])
                    };
                    let value = value.replace("&amp;", "&");
                    if correlatable(&value) {
                        out.push(Source {
                            step: i,
                            value,
                            hint: name.to_string(),
                            extract: format!(
                                "{{regex: {}}}",
                                q(&take.replace("{}", &regex::escape(name)))
                            ),
                        });
                    }
                }
            }
        }
        for (name, value) in &s.final_headers {
            // An application's own headers carry tokens; standard ones
            // (content-type, server, date…) only coincide with requests.
            let n = name.to_ascii_lowercase();
            let own = n.starts_with("x-")
                || ["token", "csrf", "auth", "key", "session"]
                    .iter()
                    .any(|w| n.contains(w));
            if !own || n == "set-cookie" || !is_token(&n) {
                continue;
            }
            if correlatable(value) {
                out.push(Source {
                    step: i,
                    value: value.clone(),
                    hint: n.replace('-', "_"),
                    extract: format!("{{header: {}}}", q(name)),
                });
            }
        }
    }
    tell(progress, HarStage::Answers, steps.len(), steps.len());
    out
}

/// Where an answer gave a value: its step, and the first of the
/// `sources` it gave there.
#[derive(Clone, Copy)]
struct Producer {
    step: usize,
    source: usize,
}

/// The answers that gave each value, in step order.
///
/// A request's value is looked up here rather than searched for among
/// the values of every answer before it: a recording of 16,000 entries,
/// whose answers gave 150,000 values, took 37 s that way, one of 100,000
/// entries more than 20 minutes; now 0.4 s and 3.3 s.
struct Producers {
    by_value: HashMap<String, Vec<Producer>>,
    /// Producers compared with the step asked about, for the test that
    /// the work stays linear in the recording.
    #[cfg(test)]
    probes: Cell<u64>,
}

impl Producers {
    /// The index of `sources`, which are in step order.
    fn new(sources: &[Source]) -> Producers {
        let mut by_value: HashMap<String, Vec<Producer>> = HashMap::new();
        for (source, s) in sources.iter().enumerate() {
            let here = Producer {
                step: s.step,
                source,
            };
            match by_value.get_mut(&s.value) {
                Some(list) => {
                    let last = list.last().expect("a value's list is never empty");
                    debug_assert!(last.step <= s.step, "sources are in step order");
                    // A second place in the same answer: its first is the one taken.
                    if last.step != s.step {
                        list.push(here);
                    }
                }
                None => {
                    by_value.insert(s.value.clone(), vec![here]);
                }
            }
        }
        Producers {
            by_value,
            #[cfg(test)]
            probes: Cell::new(0),
        }
    }

    /// The latest answer before step `at` that gave `value`.
    fn latest_before(&self, value: &str, at: usize) -> Option<Producer> {
        let list = self.by_value.get(value)?;
        let earlier = list.partition_point(|p| {
            #[cfg(test)]
            self.probes.set(self.probes.get() + 1);
            p.step < at
        });
        list.get(earlier.checked_sub(1)?).copied()
    }

    /// The first answer that gave `value`.
    fn first(&self, value: &str) -> Option<Producer> {
        self.by_value.get(value).map(|list| list[0])
    }
}

/// Values sent before any answer had them are the user's: each with the
/// step that first sent it.
fn typed_input(steps: &[Step], producers: &Producers) -> HashMap<String, usize> {
    let mut first_seen: HashMap<String, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        for v in sent_values(s) {
            first_seen.entry(v).or_insert(i);
        }
    }
    first_seen.retain(|v, at| producers.first(v).is_none_or(|p| *at <= p.step));
    first_seen
}

/// The correlations made: on each step, the variables it extracts; and the
/// variable each value of a request is replaced by. A correlation is made
/// when a request sending the value is printed, so the order requests are
/// printed in names the variables.
pub(super) struct Correlator<'a> {
    sources: Vec<Source>,
    producers: Producers,
    /// Values the user sent before an answer held them (typed input), and
    /// the step that first sent each.
    typed: HashMap<String, usize>,
    steps: &'a [Step],
    vars: UniqueNames,
    /// (source index) → variable.
    bound: BTreeMap<usize, String>,
    /// (step) → the variables its answer gives, and how to extract each.
    pub(super) extracts: BTreeMap<usize, Vec<(String, String)>>,
    /// One line per correlation made, for the report.
    pub(super) notes: Vec<String>,
}

impl<'a> Correlator<'a> {
    /// No correlation made yet: what the answers of `steps` gave, and what
    /// the user typed.
    pub(super) fn new(steps: &'a [Step], progress: &mut dyn HarProgress) -> Self {
        let sources = sources(steps, progress);
        let producers = Producers::new(&sources);
        let typed = typed_input(steps, &producers);
        Correlator {
            sources,
            producers,
            typed,
            steps,
            vars: UniqueNames::default(),
            bound: BTreeMap::new(),
            extracts: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// The variable for `value` sent by step `at`, if an earlier answer
    /// gave it.
    fn var_for(&mut self, value: &str, at: usize) -> Option<String> {
        if !correlatable(value) {
            return None;
        }
        // The latest answer that had it, and there its first place.
        let Producer {
            step: src_step,
            source: idx,
        } = self.producers.latest_before(value, at)?;
        // Sent before that answer came: the user's own input.
        if self.typed.get(value).is_some_and(|&sent| sent <= src_step) {
            return None;
        }
        if let Some(v) = self.bound.get(&idx) {
            return Some(v.clone());
        }
        let name = self
            .vars
            .name(safe_name(identifier(&self.sources[idx].hint)));
        self.extracts
            .entry(src_step)
            .or_default()
            .push((name.clone(), self.sources[idx].extract.clone()));
        self.notes.push(format!(
            "`{value}` from the answer to step {} ({} {}) into `${{{name}}}`",
            src_step + 1,
            self.steps[src_step].method,
            self.steps[src_step].target
        ));
        self.bound.insert(idx, name.clone());
        Some(name)
    }

    /// A part of a URL: as `template`, bytes no URI may hold encoded.
    pub(super) fn uri_template(&mut self, text: &str, at: usize) -> String {
        if let Some(v) = self.var_for(text, at) {
            return format!("${{raw({v})}}");
        }
        // Percent-encoded in the URL (a token with `+/=`): the answer had
        // it decoded; the template encodes it again.
        let decoded = url::form_urlencoded::parse(format!("x={text}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if decoded != text {
            if let Some(v) = self.var_for(&decoded, at) {
                return format!("${{{v}}}");
            }
        }
        uri_literal(text)
    }

    /// `text` with whole values replaced by `${var}` (and `$` escaped).
    pub(super) fn template(&mut self, text: &str, at: usize) -> String {
        match self.var_for(text, at) {
            Some(v) => format!("${{{v}}}"),
            None => literal(text),
        }
    }
}

/// Every value a request sends, for telling typed input from answers'.
fn sent_values(s: &Step) -> Vec<String> {
    let mut v: Vec<String> = s
        .target
        .split(['/', '?', '&', '='])
        .map(str::to_string)
        .collect();
    v.extend(s.headers.iter().map(|(_, x)| x.clone()));
    match &s.body {
        Some(StepBody::Form(pairs)) => v.extend(pairs.iter().map(|(_, x)| x.clone())),
        Some(StepBody::Json(j)) => collect_strings(j, &mut v),
        Some(StepBody::Raw { text, .. }) => v.push(text.clone()),
        None => {}
    }
    v
}

fn collect_strings(j: &Value, out: &mut Vec<String>) {
    match j {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// A JSON body as a template: string leaves that an answer gave become
/// `${var}` inside their quotes; `numbers` is set when a number did.
pub(super) fn json_template(
    j: &Value,
    c: &mut Correlator,
    at: usize,
    numbers: &mut bool,
) -> String {
    match j {
        Value::String(s) => {
            let t = match c.var_for(s, at) {
                Some(v) => format!("${{{v}}}"),
                None => {
                    let quoted = serde_json::to_string(s).unwrap_or_default();
                    return literal(&quoted);
                }
            };
            format!("\"{t}\"")
        }
        Value::Number(n) => match c.var_for(&n.to_string(), at) {
            // A number from an answer stays a number: its digits go in
            // unquoted, which only a raw body can hold.
            Some(v) => {
                *numbers = true;
                format!("${{{v}}}")
            }
            None => n.to_string(),
        },
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|x| json_template(x, c, at, numbers))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!(
                    "{}: {}",
                    // Keys are not templates: as they are.
                    serde_json::to_string(k).unwrap_or_default(),
                    json_template(x, c, at, numbers)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
