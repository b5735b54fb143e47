//! Configuration of a PostgreSQL store: options, and the URL that may override them.

use std::str::FromStr;
use std::time::Duration;

use stepjournal_codec::Limits;
use tokio_postgres::config::{Host, SslMode};

use crate::OpenError;

/// How a PostgreSQL store connects and behaves. A URL's own parameters (see
/// [`PostgresStore::connect`](super::PostgresStore::connect)) override these.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The schema holding the store's tables, created if absent. Default `stepjournal`;
    /// URL parameter `schema`.
    pub schema: String,
    /// The most connections the store opens. Default 8; URL parameter `pool_size`.
    pub pool_size: usize,
    /// How long a call waits for a free connection. Default 30 s.
    pub pool_timeout: Duration,
    /// The server-side limit on each statement, `None` for none. Default 30 s; URL parameter
    /// `statement_timeout` in milliseconds (0 for none).
    pub statement_timeout: Option<Duration>,
    /// How long opening one connection may take, unless the URL sets libpq's `connect_timeout`.
    /// Default 5 s.
    pub connect_timeout: Duration,
    /// After a connection is lost during an append, how long the store keeps trying to reach
    /// the database to learn whether the batch landed before answering
    /// [`AppendError::OutcomeUnknown`](crate::AppendError::OutcomeUnknown). Default 10 s; URL
    /// parameter `resolve_timeout` in milliseconds.
    pub resolve_timeout: Duration,
    /// How many times an operation is retried after a serialization failure (SQLSTATE 40001),
    /// a deadlock (40P01) or a lost connection whose batch did not land. Default 10; URL
    /// parameter `max_retries`.
    pub max_retries: u32,
    /// Record and batch size bounds. Default [`Limits::default`].
    pub limits: Limits,
    /// Open an existing store for reading only (default `false`): the schema is checked, never
    /// created or migrated; appends and deletes return
    /// [`StoreError::ReadOnly`](crate::StoreError::ReadOnly).
    pub read_only: bool,
    /// Create the schema and its tables when the schema holds no store (default `true`). With
    /// `false` a schema holding no store is refused, never created: a mistyped `?schema=` given
    /// to a command that acts on sessions creates nothing.
    pub create: bool,
    /// The store is reached through a transaction pooler (PgBouncer in `pool_mode =
    /// transaction`, Supabase's and Neon's poolers): consecutive transactions of one connection
    /// may run on different server connections, so no statement is prepared (each is sent
    /// unnamed, with its types) and no session setting is made (a `Buffered` append sets
    /// `synchronous_commit = off` for its own transaction; `Synced` appends rely on the server's
    /// `on`, checked at open; `statement_timeout` is the role's or the server's). Default
    /// `false`; URL parameter `pooler=transaction` (or `pooler=none`).
    pub transaction_pooler: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "stepjournal".to_owned(),
            pool_size: 8,
            pool_timeout: Duration::from_secs(30),
            statement_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Duration::from_secs(5),
            resolve_timeout: Duration::from_secs(10),
            max_retries: 10,
            limits: Limits::default(),
            read_only: false,
            create: true,
            transaction_pooler: false,
        }
    }
}

/// A URL taken apart: the driver's configuration, the store's options, and a name for errors
/// (without the password).
#[derive(Debug)]
pub(crate) struct Resolved {
    pub config: tokio_postgres::Config,
    pub options: PostgresOptions,
    pub location: String,
}

/// The longest identifier PostgreSQL keeps without truncating it (NAMEDATALEN - 1).
const MAX_IDENT: usize = 63;

fn bad(url: &str, reason: impl Into<String>) -> OpenError {
    OpenError::Url { url: crate::redact::redact(url), reason: reason.into() }
}

fn percent_decode(url: &str, s: &str) -> Result<String, OpenError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad(url, format!("bad percent escape in `{s}`")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(if b == b'+' { b' ' } else { b });
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad(url, format!("`{s}` is not UTF-8 once decoded")))
}

fn millis(url: &str, key: &str, value: &str) -> Result<Duration, OpenError> {
    value
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| bad(url, format!("`{key}` must be a number of milliseconds, not `{value}`")))
}

/// Takes this store's parameters (`schema`, `pool_size`, `statement_timeout`,
/// `resolve_timeout`, `max_retries`) out of a `postgres://` URL and hands the rest to the
/// driver. A key-value connection string (`host=... user=...`) goes to the driver whole.
pub(crate) fn resolve(url: &str, mut options: PostgresOptions) -> Result<Resolved, OpenError> {
    let mut driver_url = url.to_owned();
    if url.contains("://")
        && let Some((base, query)) = url.split_once('?')
    {
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
            // Only this store's own values are decoded here (and may be quoted in an error);
            // the driver decodes the rest, a password among them.
            let value = || percent_decode(url, raw);
            match key {
                "schema" => options.schema = value()?,
                "pool_size" => {
                    let value = value()?;
                    options.pool_size = value.parse().map_err(|_| {
                        bad(url, format!("`pool_size` must be a number, not `{value}`"))
                    })?;
                }
                "statement_timeout" => {
                    let d = millis(url, key, &value()?)?;
                    options.statement_timeout = (!d.is_zero()).then_some(d);
                }
                "resolve_timeout" => options.resolve_timeout = millis(url, key, &value()?)?,
                "pooler" => {
                    options.transaction_pooler = match value()?.as_str() {
                        "transaction" => true,
                        "none" | "session" => false,
                        other => {
                            return Err(bad(
                                url,
                                format!(
                                    "`pooler` is `transaction` (a transaction pooler in front of \
                                     the server), `session` or `none`, not `{other}`"
                                ),
                            ));
                        }
                    };
                }
                "max_retries" => {
                    let value = value()?;
                    options.max_retries = value.parse().map_err(|_| {
                        bad(url, format!("`max_retries` must be a number, not `{value}`"))
                    })?;
                }
                _ => kept.push(pair),
            }
        }
        driver_url =
            if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    }
    if options.schema.is_empty()
        || options.schema.len() > MAX_IDENT
        || options.schema.contains('\0')
    {
        return Err(bad(
            url,
            format!("the schema name must be 1 to {MAX_IDENT} bytes without NUL"),
        ));
    }
    if options.pool_size == 0 {
        return Err(bad(url, "`pool_size` must be at least 1"));
    }
    let mut config = tokio_postgres::Config::from_str(&driver_url)
        .map_err(|e| bad(url, super::cause::describe(&e)))?;
    if config.get_ssl_mode() == SslMode::Require {
        return Err(bad(
            url,
            "sslmode=require: TLS is not supported by this build's PostgreSQL backend yet; \
             connect over a trusted network or a local socket, or through a TLS tunnel",
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    // Notice a dead peer within about half a minute rather than the OS default of hours.
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(Duration::from_secs(15));
        config.keepalives_interval(Duration::from_secs(5));
        config.keepalives_retries(3);
    }
    // And of a link that stopped carrying an append's bytes (a partition): without a bound the
    // kernel retransmits for about a quarter of an hour before the connection fails.
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
    let location = location(&config, &options.schema);
    Ok(Resolved { config, options, location })
}

fn location(config: &tokio_postgres::Config, schema: &str) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("postgres://{host}:{port}/{db} (schema {schema})")
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_parameters_are_taken_out_and_the_rest_goes_to_the_driver() {
        let url = "postgres://u:secret@db.example:6543/app?schema=t%201&sslmode=disable\
                   &statement_timeout=0&pool_size=3&resolve_timeout=250&max_retries=2";
        let r = resolve(url, PostgresOptions::default()).unwrap();
        assert_eq!(r.options.schema, "t 1");
        assert_eq!(r.options.pool_size, 3);
        assert_eq!(r.options.statement_timeout, None);
        assert_eq!(r.options.resolve_timeout, Duration::from_millis(250));
        assert_eq!(r.options.max_retries, 2);
        assert_eq!(r.config.get_dbname(), Some("app"));
        assert_eq!(r.config.get_ports(), &[6543]);
        assert_eq!(r.location, "postgres://db.example:6543/app (schema t 1)");
    }

    #[test]
    fn bad_parameters_are_clear_errors_without_the_password() {
        for (url, needle) in [
            ("postgres://u:pw@h/db?statement_timeout=soon", "milliseconds"),
            ("postgres://u:pw@h/db?pool_size=0", "at least 1"),
            ("postgres://u:pw@h/db?schema=", "schema name"),
            ("postgres://u:pw@h/db?sslmode=require", "TLS is not supported"),
            ("postgres://u:pw@h/db?bogus=1", "bogus"),
        ] {
            let err = resolve(url, PostgresOptions::default()).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
            assert!(!err.contains("pw@"), "the password leaked: {err}");
        }
    }

    #[test]
    fn no_error_of_a_url_or_key_value_string_shows_its_password() {
        // Defect: a bad percent escape in any query value was quoted in the error (a password
        // given as `?password=...` among them), and a `key=value` connection string was quoted
        // whole, password included.
        for url in [
            "postgres://u:s3cretpw@h/db?password=s3c%zzretpw",
            "postgres://u@h/db?password=s3cretpw&pool_size=x",
            "postgres://u:s3cretpw@h:notaport/db",
            "postgres://u:s3cretpw@h/db?sslmode=require",
            "host=h password=s3cretpw port=notaport",
            "host=h password='s3cretpw",
            "host=h password=s3cretpw sslmode=require",
        ] {
            // The driver takes a malformed percent escape as it is: only the errors are
            // checked, and the `Debug` of what resolves.
            let text = match resolve(url, PostgresOptions::default()) {
                Err(err) => format!("{err} {err:?}"),
                Ok(resolved) => format!("{resolved:?}"),
            };
            assert!(!text.contains("s3cretpw"), "{url}: {text}");
        }
        assert!(resolve("postgres://u@h/db?pool_size=x", PostgresOptions::default()).is_err());
        let ok = resolve("host=h password=s3cretpw", PostgresOptions::default()).unwrap();
        assert!(!format!("{ok:?}").contains("s3cretpw"), "{ok:?}");
        assert!(!format!("{:?}", ok.options).contains("s3cretpw"));
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
