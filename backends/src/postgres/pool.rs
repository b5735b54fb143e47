//! A small connection pool: at most `size` connections, opened on demand, each with its
//! statements prepared; a connection that failed is dropped, never handed out again.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use super::schema::Statements;
use super::{Failure, PgError};

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
    pub config: postgres::Config,
    pub quoted_schema: String,
    pub statement_timeout: Option<Duration>,
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
    /// timeout), sets its session parameters and prepares its statements.
    pub(crate) fn open(&self, timeout: Option<Duration>) -> Result<Conn, PgError> {
        let mut config = self.config.clone();
        if let Some(t) = timeout {
            let current = config.get_connect_timeout().copied().unwrap_or(t);
            config.connect_timeout(current.min(t).max(Duration::from_millis(1)));
        }
        let mut client = config.connect(NoTls).map_err(|e| PgError::new("connecting", e))?;
        let statement_timeout = self.statement_timeout.map_or(0, |d| d.as_millis());
        client
            .batch_execute(&format!(
                "SET statement_timeout = {statement_timeout}; SET synchronous_commit = on"
            ))
            .map_err(|e| PgError::new("setting the session parameters", e))?;
        let stmts = Statements::prepare(&mut client, &self.quoted_schema)
            .map_err(|e| PgError::new("preparing statements", e))?;
        Ok(Conn { client, stmts, synchronous_commit: true })
    }
}

#[derive(Debug, Default)]
struct State {
    idle: Vec<Conn>,
    open: usize,
}

/// The pool.
#[derive(Debug)]
pub(crate) struct Pool {
    pub connector: Connector,
    size: usize,
    wait: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

/// A connection taken from the pool; it goes back when dropped, unless it failed.
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    broken: bool,
}

impl Lease<'_> {
    /// The connection.
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
        let mut state = self.pool.lock();
        match self.conn.take() {
            Some(conn) if !self.broken && !conn.client.is_closed() => state.idle.push(conn),
            _ => state.open = state.open.saturating_sub(1),
        }
        drop(state);
        self.pool.freed.notify_one();
    }
}

impl Pool {
    pub(crate) fn new(connector: Connector, size: usize, wait: Duration) -> Self {
        Pool { connector, size, wait, state: Mutex::default(), freed: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a list and a count, consistent between statements: take it back after a
        // panic elsewhere.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection: an idle one, a new one while fewer than `size` are open, or the first one
    /// freed within the pool timeout.
    pub(crate) fn get(&self) -> Result<Lease<'_>, Failure> {
        let deadline = super::deadline(self.wait);
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Lease { pool: self, conn: Some(conn), broken: false });
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match self.connector.open(None) {
                    Ok(conn) => Ok(Lease { pool: self, conn: Some(conn), broken: false }),
                    Err(e) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(Failure::Driver(e))
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Failure::PoolExhausted(self.wait));
            }
            state =
                self.freed.wait_timeout(state, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}
