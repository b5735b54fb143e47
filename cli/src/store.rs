//! Opening a store from its URL and reading sessions, with errors that name the store.

use std::io::ErrorKind;
use std::sync::Arc;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{JournalStore, OpenError, OpenOptions, StoreError, StoreUrl, open_url};
use stepjournal_codec::{Record, SessionId};

use super::CliError;
use super::shown::StoreName;

/// Opens the store `url` names for reading: a file journal without the writer's lock (safe on a
/// journal a runtime is writing); a missing store is an error, never created.
pub fn open_read(url: &str) -> Result<Arc<dyn JournalStore>, CliError> {
    let mut tries = 0;
    loop {
        match open_url(url, OpenOptions::read_only()) {
            // A file journal's writer sealed a segment while it was scanned, cutting off the
            // zeros it had written ahead of its data: the scan found the file shorter than when
            // it began. Opening again reads the sealed segment.
            Err(OpenError::Store(StoreError::Io { source, .. }))
                if source.kind() == ErrorKind::UnexpectedEof && tries < SHRUNK_RETRIES =>
            {
                tries += 1;
            }
            other => {
                return other.map_err(|source| CliError::Open { url: StoreName::of(url), source });
            }
        }
    }
}

/// Opens an existing store for writing, writing as little as it can: a file journal reserves
/// no space ahead of its data (`preallocate` 0), so that a session can still be deleted on a
/// full disk (opening cuts the zeros a writer left at the tail, and a deletion is a small
/// frame).
pub(crate) fn open_to_delete(url: &str) -> Result<Arc<dyn JournalStore>, OpenError> {
    match StoreUrl::parse(url)? {
        StoreUrl::File(dir) if dir.is_dir() => {
            Ok(Arc::new(FileStore::open(&dir, FileOptions::new().preallocate(0))?))
        }
        _ => open_url(url, OpenOptions { read_only: false, create: false }),
    }
}

/// How many times a read-only open is tried again when a file shrank under it.
const SHRUNK_RETRIES: u32 = 5;

/// Every event of `session`; a session with no events is [`CliError::NoSession`].
pub fn read_session(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
) -> Result<Vec<Record>, CliError> {
    let records = store.read_all(session).map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: format!("reading session {session}"),
        source,
    })?;
    if records.is_empty() {
        return Err(CliError::NoSession { url: StoreName::of(url), session: session.clone() });
    }
    Ok(records)
}

/// Every session of the store, by id.
pub(crate) fn list_sessions(
    store: &dyn JournalStore,
    url: &str,
) -> Result<Vec<SessionId>, CliError> {
    store.sessions().map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: "listing sessions".to_owned(),
        source,
    })
}
