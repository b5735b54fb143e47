//! `stepjournal fork`: forks a session at a committed step into a new session, through the
//! session writer (`Journal::fork`): the new session opens with `forked_from` and the snapshot
//! of the original's state at that step commit; the original is only read.

use std::io::Write;

use clap::Args;
use stepjournal_codec::{CheckpointId, SessionId};

use super::CliError;
use super::act::{journal, open_to_write, read_state, write_events};
use super::shown::{Shown, StoreName};

/// Arguments of `stepjournal fork`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  stepjournal fork file:./journal SESSION --at cp-3-commit --to \
SESSION-b\n  stepjournal fork postgres://u@db/app SESSION --at CHECKPOINT --to NEW\n\n\
CHECKPOINT is a step_commit checkpoint of SESSION (`stepjournal show` prints them). A saved \
step's reply checkpoint with calls still open is refused (its calls would be in flight in two \
sessions), and so is any checkpoint that is not a step commit, an unknown checkpoint, and a NEW \
session that already exists: nothing is written. The new session starts with `forked_from` and \
a snapshot of SESSION's state at that commit; its first entry (wake, new turn, ...) plans as \
it would have on SESSION right after the commit. SESSION is not changed."
)]
pub struct ForkArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session to fork.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The step commit checkpoint to fork at.
    #[arg(long = "at", value_name = "CHECKPOINT")]
    pub at: String,
    /// The new session (it must not exist).
    #[arg(long = "to", value_name = "NEW")]
    pub to: String,
}

/// Runs `stepjournal fork`.
pub fn run(args: &ForkArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let session = SessionId::from_stored(args.session.as_str());
    let new = SessionId::new(args.to.as_str())
        .map_err(|e| CliError::Usage { option: "--to", reason: e.to_string() })?;
    if args.at.is_empty() {
        return Err(CliError::Usage { option: "--at", reason: "the checkpoint is empty".into() });
    }
    let checkpoint = CheckpointId::new(args.at.as_str());
    let store = open_to_write(&args.store, "fork")?;
    let (_, state) = read_state(&*store, &args.store, &session)?;
    let action = |source: super::ActionError| CliError::Action {
        url: StoreName::of(&args.store),
        session: session.clone(),
        what: "fork",
        source: Box::new(source),
    };
    let (journal, _owner) =
        journal(std::sync::Arc::clone(&store), &state, None).map_err(|e| action(e.into()))?;
    let written = journal.fork(&session, &checkpoint, &new).map_err(|e| action(e.into()));
    // The journal holds no run: shutting it down only stops its keeper.
    stepjournal::writer::block_on(journal.shutdown(std::time::Duration::ZERO));
    let written = written?;
    writeln!(
        out,
        "forked session {} of {} at {} into {}: wrote {} events at seq 0:",
        Shown(&session),
        StoreName::of(&args.store),
        Shown(&checkpoint),
        Shown(&new),
        written.len()
    )?;
    let events: Vec<_> = written.into_iter().map(|r| r.event).collect();
    write_events(out, 0, &events)?;
    Ok(())
}
