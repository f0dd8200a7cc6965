//! `autoperf import`: a scenario from real traffic. An access log gives
//! the CBMG (request classes, transition probabilities with their counts,
//! the think time fitted, arrivals by hour, data files of observed values);
//! a HAR recording gives one journey, its values correlated (see `har`).

mod classes;
mod clock;
mod custom;
mod entry;
mod fit;
mod graph;
mod har;
mod log;
mod logline;
mod reader;
mod report;
mod sessions;
mod write;

use std::path::{Path, PathBuf};

pub use custom::CustomFormat;
pub use fit::{Model, ThinkFit};
pub use graph::Graph;
pub use har::{har_scenario, import_har, HarOptions, HarProgress, HarStage, HarSummary};
pub use log::{
    import_log, LogImport, LogInput, LogOptions, Progress, DEFAULT_BOTS, DEFAULT_STATIC,
};
pub use logline::{JsonFields, LogFormat};
pub(crate) use report::ImportReport;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}; give the format with --format combined|common|json (and --json-fields for JSON logs), or --format har for a HAR recording", path.display())]
    Format { path: PathBuf, reason: String },
    #[error("{}: no request left to import (every line was malformed, a static asset, a robot or excluded); see the skipped counts with --format and the filter options", path.display())]
    Empty { path: PathBuf },
    #[error("{}: {reason}", path.display())]
    Har { path: PathBuf, reason: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} exists: give --force to replace it, or another --out", path.display())]
    Exists { path: PathBuf },
}

/// Where an import writes: the scenario, its data directory, the report
/// page and its JSON, all named after the scenario file.
#[derive(Debug, Clone)]
pub struct Outputs {
    pub scenario: PathBuf,
    pub data_dir: PathBuf,
    pub report: PathBuf,
    pub json: PathBuf,
}

impl Outputs {
    pub fn for_scenario(scenario: &Path) -> Outputs {
        let stem = scenario
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "imported".into());
        let dir = scenario.parent().unwrap_or(Path::new(""));
        Outputs {
            scenario: scenario.to_path_buf(),
            data_dir: dir.join(format!("{stem}.data")),
            report: dir.join(format!("{stem}.import.html")),
            json: dir.join(format!("{stem}.import.json")),
        }
    }

    /// Refuses to replace a scenario a person may have edited.
    pub fn check(&self, force: bool) -> Result<(), ImportError> {
        if !force && self.scenario.exists() {
            return Err(ImportError::Exists {
                path: self.scenario.clone(),
            });
        }
        Ok(())
    }

    fn name_of(p: &Path) -> String {
        p.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), ImportError> {
    std::fs::write(path, text).map_err(|source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A scenario name from a file name: `access.log.gz` → `access`.
pub fn scenario_name(source: &Path) -> String {
    let name = source
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "imported".into());
    let base = name.split('.').next().unwrap_or("imported");
    if base.is_empty() {
        "imported".into()
    } else {
        base.to_string()
    }
}

/// What `import` of a log wrote, for the screen.
pub struct LogSummary {
    pub import: LogImport,
    pub graph: Graph,
    pub report: ImportReport,
}

/// Imports `source` and writes the scenario, data files, page and JSON.
pub fn import_log_to(
    input: &LogInput,
    base_url: &str,
    options: &LogOptions,
    out: &Outputs,
    progress: &mut dyn Progress,
) -> Result<LogSummary, ImportError> {
    let source = match input {
        LogInput::File(p) => *p,
        LogInput::Bytes(_) => Path::new("memory.log"),
    };
    let import = log::import_log(input, options, progress)?;
    let graph = Graph::estimate(&import.counts);
    let data_dir_name = Outputs::name_of(&out.data_dir);
    let text = write::log_scenario(
        &write::LogScenario {
            name: &scenario_name(source),
            source: &Outputs::name_of(source),
            base_url,
            data_dir: &data_dir_name,
            report: &Outputs::name_of(&out.report),
            timeout_s: options.session_timeout_s,
        },
        &import,
        &graph,
    );
    if import
        .classes
        .iter()
        .any(|c| c.has_data() && !c.rows.is_empty())
    {
        std::fs::create_dir_all(&out.data_dir).map_err(|source| ImportError::Write {
            path: out.data_dir.clone(),
            source,
        })?;
        for c in import
            .classes
            .iter()
            .filter(|c| c.has_data() && !c.rows.is_empty())
        {
            write_file(
                &out.data_dir.join(format!("{}.csv", c.name)),
                &write::data_csv(c),
            )?;
        }
    }
    write_file(&out.scenario, &text)?;
    let report = log_report(source, &out.scenario, options, &import, &graph);
    write_file(&out.report, &report::render(&report))?;
    write_file(
        &out.json,
        &serde_json::to_string_pretty(&report).expect("the report serialises"),
    )?;
    Ok(LogSummary {
        import,
        graph,
        report,
    })
}

fn log_report(
    source: &Path,
    scenario: &Path,
    options: &LogOptions,
    im: &LogImport,
    g: &Graph,
) -> ImportReport {
    let span_h = if im.last_time > im.first_time {
        (im.last_time - im.first_time) / 3600.0
    } else {
        0.0
    };
    let mean_len = im.requests as f64 / g.sessions.max(1) as f64;
    let mut facts = vec![
        (
            "format".to_string(),
            format!("{}{}", im.format, if im.gzip { " (gzip)" } else { "" }),
        ),
        ("lines".into(), im.lines.to_string()),
        ("requests".into(), im.requests.to_string()),
        (
            "sessions".into(),
            format!("{} ({mean_len:.2} requests each)", g.sessions),
        ),
        ("classes".into(), im.classes.len().to_string()),
        ("span".into(), format!("{span_h:.1} h")),
        (
            "session timeout".into(),
            write::human(options.session_timeout_s),
        ),
    ];
    if let Some(f) = &im.think {
        let chosen = match f.chosen {
            Model::Exponential => format!("exponential, mean {:.3} s", f.mean_s),
            Model::Lognormal => format!(
                "lognormal, mean {:.3} s, cv {:.2}",
                f.lognormal_mean_s, f.lognormal_cv
            ),
        };
        facts.push(("think time".into(), chosen));
    }
    let mut notes = Vec::new();
    if im.malformed > 0 {
        notes.push(format!(
            "{} malformed line{} skipped (examples below).",
            im.malformed,
            if im.malformed == 1 { "" } else { "s" }
        ));
    }
    if im
        .classes
        .iter()
        .any(|c| c.method != "GET" && c.method != "HEAD")
    {
        notes.push("An access log holds no request bodies: requests other than GET are sent without one; add `form:` or `json:` where the server needs it.".into());
    }
    ImportReport {
        source: Outputs::name_of(source),
        kind: "access log".into(),
        scenario: Outputs::name_of(scenario),
        facts,
        classes: im
            .classes
            .iter()
            .map(|c| report::ReportClass {
                name: c.name.clone(),
                method: c.method.clone(),
                pattern: c.pattern.clone(),
                requests: c.requests,
                share: c.share,
                statuses: c
                    .statuses
                    .iter()
                    .map(|(s, n)| format!("{s}×{n}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                data_rows: c.rows.len(),
            })
            .collect(),
        graph: g.clone(),
        think: im.think.clone(),
        skipped: vec![
            report::Skipped {
                what: "malformed lines".into(),
                count: im.malformed,
                why: "not in the log's format".into(),
            },
            report::Skipped {
                what: "static assets".into(),
                count: im.static_skipped,
                why: format!("path ends in .{}", options.static_extensions.join(", .")),
            },
            report::Skipped {
                what: "robots".into(),
                count: im.bots_skipped,
                why: options.bots.as_ref().map_or("no rule".into(), |b| {
                    format!("user agent matches {}", b.as_str())
                }),
            },
            report::Skipped {
                what: "unclassified".into(),
                count: im.unclassified,
                why: "a method past the first 64, or a path the first pass did not see (the file changed)".into(),
            },
            report::Skipped {
                what: "excluded".into(),
                count: im.excluded,
                why: options
                    .exclude
                    .as_ref()
                    .map_or("no rule".into(), |x| format!("path matches {}", x.as_str())),
            },
        ],
        examples: im
            .malformed_examples
            .iter()
            .map(|m| (m.line, m.text.clone(), m.reason.clone()))
            .collect(),
        correlations: Vec::new(),
        notes,
    }
}
