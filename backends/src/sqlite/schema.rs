//! Opening SQLite connections: pragmas, and the schema with its migrations.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::backend_error;
use crate::{OpenError, StoreError};

/// The schema's migrations, in order. Migration `i` brings the schema to version `i + 1`; the
/// `schema_version` table holds one row per applied migration. Never edit one that shipped:
/// add the next.
const MIGRATIONS: &[&str] = &[
    // 1: one row per event. `record` holds the codec's checksummed record bytes (session and seq
    // inside), so a moved or damaged row is caught on read. WITHOUT ROWID: the table is its
    // primary-key index, one b-tree instead of two.
    "CREATE TABLE events (
        session TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        record BLOB NOT NULL,
        PRIMARY KEY (session, seq)
    ) WITHOUT ROWID;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

fn open_error(location: &str, what: &str, e: rusqlite::Error) -> OpenError {
    OpenError::Store(backend_error(format!("{location}: {what}"), e))
}

/// Opens a connection with the pragmas every connection of the store has: the busy timeout
/// (how long to wait for another connection's write lock) and a statement cache.
pub(crate) fn connect(
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

/// Puts the database in WAL mode and brings its schema to [`SCHEMA_VERSION`], in one
/// `BEGIN IMMEDIATE` transaction so that processes opening the file at once migrate it once.
pub(crate) fn prepare(conn: &Connection, location: &str) -> Result<(), OpenError> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| open_error(location, "switching to WAL mode", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Options {
            reason: format!(
                "{location}: the database stays in journal mode `{mode}`, not WAL \
                 (an in-memory or read-only database cannot be a journal store)"
            ),
        });
    }
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| open_error(location, "locking the database to check its schema", e))?;
    let result = migrate(conn, location);
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = conn
        .execute_batch(end)
        .map_err(|e| open_error(location, "committing the schema migration", e));
    result.and(ended)
}

/// For a read-only store: checks, without taking the write lock or changing anything, that the
/// database holds this build's schema.
pub(crate) fn check(conn: &Connection, location: &str) -> Result<(), OpenError> {
    let current: Option<i64> = conn
        .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
        .map_err(|e| {
            open_error(location, "reading the schema version (is this a stepjournal database?)", e)
        })?;
    match current.unwrap_or(0) {
        SCHEMA_VERSION => Ok(()),
        v if v > SCHEMA_VERSION => Err(OpenError::Options {
            reason: format!(
                "{location}: the schema is at version {v}, written by a newer stepjournal; \
                 this build knows versions up to {SCHEMA_VERSION}"
            ),
        }),
        v => Err(OpenError::Options {
            reason: format!(
                "{location}: the schema is at version {v}, older than this build's \
                 {SCHEMA_VERSION}; open it once for writing to migrate it"
            ),
        }),
    }
}

fn migrate(conn: &Connection, location: &str) -> Result<(), OpenError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .map_err(|e| open_error(location, "creating the schema_version table", e))?;
    let current: i64 = conn
        .query_row("SELECT max(version) FROM schema_version", [], |r| r.get::<_, Option<i64>>(0))
        .optional()
        .map_err(|e| open_error(location, "reading the schema version", e))?
        .flatten()
        .unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(OpenError::Options {
            reason: format!(
                "{location}: the schema is at version {current}, written by a newer stepjournal; \
                 this build knows versions up to {SCHEMA_VERSION}"
            ),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        let version = i as i64 + 1;
        conn.execute_batch(sql).map_err(|e| {
            open_error(location, &format!("applying schema migration {version}"), e)
        })?;
        conn.execute("INSERT INTO schema_version (version) VALUES (?1)", [version])
            .map_err(|e| open_error(location, "recording the schema version", e))?;
    }
    Ok(())
}
