//! `autoperf import`: the core's importers, with a progress bar (over the
//! log's bytes, both passes; over a HAR's entries, then its steps) and a
//! summary of what was written. The bar is drawn on a terminal only, and
//! not with --quiet.

use std::io::IsTerminal;
use std::path::PathBuf;

use autoperf_core::import::{
    self, CustomFormat, HarOptions, HarProgress, HarStage, ImportError, JsonFields, LogFormat,
    LogOptions, Model, Outputs, Progress, DEFAULT_BOTS, DEFAULT_STATIC,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use regex::Regex;

use crate::cli::ImportArgs;
use crate::{print_out, Failure};

/// Where the scenario goes without --out: the source's name, here.
fn default_out(args: &ImportArgs) -> PathBuf {
    PathBuf::from(format!("{}.yaml", import::scenario_name(&args.source)))
}

fn failure(e: ImportError) -> Failure {
    match e {
        ImportError::Write { .. } => Failure::cannot_proceed(e.to_string()),
        _ => Failure::bad_input(e.to_string()),
    }
}

struct Bar(Option<ProgressBar>);

impl Bar {
    /// A bar on stderr when it is a terminal and `quiet` is not asked for,
    /// else none.
    fn new(quiet: bool, template: &str) -> Bar {
        Bar((!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(template)
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar
        }))
    }

    fn finish(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

impl HarProgress for Bar {
    fn update(&mut self, stage: HarStage, done: u64, total: u64) {
        let Some(bar) = &self.0 else { return };
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(match stage {
            // Parsing shows no count until it is done: the bar says how much.
            HarStage::Parsing => format!("parsing {:.1} MB of JSON", total as f64 / 1e6),
            HarStage::Reading => format!("entries read: {done} of {total}"),
            HarStage::Answers => format!("answers searched for values: {done} of {total} steps"),
            HarStage::Correlating => format!("requests correlated: {done} of {total} steps"),
            HarStage::Writing => "writing the scenario and its report".to_string(),
        });
    }
}

impl Progress for Bar {
    fn update(&mut self, pass: u8, done: u64, total: u64, lines: u64) {
        let Some(bar) = &self.0 else { return };
        bar.set_length(total.max(1) * 2);
        bar.set_position(u64::from(pass - 1) * total + done);
        bar.set_message(format!(
            "pass {pass} of 2 ({}) · {lines} lines",
            if pass == 1 {
                "path templates"
            } else {
                "sessions"
            }
        ));
    }
}

pub fn command(args: ImportArgs) -> Result<u8, Failure> {
    let out = Outputs::for_scenario(&args.out.clone().unwrap_or_else(|| default_out(&args)));
    out.check(args.force).map_err(failure)?;
    let har = match args.format.as_deref() {
        Some("har") => true,
        Some(_) => false,
        None => args
            .source
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("har")),
    };
    let static_extensions: Vec<String> = args
        .static_ext
        .as_deref()
        .unwrap_or(DEFAULT_STATIC)
        .split(',')
        .map(|s| s.trim().trim_start_matches('.').to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if har {
        let mut progress = Bar::new(args.quiet, "{spinner} {msg}  [{elapsed_precise}] {bar:20}");
        if let Some(bar) = &progress.0 {
            // Parsing a large recording is one call with nothing to count.
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
        }
        let result = import::import_har(
            &args.source,
            &HarOptions {
                base_url: args.target.clone(),
                static_extensions,
            },
            &out,
            &mut progress,
        );
        progress.finish();
        let summary = result.map_err(failure)?;
        let mut text = format!(
            "imported {} steps from {} into {}\n",
            summary.steps,
            args.source.display(),
            out.scenario.display()
        );
        for (what, n) in &summary.skipped {
            text.push_str(&format!("  skipped {n} {what}\n"));
        }
        for c in &summary.correlations {
            text.push_str(&format!("  correlated {c}\n"));
        }
        text.push_str(&format!("report: {}\n", out.report.display()));
        print_out(&text);
        return Ok(crate::exit::OK);
    }

    let regex = |flag: &str, text: &str| -> Result<Option<Regex>, Failure> {
        if text.is_empty() {
            return Ok(None);
        }
        Regex::new(text)
            .map(Some)
            .map_err(|e| Failure::bad_input(format!("{flag}: {e}")))
    };
    let mut json = JsonFields::default();
    if let Some(spec) = &args.json_fields {
        json = json
            .with_overrides(spec)
            .map_err(|e| Failure::bad_input(format!("--json-fields: {e}")))?;
    }
    let format = match (args.format.as_deref(), &args.log_format) {
        (_, Some(spec)) => Some(LogFormat::Custom(
            CustomFormat::compile(spec, args.session_cookie.as_deref())
                .map_err(|e| Failure::bad_input(format!("--log-format: {e}")))?,
        )),
        (None | Some("auto"), None) => None,
        (Some("combined"), None) => Some(LogFormat::Combined),
        (Some("common"), None) => Some(LogFormat::Common),
        (Some(_), None) => Some(LogFormat::Json(json.clone())),
    };
    let options = LogOptions {
        format,
        json,
        session_timeout_s: args.session_timeout.as_secs_f64(),
        min_share: args.min_share,
        static_extensions,
        bots: regex("--bots", args.bots.as_deref().unwrap_or(DEFAULT_BOTS))?,
        exclude: regex("--exclude", args.exclude.as_deref().unwrap_or(""))?,
        data_rows: args.data_rows as usize,
    };
    let mut progress = Bar::new(
        args.quiet,
        "{msg}  [{elapsed_precise} / ~{duration_precise}] {bar:20} {percent}%",
    );
    let base_url = args.target.as_deref().unwrap_or("http://127.0.0.1:8080");
    let result = import::import_log_to(
        &import::LogInput::File(&args.source),
        base_url,
        &options,
        &out,
        &mut progress,
    );
    progress.finish();
    let s = result.map_err(failure)?;
    let im = &s.import;
    let mut text = format!(
        "imported {} requests ({} lines, {} format) in {} sessions into {}: {} classes\n",
        im.requests,
        im.lines,
        im.format,
        s.graph.sessions,
        out.scenario.display(),
        im.classes.len()
    );
    for c in &im.classes {
        text.push_str(&format!(
            "  {:<24} {:<6} {:<32} {:>10} {:>6.2}%\n",
            c.name,
            c.method,
            c.pattern,
            c.requests,
            c.share * 100.0
        ));
    }
    if let Some(f) = &im.think {
        text.push_str(&match f.chosen {
            Model::Exponential => format!(
                "think time: exponential, mean {:.3} s (KS {:.4}; lognormal {:.4})\n",
                f.mean_s, f.exponential_ks, f.lognormal_ks
            ),
            Model::Lognormal => format!(
                "think time: lognormal, mean {:.3} s, cv {:.2} (KS {:.4}; exponential {:.4})\n",
                f.lognormal_mean_s, f.lognormal_cv, f.lognormal_ks, f.exponential_ks
            ),
        });
    }
    text.push_str(&format!(
        "skipped: {} malformed, {} static, {} robots, {} excluded, {} unclassified\n",
        im.malformed, im.static_skipped, im.bots_skipped, im.excluded, im.unclassified
    ));
    for m in &im.malformed_examples {
        text.push_str(&format!("  line {}: {} — {}\n", m.line, m.reason, m.text));
    }
    text.push_str(&format!("report: {}\n", out.report.display()));
    print_out(&text);
    Ok(crate::exit::OK)
}
