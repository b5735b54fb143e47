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

/// The fold of a session's log as the store keeps it: from seq 0, or from its first intact
/// snapshot when it was trimmed. A trimmed log with none (damaged) is folded from its first
/// event, so that `show`, `calls`, `sessions` and `view` still show what it holds; the
/// commands that plan or write refuse it ([`fold_strict`]).
pub(crate) fn fold_records(records: &[Record]) -> stepjournal_recovery::SessionState {
    stepjournal_recovery::SessionState::of_log(records).unwrap_or_else(|_| {
        stepjournal_recovery::fold(&records.iter().map(|r| r.event.clone()).collect::<Vec<_>>())
    })
}

/// The fold of a session's log as the store keeps it ([`fold_records`]); a trimmed log with
/// no intact snapshot to start from is corrupt: [`CliError::Store`].
pub(crate) fn fold_strict(
    url: &str,
    session: &SessionId,
    records: &[Record],
) -> Result<stepjournal_recovery::SessionState, CliError> {
    stepjournal_recovery::SessionState::of_log(records).map_err(|e| CliError::Store {
        url: StoreName::of(url),
        doing: format!("folding session {session}"),
        source: StoreError::Corrupt {
            context: format!("session {session}"),
            source: stepjournal_codec::DecodeError::Malformed { reason: e.to_string() },
        },
    })
}

/// The record at `seq` of a session's records (read in order, dense from where the log starts:
/// seq 0, or a trimmed log's kept snapshot).
pub(crate) fn at_seq(records: &[Record], seq: u64) -> Option<&Record> {
    let first = records.first()?.seq.get();
    records.get(usize::try_from(seq.checked_sub(first)?).ok()?).filter(|r| r.seq.get() == seq)
}
