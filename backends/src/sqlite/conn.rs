//! What every connection of the store shares: how it is opened, and how its errors are told.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::StoreError;

pub(super) const BACKEND: &str = "sqlite";

pub(super) fn backend_error(context: impl Into<String>, e: rusqlite::Error) -> StoreError {
    StoreError::Backend { backend: BACKEND, context: context.into(), source: Box::new(e) }
}

/// What a write refused for the lock says: who holds it, where the operating system tells, and
/// how long this call waited for it.
pub(super) fn locked(path: &Path, waited: Duration) -> String {
    format!(
        "the database is locked: {}; this call waited {} ms for it (the busy timeout), and \
         nothing was written",
        super::holder::write_lock_holder(path),
        waited.as_millis()
    )
}

/// Whether the database was locked by another connection past the busy timeout.
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a connection leaves at most an open transaction, which the next
    // write rolls back first; the other guarded values are consistent between statements.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens a connection with the pragmas every connection of the store has: the busy timeout
/// (how long to wait for another connection's write lock) and a statement cache.
pub(super) fn connect(
    path: &Path,
    location: &str,
    busy_timeout: Duration,
    read_only: bool,
) -> Result<Connection, StoreError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| backend_error(format!("{location}: opening the database"), e))?;
    // SQLite takes milliseconds as a C int: longer timeouts are capped (at about 24 days).
    let max = Duration::from_millis(i32::MAX as u64);
    conn.busy_timeout(busy_timeout.min(max))
        .map_err(|e| backend_error(format!("{location}: setting the busy timeout"), e))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}
