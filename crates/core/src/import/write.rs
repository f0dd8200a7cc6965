//! The imported scenario as YAML a person reads and edits: every estimate
//! commented with the evidence behind it (counts, the fit), the data files
//! beside it.

use crate::measure::thousands;
use std::fmt::Write;

use super::fit::Model;
use super::graph::Graph;
use super::log::{LogImport, RARE};

/// A YAML double-quoted string (JSON's escapes are YAML's).
pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// Text for a YAML comment: what would end the line or the stream
/// (controls, NEL, line and paragraph separators, a BOM) escaped.
pub(crate) fn comment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Literal text inside an autoperf template: `$` written `$$`.
pub(crate) fn literal(s: &str) -> String {
    s.replace('$', "$$")
}

/// A literal part of a path as logged: bytes no URI may hold (controls,
/// space, non-ASCII, `"<>\^`{|}`) percent-encoded, `$` written `$$`.
pub(crate) fn uri_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'$' => out.push_str("$$"),
            b'%' | b'!'..=b'~' if !b"\"<>\\^`{|}".contains(&b) => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A duration autoperf reads back exactly enough: whole milliseconds.
pub(crate) fn ms(seconds: f64) -> String {
    format!("{}ms", (seconds * 1000.0).round().max(0.0) as u64)
}

/// A probability with six decimals, rounded down so a request's
/// transitions never sum above 1.
fn p(x: f64) -> String {
    // Six significant digits at least, however small: a rare class's
    // share printed as 0 would leave it unreachable.
    let decimals = if x > 0.0 && x < 1e-6 {
        (-x.log10()).ceil() as usize + 5
    } else {
        6
    };
    let scale = 10f64.powi(decimals as i32);
    let v = (x * scale).floor() / scale;
    let s = format!("{v:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// `30m`, `1h 30m`, `45s`.
pub(crate) fn human(seconds: f64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(
        seconds.round().max(0.0) as u64
    ))
    .to_string()
}

pub(crate) struct LogScenario<'a> {
    pub name: &'a str,
    pub source: &'a str,
    pub base_url: &'a str,
    /// Relative to the scenario file: `shop.data`.
    pub data_dir: &'a str,
    pub report: &'a str,
    pub timeout_s: f64,
}

/// The scenario's text.
pub(crate) fn log_scenario(s: &LogScenario, im: &LogImport, g: &Graph) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Imported by `autoperf import` from {} ({} format{}).",
        comment(s.source),
        im.format,
        if im.gzip { ", gzip" } else { "" }
    );
    let _ = writeln!(
        y,
        "# {} lines: {} requests in {} sessions (a client silent {} starts a new one);",
        thousands(im.lines),
        thousands(im.requests),
        thousands(g.sessions),
        human(s.timeout_s)
    );
    let _ = writeln!(
        y,
        "# skipped: {} malformed, {} static assets, {} robots, {} excluded, {} unclassified.",
        thousands(im.malformed),
        thousands(im.static_skipped),
        thousands(im.bots_skipped),
        thousands(im.excluded),
        thousands(im.unclassified)
    );
    let _ = writeln!(y, "# What was imported, drawn: {}", comment(s.report));
    let _ = writeln!(y, "name: {}", q(s.name));
    let _ = writeln!(y, "target:\n  base_url: {}", q(s.base_url));
    match &im.think {
        Some(f) => {
            let _ = writeln!(
                y,
                "# Think time fitted to {} gaps between a session's requests (they include the\n\
                 # server's response times){}: exponential KS distance {:.4}, lognormal {:.4} (cv {:.2}).",
                thousands(f.gaps),
                if f.whole_seconds { ", stamped in whole seconds" } else { "" },
                f.exponential_ks,
                f.lognormal_ks,
                f.lognormal_cv
            );
            match f.chosen {
                Model::Exponential => {
                    let _ = writeln!(y, "think_time: {{exponential: {}}}", ms(f.mean_s));
                }
                Model::Lognormal => {
                    let _ = writeln!(
                        y,
                        "think_time: {{lognormal: {{mean: {}, cv: {:.3}}}}}",
                        ms(f.lognormal_mean_s),
                        f.lognormal_cv
                    );
                }
            }
        }
        None => {
            let _ = writeln!(
                y,
                "# No session had two requests: no think time to fit.\nthink_time: 0s"
            );
        }
    }
    if let Some((hour, rate)) = g.peak_arrivals() {
        let _ = writeln!(
            y,
            "# New sessions per second by hour of the day (UTC), for an open workload\n\
             # (`autoperf run` with it, or `capacity` to search the rate). The busiest hour,\n\
             # {hour:02}:00, as a constant rate:\n# arrivals: {{rate: {}/s}}\n# or the day, each hour compressed to a minute:\n# arrivals:\n#   stages:",
            rate_text(rate)
        );
        for (h, r) in g.arrivals_by_hour.iter().enumerate() {
            if let Some(r) = r {
                let _ = writeln!(
                    y,
                    "#     - {{rate: {}/s, for: 1m}}   # {h:02}:00",
                    rate_text(*r)
                );
            }
        }
    }
    let with_data: Vec<_> = im
        .classes
        .iter()
        .filter(|c| c.has_data() && !c.rows.is_empty())
        .collect();
    if !with_data.is_empty() {
        y.push_str("# Values the log's requests carried, sampled as often as they came.\ndata:\n");
        for c in &with_data {
            let _ = writeln!(
                y,
                "  {}: {{csv: {}, mode: random}}",
                c.name,
                q(&format!("{}/{}.csv", s.data_dir, c.name))
            );
        }
    }
    y.push_str("requests:\n");
    for c in &im.classes {
        let _ = writeln!(
            y,
            "  {}:   # {} {}: {} requests ({:.2}%)",
            c.name,
            c.method,
            comment(&c.pattern),
            thousands(c.requests),
            c.share * 100.0
        );
        if c.pattern == RARE {
            let shown: Vec<&str> = c.folded.iter().take(5).map(String::as_str).collect();
            let _ = writeln!(
                y,
                "    # {} rare paths, each under the minimum share: {}{}",
                c.folded.len(),
                comment(&shown.join(", ")),
                if c.folded.len() > 5 { ", …" } else { "" }
            );
        }
        if c.method != "GET" {
            let _ = writeln!(y, "    method: {}", q(&c.method));
        }
        let _ = writeln!(y, "    path: {}", q(&path_template(c)));
        if c.method != "GET" && c.method != "HEAD" && c.method != "DELETE" {
            y.push_str("    # An access log holds no bodies: add `form:` or `json:` if the server needs one.\n");
        }
    }
    y.push_str("session:\n");
    match g.entries.as_slice() {
        [only] => {
            let _ = writeln!(y, "  start: {}", im.classes[only.to].name);
        }
        entries => {
            y.push_str("  start:   # where sessions began\n");
            for e in entries {
                let _ = writeln!(
                    y,
                    "    {}: {}   # {} sessions",
                    im.classes[e.to].name,
                    p(e.probability),
                    thousands(e.count)
                );
            }
        }
    }
    y.push_str("  transitions:   # the rest of each request's probability ends the session\n");
    for (a, row) in g.edges.iter().enumerate() {
        let name = &im.classes[a].name;
        let (exit_p, exit_n) = g.exits[a];
        if row.is_empty() {
            let _ = writeln!(
                y,
                "    {name}: {{}}   # {} steps out, all ends",
                thousands(g.out[a])
            );
            continue;
        }
        let _ = writeln!(
            y,
            "    {name}:   # {} steps out; ends {} ({:.1}%)",
            thousands(g.out[a]),
            thousands(exit_n),
            exit_p * 100.0
        );
        for e in row {
            let _ = writeln!(
                y,
                "      {}: {}   # {}",
                im.classes[e.to].name,
                p(e.probability),
                thousands(e.count)
            );
        }
    }
    y
}

fn rate_text(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.4}")
    }
}

/// The class's path: literal words as logged, parameters and the query
/// from its data file (`raw`: the log's values are encoded already).
fn path_template(c: &super::log::Class) -> String {
    if c.pattern == RARE {
        return format!("/${{raw({}.target)}}", c.name);
    }
    let mut path = String::new();
    let mut param = 0;
    for seg in &c.segments {
        path.push('/');
        match seg {
            None => {
                let _ = write!(path, "${{raw({}.{})}}", c.name, c.columns[param]);
                param += 1;
            }
            Some(word) => path.push_str(&uri_literal(word)),
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    if c.columns.last().is_some_and(|q| q == "query") && !c.rows.is_empty() {
        let _ = write!(path, "${{raw({}.query)}}", c.name);
    }
    path
}

/// A class's data file as CSV text.
pub(crate) fn data_csv(c: &super::log::Class) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(&c.columns);
    for r in &c.rows {
        let _ = w.write_record(r);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_round_down_and_read_back() {
        assert_eq!(p(0.3333339), "0.333333");
        assert_eq!(p(1.0), "1");
        assert_eq!(p(0.0000004), "0.0000004");
        assert_eq!(p(2.5e-7), "0.00000025");
        assert_eq!(ms(20.1234), "20123ms");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(q("a\"b"), "\"a\\\"b\"");
        assert_eq!(literal("/a$b"), "/a$$b");
    }
}
