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
//! - `mod.rs` (this file): the entry points, how far an import is, and
//!   the import report.
//!
//! Every step of that is linear in the recording: the values answers gave
//! are indexed by value, names keep the suffix they reached, so a
//! recording of 100,000 entries imports in seconds.

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

/// The stages of a HAR import, in order, each told as `done` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HarStage {
    /// The recording's JSON parsed: `total` bytes, all done at once.
    Parsing,
    /// Its entries read into steps.
    Reading,
    /// The steps' answers searched for values a request may send again.
    Answers,
    /// The steps' requests printed, their values correlated.
    Correlating,
    /// The scenario, the report page and its JSON written: files.
    Writing,
}

/// Told how far a HAR import is.
pub trait HarProgress {
    fn update(&mut self, stage: HarStage, done: u64, total: u64);
}

impl HarProgress for () {
    fn update(&mut self, _: HarStage, _: u64, _: u64) {}
}

/// Tells `progress` of item `done` of `total` now and then: every 1024th
/// and the last, not the cost of a message for each.
fn tell(progress: &mut dyn HarProgress, stage: HarStage, done: usize, total: usize) {
    if done.is_multiple_of(1024) || done == total {
        progress.update(stage, done as u64, total as u64);
    }
}

/// Reads `source`, writes the scenario, the page and its JSON.
pub fn import_har(
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
    progress: &mut dyn HarProgress,
) -> Result<HarSummary, ImportError> {
    let text = std::fs::read_to_string(source).map_err(|e| ImportError::Read {
        path: source.to_path_buf(),
        source: e,
    })?;
    let summary =
        scenario(&text, source, options, out, progress).map_err(|reason| ImportError::Har {
            path: source.to_path_buf(),
            reason,
        })?;
    progress.update(HarStage::Writing, 0, 3);
    write_file(&out.scenario, &summary.yaml)?;
    progress.update(HarStage::Writing, 1, 3);
    write_file(&out.report, &report::render(&summary.report))?;
    progress.update(HarStage::Writing, 2, 3);
    write_file(
        &out.json,
        &serde_json::to_string_pretty(&summary.report).expect("the report serialises"),
    )?;
    progress.update(HarStage::Writing, 3, 3);
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
    scenario(text, source, options, out, &mut ())
}

fn scenario(
    text: &str,
    source: &Path,
    options: &HarOptions,
    out: &Outputs,
    progress: &mut dyn HarProgress,
) -> Result<HarSummary, String> {
    let recording = recording::read(text, &options.static_extensions, progress)?;
    let base_url = options
        .base_url
        .clone()
        .unwrap_or_else(|| recording.steps[0].origin.clone());
    let names = yaml::request_names(&recording.steps);
    let mut correlator = Correlator::new(&recording.steps, progress);
    let journey = Journey {
        source,
        report: &out.report,
        recording: &recording,
        base_url: &base_url,
        names: &names,
    };
    let yaml = yaml::print(&journey, &mut correlator, progress);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::fixture::Exchange;
    use super::{scenario, HarOptions, HarProgress, HarStage, Outputs};

    #[derive(Default)]
    struct Told(Vec<(HarStage, u64, u64)>);

    impl HarProgress for Told {
        fn update(&mut self, stage: HarStage, done: u64, total: u64) {
            self.0.push((stage, done, total));
        }
    }

    #[test]
    fn progress_counts_the_entries_then_the_steps() {
        // 3000 entries, every third a static asset: 2000 steps.
        let entries: Vec<_> = (0..3000)
            .map(|i| {
                let mut e = Exchange {
                    started: "2024-01-01T00:00:00Z",
                    ..Exchange::default()
                }
                .json();
                let ext = if i % 3 == 2 { ".css" } else { "" };
                e["request"]["url"] = format!("http://a/p{i}{ext}").into();
                e
            })
            .collect();
        let text = serde_json::json!({"log": {"entries": entries}}).to_string();
        let out = Outputs::for_scenario(Path::new("/nonexistent/j.yaml"));
        let mut told = Told::default();
        let s = scenario(
            &text,
            Path::new("j.har"),
            &HarOptions {
                static_extensions: vec!["css".into()],
                ..HarOptions::default()
            },
            &out,
            &mut told,
        )
        .unwrap();
        assert_eq!(s.steps, 2000);
        let told = told.0;
        // Stages in order, each counting up to its total.
        assert!(
            told.windows(2)
                .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)),
            "{told:?}"
        );
        let last = |stage| *told.iter().rev().find(|t| t.0 == stage).unwrap();
        let bytes = text.len() as u64;
        assert_eq!(last(HarStage::Parsing), (HarStage::Parsing, bytes, bytes));
        assert_eq!(last(HarStage::Reading), (HarStage::Reading, 3000, 3000));
        assert_eq!(last(HarStage::Answers), (HarStage::Answers, 2000, 2000));
        assert_eq!(
            last(HarStage::Correlating),
            (HarStage::Correlating, 2000, 2000)
        );
        // Now and then, not once an entry.
        assert!(told.len() < 20, "{told:?}");
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
