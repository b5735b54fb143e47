//! The SQLite backend: one row per event in a WAL-mode database file.
//!
//! - Table `events (session, seq, at, kind, record)`, primary key `(session, seq)`,
//!   `WITHOUT ROWID`; `record` is the codec's checksummed record, checked on every read.
//! - Appends are written in `BEGIN IMMEDIATE` transactions that read each batch's session tail
//!   and insert the batch only if the tail is the expected one: the write lock makes the check
//!   and the insert one step, across threads and across processes sharing the file.
//! - Group commit: appends that arrive while a transaction commits wait and share the next one
//!   (and its sync), each still with its own check; a batch that conflicts is skipped and
//!   answered `Conflict`, the others land.
//! - Durability per append: `PRAGMA synchronous = FULL` for [`Durability::Synced`] (the WAL is
//!   synced at every commit: survives a loss of power), `NORMAL` for [`Durability::Buffered`]
//!   (the WAL is synced only at checkpoints: a commit survives a crash of the process, since it
//!   is in the OS's cache, but not a loss of power).
//! - Several processes may open one file: SQLite's locks order their writes; a writer waits for
//!   another's lock up to the busy timeout.
//! - A failed commit or an I/O error while writing poisons the store until it is opened again.

mod group;
mod schema;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, params};
use stepjournal_codec::{DecodeError, Limits, Record, Seq, SessionId, Stamped};

use crate::sql::{self, EncodedBatch, Place};
use crate::{AppendAck, AppendError, Durability, JournalStore, OpenError, StoreError};
use group::{Failure, Outcome, Queue, Request, Unknown};

pub use schema::SCHEMA_VERSION;

const BACKEND: &str = "sqlite";

/// How an SQLite store is opened.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a write waits for another connection's (or process's) write lock before failing.
    /// Default 5 s.
    pub busy_timeout: Duration,
    /// How many idle reader connections are kept for reuse. Default 4.
    pub readers: usize,
    /// Record and batch size bounds. Default [`Limits::default`].
    pub limits: Limits,
    /// Open an existing database for reading only (default `false`): no schema change, no write
    /// lock taken, so it can be inspected while another process writes it. Appends and deletes
    /// return [`StoreError::ReadOnly`].
    pub read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            limits: Limits::default(),
            read_only: false,
        }
    }
}

impl SqliteOptions {
    /// These options, reading only (see [`SqliteOptions::read_only`]).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}

/// A journal store in one SQLite database file. See the module documentation.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    location: String,
    options: SqliteOptions,
    writer: Mutex<Writer>,
    queue: Queue,
    readers: Mutex<Vec<Connection>>,
    poison: OnceLock<String>,
}

#[derive(Debug)]
struct Writer {
    conn: Connection,
    /// The `synchronous` setting last applied on the connection.
    synchronous: Option<Durability>,
}

/// What a write transaction's body decided.
enum Step<T> {
    Commit(T),
    Rollback(T),
}

/// Why a write transaction failed.
enum WriteFailure {
    /// Nothing was written.
    Failed(StoreError),
    /// A commit failed in a way that leaves its outcome to what is on disk.
    CommitUnknown(Unknown),
}

pub(crate) fn backend_error(context: impl Into<String>, e: rusqlite::Error) -> StoreError {
    StoreError::Backend { backend: BACKEND, context: context.into(), source: Box::new(e) }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a connection leaves at most an open transaction, which the next
    // write rolls back first.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, puts it in WAL mode and brings its
    /// schema up to date; or, with [`SqliteOptions::read_only`], opens an existing database
    /// and only checks its schema.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        let location = format!("sqlite:{}", path.display());
        let conn = schema::connect(&path, &location, options.busy_timeout, options.read_only)?;
        if options.read_only {
            schema::check(&conn, &location)?;
        } else {
            schema::prepare(&conn, &location)?;
        }
        Ok(SqliteStore {
            path,
            location,
            options,
            writer: Mutex::new(Writer { conn, synchronous: None }),
            queue: Queue::default(),
            readers: Mutex::new(Vec::new()),
            poison: OnceLock::new(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.options.read_only {
            return Err(StoreError::ReadOnly { location: self.location.clone() });
        }
        self.check_poison()
    }

    fn check_poison(&self) -> Result<(), StoreError> {
        match self.poison.get() {
            Some(first) => Err(StoreError::Poisoned { first_failure: first.clone() }),
            None => Ok(()),
        }
    }

    fn poison_with(&self, e: &StoreError) {
        let _ = self.poison.set(e.to_string());
    }

    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.check_poison()?;
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(c) => c,
            None => schema::connect(
                &self.path,
                &self.location,
                self.options.busy_timeout,
                self.options.read_only,
            )?,
        };
        let result = f(&conn);
        if result.is_ok() {
            let mut idle = lock(&self.readers);
            if idle.len() < self.options.readers {
                idle.push(conn);
            }
        }
        result
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction at `durability`'s `synchronous` setting.
    fn write<T>(
        &self,
        durability: Durability,
        what: &str,
        body: impl FnOnce(&Connection) -> rusqlite::Result<Step<T>>,
    ) -> Result<T, WriteFailure> {
        self.check_writable().map_err(WriteFailure::Failed)?;
        let mut writer = lock(&self.writer);
        let fail = |store: &Self, doing: &str, e: rusqlite::Error, poison: bool| {
            let err = backend_error(format!("{}: {what}: {doing}", store.location), e);
            if poison {
                store.poison_with(&err);
            }
            WriteFailure::Failed(err)
        };
        if !writer.conn.is_autocommit() {
            writer
                .conn
                .execute_batch("ROLLBACK")
                .map_err(|e| fail(self, "rolling back a transaction left open", e, true))?;
        }
        if writer.synchronous != Some(durability) {
            let pragma = match durability {
                Durability::Synced => "PRAGMA synchronous = FULL",
                _ => "PRAGMA synchronous = NORMAL",
            };
            writer.synchronous = None;
            writer.conn.execute_batch(pragma).map_err(|e| {
                let poison = !is_busy(&e);
                fail(self, "setting the synchronous level", e, poison)
            })?;
            writer.synchronous = Some(durability);
        }
        let conn = &writer.conn;
        if let Err(e) = conn.prepare_cached("BEGIN IMMEDIATE").and_then(|mut s| s.execute([])) {
            let doing = if is_busy(&e) {
                format!(
                    "another connection held the write lock for longer than the busy timeout ({:?})",
                    self.options.busy_timeout
                )
            } else {
                "beginning the transaction".to_owned()
            };
            return Err(fail(self, &doing, e, false));
        }
        let step = match body(conn) {
            Ok(step) => step,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(fail(self, "writing", e, true));
            }
        };
        match step {
            Step::Rollback(value) => match conn.execute_batch("ROLLBACK") {
                Ok(()) => Ok(value),
                Err(e) => Err(fail(self, "rolling back", e, true)),
            },
            Step::Commit(value) => {
                let Err(e) = conn.prepare_cached("COMMIT").and_then(|mut s| s.execute([])) else {
                    return Ok(value);
                };
                if !conn.is_autocommit() && conn.execute_batch("ROLLBACK").is_ok() {
                    // The transaction was still open and is now rolled back: nothing was written.
                    return Err(fail(self, "committing", e, true));
                }
                // SQLite ended the transaction itself after an I/O error: whether its WAL frames
                // count is decided by what the next open of the file finds.
                let reason = format!("{}: {what}: the commit failed: {e}", self.location);
                let _ = self.poison.set(reason.clone());
                Err(WriteFailure::CommitUnknown(Unknown { reason, source: Arc::new(e) }))
            }
        }
    }

    fn tail_on(&self, conn: &Connection, session: &SessionId) -> rusqlite::Result<i64> {
        let mut stmt = conn.prepare_cached("SELECT max(seq) FROM events WHERE session = ?1")?;
        let max: Option<i64> = stmt.query_row([session.as_str()], |r| r.get(0))?;
        Ok(max.map_or(0, |m| m.saturating_add(1)))
    }

    fn insert_batch(
        conn: &Connection,
        session: &SessionId,
        batch: &EncodedBatch,
    ) -> rusqlite::Result<()> {
        let mut stmt = conn.prepare_cached(
            "INSERT INTO events (session, seq, at, kind, record) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for row in &batch.rows {
            stmt.execute(params![session.as_str(), row.seq, row.at, row.kind, batch.record(row)])?;
        }
        Ok(())
    }

    /// Commits a group of appends in one transaction, synced if any of them asks for it.
    fn commit_group(&self, group: &[Request]) -> Vec<Outcome> {
        let durability = group.iter().map(|r| r.durability).max().unwrap_or(Durability::Synced);
        let what = match group {
            [one] => format!("appending to {} at {}", one.session, one.place.first),
            [first, ..] => format!(
                "appending {} batches in one transaction (the first to {} at {})",
                group.len(),
                first.session,
                first.place.first
            ),
            [] => return Vec::new(),
        };
        let outcome = self.write(durability, &what, |conn| {
            let mut outcomes = Vec::with_capacity(group.len());
            for r in group {
                let tail = self.tail_on(conn, &r.session)?;
                if tail == r.place.first {
                    Self::insert_batch(conn, &r.session, &r.batch)?;
                    outcomes.push(Outcome::Landed);
                } else {
                    outcomes.push(Outcome::Conflict(tail));
                }
            }
            Ok(if outcomes.contains(&Outcome::Landed) {
                Step::Commit(outcomes)
            } else {
                Step::Rollback(outcomes)
            })
        });
        match outcome {
            Ok(outcomes) => outcomes,
            Err(WriteFailure::Failed(e)) => {
                vec![Outcome::Failed(Failure::from_store(&e)); group.len()]
            }
            Err(WriteFailure::CommitUnknown(unknown)) => {
                vec![Outcome::Unknown(unknown); group.len()]
            }
        }
    }

    fn conflict_past_range(&self, session: &SessionId, expected: Seq) -> AppendError {
        match self.tail(session) {
            Ok(actual) => AppendError::Conflict { expected, actual },
            Err(e) => AppendError::Store(e),
        }
    }
}

impl JournalStore for SqliteStore {
    fn max_durability(&self) -> Durability {
        Durability::Synced
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        let (batch, place) = sql::encode_batch(session, expected, events, &self.options.limits)?;
        let Some(place @ Place { next, .. }) = place else {
            return Err(self.conflict_past_range(session, expected));
        };
        self.check_writable()?;
        let durability = durability.min(Durability::Synced);
        let request = Request { session: session.clone(), place, batch, durability };
        match self.queue.submit(request, |group| self.commit_group(group)) {
            Outcome::Landed => {
                Ok(AppendAck { first: expected, next: Seq(next as u64), durability })
            }
            Outcome::Conflict(tail) => Err(AppendError::Conflict {
                expected,
                actual: sql::seq_from_column(&self.location, "the session's tail", tail)?,
            }),
            Outcome::Failed(failure) => Err(AppendError::Store(failure.into_store(BACKEND))),
            Outcome::Unknown(Unknown { reason, source }) => Err(AppendError::OutcomeUnknown {
                session: session.clone(),
                expected,
                reason,
                source: Some(std::io::Error::other(source)),
            }),
        }
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let (start, end) = sql::range_bounds(&range);
        let limits = self.options.limits;
        let records = self.with_reader(|conn| {
            let failed = |e| backend_error(format!("{}: reading {session}", self.location), e);
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, record FROM events
                     WHERE session = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
                )
                .map_err(failed)?;
            let mut rows = stmt.query(params![session.as_str(), start, end]).map_err(failed)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(failed)? {
                let seq: i64 = row.get(0).map_err(failed)?;
                let bytes = match row.get_ref(1).map_err(failed)? {
                    ValueRef::Blob(b) => b,
                    other => {
                        return Err(StoreError::Corrupt {
                            context: format!("{}, session {session}, seq {seq}", self.location),
                            source: DecodeError::Malformed {
                                reason: format!(
                                    "the record column holds {:?}, not a blob",
                                    other.data_type()
                                ),
                            },
                        });
                    }
                };
                out.push(sql::decode_row(&self.location, session, seq, bytes, &limits)?);
            }
            Ok(out)
        })?;
        sql::check_dense(&self.location, session, range.start.get(), &records)?;
        Ok(records)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let tail = self.with_reader(|conn| {
            self.tail_on(conn, session).map_err(|e| {
                backend_error(format!("{}: reading the tail of {session}", self.location), e)
            })
        })?;
        sql::seq_from_column(&self.location, "the session's tail", tail)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.with_reader(|conn| {
            let failed = |e| backend_error(format!("{}: listing sessions", self.location), e);
            // One index probe per session rather than a scan of every event.
            let mut stmt = conn
                .prepare_cached(
                    "WITH RECURSIVE s(id) AS (
                         SELECT min(session) FROM events
                         UNION ALL
                         SELECT (SELECT min(session) FROM events WHERE session > s.id)
                         FROM s WHERE s.id IS NOT NULL
                     )
                     SELECT id FROM s WHERE id IS NOT NULL",
                )
                .map_err(failed)?;
            let ids = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(failed)?;
            ids.map(|r| r.map(SessionId::from_stored).map_err(failed)).collect()
        })
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        let what = format!("deleting {session}");
        let outcome = self.write(Durability::Synced, &what, |conn| {
            let mut stmt = conn.prepare_cached("DELETE FROM events WHERE session = ?1")?;
            Ok(Step::Commit(stmt.execute([session.as_str()])? > 0))
        });
        match outcome {
            Ok(existed) => Ok(existed),
            Err(WriteFailure::Failed(e)) => Err(e),
            Err(WriteFailure::CommitUnknown(Unknown { reason, .. })) => {
                Err(StoreError::Poisoned { first_failure: reason })
            }
        }
    }
}

#[cfg(test)]
mod tests;
