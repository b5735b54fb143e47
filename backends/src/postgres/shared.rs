//! What the store's handle and its operations on the runtime share, and how an operation that
//! is safe to repeat is retried.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::config::PostgresOptions;
use super::failure::{BACKEND, Class, Failure, PgError, store_error};
use super::pool::Pool;
use crate::StoreError;
use crate::sql::metrics::Metrics;

/// A statement parameter (the first of a list names the list's type for the compiler).
pub(crate) type Param<'a> = dyn tokio_postgres::types::ToSql + Sync + 'a;

/// Counts of what the store had to recover from.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub retried: AtomicU64,
    pub lost_landed: AtomicU64,
    pub lost_not_landed: AtomicU64,
    pub outcome_unknown: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The store's state, shared by its handle and the operations running on its runtime.
#[derive(Debug)]
pub(crate) struct Shared {
    pub pool: Pool,
    pub options: PostgresOptions,
    pub location: String,
    pub counters: Counters,
    pub metrics: Metrics,
    /// Set once the store is closed: every call is refused.
    pub closed: std::sync::OnceLock<()>,
}

impl Shared {
    pub(crate) fn failure(&self, what: &str, f: Failure) -> StoreError {
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

    pub(crate) fn check_writable(&self) -> Result<(), StoreError> {
        self.check_open()?;
        if self.options.read_only {
            return Err(StoreError::ReadOnly { location: self.location.clone() });
        }
        Ok(())
    }

    /// Refused once the store is closed.
    pub(crate) fn check_open(&self) -> Result<(), StoreError> {
        match self.closed.get() {
            Some(()) => Err(StoreError::Closed { location: self.location.clone() }),
            None => Ok(()),
        }
    }

    /// After a failed attempt `attempt` (from 0) of an operation safe to repeat: the error to
    /// return, or `None` to try again (after counting a retry and pausing).
    pub(crate) async fn after_failure(
        &self,
        what: &str,
        attempt: u32,
        err: PgError,
    ) -> Option<StoreError> {
        let class = err.class();
        if class == Class::Refused || attempt >= self.options.max_retries {
            return Some(store_error(&self.location, what, err));
        }
        if class == Class::Retry {
            bump(&self.counters.retried);
        }
        tokio::time::sleep(backoff(attempt + 1)).await;
        None
    }
}

/// Runs an operation that is safe to repeat on a pooled connection, retrying after a
/// serialization failure, a deadlock or a lost connection, up to `max_retries` times. `$body`
/// is an expression of `$c: &mut Conn` giving `Result<T, PgError>`; the whole is an expression
/// giving `Result<T, StoreError>`, inside an `async` block.
macro_rules! with_retries {
    ($shared:expr, $what:expr, |$c:ident| $body:expr) => {{
        let shared: &$crate::postgres::shared::Shared = $shared;
        let what: &str = $what;
        let mut attempt: u32 = 0;
        loop {
            let mut lease = match shared.pool.get().await {
                Ok(lease) => lease,
                // A connection that could not be opened (the server ended it while it was set
                // up, its statements being prepared, say): nothing was sent; tried again like
                // a connection lost before anything was sent, unless the server refused.
                Err($crate::postgres::failure::Failure::Driver(err))
                    if err.class() != $crate::postgres::failure::Class::Refused =>
                {
                    if let Some(e) = shared.after_failure(what, attempt, err).await {
                        break Err(e);
                    }
                    attempt += 1;
                    continue;
                }
                Err(f) => break Err(shared.failure(what, f)),
            };
            let Some($c) = lease.conn() else {
                break Err(shared.failure(
                    what,
                    $crate::postgres::failure::Failure::PoolExhausted(std::time::Duration::ZERO),
                ));
            };
            let err = match $body {
                Ok(value) => break Ok(value),
                Err(err) => err,
            };
            if err.class() == $crate::postgres::failure::Class::Lost {
                lease.discard();
            }
            drop(lease);
            if let Some(e) = shared.after_failure(what, attempt, err).await {
                break Err(e);
            }
            attempt += 1;
        }
    }};
}
pub(crate) use with_retries;

/// `after` from now, or a year from now for a timeout too large to add.
pub(crate) fn deadline(after: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
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
