//! The SQLite backend: one row per event in a WAL-mode database file.
//!
//! - Table `events (session, seq, at, kind, record)`, primary key `(session, seq)`,
//!   `WITHOUT ROWID`; `record` is the codec's checksummed record, checked on every read.
//! - Appends are written in `BEGIN IMMEDIATE` transactions that read each batch's session tail
//!   and insert the batch only if the tail is the expected one: the write lock makes the check
//!   and the insert one step, across threads and across processes sharing the file.
//! - Index `events_snapshots`: the `snapshot` rows by `(session, seq)` (a partial index), so that
//!   a read from a session's newest snapshot is one statement that finds it in the index and
//!   reads the rows from it on by the primary key, never a scan of the session's history.
//! - Table `sessions`: a head row per session, holding its tail (which the append's
//!   compare-and-set reads), its last append time, the state of its last run (moved by each
//!   append from what its batch does, by [`RunHead::advance`](crate::RunHead::advance)) and the
//!   lease of the process running it, taken, renewed and judged by this machine's clock as the
//!   kernel keeps it (`clock`), never by a caller's.
//! - Group commit: appends that arrive while a transaction commits queue and share the next one
//!   (and its sync), each still with its own check; a batch that conflicts is skipped and
//!   answered `Conflict`, the others land. Each append's future is completed when its group
//!   committed: no thread waits per queued append. A sync caller that finds no group
//!   committing commits its own at once; other groups are committed by the store's committer
//!   thread, so an async caller never runs a transaction on its own task.
//! - Durability per append: `PRAGMA synchronous = FULL` for [`Durability::Synced`] (the WAL is
//!   synced at every commit: survives a loss of power), `NORMAL` for [`Durability::Buffered`]
//!   (the WAL is synced only at checkpoints: a commit survives a crash of the process, since it
//!   is in the OS's cache, but not a loss of power).
//! - Several processes may open one file: SQLite's locks order their writes; a writer waits for
//!   another's lock up to the busy timeout.
//! - A failed commit or an I/O error while writing poisons the store until it is opened again.

mod clock;
mod cohort;
mod committer;
mod conn;
mod group;
mod heads;
mod holder;
mod read;
mod schema;
mod shared;

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use stepjournal_codec::{Limits, Record, RunId, Seq, SessionId, Stamped};

use crate::head::{LeaseTaken, OwnerId, SessionHead, StoreMetrics};
use crate::readers::Readers;
use crate::sql;
use crate::{
    AppendAck, AppendError, AppendFuture, Durability, JournalStore, OpenError, StoreError,
    StoreFuture,
};
use committer::Committer;
use conn::backend_error;
use group::{Request, Unknown};
use shared::{Shared, Step, WriteFailure, Writer};

pub use holder::{WriteLock, write_lock_holder};
pub use schema::SCHEMA_VERSION;

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
    shared: Arc<Shared>,
    /// Commits the groups no sync caller leads; `None` for a read-only store. Dropped (stopped
    /// and joined) with the store, after committing what is queued.
    committer: Mutex<Option<Committer>>,
    /// The threads an async caller's reads run on.
    readers: Readers,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, puts it in WAL mode and brings its
    /// schema up to date; or, with [`SqliteOptions::read_only`], opens an existing database
    /// and only checks its schema.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        let location = format!("sqlite:{}", path.display());
        let conn = conn::connect(&path, &location, options.busy_timeout, options.read_only)?;
        if options.read_only {
            schema::check(&conn, &location)?;
        } else {
            schema::prepare(&conn, &location, &path, options.busy_timeout)?;
        }
        let read_only = options.read_only;
        let shared = Arc::new(Shared {
            path,
            location,
            options,
            writer: Mutex::new(Writer { conn, synchronous: None }),
            queue: group::Queue::default(),
            readers: Mutex::new(Vec::new()),
            poison: OnceLock::new(),
            closed: OnceLock::new(),
            metrics: Default::default(),
        });
        let committer = if read_only {
            None
        } else {
            let started = Committer::start(Arc::clone(&shared)).map_err(|e| {
                OpenError::Store(StoreError::Io {
                    context: format!("{}: starting the committer thread", shared.location),
                    source: e,
                })
            })?;
            Some(started)
        };
        let committer = Mutex::new(committer);
        Ok(SqliteStore { shared, committer, readers: Readers::new("stepjournal-sqlite-read") })
    }

    /// `work` on one of the store's reading threads, refused at once by a closed or poisoned
    /// store; `what` names it should its thread be lost.
    fn on_reader<T: Send + 'static>(
        &self,
        what: &str,
        work: impl FnOnce(&Shared) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<Result<T, StoreError>> {
        let context = format!("{}: {what}", self.shared.location);
        self.readers.read_with(&self.shared, self.shared.check_poison(), context, work)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    fn conflict_past_range(&self, session: &SessionId, expected: Seq) -> AppendError {
        match self.tail(session) {
            Ok(actual) => AppendError::Conflict { expected, actual },
            Err(e) => AppendError::Store(e),
        }
    }

    /// Checks and encodes the batch, and queues it; `lead` lets the caller commit the group
    /// itself when none is committing (the sync path, whose thread waits anyway).
    fn submit(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
        lead: bool,
    ) -> AppendFuture {
        let (batch, place) =
            match sql::encode_batch(session, expected, events, &self.shared.options.limits) {
                Ok(encoded) => encoded,
                Err(e) => return StoreFuture::ready(Err(e)),
            };
        let Some(place) = place else {
            return StoreFuture::ready(Err(self.conflict_past_range(session, expected)));
        };
        if let Err(e) = self.shared.check_writable() {
            return StoreFuture::ready(Err(e.into()));
        }
        let durability = durability.min(Durability::Synced);
        let unanswered = group::unanswered(&self.shared.location, session, expected);
        let (future, done) = StoreFuture::pending_or(unanswered);
        let request = Request { session: session.clone(), place, batch, durability, done };
        if let Some(group) = self.shared.queue.submit(request, lead) {
            self.shared.commit(group);
        }
        future
    }
}

impl JournalStore for SqliteStore {
    /// The database file, resolved (`sqlite:` and its canonical path).
    fn identity(&self) -> crate::StoreIdentity {
        let path = &self.shared.path;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        crate::StoreIdentity::Location(format!("sqlite:{}", path.display()))
    }
    fn max_durability(&self) -> Durability {
        Durability::Synced
    }

    /// Refuses every call from now on (an append racing the close is written or refused,
    /// never left unanswered), stops the committer and reading threads and closes the reading
    /// connections; the write connection closes with the last handle.
    fn close(&self) -> Result<(), StoreError> {
        if self.shared.closed.set(()).is_err() {
            return Ok(());
        }
        drop(conn::lock(&self.committer).take());
        self.readers.close();
        conn::lock(&self.shared.readers).clear();
        Ok(())
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.submit(session, expected, events, durability, true).wait()
    }

    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        self.submit(session, expected, events, durability, false)
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        read_range(&self.shared, session, &range)
    }

    /// Read on one of the store's reading threads: the caller's executor thread never waits on
    /// the database file. **Dropped before it finished**: the read finishes unread.
    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let session = session.clone();
        self.on_reader("reading", move |shared| read_range(shared, &session, &range))
    }

    /// One statement: the newest snapshot's place from the partial index `events_snapshots`,
    /// and the rows from it on by the primary key; never a scan of the session's history.
    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        read_snapshot_on(&self.shared, session)
    }

    /// As [`read_async`](JournalStore::read_async), from the newest snapshot.
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let session = session.clone();
        self.on_reader("reading from the newest snapshot", move |shared| {
            read_snapshot_on(shared, &session)
        })
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let shared = &self.shared;
        let tail = shared.with_reader(|conn| {
            Shared::tail_on(conn, session).map_err(|e| {
                backend_error(format!("{}: reading the tail of {session}", shared.location), e)
            })
        })?;
        sql::seq_from_column(&shared.location, "the session's tail", tail)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let shared = &self.shared;
        shared.with_reader(|conn| {
            let failed = |e| backend_error(format!("{}: listing sessions", shared.location), e);
            let mut stmt = conn
                .prepare_cached("SELECT session FROM sessions WHERE next_seq > 0 ORDER BY session")
                .map_err(failed)?;
            let ids = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(failed)?;
            ids.map(|r| r.map(SessionId::from_stored).map_err(failed)).collect()
        })
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        // With no tail to match, nothing is refused.
        Ok(delete_if(&self.shared, session, None)?.unwrap_or(false))
    }

    /// The tail checked and the rows deleted in one write transaction.
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<crate::DeleteAt, StoreError> {
        Ok(match delete_if(&self.shared, session, Some(tail))? {
            Ok(_) => crate::DeleteAt::Deleted,
            Err(tail) => crate::DeleteAt::Changed { tail },
        })
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        heads::heads(&self.shared)
    }

    /// [`heads`](JournalStore::heads) on one of the store's reading threads.
    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        self.on_reader("reading the session heads", heads::heads)
    }

    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        heads::head(&self.shared, session)
    }

    /// [`head`](JournalStore::head) on one of the store's reading threads.
    fn head_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Option<SessionHead>, StoreError>> {
        let session = session.clone();
        self.on_reader("reading a session head", move |shared| heads::head(shared, &session))
    }

    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        heads::take_lease(&self.shared, session, owner, run, ttl, force)
    }

    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        heads::renew_leases(&self.shared, owner, runs, ttl)
    }

    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        heads::release_lease(&self.shared, session, owner, run)
    }

    fn metrics(&self) -> StoreMetrics {
        self.shared.metrics.snapshot(self.shared.poison.get().is_some())
    }
}

#[cfg(test)]
mod tests;

/// `range` of the session's records, checked dense.
fn read_range(
    shared: &Shared,
    session: &SessionId,
    range: &Range<Seq>,
) -> Result<Vec<Record>, StoreError> {
    let (start, end) = sql::range_bounds(range);
    let records = read::range(shared, session, start, end)?;
    sql::check_dense(&shared.location, session, range.start.get(), &records)?;
    Ok(records)
}

/// The session's records from its newest snapshot on, checked.
fn read_snapshot_on(shared: &Shared, session: &SessionId) -> Result<Vec<Record>, StoreError> {
    let records = read::from_snapshot(shared, session)?;
    sql::check_from_snapshot(&shared.location, session, &records)?;
    Ok(records)
}

/// Deletes the session, if its tail is `tail` when one is given: whether it had events, or its
/// tail when that is not `tail`.
fn delete_if(
    shared: &Shared,
    session: &SessionId,
    tail: Option<Seq>,
) -> Result<Result<bool, Seq>, StoreError> {
    let what = format!("deleting {session}");
    let outcome = shared.write(Durability::Synced, &what, |conn| {
        let actual = Shared::tail_on(conn, session)?;
        if let Some(expected) = tail
            && i64::try_from(expected.get()).ok() != Some(actual)
        {
            return Ok(Step::Rollback(Err(Seq(u64::try_from(actual).unwrap_or(0)))));
        }
        let mut stmt = conn.prepare_cached("DELETE FROM events WHERE session = ?1")?;
        let existed = stmt.execute([session.as_str()])? > 0;
        let mut stmt = conn.prepare_cached("DELETE FROM sessions WHERE session = ?1")?;
        stmt.execute([session.as_str()])?;
        Ok(Step::Commit(Ok(existed)))
    });
    match outcome {
        Ok(done) => Ok(done),
        Err(WriteFailure::Failed(e)) => Err(e),
        Err(WriteFailure::CommitUnknown(Unknown { reason, .. })) => {
            Err(StoreError::Poisoned { first_failure: reason })
        }
    }
}
