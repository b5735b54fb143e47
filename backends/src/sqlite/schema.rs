//! The schema and its migrations, and what a database must hold to be opened as a journal.

use rusqlite::{Connection, OptionalExtension};

use super::conn::backend_error;
use crate::OpenError;

/// The schema's migrations, in order. Migration `i` brings the schema to version `i + 1`; the
/// `schema_version` table holds one row per applied migration. Never edit one that shipped:
/// add the next.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 2: a head row per session: its next sequence number and last append time, the state of
    // its last run as the appends moved it (`run_state` NULL: not known, for the sessions of a
    // journal written before heads were kept; 0 no run, 1 open, 2 ended, with `run_id` and
    // `outcome`; `answered`: an answer appended after the run ended suspended), and the lease
    // of the process running it (`lease_expires` in unix ms by this machine's clock). The
    // append's compare-and-set reads `next_seq`; every session already stored gets its row.
    "CREATE TABLE sessions (
        session TEXT NOT NULL PRIMARY KEY,
        next_seq INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        run_state INTEGER,
        run_id TEXT,
        outcome TEXT,
        answered INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_run TEXT,
        lease_expires INTEGER
    ) WITHOUT ROWID;
    INSERT INTO sessions (session, next_seq, last_at)
        SELECT session, max(seq) + 1, at FROM events GROUP BY session;",
    // 3: the `snapshot` rows (kind 17) indexed by place, so that a read from a session's newest
    // snapshot finds it as the last entry of the session's in this index, whatever the length
    // of its history. The condition names the literal kind, as the read does.
    "CREATE INDEX events_snapshots ON events (session, seq) WHERE kind = 17;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

fn open_error(location: &str, what: &str, e: rusqlite::Error) -> OpenError {
    OpenError::Store(backend_error(format!("{location}: {what}"), e))
}

/// The tables and indexes of a journal store: what a database may hold and still be opened for
/// writing.
const OURS: [&str; 4] = ["events", "events_snapshots", "schema_version", "sessions"];

/// Refuses a database that holds anything but a journal store: tables, views, indexes or
/// triggers of its own (SQLite's internal `sqlite_*` objects aside), or a journal's tables
/// without their `schema_version`. An empty database passes. Nothing is changed.
fn refuse_foreign(conn: &Connection, location: &str) -> Result<(), OpenError> {
    let mut stmt = conn
        .prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        .map_err(|e| open_error(location, "listing the database's tables", e))?;
    let objects: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| open_error(location, "listing the database's tables", e))?;
    let foreign: Vec<String> = objects
        .iter()
        .filter(|(_, name)| !OURS.contains(&name.as_str()))
        .map(|(kind, name)| format!("{kind} `{name}`"))
        .collect();
    let found = if !foreign.is_empty() {
        let more = foreign.len().saturating_sub(10);
        let mut named: Vec<String> = foreign.into_iter().take(10).collect();
        if more > 0 {
            named.push(format!("{more} more"));
        }
        named.join(", ")
    } else if !objects.is_empty() && !objects.iter().any(|(_, name)| name == "schema_version") {
        "a table named like a journal's but no `schema_version` table".to_owned()
    } else {
        return Ok(());
    };
    Err(OpenError::NotAJournal { location: location.to_owned(), found })
}

/// Puts the database in WAL mode and brings its schema to [`SCHEMA_VERSION`], in one
/// `BEGIN IMMEDIATE` transaction so that processes opening the file at once migrate it once.
/// A database holding anything but a journal store is refused first, unchanged.
pub(crate) fn prepare(
    conn: &Connection,
    location: &str,
    path: &std::path::Path,
    busy_timeout: std::time::Duration,
) -> Result<(), OpenError> {
    refuse_foreign(conn, location)?;
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
    conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| {
        let what = if super::conn::is_busy(&e) {
            format!(
                "locking the database to check its schema: {}",
                super::conn::locked(path, busy_timeout)
            )
        } else {
            "locking the database to check its schema".to_owned()
        };
        open_error(location, &what, e)
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::{SqliteOptions, SqliteStore};

    #[test]
    fn a_database_of_another_application_is_refused_and_left_unchanged() {
        // Defect: opening another application's database for writing switched it to WAL and
        // added the journal's tables.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otherapp.db");
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch(
                "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
                 CREATE INDEX users_name ON users (name);
                 INSERT INTO users (name) VALUES ('ada');",
            )
            .unwrap();
        drop(other);
        let before = std::fs::read(&path).unwrap();
        let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err().to_string();
        assert!(err.contains("is not a stepjournal store"), "{err}");
        assert!(err.contains("table `users`") && err.contains("index `users_name`"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "the database was changed");
        let mode: String = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        assert!(!dir.path().join("otherapp.db-wal").exists());
    }

    #[test]
    fn a_journals_tables_without_their_version_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("half.db");
        Connection::open(&path).unwrap().execute_batch("CREATE TABLE events (x)").unwrap();
        let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err().to_string();
        assert!(err.contains("no `schema_version` table"), "{err}");
    }

    #[test]
    fn the_snapshot_index_names_the_snapshot_kind() {
        let condition = format!("WHERE kind = {};", stepjournal_codec::EventKind::Snapshot.code());
        assert!(
            MIGRATIONS.iter().any(|m| m.contains("events_snapshots") && m.ends_with(&condition))
        );
    }

    #[test]
    fn an_empty_database_and_a_journal_are_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.db");
        std::fs::write(&path, b"").unwrap();
        drop(SqliteStore::open(&path, SqliteOptions::default()).unwrap());
        drop(SqliteStore::open(&path, SqliteOptions::default()).unwrap());
    }
}
