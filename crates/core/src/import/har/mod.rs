//! A HAR recording (HTTP Archive 1.2, what browsers' developer tools and
//! proxies save) into a scenario of the one journey it holds:
//!
//! - the requests in order, on the recording's main origin (third-party
//!   hosts and static assets left out, counted);
//! - a redirect and the request that followed it are one step, since
//!   autoperf follows redirects itself (cookies too: its jar keeps them);
//! - headers worth keeping (not the ones the client sets itself), POST
//!   bodies as `form:`, `json:` or `body:`;
//! - correlation: a value a later request sends that an earlier answer
//!   gave — a JSON field, a hidden form field, a response header — becomes
//!   an `extract` on that answer and `${variable}` in the request, unless
//!   the user sent it before any answer had it (then it is typed input);
//! - a status check on every step, and the recording's pauses as each
//!   step's think time.
//!
//! The files, in the order an import runs through them:
//!
//! - `recording.rs`: the HAR schema, and the recording read into steps
//!   (entries in time order, redirects folded, what is left out counted);
//! - `correlate.rs`: the values the answers gave, the user's typed input,
//!   and the variable a request's value becomes;
//! - `yaml.rs`: the scenario's text — the requests' names, each request
//!   printed (which makes its correlations), the session chain;
//! - `mod.rs` (this file): the entry points, and the import report.

mod correlate;
mod recording;
mod yaml;

use std::collections::BTreeMap;
use std::path::Path;

use super::graph::{Edge, Graph};
use super::report::{ImportReport, ReportClass, Skipped};
use super::{report, write_file, ImportError, Outputs};

use correlate::Correlator;
use recording::Recording;
use yaml::Journey;

#[derive(Debug, Clone, Default)]
pub struct HarOptions {
    /// Replaces the recording's origin as the scenario's base URL.
    pub base_url: Option<String>,
    /// Paths with these extensions are assets, left out (none when empty).
    pub static_extensions: Vec<String>,
}

/// What the HAR import found and wrote.
pub struct HarSummary {
    pub steps: usize,
    pub correlations: Vec<String>,
    pub skipped: BTreeMap<&'static str, u64>,
    /// The scenario's text.
    pub yaml: String,
    pub report: ImportReport,
}

/// Reads `source`, writes the scenario, the page and its JSON.
pub fn import_har(
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
) -> Result<HarSummary, ImportError> {
    let text = std::fs::read_to_string(source).map_err(|e| ImportError::Read {
        path: source.to_path_buf(),
        source: e,
    })?;
    let summary = har_scenario(&text, source, options, out).map_err(|reason| ImportError::Har {
        path: source.to_path_buf(),
        reason,
    })?;
    write_file(&out.scenario, &summary.yaml)?;
    write_file(&out.report, &report::render(&summary.report))?;
    write_file(
        &out.json,
        &serde_json::to_string_pretty(&summary.report).expect("the report serialises"),
    )?;
    Ok(summary)
}

/// The scenario of the recording `text` (named after `source`, its report
/// as `out` says), nothing written.
pub fn har_scenario(
    text: &str,
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
) -> Result<HarSummary, String> {
    let recording = recording::read(text, &options.static_extensions)?;
    let base_url = options
        .base_url
        .clone()
        .unwrap_or_else(|| recording.steps[0].origin.clone());
    let names = yaml::request_names(&recording.steps);
    let mut correlator = Correlator::new(&recording.steps);
    let journey = Journey {
        source,
        report: &out.report,
        recording: &recording,
        base_url: &base_url,
        names: &names,
    };
    let yaml = yaml::print(&journey, &mut correlator);
    let correlations = correlator.notes;
    let report = import_report(&journey, &correlations, &out.scenario);
    Ok(HarSummary {
        steps: recording.steps.len(),
        correlations,
        skipped: recording.skipped,
        yaml,
        report,
    })
}

/// The import report of `journey`, whose scenario is `scenario` and
/// whose requests make `correlations`.
fn import_report(journey: &Journey, correlations: &[String], scenario: &Path) -> ImportReport {
    let Recording {
        entries,
        steps,
        skipped,
    } = journey.recording;
    let n = steps.len();
    ImportReport {
        source: Outputs::name_of(journey.source),
        kind: "HAR recording".into(),
        scenario: Outputs::name_of(scenario),
        facts: vec![
            ("entries".into(), entries.to_string()),
            ("steps".into(), n.to_string()),
            (
                "redirects folded".into(),
                steps.iter().map(|s| s.redirects).sum::<usize>().to_string(),
            ),
            ("correlations".into(), correlations.len().to_string()),
            (
                "recorded".into(),
                format!(
                    "{:.1} s",
                    steps.last().map_or(0.0, |l| l.end) - steps[0].start
                ),
            ),
        ],
        classes: steps
            .iter()
            .zip(journey.names)
            .map(|(s, name)| ReportClass {
                name: name.clone(),
                method: s.method.clone(),
                pattern: s.target.clone(),
                requests: 1,
                share: 1.0 / n as f64,
                statuses: s.final_status.to_string(),
                data_rows: 0,
            })
            .collect(),
        graph: chain(n),
        think: None,
        skipped: skipped
            .iter()
            .map(|(k, v)| Skipped {
                what: k.to_string(),
                count: *v,
                why: match *k {
                    "third-party hosts" => "not the recording's main origin".into(),
                    "static assets" => "a browser fetches them with the page".into(),
                    _ => String::new(),
                },
            })
            .collect(),
        examples: Vec::new(),
        correlations: correlations.to_vec(),
        notes: Vec::new(),
    }
}

/// The graph of one journey of `n` steps: each once, in order.
fn chain(n: usize) -> Graph {
    Graph {
        entries: vec![Edge {
            to: 0,
            probability: 1.0,
            count: 1,
        }],
        edges: (0..n)
            .map(|i| {
                if i + 1 < n {
                    vec![Edge {
                        to: i + 1,
                        probability: 1.0,
                        count: 1,
                    }]
                } else {
                    Vec::new()
                }
            })
            .collect(),
        exits: (0..n)
            .map(|i| if i + 1 == n { (1.0, 1) } else { (0.0, 0) })
            .collect(),
        out: vec![1; n],
        sessions: 1,
        arrivals_by_hour: Vec::new(),
    }
}

/// A HAR entry for the tests of every file here.
#[cfg(test)]
mod fixture {
    use serde_json::Value;

    /// One request and its answer, the fields a recording gives, in its
    /// order; what a test leaves out is an empty 200 answer to a GET.
    pub(super) struct Exchange {
        pub(super) started: &'static str,
        pub(super) method: &'static str,
        pub(super) url: &'static str,
        pub(super) request_headers: Value,
        pub(super) status: u16,
        pub(super) response_headers: Value,
        pub(super) mime: &'static str,
        pub(super) body: &'static str,
    }

    impl Default for Exchange {
        fn default() -> Self {
            Exchange {
                started: "",
                method: "GET",
                url: "",
                request_headers: serde_json::json!([]),
                status: 200,
                response_headers: serde_json::json!([]),
                mime: "",
                body: "",
            }
        }
    }

    impl Exchange {
        /// The HAR entry (a POST sends a JSON body).
        pub(super) fn json(&self) -> Value {
            let mut e = serde_json::json!({
                "startedDateTime": self.started, "time": 10,
                "request": {"method": self.method, "url": self.url, "headers": self.request_headers},
                "response": {"status": self.status, "headers": self.response_headers, "content": {"mimeType": self.mime, "text": self.body}},
            });
            if self.method == "POST" {
                e["request"]["postData"] = serde_json::json!({"mimeType": "application/json", "text": "{\"n\":4711,\"who\":\"typed123\"}"});
            }
            e
        }
    }
}
