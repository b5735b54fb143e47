//! The PostgreSQL backend: one row per event, for several runtime processes on several hosts
//! sharing one journal.
//!
//! - Tables `sessions (session, next_seq, token)` and `events (session, seq, at, kind, record)`
//!   in one schema (default `stepjournal`), with `schema_version` and `schema_lock` tables and
//!   migrations guarded by a row lock (no advisory lock: see `migrate`).
//! - An append is one statement (one round trip, its own transaction): it moves the session's
//!   head row from the expected tail to the new one (an `UPDATE`, or an `INSERT ... ON
//!   CONFLICT` for a batch at 0: each table is modified once per statement, as CockroachDB
//!   requires) and inserts the events only if that moved a row. The row lock orders racing
//!   writers; the loser finds the head moved and gets
//!   [`AppendError::Conflict`](crate::AppendError::Conflict). No batch can land past the tail.
//! - Durability per append: `synchronous_commit = on` for [`Durability::Synced`], `off` for
//!   [`Durability::Buffered`] (the commit returns before the WAL is flushed: it survives a crash
//!   of the application, but a crash of the database server or its machine may lose the last
//!   few hundred milliseconds of such appends, whole batches from the tail, never a part of one).
//! - Serialization failures (SQLSTATE 40001) and deadlocks (40P01) are retried, a bounded number
//!   of times, so the store runs unchanged on Postgres-wire distributed SQL.
//! - A connection lost while an append was in flight is resolved through the batch's token,
//!   written on the session's head row by the statement that moves it (so the row holds the
//!   last batch's token, and no other is kept): the store reconnects, waits for the old
//!   transaction to end (by taking the head row's lock), and reads the row. Its token: `Ok`.
//!   Its tail short of the batch's end, or at it with another token: not landed, and the append
//!   is retried (the compare-and-set makes a retry safe). Past the batch's end with another
//!   token (another writer appended since), or the database not reachable within the resolve
//!   timeout: [`AppendError::OutcomeUnknown`](crate::AppendError::OutcomeUnknown).
//! - The database is the only state, so a failure does not poison the store: each call reports
//!   its own error, and the next call tries again.
//! - TLS is not supported yet (`sslmode=require` is refused at open); the default `prefer`
//!   connects without it.

mod append;
mod cause;
mod config;
mod migrate;
mod pool;
mod schema;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use postgres::error::{Severity, SqlState};
use stepjournal_codec::{Record, Seq, SessionId, Stamped};

use crate::{AppendAck, AppendError, Durability, JournalStore, OpenError, StoreError, sql};
pub use cause::PgFailure;
pub use config::PostgresOptions;
pub use migrate::SCHEMA_VERSION;
use pool::{Conn, Connector, Pool};

const BACKEND: &str = "postgres";

/// A driver error and what was being done.
#[derive(Debug)]
pub(crate) struct PgError {
    doing: &'static str,
    source: postgres::Error,
}

impl PgError {
    pub(crate) fn new(doing: &'static str, source: postgres::Error) -> Self {
        PgError { doing, source }
    }

    fn class(&self) -> Class {
        classify(&self.source)
    }
}

/// Why a call could not run a statement.
#[derive(Debug)]
pub(crate) enum Failure {
    Driver(PgError),
    PoolExhausted(Duration),
}

/// What a driver error says about the statement it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The server refused it with an ERROR: its transaction was rolled back.
    Refused,
    /// A serialization failure or a deadlock: rolled back, and worth running again.
    Retry,
    /// The connection failed (or the server ended the session): the statement may or may not
    /// have committed.
    Lost,
}

fn classify(e: &postgres::Error) -> Class {
    match e.as_db_error() {
        Some(db) if matches!(db.parsed_severity(), Some(Severity::Fatal | Severity::Panic)) => {
            Class::Lost
        }
        Some(db)
            if *db.code() == SqlState::T_R_SERIALIZATION_FAILURE
                || *db.code() == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            Class::Retry
        }
        Some(_) => Class::Refused,
        None => Class::Lost,
    }
}

/// Counts of what the store had to recover from, for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresStats {
    /// Statements run again after a serialization failure or a deadlock.
    pub retried: u64,
    /// Appends whose connection was lost and whose batch was then found to have landed.
    pub lost_landed: u64,
    /// Appends whose connection was lost and whose batch was found not to have landed.
    pub lost_not_landed: u64,
    /// Appends answered `OutcomeUnknown`.
    pub outcome_unknown: u64,
}

#[derive(Debug, Default)]
struct Counters {
    retried: AtomicU64,
    lost_landed: AtomicU64,
    lost_not_landed: AtomicU64,
    outcome_unknown: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A journal store in a PostgreSQL schema. See the module documentation.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    options: PostgresOptions,
    location: String,
    counters: Counters,
}

impl PostgresStore {
    /// Connects to the database at `url` and brings the store's schema up to date.
    ///
    /// `url` is a libpq connection URL (`postgres://user:password@host:port/dbname?...`, or a
    /// `key=value` connection string). Besides libpq's parameters (`connect_timeout`,
    /// `application_name`, `options`, `keepalives*`, `sslmode`, ...), a URL may carry the
    /// store's own, overriding `options`: `schema`, `pool_size`, `statement_timeout` (ms, 0 for
    /// none), `resolve_timeout` (ms) and `max_retries`.
    pub fn connect(url: &str, options: PostgresOptions) -> Result<Self, OpenError> {
        let resolved = config::resolve(url, options)?;
        let quoted = config::quote_ident(&resolved.options.schema);
        let connector = Connector {
            config: resolved.config,
            quoted_schema: quoted.clone(),
            statement_timeout: resolved.options.statement_timeout,
        };
        let location = resolved.location;
        let open_err = |e: PgError| OpenError::Store(store_error(&location, "opening", e));
        let mut client = connector
            .config
            .connect(postgres::NoTls)
            .map_err(|e| open_err(PgError::new("connecting", e)))?;
        let migrate_err = |e| match e {
            migrate::MigrateError::Driver(doing, e) => open_err(PgError::new(doing, e)),
            migrate::MigrateError::Foreign(found) => {
                OpenError::NotAJournal { location: location.clone(), found }
            }
            migrate::MigrateError::Newer(v) => OpenError::Options {
                reason: format!(
                    "{location}: the schema is at version {v}, written by a newer stepjournal; \
                     this build knows versions up to {SCHEMA_VERSION}"
                ),
            },
        };
        if resolved.options.read_only {
            let schema = &resolved.options.schema;
            match migrate::check(&mut client, schema, &quoted).map_err(migrate_err)? {
                Some(SCHEMA_VERSION) => {}
                Some(v) if v > SCHEMA_VERSION => {
                    return Err(migrate_err(migrate::MigrateError::Newer(v)));
                }
                found => {
                    let what = match found {
                        None => "holds no stepjournal store".to_owned(),
                        Some(v) => format!(
                            "is at version {v}, older than this build's {SCHEMA_VERSION}; open \
                             it once for writing to migrate it"
                        ),
                    };
                    return Err(OpenError::Options {
                        reason: format!("{location}: schema `{schema}` {what}"),
                    });
                }
            }
        } else {
            migrate::migrate(&mut client, &resolved.options.schema, &quoted)
                .map_err(migrate_err)?;
        }
        // The migration's connection has no prepared statements yet: let the pool open its own.
        drop(client);
        let pool = Pool::new(connector, resolved.options.pool_size, resolved.options.pool_timeout);
        Ok(PostgresStore {
            pool,
            options: resolved.options,
            location,
            counters: Counters::default(),
        })
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.options.read_only {
            return Err(StoreError::ReadOnly { location: self.location.clone() });
        }
        Ok(())
    }

    /// The schema holding the store's tables.
    pub fn schema(&self) -> &str {
        &self.options.schema
    }

    /// What the store has recovered from so far.
    pub fn stats(&self) -> PostgresStats {
        let c = &self.counters;
        PostgresStats {
            retried: c.retried.load(Ordering::Relaxed),
            lost_landed: c.lost_landed.load(Ordering::Relaxed),
            lost_not_landed: c.lost_not_landed.load(Ordering::Relaxed),
            outcome_unknown: c.outcome_unknown.load(Ordering::Relaxed),
        }
    }

    /// Drops the store's schema with every table and event in it. For tests and for
    /// decommissioning a journal; there is no undo.
    pub fn drop_schema(self) -> Result<(), StoreError> {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.pool.connector.quoted_schema);
        self.run("dropping the schema", |c| {
            c.client.batch_execute(&sql).map_err(|e| PgError::new("dropping the schema", e))
        })
    }

    fn failure(&self, what: &str, f: Failure) -> StoreError {
        match f {
            Failure::Driver(e) => store_error(&self.location, what, e),
            Failure::PoolExhausted(wait) => StoreError::Backend {
                backend: BACKEND,
                context: format!("{}: {what}", self.location),
                source: format!(
                    "no connection came free within {wait:?} ({} in use)",
                    self.options.pool_size
                )
                .into(),
            },
        }
    }

    /// Runs an operation that is safe to repeat, retrying after a serialization failure, a
    /// deadlock or a lost connection, up to `max_retries` times.
    fn run<T>(
        &self,
        what: &str,
        mut op: impl FnMut(&mut Conn) -> Result<T, PgError>,
    ) -> Result<T, StoreError> {
        let mut attempt = 0;
        loop {
            let mut lease = self.pool.get().map_err(|f| self.failure(what, f))?;
            let Some(conn) = lease.conn() else {
                return Err(self.failure(what, Failure::PoolExhausted(Duration::ZERO)));
            };
            let err = match op(conn) {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let class = err.class();
            if class == Class::Lost {
                lease.discard();
            }
            drop(lease);
            if class == Class::Refused || attempt >= self.options.max_retries {
                return Err(store_error(&self.location, what, err));
            }
            if class == Class::Retry {
                bump(&self.counters.retried);
            }
            attempt += 1;
            std::thread::sleep(backoff(attempt));
        }
    }
}

pub(crate) fn store_error(location: &str, what: &str, e: PgError) -> StoreError {
    StoreError::Backend {
        backend: BACKEND,
        context: format!("{location}: {what}: {}", e.doing),
        source: Box::new(PgFailure::new(e.source)),
    }
}

/// `after` from now, or a year from now for a timeout too large to add.
pub(crate) fn deadline(after: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(after)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(now)
}

/// The pause before retry `attempt` (from 1): doubling from 2 ms up to 200 ms, with jitter so
/// that writers that failed together do not retry together.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = 2u64.saturating_mul(1 << attempt.min(7)).min(200);
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()) % (base * 1000));
    Duration::from_micros(base * 500 + jitter / 2)
}

impl JournalStore for PostgresStore {
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
        self.check_writable()?;
        append::append(self, session, expected, events, durability)
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let (start, end) = sql::range_bounds(&range);
        let rows = self.run(&format!("reading {session}"), |c| {
            let rows = c.client.query(&c.stmts.read, &[&session.as_str(), &start, &end]);
            rows.map_err(|e| PgError::new("selecting events", e))
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let (seq, bytes): (i64, &[u8]) =
                row.try_get(0).and_then(|seq| Ok((seq, row.try_get(1)?))).map_err(|e| {
                    store_error(&self.location, "reading a row", PgError::new("decoding", e))
                })?;
            out.push(sql::decode_row(&self.location, session, seq, bytes, &self.options.limits)?);
        }
        sql::check_dense(&self.location, session, range.start.get(), &out)?;
        Ok(out)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let tail = self.run(&format!("reading the tail of {session}"), |c| {
            let row = c.client.query_opt(&c.stmts.tail, &[&session.as_str()]);
            let row = row.map_err(|e| PgError::new("selecting the head row", e))?;
            row.map_or(Ok(0), |r| r.try_get::<_, i64>(0))
                .map_err(|e| PgError::new("decoding the head row", e))
        })?;
        sql::seq_from_column(&self.location, "the session's head row", tail)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let rows = self.run("listing sessions", |c| {
            c.client.query(&c.stmts.sessions, &[]).map_err(|e| PgError::new("selecting", e))
        })?;
        rows.iter()
            .map(|r| {
                r.try_get::<_, &str>(0).map(SessionId::from_stored).map_err(|e| {
                    store_error(&self.location, "listing sessions", PgError::new("decoding", e))
                })
            })
            .collect()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.check_writable()?;
        // Repeating a delete is harmless; a session seen by any attempt existed.
        let mut existed = false;
        self.run(&format!("deleting {session}"), |c| {
            let mut tx = c.client.transaction().map_err(|e| PgError::new("beginning", e))?;
            let s = session.as_str();
            // Lock the head first: a concurrent append finishes before the events are deleted,
            // and the delete below (a new snapshot) sees what it wrote.
            let head = tx
                .query_opt(&c.stmts.lock_head, &[&s])
                .map_err(|e| PgError::new("locking the head row", e))?;
            let events = tx
                .execute(&c.stmts.delete_events, &[&s])
                .map_err(|e| PgError::new("deleting events", e))?;
            tx.execute(&c.stmts.delete_head, &[&s])
                .map_err(|e| PgError::new("deleting the head row", e))?;
            let had = head.and_then(|r| r.try_get::<_, i64>(0).ok()).is_some_and(|n| n > 0);
            // Counted before the commit: if it is lost and landed, the retry finds nothing.
            existed |= had || events > 0;
            tx.commit().map_err(|e| PgError::new("committing", e))
        })?;
        Ok(existed)
    }
}
