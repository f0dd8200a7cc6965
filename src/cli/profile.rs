//! `autoperf profile`: what one request of each type costs every server
//! process.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{parse_duration, GeneratorArgs, OutputArgs, SetArgs};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The scenario file (YAML); its `servers:` name the processes and agents.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Request types to profile, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub requests: Vec<String>,
    /// Concurrent users loading each request type.
    #[arg(long, short = 'u', default_value_t = 10)]
    pub users: u32,
    /// Warm-up before each request type's measurement (prerequisites run in it).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub warmup: Duration,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}
