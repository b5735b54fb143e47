//! What the store's handle and its committer thread share: the connections, the queue, the
//! poison, the figures; write transactions and the group commit.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, params};
use stepjournal_codec::SessionId;

use super::conn::{self, BACKEND, backend_error, is_busy, lock};
use super::group::{Failure, Group, Outcome, Queue, Unknown};
use crate::head::RunHead;
use crate::sql::head::HeadColumns;
use crate::sql::metrics::Metrics;
use crate::sql::{EncodedBatch, Place};
use crate::{Durability, StoreError};

use super::SqliteOptions;

/// The store's state.
#[derive(Debug)]
pub(super) struct Shared {
    pub path: PathBuf,
    pub location: String,
    pub options: SqliteOptions,
    pub writer: Mutex<Writer>,
    pub queue: Queue,
    pub readers: Mutex<Vec<Connection>>,
    pub poison: OnceLock<String>,
    /// Set once the store is closed: every call is refused.
    pub closed: OnceLock<()>,
    pub metrics: Metrics,
}

/// The write connection.
#[derive(Debug)]
pub(super) struct Writer {
    pub conn: Connection,
    /// The `synchronous` setting last applied on the connection.
    pub synchronous: Option<Durability>,
}

/// What a write transaction's body decided.
pub(super) enum Step<T> {
    Commit(T),
    Rollback(T),
}

/// Why a write transaction failed.
pub(super) enum WriteFailure {
    /// Nothing was written.
    Failed(StoreError),
    /// A commit failed in a way that leaves its outcome to what is on disk.
    CommitUnknown(Unknown),
}

/// A session's head row as an append reads it: its tail and run head.
struct HeadRow {
    next: i64,
    run: RunHead,
}

impl Shared {
    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        if self.options.read_only {
            return Err(StoreError::ReadOnly { location: self.location.clone() });
        }
        self.check_poison()
    }

    pub(super) fn check_poison(&self) -> Result<(), StoreError> {
        if self.closed.get().is_some() {
            return Err(StoreError::Closed { location: self.location.clone() });
        }
        match self.poison.get() {
            Some(first) => Err(StoreError::Poisoned { first_failure: first.clone() }),
            None => Ok(()),
        }
    }

    fn poison_with(&self, e: &StoreError) {
        let _ = self.poison.set(e.to_string());
    }

    pub(super) fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.check_poison()?;
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(c) => c,
            None => conn::connect(
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
    pub(super) fn write<T>(
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
                conn::locked(&self.path, self.options.busy_timeout)
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
                Err(WriteFailure::CommitUnknown(Unknown { reason, source: Some(Arc::new(e)) }))
            }
        }
    }

    /// The session's tail, from its head row (0 for a session with none).
    pub(super) fn tail_on(conn: &Connection, session: &SessionId) -> rusqlite::Result<i64> {
        let mut stmt = conn.prepare_cached("SELECT next_seq FROM sessions WHERE session = ?1")?;
        Ok(stmt.query_row([session.as_str()], |r| r.get(0)).optional()?.unwrap_or(0))
    }

    fn head_on(conn: &Connection, session: &SessionId) -> rusqlite::Result<HeadRow> {
        let mut stmt = conn.prepare_cached(
            "SELECT next_seq, run_state, run_id, outcome, answered FROM sessions WHERE session = ?1",
        )?;
        let row = stmt
            .query_row([session.as_str()], |r| {
                let columns = HeadColumns {
                    state: r.get(1)?,
                    run: r.get(2)?,
                    outcome: r.get(3)?,
                    answered: r.get(4)?,
                };
                Ok(HeadRow { next: r.get(0)?, run: columns.head() })
            })
            .optional()?;
        Ok(row.unwrap_or(HeadRow { next: 0, run: RunHead::default() }))
    }

    fn insert_batch(
        conn: &Connection,
        session: &SessionId,
        place: Place,
        batch: &EncodedBatch,
        head: &RunHead,
    ) -> rusqlite::Result<()> {
        let mut stmt = conn.prepare_cached(
            "INSERT INTO events (session, seq, at, kind, record) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for row in &batch.rows {
            stmt.execute(params![session.as_str(), row.seq, row.at, row.kind, batch.record(row)])?;
        }
        if batch.trim > 0 {
            conn.prepare_cached("DELETE FROM events WHERE session = ?1 AND seq < ?2")?
                .execute(params![session.as_str(), batch.trim])?;
        }
        let columns = HeadColumns::of(head);
        let mut stmt = conn.prepare_cached(
            "INSERT INTO sessions (session, next_seq, last_at, run_state, run_id, outcome, answered)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (session) DO UPDATE SET
                 next_seq = excluded.next_seq, last_at = excluded.last_at,
                 run_state = excluded.run_state, run_id = excluded.run_id,
                 outcome = excluded.outcome, answered = excluded.answered",
        )?;
        stmt.execute(params![
            session.as_str(),
            place.next,
            batch.last_at(),
            columns.state,
            columns.run,
            columns.outcome,
            columns.answered,
        ])?;
        Ok(())
    }

    /// Commits a group of appends in one transaction, synced if any of them asks for it, and
    /// completes each append's future.
    pub(super) fn commit(&self, mut group: Group<'_>) {
        let started = Instant::now();
        let outcomes = self.commit_requests(&group);
        group.committed(started.elapsed());
        for (request, outcome) in group.requests.drain(..).zip(outcomes) {
            request.answer(outcome, &self.location, BACKEND);
        }
    }

    fn commit_requests(&self, group: &Group<'_>) -> Vec<Outcome> {
        let requests = &group.requests;
        let durability = requests.iter().map(|r| r.durability).max().unwrap_or(Durability::Synced);
        let what = match requests.as_slice() {
            [one] => format!("appending to {} at {}", one.session, one.place.first),
            [first, ..] => format!(
                "appending {} batches in one transaction (the first to {} at {})",
                requests.len(),
                first.session,
                first.place.first
            ),
            [] => return Vec::new(),
        };
        let started = Instant::now();
        let mut bytes = 0;
        let outcome = self.write(durability, &what, |conn| {
            let mut outcomes = Vec::with_capacity(requests.len());
            for r in requests {
                let HeadRow { next, mut run } = Self::head_on(conn, &r.session)?;
                if next == r.place.first {
                    run = r.batch.head.apply(run);
                    Self::insert_batch(conn, &r.session, r.place, &r.batch, &run)?;
                    bytes += r.batch.bytes();
                    outcomes.push(Outcome::Landed);
                } else {
                    outcomes.push(Outcome::Conflict(next));
                }
            }
            Ok(if outcomes.contains(&Outcome::Landed) {
                Step::Commit(outcomes)
            } else {
                Step::Rollback(outcomes)
            })
        });
        match outcome {
            Ok(outcomes) => {
                let landed = outcomes.iter().filter(|o| **o == Outcome::Landed).count();
                let synced = landed > 0 && durability == Durability::Synced;
                self.metrics.group(requests.len(), landed, bytes, synced, started.elapsed());
                outcomes
            }
            Err(WriteFailure::Failed(e)) => {
                vec![Outcome::Failed(Failure::from_store(&e)); requests.len()]
            }
            Err(WriteFailure::CommitUnknown(unknown)) => {
                vec![Outcome::Unknown(unknown); requests.len()]
            }
        }
    }
}
