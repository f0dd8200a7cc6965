//! `autoperf`: turns argv into typed values, calls the core, and maps the
//! outcome to an exit code: 0 success, 1 an SLO failed, 2 bad input,
//! 3 the run could not proceed, 4 it measured nothing trustworthy, 130
//! interrupted (the `exit` module below).

mod cli;
mod cmd;
mod compare;
mod import;
mod outputs;
mod progress;
mod resume;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit codes of the contract (docs/design.md 2.3).
pub mod exit {
    pub const OK: u8 = 0;
    pub const THRESHOLD_FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const CANNOT_PROCEED: u8 = 3;
    /// The run measured nothing trustworthy: a level whose requests all
    /// failed (or past `capacity.max_error_rate`), or a target that died.
    pub const UNTRUSTWORTHY: u8 = 4;
    /// Ctrl-C: results written up to the interruption (128 + SIGINT, as
    /// shells report it).
    pub const INTERRUPTED: u8 = 130;
}

/// A failure that already knows its exit code and message.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::BAD_INPUT,
            message: message.into(),
        }
    }

    pub fn cannot_proceed(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::CANNOT_PROCEED,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every connection is a file descriptor: use all the process may have.
    autoperf_core::engine::fleet::raise_open_file_limit();
    let result = match cli.command {
        Command::Run(args) => cmd::run(args),
        Command::Compare(args) => compare::command(args),
        Command::Import(args) => import::command(args),
        Command::Check { scenario, set } => cmd::check(&scenario, &set.overrides),
        Command::Report { results } => cmd::report(&results),
        Command::Capacity(args) => cmd::capacity(args),
        Command::Profile(args) => cmd::profile(args),
        Command::Predict(args) => cmd::predict(args),
        Command::Demo(args) => cmd::demo(args),
        Command::Testbed(args) => cmd::testbed(args),
        Command::Agent(args) => cmd::agent(args),
        Command::Worker(args) => cmd::worker(args),
        Command::Tier(args) => cmd::tier(args),
        Command::Generator => cmd::generator(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            let message = autoperf_core::measure::printable(&failure.message);
            let _ = writeln!(std::io::stderr(), "error: {message}");
            ExitCode::from(failure.code)
        }
    }
}

/// Writes to stdout; a closed pipe (`autoperf … | head`) is not an error.
pub fn print_out(text: &str) {
    let text = autoperf_core::measure::printable(text);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}
