//! `autoperf predict`: the what-ifs asked of the queueing model, and the
//! parsers of their user counts and `name=value` lists.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{parse_duration, parse_rate};

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// A results directory of `autoperf profile` or `autoperf capacity`.
    pub results: PathBuf,
    /// Users to predict for: N, A..B or a list (default: 1 to twice N*).
    #[arg(long, value_parser = parse_users, conflicts_with = "rate")]
    pub users: Option<UserCounts>,
    /// Open-workload what-ifs instead: arrival rates, e.g. 100/s,200/s.
    #[arg(long, value_delimiter = ',', value_parser = parse_rate)]
    pub rate: Vec<f64>,
    /// Users per workload class (`classes:`), e.g. browser=14,buyer=12:
    /// one point, each class solved apart (needs a profile).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<u32>, conflicts_with_all = ["users", "rate", "mix"])]
    pub class_users: Vec<(String, u32)>,
    /// Think time between a user's requests (default: the scenario's mean).
    #[arg(long, value_parser = parse_duration)]
    pub think: Option<Duration>,
    /// Request mix by share, e.g. login=0.2,search=0.8 (needs a profile).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<f64>)]
    pub mix: Vec<(String, f64)>,
    /// Cores per tier, e.g. web=4,db=2.
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<u32>)]
    pub cores: Vec<(String, u32)>,
    /// A tier's CPU this many times faster, e.g. db=1.5.
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<f64>)]
    pub speedup: Vec<(String, f64)>,
    /// The scenario the results were measured with (default: the file
    /// named in run.json).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Compare with the measured levels of this capacity analysis (default:
    /// RESULTS itself, when it is one and no what-if is asked).
    #[arg(long, value_name = "DIR")]
    pub measured: Option<PathBuf>,
    /// Where prediction.json goes (default: the results directory).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print prediction.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// User counts to predict for.
#[derive(Debug, Clone)]
pub struct UserCounts(pub Vec<u32>);

/// `N`, `A..B` (up to 200 evenly spaced counts) or `A,B,C`.
fn parse_users(text: &str) -> Result<UserCounts, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("expected users like 100, 1..2000 or 10,50,100, found `{text}`"))
    };
    if let Some((a, b)) = text.split_once("..") {
        let (a, b) = (number(a)?, number(b)?);
        if a > b {
            return Err(format!(
                "`{text}`: the range runs from the smaller to the larger count"
            ));
        }
        return Ok(UserCounts(autoperf_core::model::predict::user_steps(
            a, b, 200,
        )));
    }
    text.split(',')
        .map(number)
        .collect::<Result<_, _>>()
        .map(UserCounts)
}

/// `name=value`.
fn parse_pair<T: std::str::FromStr>(text: &str) -> Result<(String, T), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected name=value, found `{text}`"))?;
    let value = value
        .trim()
        .parse::<T>()
        .map_err(|_| format!("`{text}`: `{value}` is not a number"))?;
    Ok((name.trim().to_string(), value))
}
