//! `stepjournal trim`: drops a session's events before a kept snapshot, through the session
//! writer (`Journal::trim`): a `trimmed` event appended at the tail the command read, which the
//! store applies atomically with the append. A session whose run is live is refused.

use std::io::Write;

use clap::Args;
use stepjournal::{Trim, TrimError};
use stepjournal_codec::SessionId;

use super::CliError;
use super::act::{journal, open_to_write, read_state};
use super::shown::{Shown, StoreName};

/// Arguments of `stepjournal trim`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal trim file:./journal SESSION\n  stepjournal trim \
sqlite:journal.db SESSION --keep-turns 5\n\n\
Keeps the session's log from a snapshot on: never the newest snapshot alone (the one before it \
is kept too), never less than the last KEEP turns whole, never a snapshot a later rewind reaches \
back past. Every open call, pending approval and client call lies after a kept snapshot. \
Afterwards `show`, `export` and `read` start at the kept snapshot, and the transcript says how \
many turns were dropped. A session whose run is live is refused (the trim would race its \
appends); a session another actor appends to meanwhile is left as it is. The space is freed as a \
deletion's is (rows at once; a file journal's segments by compaction).")]
pub struct TrimArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session to trim.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// How many of the last turns (runs begun by a new message) to keep whole.
    #[arg(long = "keep-turns", value_name = "KEEP", default_value_t = 1)]
    pub keep_turns: usize,
}

/// Runs `stepjournal trim`.
pub fn run(args: &TrimArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let session = SessionId::from_stored(args.session.as_str());
    let store = open_to_write(&args.store, "trim")?;
    let (records, state) = read_state(&*store, &args.store, &session)?;
    let action = |source: super::ActionError| CliError::Action {
        url: StoreName::of(&args.store),
        session: session.clone(),
        what: "trim",
        source: Box::new(source),
    };
    let (journal, _owner) =
        journal(std::sync::Arc::clone(&store), &state, None).map_err(|e| action(e.into()))?;
    let trimmed = journal.trim(&session, args.keep_turns);
    // The journal holds no run: shutting it down only stops its keeper.
    stepjournal::writer::block_on(journal.shutdown(std::time::Duration::ZERO));
    match trimmed.map_err(|e: TrimError| action(e.into()))? {
        Trim::Trimmed { before, from, at, turns } => writeln!(
            out,
            "trimmed session {} of {}: dropped seq {from}..{before} ({} events read before); the \
             log starts at the snapshot at seq {before}; `trimmed` written at seq {at} ({turns} \
             turns dropped in all)",
            Shown(&session),
            StoreName::of(&args.store),
            records.len()
        )?,
        Trim::Nothing { why } => writeln!(
            out,
            "nothing to trim in session {} of {}: {why}",
            Shown(&session),
            StoreName::of(&args.store)
        )?,
        _ => {}
    }
    Ok(())
}
