//! `autoperf predict`: the queueing model of a results directory's
//! measured demands, what-ifs applied, into prediction.json; and the
//! model's section `capacity --predict` and `demo` add to their results.

use std::path::{Path, PathBuf};

use autoperf_core::model::memory;
use autoperf_core::model::predict::{self, Ask};
use autoperf_core::model::{Model, Prediction};
use autoperf_core::record::RunRecord;
use autoperf_core::report::{self, text};
use autoperf_core::results::read_run;
use autoperf_core::scenario::{self, Override, Scenario};

use super::{load, Outcome};
use crate::cli::PredictArgs;
use crate::{exit, print_out, Failure};

pub fn predict(args: PredictArgs) -> Outcome {
    let record = read_run(&args.results).map_err(|e| Failure::bad_input(e.to_string()))?;
    let scenario = match &args.scenario {
        Some(path) => load(path, &[])?,
        None => {
            let path = PathBuf::from(&record.scenario.file);
            // The --set the run was given, applied again.
            let overrides: Vec<Override> = record
                .scenario
                .overrides
                .iter()
                .filter_map(|s| Override::parse(s).ok())
                .collect();
            scenario::parse_with(&record.scenario.text, &path, &overrides).map_err(|d| {
                Failure::bad_input(format!(
                    "{}: the scenario these results were measured with does not load here ({d}); name it with --scenario FILE",
                    args.results.display()
                ))
            })?
        }
    };
    let bad = |e: autoperf_core::model::ModelError| {
        Failure::bad_input(format!("{}: {e}", args.results.display()))
    };
    let mut model = Model::from_record(&record, &scenario).map_err(bad)?;
    let what_if = !args.mix.is_empty()
        || !args.cores.is_empty()
        || !args.speedup.is_empty()
        || args.think.is_some();
    if !args.mix.is_empty() {
        model = model.with_mix(&args.mix).map_err(bad)?;
    }
    for (tier, cores) in &args.cores {
        model = model.with_cores(tier, *cores).map_err(bad)?;
    }
    for (tier, factor) in &args.speedup {
        model = model.with_speedup(tier, *factor).map_err(bad)?;
    }
    if let Some(think) = args.think {
        model = model.with_think(think.as_secs_f64());
    }
    let measured = match &args.measured {
        Some(dir) => predict::closed_levels(
            &read_run(dir)
                .map_err(|e| Failure::bad_input(format!("--measured: {e}")))?
                .levels,
        ),
        None => predict::measured_levels(&record, what_if),
    };
    let ask = if !args.rate.is_empty() {
        Ask::Rates(args.rate.clone())
    } else if !args.class_users.is_empty() {
        Ask::Classes(model.class_population(&args.class_users).map_err(bad)?)
    } else {
        let users = args.users.clone().map(|u| u.0);
        Ask::Users(users.unwrap_or_else(|| predict::default_users(&model, &measured)))
    };
    // Memory per user, from this record's own levels (what-ifs of CPU
    // leave it as measured).
    let memory = memory::fit(&predict::closed_levels(&record.levels));
    let prediction = predict::predict(&model, &ask, &measured).with_memory(memory);
    let out = args.out.clone().unwrap_or_else(|| args.results.clone());
    let path = write_prediction(&out, &prediction)?;
    // The results' own report gains the model's section.
    let report = match out.join("run.json").exists() {
        true => Some(
            report::html::write_report(&out).map_err(|e| Failure::cannot_proceed(e.to_string()))?,
        ),
        false => None,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&prediction).unwrap_or_default();
        print_out(&format!("{text}\n"));
    } else {
        let report = report.map_or(String::new(), |r| format!("report: {}\n", r.display()));
        print_out(&format!(
            "{}\nprediction: {}\n{report}",
            text::prediction_table(&prediction, 20),
            path.display()
        ));
    }
    Ok(exit::OK)
}

fn write_prediction(out: &Path, prediction: &Prediction) -> Result<PathBuf, Failure> {
    let path = out.join("prediction.json");
    let text = serde_json::to_string_pretty(prediction).unwrap_or_default();
    std::fs::create_dir_all(out)
        .and_then(|_| std::fs::write(&path, format!("{text}\n")))
        .map_err(|e| Failure::cannot_proceed(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// `capacity --predict`: the queueing model of the measured demands, set
/// against the measured levels, into `prediction.json` (and so the
/// report); a line for the summary. `None` when no demands were measured
/// (no agents), unless `required`.
pub(super) fn capacity_prediction(
    out: &Path,
    record: &RunRecord,
    scenario: &Scenario,
    required: bool,
) -> Result<Option<String>, Failure> {
    let model = match Model::from_record(record, scenario) {
        Ok(model) => model,
        Err(e) if required => {
            return Err(Failure::bad_input(format!(
                "--predict: {e} (the model needs the agents' demands: `servers:` in the scenario, without --no-agents)"
            )))
        }
        Err(_) => return Ok(None),
    };
    let prediction = predict::of_analysis(&model, &record.levels);
    let path = write_prediction(out, &prediction)?;
    Ok(Some(text::model_summary(&prediction, &path)))
}
