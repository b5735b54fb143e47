//! stepjournal-cli: the `stepjournal` command. Its arguments (clap derive) and one library
//! function per subcommand; `main` only parses, calls [`run`] and maps the result to an exit code.
//!
//! Every backend is built in: the command opens `file:`, `sqlite:` and `postgres://` stores.
//!
//! A new subcommand is a file in this crate with its `Args` struct and its `run` function, and
//! one variant of [`Command`].
//!
//! Every read command opens its store read-only (a file journal without the writer's lock), so
//! each is safe on a journal a runtime is writing; the write commands (`stop`, `fork`, `answer`,
//! `approve`, `deny`, `delete`) go through the session writer. Exit status: 0 on success, 1 when
//! `verify` found a problem or damaged sessions were skipped, 2 on an error (named on standard
//! error), 74 when the output cannot be written.

mod act;
pub mod answer;
pub mod calls;
mod columns;
pub mod delete;
pub mod demo;
mod error;
pub mod export;
pub mod fork;
mod holders;
pub mod import;
pub mod operator;
pub mod partial;
pub mod plan;
mod progress;
pub mod reading;
pub mod salvage;
pub mod sessions;
pub mod show;
mod shown;
pub mod stats;
pub mod stop;
mod store;
pub mod time;
pub mod trim;
pub mod verify;
pub mod view;
mod wrap;

use std::io::{IsTerminal, Write};

use clap::{Parser, Subcommand};

pub use error::{ActionError, CliError, StopCause};
pub use shown::{Shown, StoreName, escape, is_escaped};
pub use store::{open_read, read_session};

/// stepjournal: inspect, verify, explain, export and import agent-session journals.
#[derive(Debug, Parser)]
#[command(
    name = "stepjournal",
    version,
    about,
    long_about = None,
    after_help = "STORE is a URL: file:PATH (a journal directory), sqlite:PATH, or postgres://... \
                  (postgresql://...).\n\n\
Examples:\n  stepjournal sessions file:./stepjournal-demo --state crashed\n  \
stepjournal calls file:./stepjournal-demo SESSION\n  \
stepjournal show file:./stepjournal-demo SESSION\n  \
stepjournal plan file:./stepjournal-demo SESSION --entry wake\n  \
stepjournal view file:./stepjournal-demo SESSION -o session.html\n  \
stepjournal stop sqlite:journal.db SESSION --dry-run\n  \
stepjournal fork file:./stepjournal-demo SESSION --at CHECKPOINT --to NEW\n  \
stepjournal trim file:./stepjournal-demo SESSION --keep-turns 2\n  \
stepjournal salvage file:./damaged --to file:./salvaged\n  \
stepjournal export file:./stepjournal-demo > journal.jsonl"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List sessions: events, last append, state, unresolved calls.
    Sessions(sessions::SessionsArgs),
    /// Show one session's timeline: runs, steps, calls and what became of them.
    Show(show::ShowArgs),
    /// One row per call of a session: tool, kind, policy, attempts, dispatch, status, rule, age.
    Calls(calls::CallsArgs),
    /// Print what recovery would do for an entry (a dry run: nothing is written).
    Plan(plan::PlanArgs),
    /// Check records, checksums, sequence continuity and the protocol.
    Verify(verify::VerifyArgs),
    /// Write sessions as JSON lines (a header line, then one line per event).
    Export(export::ExportArgs),
    /// Append the sessions of an export to a store.
    Import(import::ImportArgs),
    /// Copy every intact batch of a damaged store to a new store (the source is never written).
    Salvage(salvage::SalvageArgs),
    /// Stop a session's work through the session writer (fences its running run).
    Stop(stop::StopArgs),
    /// Fork a session at a committed step into a new session.
    Fork(fork::ForkArgs),
    /// Drop a session's events before a kept snapshot (what recovery needs is kept).
    Trim(trim::TrimArgs),
    /// Answer a waiting client call through the session writer.
    Answer(answer::AnswerArgs),
    /// Approve an approval-gated call through the session writer.
    Approve(answer::DecideArgs),
    /// Deny an approval-gated call through the session writer.
    Deny(answer::DecideArgs),
    /// Delete sessions from a store.
    Delete(delete::DeleteArgs),
    /// Count sessions, events, bytes and events of each kind.
    Stats(stats::StatsArgs),
    /// Write one session's timeline as one self-contained HTML file.
    View(view::ViewArgs),
    /// Run an agent session, kill it with SIGKILL mid-step, recover it, and say what happened.
    Demo(demo::DemoArgs),
    /// The demo's crashing child process.
    #[command(name = "demo-child", hide = true)]
    DemoChild(demo::DemoChildArgs),
}

/// What the command's output goes to: colour and progress bars only on a terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terminal {
    /// Standard output is a terminal (and `NO_COLOR` is not set): `show` may use colour.
    pub colour: bool,
    /// Standard error is a terminal: long scans may draw a progress bar there.
    pub progress: bool,
    /// Standard output is a terminal this many columns wide: `show` wraps its lines to it.
    pub width: Option<usize>,
}

impl Terminal {
    /// What this process's standard output and error are.
    pub fn detect() -> Self {
        Terminal {
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            progress: std::io::stderr().is_terminal(),
            width: terminal_size::terminal_size_of(std::io::stdout())
                .map(|(terminal_size::Width(w), _)| usize::from(w)),
        }
    }
}

/// Runs a parsed command line, writing results to `out` and warnings to `err`, with colour and
/// progress decided by what this process's standard streams are.
pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    run_with(cli, out, err, Terminal::detect())
}

/// Runs a parsed command line with the given terminal settings. An output closed by its reader
/// (`stepjournal export ... | head`) ends the command quietly.
pub fn run_with(
    cli: Cli,
    out: &mut dyn Write,
    err: &mut dyn Write,
    term: Terminal,
) -> Result<(), CliError> {
    let result = match cli.command {
        Command::Sessions(args) => sessions::run(&args, out),
        Command::Show(args) => show::run(&args, out, term),
        Command::Calls(args) => calls::run(&args, out),
        Command::Plan(args) => plan::run(&args, out, err),
        Command::Verify(args) => verify::run(&args, out, term),
        Command::Salvage(args) => salvage::run(&args, out, term.progress),
        Command::Export(args) => export::run(&args, out, term.progress),
        Command::Import(args) => import::run(&args, out, term.progress),
        Command::Stop(args) => stop::run(&args, out),
        Command::Fork(args) => fork::run(&args, out),
        Command::Trim(args) => trim::run(&args, out),
        Command::Answer(args) => answer::run_answer(&args, out),
        Command::Approve(args) => answer::run_decide(&args, true, out),
        Command::Deny(args) => answer::run_decide(&args, false, out),
        Command::Delete(args) => delete::run(&args, out),
        Command::Stats(args) => stats::run(&args, out),
        Command::View(args) => view::run(&args, out),
        Command::Demo(args) => match std::env::current_exe() {
            // The demo's child is this very executable, run with `demo-child`.
            Ok(program) => demo::run(&args, &program, out),
            Err(source) => {
                Err(CliError::Read { path: "the stepjournal executable".into(), source })
            }
        },
        Command::DemoChild(args) => demo::run_child(&args, out),
    };
    match result {
        Err(CliError::Write { source }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(())
        }
        other => other,
    }
}
