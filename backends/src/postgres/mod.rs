//! The PostgreSQL backend: one row per event, for several runtime processes on several hosts
//! sharing one journal.
//!
//! - Tables `sessions` (a head row per session: `next_seq`, the last batch's `token`, and the
//!   session's head and lease, see below) and `events (session, seq, at, kind, record)` in one
//!   schema (default `stepjournal`), with `schema_version` and `schema_lock` tables and
//!   migrations guarded by a row lock (no advisory lock: see `migrate`).
//! - The driver is tokio-postgres, on a current-thread tokio runtime the store owns (one
//!   thread, `stepjournal-postgres`, driving every connection). Every operation runs there and
//!   completes a [`StoreFuture`]: an async caller awaits it from any executor without its task
//!   blocking on the network, and the sync API waits on the same future.
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
//! - A partial index of the `snapshot` rows, `events_snapshots (session, seq) WHERE kind = 17`
//!   (schema version 4), lets a read from a session's newest snapshot be one statement that
//!   finds it in the index and reads the rows from it on by the primary key.
//! - The head row also holds the session's head (the state of its last run, moved by each
//!   append from what its batch does, computed in Rust with
//!   [`RunHead::advance`](crate::RunHead::advance); rows written before schema version 3 read
//!   as [`RunState::Unknown`](crate::RunState::Unknown)) and the lease of the process running
//!   it, whose expiry the server's clock decides (`now()`).
//! - The database is the only state, so a failure does not poison the store: each call reports
//!   its own error, and the next call tries again.
//! - TLS is not supported yet (`sslmode=require` is refused at open); the default `prefer`
//!   connects without it.

mod append;
mod cause;
mod config;
mod driver;
mod failure;
mod leases;
mod migrate;
mod ops;
mod pool;
mod schema;
mod shared;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use stepjournal_codec::{Record, RunId, Seq, SessionId, Stamped};

use crate::head::{LeaseTaken, OwnerId, SessionHead, StoreMetrics};
use crate::{
    AppendAck, AppendError, AppendFuture, Durability, JournalStore, OpenError, StoreError,
    StoreFuture, sql,
};
pub use cause::PgFailure;
pub use config::PostgresOptions;
use driver::Driver;
use failure::{BACKEND, PgError, store_error};
pub use migrate::SCHEMA_VERSION;
use pool::{Connector, Pool};
use shared::{Counters, Shared};

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

/// A journal store in a PostgreSQL schema. See the module documentation.
#[derive(Debug)]
pub struct PostgresStore {
    shared: Arc<Shared>,
    /// Dropped after `shared`'s last user on the handle's side: it lets what is in flight
    /// finish, then stops the runtime's thread.
    driver: Driver,
}

/// What a future of an operation resolves to if the operation was dropped unfinished (it
/// panicked, or the runtime stopped under it).
fn unfinished(location: &str, what: &str) -> StoreError {
    StoreError::Backend {
        backend: BACKEND,
        context: format!("{location}: {what}"),
        source: "the store's runtime ended the operation before it finished".into(),
    }
}

impl PostgresStore {
    /// Connects to the database at `url` and brings the store's schema up to date.
    ///
    /// `url` is a libpq connection URL (`postgres://user:password@host:port/dbname?...`, or a
    /// `key=value` connection string). Besides libpq's parameters (`connect_timeout`,
    /// `application_name`, `options`, `keepalives*`, `sslmode`, ...), a URL may carry the
    /// store's own, overriding `options`: `schema`, `pool_size`, `statement_timeout` (ms, 0 for
    /// none), `resolve_timeout` (ms) and `max_retries`.
    ///
    /// Blocks the calling thread while it connects and migrates (on the store's own runtime).
    pub fn connect(url: &str, options: PostgresOptions) -> Result<Self, OpenError> {
        let resolved = config::resolve(url, options)?;
        let quoted = config::quote_ident(&resolved.options.schema);
        let connector = Connector {
            config: resolved.config,
            quoted_schema: quoted,
            statement_timeout: resolved.options.statement_timeout,
            pooled: resolved.options.transaction_pooler,
        };
        let location = resolved.location;
        let driver = Driver::start().map_err(|e| {
            OpenError::Store(StoreError::Io {
                context: format!("{location}: starting the store's runtime thread"),
                source: e,
            })
        })?;
        let options = resolved.options;
        let connector = {
            let (location, options) = (location.clone(), options.clone());
            let lost = OpenError::Store(unfinished(&location, "opening"));
            let prepared = driver.spawn(Err(lost), async move {
                open_schema(&connector, &location, &options).await.map(|()| connector)
            });
            prepared.wait()?
        };
        let pool = Pool::new(connector, options.pool_size, options.pool_timeout);
        let shared = Arc::new(Shared {
            pool,
            options,
            location,
            counters: Counters::default(),
            metrics: Default::default(),
            closed: std::sync::OnceLock::new(),
        });
        Ok(PostgresStore { shared, driver })
    }

    /// The schema holding the store's tables.
    pub fn schema(&self) -> &str {
        &self.shared.options.schema
    }

    /// What the store has recovered from so far.
    pub fn stats(&self) -> PostgresStats {
        let c = &self.shared.counters;
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
        let shared = Arc::clone(&self.shared);
        self.spawn("dropping the schema", async move { ops::drop_schema(&shared).await }).wait()
    }

    /// Runs an operation on the store's runtime.
    fn spawn<T: Send + 'static>(
        &self,
        what: &str,
        operation: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> StoreFuture<Result<T, StoreError>> {
        if let Err(e) = self.shared.check_open() {
            return StoreFuture::ready(Err(e));
        }
        self.driver.spawn(Err(unfinished(&self.shared.location, what)), operation)
    }
}

/// Connects once and checks (read-only) or migrates the schema, on the store's runtime.
async fn open_schema(
    connector: &Connector,
    location: &str,
    options: &PostgresOptions,
) -> Result<(), OpenError> {
    let open_err = |e: PgError| OpenError::Store(store_error(location, "opening", e));
    let mut client = connector.connect(None).await.map_err(open_err)?;
    let migrate_err = |e| match e {
        migrate::MigrateError::Driver(doing, e) => open_err(PgError::new(doing, e)),
        migrate::MigrateError::Foreign(found) => {
            OpenError::NotAJournal { location: location.to_owned(), found }
        }
        migrate::MigrateError::Newer(v) => OpenError::Options {
            reason: format!(
                "{location}: the schema is at version {v}, written by a newer stepjournal; \
                 this build knows versions up to {SCHEMA_VERSION}"
            ),
        },
    };
    if options.transaction_pooler {
        // `Synced` appends make no session setting behind a pooler: they need the server's.
        let rows = client
            .simple_query("SHOW synchronous_commit")
            .await
            .map_err(|e| open_err(PgError::new("reading synchronous_commit", e)))?;
        let setting = rows
            .iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default();
        if setting == "off" || setting == "local" {
            return Err(OpenError::Options {
                reason: format!(
                    "{location}: behind a transaction pooler (`pooler=transaction`) a `Synced` \
                     append relies on the server's `synchronous_commit`, which is `{setting}` \
                     for this role and database; set it to `on` (`ALTER ROLE ... SET \
                     synchronous_commit = on`), or connect without the pooler"
                ),
            });
        }
    }
    let schema = &options.schema;
    let quoted = &connector.quoted_schema;
    // Opened to create (the default), the migration looks at the schema itself: no look first.
    if !options.read_only && options.create {
        return migrate::migrate(&mut client, schema, quoted).await.map_err(migrate_err);
    }
    let found = migrate::check(&mut client, schema, quoted).await.map_err(migrate_err)?;
    if !options.read_only && found.is_some() {
        return migrate::migrate(&mut client, schema, quoted).await.map_err(migrate_err);
    }
    match found {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(v) if v > SCHEMA_VERSION => Err(migrate_err(migrate::MigrateError::Newer(v))),
        found => {
            let what = match found {
                None if !options.read_only => {
                    "holds no stepjournal store, and this opening creates none (only `import` \
                     and `salvage` create a store)"
                        .to_owned()
                }
                None => "holds no stepjournal store".to_owned(),
                Some(v) => format!(
                    "is at version {v}, older than this build's {SCHEMA_VERSION}; open it \
                     once for writing to migrate it"
                ),
            };
            Err(OpenError::Options { reason: format!("{location}: schema `{schema}` {what}") })
        }
    }
}

impl JournalStore for PostgresStore {
    /// The servers, the database and the schema (never the user or a password).
    fn identity(&self) -> crate::StoreIdentity {
        crate::StoreIdentity::Location(self.shared.location.clone())
    }
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
        self.append_async(session, expected, events, durability).wait()
    }

    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        if let Err(e) = self.shared.check_writable() {
            return StoreFuture::ready(Err(e.into()));
        }
        let encoded = sql::encode_batch(session, expected, events, &self.shared.options.limits);
        let (batch, place) = match encoded {
            Ok(encoded) => encoded,
            Err(e) => return StoreFuture::ready(Err(e)),
        };
        let shared = Arc::clone(&self.shared);
        let session = session.clone();
        let unknown = AppendError::OutcomeUnknown {
            session: session.clone(),
            expected,
            reason: format!(
                "{}: the store's runtime ended the append before it finished; read the \
                 session's tail before writing again",
                shared.location
            ),
            source: None,
        };
        let Some(place) = place else {
            // A batch past what a column holds cannot be at the tail: a conflict, once the
            // tail is read.
            return self.driver.spawn(Err(unknown), async move {
                let actual = ops::tail(&shared, &session).await?;
                Err(AppendError::Conflict { expected, actual })
            });
        };
        let durability = durability.min(Durability::Synced);
        let request = append::Append { session, expected, place, batch, durability };
        self.driver.spawn(Err(unknown), append::append(shared, request))
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.read_async(session, range).wait()
    }

    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let (shared, session) = (Arc::clone(&self.shared), session.clone());
        self.spawn("reading", async move { ops::read(&shared, &session, range).await })
    }

    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.read_from_snapshot_async(session).wait()
    }

    /// One statement on the store's runtime, as [`read_async`](JournalStore::read_async): the
    /// newest snapshot's place from the partial index `events_snapshots`, and the rows from it
    /// on by the primary key; never a scan of the session's history.
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let (shared, session) = (Arc::clone(&self.shared), session.clone());
        self.spawn("reading from the newest snapshot", async move {
            ops::read_from_snapshot(&shared, &session).await
        })
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.tail_async(session).wait()
    }

    fn tail_async(&self, session: &SessionId) -> StoreFuture<Result<Seq, StoreError>> {
        let (shared, session) = (Arc::clone(&self.shared), session.clone());
        self.spawn("reading the tail", async move { ops::tail(&shared, &session).await })
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let shared = Arc::clone(&self.shared);
        self.spawn("listing sessions", async move { ops::sessions(&shared).await }).wait()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        let (shared, session) = (Arc::clone(&self.shared), session.clone());
        let deleted =
            self.spawn("deleting", async move { ops::delete(&shared, &session, None).await });
        // With no tail to match, nothing is refused.
        Ok(deleted.wait()?.unwrap_or(false))
    }

    /// The head row locked, its tail checked and the rows deleted in one transaction.
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<crate::DeleteAt, StoreError> {
        let (shared, id) = (Arc::clone(&self.shared), session.clone());
        let deleting = async move { ops::delete(&shared, &id, Some(tail)).await };
        Ok(match self.spawn("deleting", deleting).wait()? {
            Ok(_) => crate::DeleteAt::Deleted,
            Err(tail) => crate::DeleteAt::Changed { tail },
        })
    }

    /// Refuses every call from now on; what is in flight finishes. The pool's connections to
    /// the server end (an idle one at once, one in use when its operation ends); the driver's
    /// thread goes with the last handle.
    fn close(&self) -> Result<(), StoreError> {
        let _ = self.shared.closed.set(());
        self.shared.pool.close();
        Ok(())
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.heads_async().wait()
    }

    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn("reading the heads", async move { leases::heads(&shared).await })
    }

    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.head_async(session).wait()
    }

    fn head_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Option<SessionHead>, StoreError>> {
        let (shared, session) = (Arc::clone(&self.shared), session.clone());
        self.spawn("reading a head", async move { leases::head(&shared, &session).await })
    }

    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        let shared = Arc::clone(&self.shared);
        let (session, owner, run) = (session.clone(), owner.clone(), run.clone());
        self.spawn("taking a lease", async move {
            leases::take_lease(&shared, &session, &owner, &run, ttl, force).await
        })
        .wait()
    }

    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        let shared = Arc::clone(&self.shared);
        let (owner, runs) = (owner.clone(), runs.to_vec());
        self.spawn("renewing leases", async move {
            leases::renew_leases(&shared, &owner, &runs, ttl).await
        })
        .wait()
    }

    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        let shared = Arc::clone(&self.shared);
        let (session, owner, run) = (session.clone(), owner.clone(), run.clone());
        self.spawn("releasing a lease", async move {
            leases::release_lease(&shared, &session, &owner, &run).await
        })
        .wait()
    }

    fn metrics(&self) -> StoreMetrics {
        self.shared.metrics.snapshot(false)
    }
}
