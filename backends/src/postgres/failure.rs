//! What a failed statement was: the driver's error and what was being done ([`PgError`]), why a
//! call could not run one ([`Failure`]), what the error says about the statement ([`Class`]),
//! and the store error it becomes.

use std::time::Duration;

use tokio_postgres::error::{DbError, Severity, SqlState};

use super::cause::PgFailure;
use crate::StoreError;

pub(crate) const BACKEND: &str = "postgres";

/// A driver error and what was being done.
#[derive(Debug)]
pub(crate) struct PgError {
    pub doing: &'static str,
    pub source: tokio_postgres::Error,
}

impl PgError {
    pub(crate) fn new(doing: &'static str, source: tokio_postgres::Error) -> Self {
        PgError { doing, source }
    }

    pub(crate) fn class(&self) -> Class {
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

fn classify(e: &tokio_postgres::Error) -> Class {
    match e.as_db_error() {
        Some(db) if ends_the_session(db) => Class::Lost,
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

/// Whether the error's severity is FATAL or PANIC: the session ended with it. The server sends
/// the severity twice, translated (`S`) and not (`V`, which the driver parses); a pooler
/// reporting for a server connection it lost (PgBouncer's `FATAL: server conn crashed?`) sends
/// only `S`, in English.
fn ends_the_session(db: &DbError) -> bool {
    match db.parsed_severity() {
        Some(severity) => matches!(severity, Severity::Fatal | Severity::Panic),
        None => matches!(db.severity(), "FATAL" | "PANIC"),
    }
}

pub(crate) fn store_error(location: &str, what: &str, e: PgError) -> StoreError {
    StoreError::Backend {
        backend: BACKEND,
        context: format!("{location}: {what}: {}", e.doing),
        source: Box::new(PgFailure::new(e.source)),
    }
}
