//! `data:`: the feeders templates read, a CSV file's rows or a generated
//! range of integers, handed out in order, at random, or each once.

use std::path::PathBuf;

/// A `data:` entry: rows of name-value pairs from a CSV file with a header,
/// or a generated range of integers. Each use takes the next row, wrapping
/// around.
#[derive(Debug, Clone)]
pub struct Feeder {
    pub name: String,
    pub source: FeederSource,
    pub mode: FeederMode,
    pub columns: Vec<String>,
    /// Never empty: validation rejects a file without data rows.
    pub rows: Vec<Vec<String>>,
}

/// How a feeder hands out its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeederMode {
    /// In order, shared by all users, round and round (the default).
    #[default]
    Sequential,
    /// A row drawn at random for each use.
    Random,
    /// Each row once in the whole level; a user whose request finds none
    /// left stops (`data_exhausted`).
    Unique,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeederSource {
    /// `{csv: file}`: the file, resolved against the scenario's directory.
    Csv(PathBuf),
    /// `{range: [from, to]}`: one column `n`, the integers from..=to.
    Range { from: i64, to: i64 },
}
