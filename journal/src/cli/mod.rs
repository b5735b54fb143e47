//! The `stepjournal` command: its arguments (clap derive) and one library function per
//! subcommand. `main` only parses, calls [`run`] and maps the result to an exit code.
//!
//! A new subcommand is a file in this folder with its `Args` struct and its `run` function, and
//! one variant of [`Command`].

pub mod plan;

use std::io::Write;

use clap::{Parser, Subcommand};

/// stepjournal: the recovery engine's command-line tool.
#[derive(Debug, Parser)]
#[command(
    name = "stepjournal",
    version,
    about,
    long_about = None,
    after_help = "Example:\n  stepjournal plan --scenario tests/conformance/cases/18-retry-rewinds.json"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what recovery would do for an entry, as one JSON object.
    Plan(plan::PlanArgs),
}

/// A subcommand that failed: the message is printed on standard error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A scenario file is malformed.
    #[error("{path}: {source}")]
    Scenario {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, and where.
        #[source]
        source: crate::scenario::ScenarioError,
    },
    /// Standard output could not be written.
    #[error("cannot write the output: {source}")]
    Write {
        /// Why.
        #[from]
        source: std::io::Error,
    },
}

impl CliError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Read { .. } | CliError::Scenario { .. } => 1,
            CliError::Write { .. } => 74,
        }
    }
}

/// Runs a parsed command line, writing results to `out` and warnings to `err`.
pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Plan(args) => plan::run(&args, out, err),
    }
}
