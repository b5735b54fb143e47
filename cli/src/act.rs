//! What the write commands (`stop`, `answer`, `approve`, `deny`, `delete`) share: opening a
//! store to write through the session writer (a file journal a runtime holds is refused, naming
//! its lock), the journal over it, and printing what was written.

use std::io::Write;
use std::sync::Arc;

use stepjournal::Journal;
use stepjournal::writer::{JournalOptions, block_on};
use stepjournal_backends::file::{FileOptions, FileStore, LOCK_FILE, writer_is_live};
use stepjournal_backends::{JournalStore, OpenError, OpenOptions, OwnerId, StoreUrl, open_url};
use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{Event, Operator, Record, RunId, SessionId};
use stepjournal_recovery::SessionState;

use super::CliError;
use super::plan::SavedPolicies;
use super::shown::{StoreName, json_for_terminal};

/// Opens `url` to write, for the command `action`: a file journal whose lock a runtime holds
/// is [`CliError::Held`] (a file journal has one writer), and nothing is created.
pub(crate) fn open_to_write(
    url: &str,
    action: &'static str,
) -> Result<Arc<dyn JournalStore>, CliError> {
    let name = StoreName::of(url);
    let held = |dir: &std::path::Path| CliError::Held {
        url: name.clone(),
        lock: dir.join(LOCK_FILE),
        action,
    };
    match StoreUrl::parse(url) {
        Ok(StoreUrl::File(dir)) if dir.is_dir() => {
            if writer_is_live(&dir).unwrap_or(false) {
                return Err(held(&dir));
            }
            // `preallocate` 0: an action writes little, and may be what a full disk needs.
            match FileStore::open(&dir, FileOptions::new().preallocate(0)) {
                Ok(store) => Ok(Arc::new(store)),
                Err(OpenError::Locked { .. }) => Err(held(&dir)),
                Err(source) => Err(CliError::Open { url: name, source }),
            }
        }
        _ => open_url(url, OpenOptions { read_only: false, create: false })
            .map_err(|source| CliError::Open { url: name, source }),
    }
}

/// The session's events and its folded state; a session with no events is
/// [`CliError::NoSession`].
pub(crate) fn read_state(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
) -> Result<(Vec<Record>, SessionState), CliError> {
    let records = super::store::read_session(store, url, session)?;
    let state = super::store::fold_strict(url, session, &records)?;
    Ok((records, state))
}

/// A session writer over `store` that decides recovery with each tool's saved policy (the
/// command runs no tool body: a call that must run is left to the runtime) and signs what it
/// writes with `by` (`--as`, `--reason`), and the owner its runs' leases are taken for.
pub(crate) fn journal(
    store: Arc<dyn JournalStore>,
    state: &SessionState,
    by: Option<Operator>,
) -> Result<(Journal, OwnerId), stepjournal::JournalError> {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".to_owned());
    let owner = OwnerId::new(format!("stepjournal-cli:{host}:{}", std::process::id()));
    let options = JournalOptions::new().owner(owner.clone()).operator(by);
    Ok((Journal::new(store, Arc::new(SavedPolicies::of(state)), options)?, owner))
}

/// Lets go of the command's run, writing nothing more: the journal shuts down and the run's
/// lease, where the store keeps one, is released before the command exits (the journal's keeper
/// releases it too, but on its own thread, which the exit may overtake), so that the runtime's
/// next start finds the session at once rather than once the lease lapses.
pub(crate) fn let_go(
    journal: &Journal,
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
    owner: &OwnerId,
    run: &RunId,
) -> Result<(), CliError> {
    block_on(journal.shutdown(std::time::Duration::ZERO));
    store.release_lease(session, owner, run).map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: format!("releasing the lease of session {session}"),
        source,
    })
}

/// Refuses to act on a session whose open run holds a live lease (a runtime is running it),
/// judged by the store's clock read with the head: the action would fence that run. `what`
/// names the action.
pub(crate) fn refuse_if_running(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
    state: &SessionState,
    what: &'static str,
) -> Result<(), CliError> {
    if state.last_run_outcome().is_some() || state.last_run().is_none() {
        return Ok(());
    }
    let head = store.head(session).map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: format!("reading the lease of session {session}"),
        source,
    })?;
    match head.as_ref().and_then(|h| h.live_lease()) {
        Some(lease) => Err(CliError::Running {
            url: StoreName::of(url),
            session: session.clone(),
            owner: lease.owner.to_string(),
            what,
        }),
        None => Ok(()),
    }
}

/// Prints the events as written (or, for a dry run, as they would be): one line each, its seq
/// and its JSON.
pub(crate) fn write_events(
    out: &mut dyn Write,
    first: u64,
    events: &[Event],
) -> std::io::Result<()> {
    for (i, e) in events.iter().enumerate() {
        writeln!(out, "  {}  {}", first + i as u64, json_for_terminal(&event_to_json(e)))?;
    }
    Ok(())
}

/// The events the store holds from `from` up to its tail now (what an action wrote, and what
/// another writer appended between, which the writer folded).
pub(crate) fn written_since(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
    from: u64,
) -> Result<Vec<Event>, CliError> {
    let records = super::store::read_session(store, url, session)?;
    Ok(records.into_iter().skip(from as usize).map(|r| r.event).collect())
}
