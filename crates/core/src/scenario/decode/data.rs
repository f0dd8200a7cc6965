//! Decoding of `data`: each feeder's CSV file is read now (relative to the
//! scenario's directory) and checked for a header and at least one row, so
//! templates can be checked against its columns. A `range` feeder is
//! generated: one column `n`, the integers of the range in order (the
//! Theodolite workload's sensor ids).

use std::path::Path;

use super::super::files;
use super::super::model::{Feeder, FeederMode, FeederSource};
use super::super::yaml::Node;
use super::ctx::{is_name, Ctx};

/// The keys of a `data:` entry.
pub(crate) const DATA_KEYS: &[&str] = &["csv", "range", "mode"];

/// A feeder and whether its file could be read (if not, its columns are
/// unknown and templates naming it are not checked further).
pub(crate) struct DecodedFeeder {
    pub feeder: Feeder,
    pub readable: bool,
}

pub(crate) fn decode_data(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Vec<DecodedFeeder> {
    let mut feeders = Vec::new();
    for (key, value) in ctx.named_map(node, "`data`").unwrap_or_default() {
        if !is_name(&key.name) || key.name == "random" {
            ctx.error(
                key.pos,
                format!("expected a feeder name of letters, digits, `_` or `-` (not `random`), found `{}`", key.name),
            );
        }
        let what = format!("data feeder `{}`", key.name);
        let Some(fields) = ctx.map(value, &what, DATA_KEYS) else {
            continue;
        };
        let mode = match fields.get("mode") {
            None => FeederMode::Sequential,
            Some(n) => match n.as_str() {
                Some("sequential") => FeederMode::Sequential,
                Some("random") => FeederMode::Random,
                Some("unique") => FeederMode::Unique,
                _ => {
                    ctx.error(
                        n.pos(),
                        format!(
                            "expected `sequential`, `random` or `unique` for the mode of {what}, found {}",
                            n.describe()
                        ),
                    );
                    FeederMode::Sequential
                }
            },
        };
        if let Some(range) = fields.get("range") {
            if fields.get("csv").is_some() {
                ctx.error(
                    key.pos,
                    format!("expected one of `csv` or `range` in {what}, found both"),
                );
            }
            if let Some((from, to)) = decode_range(ctx, range) {
                feeders.push(DecodedFeeder {
                    feeder: Feeder {
                        name: key.name.clone(),
                        source: FeederSource::Range { from, to },
                        mode,
                        columns: vec!["n".into()],
                        rows: (from..=to).map(|n| vec![n.to_string()]).collect(),
                    },
                    readable: true,
                });
            }
            continue;
        }
        let Some(csv_node) = fields.get("csv") else {
            ctx.error(
                fields.pos,
                format!("missing required key `csv` (or `range`) in {what}"),
            );
            continue;
        };
        let Some(relative) = ctx.setting(csv_node, "a CSV file path") else {
            continue;
        };
        let path = base_dir.join(&relative);
        let (columns, rows, readable) = match read_csv(&path) {
            Ok((columns, rows)) => (columns, rows, true),
            Err(message) => {
                ctx.error(csv_node.pos(), message);
                (Vec::new(), Vec::new(), false)
            }
        };
        feeders.push(DecodedFeeder {
            feeder: Feeder {
                name: key.name.clone(),
                source: FeederSource::Csv(path),
                mode,
                columns,
                rows,
            },
            readable,
        });
    }
    feeders
}

/// Rows are materialised, so a range is bounded; a million sensors is
/// already far beyond the workloads it serves.
const MAX_RANGE_ROWS: i64 = 1_000_000;

/// `[from, to]`, both included.
fn decode_range(ctx: &mut Ctx, node: &Node) -> Option<(i64, i64)> {
    let expected = "expected `range: [from, to]` with two integers, from <= to";
    let bounds = match node {
        Node::Seq { items, .. } if items.len() == 2 => {
            let parse = |n: &Node| n.as_str().and_then(|s| s.trim().parse::<i64>().ok());
            parse(&items[0]).zip(parse(&items[1]))
        }
        _ => None,
    };
    match bounds {
        Some((from, to)) if from <= to && to.saturating_sub(from) < MAX_RANGE_ROWS => {
            Some((from, to))
        }
        Some((from, to)) if from <= to => {
            ctx.error(
                node.pos(),
                format!("expected a range of at most {MAX_RANGE_ROWS} values, found {from}..={to}"),
            );
            None
        }
        _ => {
            ctx.error(node.pos(), format!("{expected}, found {}", node.describe()));
            None
        }
    }
}

/// Reads a CSV file with a header row and at least one data row.
fn read_csv(path: &Path) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let shown = path.display();
    let bytes = files::read_bounded(path, files::DATA_LIMIT, "CSV file")?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::Headers)
        .from_reader(&bytes[..]);
    let columns: Vec<String> = reader
        .headers()
        .map_err(|e| format!("cannot read CSV file `{shown}`: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    if columns.iter().all(String::is_empty) {
        return Err(format!(
            "expected a header row naming the columns in CSV file `{shown}`, found an empty file"
        ));
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("cannot read CSV file `{shown}`: {e}"))?;
        rows.push(record.iter().map(str::to_string).collect());
    }
    if rows.is_empty() {
        return Err(format!(
            "expected at least one data row in CSV file `{shown}`, found only the header"
        ));
    }
    Ok((columns, rows))
}
