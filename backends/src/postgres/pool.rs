//! A small connection pool: at most `size` connections, opened on demand, each with its
//! statements prepared; a connection that failed is dropped, never handed out again. It lives on
//! the store's runtime: each connection's I/O is a task there.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, NoTls};

use super::failure::{Failure, PgError};
use super::schema::Statements;

/// One open connection and what the store knows about it.
pub(crate) struct Conn {
    pub client: Client,
    pub stmts: Statements,
    /// The session's `synchronous_commit` as last set: `true` for `on`.
    pub synchronous_commit: bool,
}

/// How a connection is opened.
#[derive(Debug)]
pub(crate) struct Connector {
    pub config: tokio_postgres::Config,
    pub quoted_schema: String,
    pub statement_timeout: Option<Duration>,
    /// Behind a transaction pooler: no statement prepared, no session setting made.
    pub pooled: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("closed", &self.client.is_closed())
            .field("synchronous_commit", &self.synchronous_commit)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Opens a connection within `timeout` (the smaller of it and the configured connect
    /// timeout), sets its session parameters and prepares its statements. Runs on the store's
    /// runtime, where the connection's task is spawned.
    pub(crate) async fn open(&self, timeout: Option<Duration>) -> Result<Conn, PgError> {
        let client = self.connect(timeout).await?;
        // Behind a transaction pooler a session setting would stay on the server connection,
        // for whichever client the pooler hands it to next: none is made.
        if !self.pooled {
            let statement_timeout = self.statement_timeout.map_or(0, |d| d.as_millis());
            client
                .batch_execute(&format!(
                    "SET statement_timeout = {statement_timeout}; SET synchronous_commit = on"
                ))
                .await
                .map_err(|e| PgError::new("setting the session parameters", e))?;
        }
        let stmts = Statements::prepare(&client, &self.quoted_schema, self.pooled)
            .await
            .map_err(|e| PgError::new("preparing statements", e))?;
        Ok(Conn { client, stmts, synchronous_commit: true })
    }

    /// A bare connection (no session parameters, no statements), within `timeout`.
    pub(crate) async fn connect(&self, timeout: Option<Duration>) -> Result<Client, PgError> {
        let mut config = self.config.clone();
        if let Some(t) = timeout {
            let current = config.get_connect_timeout().copied().unwrap_or(t);
            config.connect_timeout(current.min(t).max(Duration::from_millis(1)));
        }
        let (client, connection) =
            config.connect(NoTls).await.map_err(|e| PgError::new("connecting", e))?;
        // The connection's I/O: it ends when the client is dropped or the link fails, which the
        // client's next call reports.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

/// The pool.
#[derive(Debug)]
pub(crate) struct Pool {
    pub connector: Connector,
    wait: Duration,
    idle: Mutex<Vec<Conn>>,
    slots: Semaphore,
    /// The store was closed: connections are dropped as their leases end.
    closed: std::sync::atomic::AtomicBool,
}

/// A connection taken from the pool; it goes back when dropped, unless it failed.
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    broken: bool,
    _slot: SemaphorePermit<'a>,
}

impl Lease<'_> {
    /// The connection (always there until the lease is dropped).
    pub(crate) fn conn(&mut self) -> Option<&mut Conn> {
        self.conn.as_mut()
    }

    /// Drops the connection instead of returning it: it failed, or its state is unknown.
    pub(crate) fn discard(&mut self) {
        self.broken = true;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        // The slot is freed after this (the permit is dropped with the lease), so the
        // connection is idle before a waiter can look for one.
        match self.conn.take() {
            Some(conn) if !self.broken && !conn.client.is_closed() && !self.pool.is_closed() => {
                self.pool.lock().push(conn);
            }
            _ => {}
        }
    }
}

impl Pool {
    pub(crate) fn new(connector: Connector, size: usize, wait: Duration) -> Self {
        let idle = Mutex::new(Vec::new());
        let closed = std::sync::atomic::AtomicBool::new(false);
        Pool { connector, wait, idle, slots: Semaphore::new(size), closed }
    }

    /// Ends the idle connections now, and each one in use as its lease ends.
    pub(crate) fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        self.lock().clear();
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Conn>> {
        // A list, consistent between statements: take it back after a panic elsewhere.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection: an idle one, or a new one, once one of the `size` slots is free within the
    /// pool timeout.
    pub(crate) async fn get(&self) -> Result<Lease<'_>, Failure> {
        let slot = match tokio::time::timeout(self.wait, self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) | Err(_) => return Err(Failure::PoolExhausted(self.wait)),
        };
        let idle = loop {
            match self.lock().pop() {
                Some(conn) if conn.client.is_closed() => continue,
                other => break other,
            }
        };
        let conn = match idle {
            Some(conn) => conn,
            None => self.connector.open(None).await.map_err(Failure::Driver)?,
        };
        Ok(Lease { pool: self, conn: Some(conn), broken: false, _slot: slot })
    }
}
