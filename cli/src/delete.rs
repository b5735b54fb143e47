//! `stepjournal delete`: deletes sessions from a store (what a failed import names when it
//! could not remove a partial session itself).

use std::io::Write;

use clap::Args;
use stepjournal_codec::SessionId;

use super::CliError;
use super::shown::{Shown, StoreName};
use super::store::open_to_delete;

/// Arguments of `stepjournal delete`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal delete file:./restored s-1\n  \
stepjournal delete sqlite:journal.db s-1 s-2\n\n\
Every named session must be in the store: if one is not, nothing is deleted. The store is \
opened for writing (a file journal takes its writer's lock, so no runtime may be writing it). \
There is no undo.")]
pub struct DeleteArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The sessions to delete.
    #[arg(value_name = "SESSION", required = true)]
    pub sessions: Vec<String>,
}

/// Runs `stepjournal delete`.
pub fn run(args: &DeleteArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let url = StoreName::of(&args.store);
    let store = open_to_delete(&args.store)
        .map_err(|source| CliError::Open { url: url.clone(), source })?;
    let mut sessions: Vec<SessionId> =
        args.sessions.iter().map(|s| SessionId::from_stored(s.as_str())).collect();
    sessions.sort();
    sessions.dedup();
    let mut tails = Vec::with_capacity(sessions.len());
    for s in &sessions {
        let tail = store.tail(s).map_err(|source| CliError::Store {
            url: url.clone(),
            doing: format!("reading the tail of {s}"),
            source,
        })?;
        if tail.get() == 0 {
            return Err(CliError::NoSession { url, session: s.clone() });
        }
        tails.push(tail);
    }
    for (s, tail) in sessions.iter().zip(tails) {
        store.delete(s).map_err(|source| CliError::Store {
            url: url.clone(),
            doing: format!("deleting session {s}"),
            source,
        })?;
        writeln!(out, "deleted session {} ({} events) from {url}", Shown(s), tail.get())?;
    }
    Ok(())
}
