//! Opening a store from its URL and reading sessions, with errors that name the store.

use std::sync::Arc;

use stepjournal_backends::{JournalStore, OpenOptions, open_url};
use stepjournal_codec::{Record, SessionId};

use super::CliError;

/// Opens the store `url` names for reading: a file journal without the writer's lock (safe on a
/// journal a runtime is writing); a missing store is an error, never created.
pub fn open_read(url: &str) -> Result<Arc<dyn JournalStore>, CliError> {
    open_url(url, OpenOptions::read_only())
        .map_err(|source| CliError::Open { url: url.to_owned(), source })
}

/// Every event of `session`; a session with no events is [`CliError::NoSession`].
pub fn read_session(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
) -> Result<Vec<Record>, CliError> {
    let records = store.read_all(session).map_err(|source| CliError::Store {
        url: url.to_owned(),
        doing: format!("reading session {session}"),
        source,
    })?;
    if records.is_empty() {
        return Err(CliError::NoSession { url: url.to_owned(), session: session.clone() });
    }
    Ok(records)
}

/// Every session of the store, by id.
pub(crate) fn list_sessions(
    store: &dyn JournalStore,
    url: &str,
) -> Result<Vec<SessionId>, CliError> {
    store.sessions().map_err(|source| CliError::Store {
        url: url.to_owned(),
        doing: "listing sessions".to_owned(),
        source,
    })
}
