//! A driver error as one message that holds its cause. `tokio_postgres::Error` shows only its kind
//! ("db error", "error connecting to server"); the server's message and SQLSTATE, or the OS
//! error under a failed connection, are in its source chain, which many printers never walk.

use std::fmt;

/// A PostgreSQL driver error whose message holds its whole cause: for an error the server
/// reported, its severity, message, SQLSTATE, detail and hint
/// (`db error: FATAL: database "x" does not exist (SQLSTATE 3D000)`); otherwise the driver's
/// message and every source under it (`error connecting to server: Connection refused (os error
/// 111)`). It has no `source`: everything is in the message. The driver's error itself is
/// [`PgFailure::driver_error`].
#[derive(Debug)]
pub struct PgFailure {
    message: String,
    error: tokio_postgres::Error,
}

impl PgFailure {
    /// The failure of the driver's `error`.
    pub fn new(error: tokio_postgres::Error) -> Self {
        PgFailure { message: describe(&error), error }
    }

    /// The SQLSTATE the server gave, if the server reported the error (`3D000`, `40001`, ...).
    pub fn sqlstate(&self) -> Option<&str> {
        self.error.as_db_error().map(|db| db.code().code())
    }

    /// The driver's error.
    pub fn driver_error(&self) -> &tokio_postgres::Error {
        &self.error
    }
}

impl fmt::Display for PgFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PgFailure {}

/// The driver's error as one line holding its cause (see [`PgFailure`]).
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let mut text =
            format!("{error}: {}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; detail: {}", one_line(detail)));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {}", one_line(hint)));
        }
        // A statement the store prepared on its connection is gone: the connection's server
        // session changed under it, as behind a transaction pooler.
        if db.code() == &tokio_postgres::error::SqlState::INVALID_SQL_STATEMENT_NAME {
            text.push_str(
                "; a prepared statement of this connection is gone, as when a transaction \
                 pooler (PgBouncer in transaction mode) stands between the store and the \
                 server: open the store with `?pooler=transaction`",
            );
        }
        return text;
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let shown = cause.to_string();
        if !text.contains(&shown) {
            text.push_str(": ");
            text.push_str(&shown);
        }
        source = cause.source();
    }
    text
}

/// The server's multi-line text on one line.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn a_connection_string_error_names_what_is_wrong() {
        // Defect: the driver's "invalid connection string" came without its cause.
        let err = tokio_postgres::Config::from_str("host=h bogus_option=1").unwrap_err();
        let text = describe(&err);
        assert!(
            text.starts_with("invalid connection string: ") && text.contains("bogus_option"),
            "{text}"
        );
    }

    #[test]
    fn a_refused_connection_names_the_os_error() {
        // Defect: a refused port showed only "error connecting to server".
        let mut config = tokio_postgres::Config::from_str("postgres://u@127.0.0.1:1/db").unwrap();
        config.connect_timeout(std::time::Duration::from_secs(2));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let connecting = config.connect(tokio_postgres::NoTls);
        let err = runtime.block_on(connecting).map(|_| ()).unwrap_err();
        let failure = PgFailure::new(err);
        let text = failure.to_string();
        assert!(text.starts_with("error connecting to server: "), "{text}");
        assert!(text.contains("refused") || text.contains("os error"), "{text}");
        assert_eq!(failure.sqlstate(), None);
    }
}
