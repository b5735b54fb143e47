//! The PostgreSQL schema, its migrations, and the statements the store runs.

use postgres::types::Type;
use postgres::{Client, Statement};

/// The schema's migrations, in order; `{s}` stands for the quoted schema name. Migration `i`
/// brings the schema to version `i + 1`. Never edit one that shipped: add the next.
const MIGRATIONS: &[&str] = &[
    // 1: a head row per session holds its next sequence number; an append moves it only from
    // the expected value, in the same transaction as the events' insert, so a batch can land
    // only at the tail (the primary key alone would let one land past it). `token` is set on a
    // batch's first row: after a connection lost during commit, it tells whether the batch
    // landed. `COLLATE "C"` orders session ids by their bytes, as every backend does.
    r#"CREATE TABLE {s}.sessions (
        session TEXT COLLATE "C" PRIMARY KEY,
        next_seq BIGINT NOT NULL CHECK (next_seq >= 0)
    );
    CREATE TABLE {s}.events (
        session TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL CHECK (seq >= 0),
        at BIGINT NOT NULL,
        kind SMALLINT NOT NULL,
        record BYTEA NOT NULL,
        token BYTEA,
        PRIMARY KEY (session, seq)
    );"#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Why a schema could not be brought up to date.
#[derive(Debug)]
pub(crate) enum MigrateError {
    Driver(&'static str, postgres::Error),
    Newer(i32),
    /// The schema holds relations that are not a journal store's: what was found.
    Foreign(String),
}

/// The relations of a journal store's schema.
const OURS: [&str; 3] = ["sessions", "events", "schema_version"];

/// Refuses a schema holding tables or views that are not a journal store's, or a journal's
/// tables without their `schema_version`. A missing or empty schema passes.
fn refuse_foreign(tx: &mut postgres::Transaction<'_>, schema: &str) -> Result<(), MigrateError> {
    let rows = tx
        .query(
            "SELECT table_name::text, table_type::text FROM information_schema.tables \
             WHERE table_schema = $1 ORDER BY table_name",
            &[&schema],
        )
        .map_err(|e| MigrateError::Driver("listing the schema's tables", e))?;
    let mut names = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String =
            row.try_get(0).map_err(|e| MigrateError::Driver("listing the schema's tables", e))?;
        let kind: String =
            row.try_get(1).map_err(|e| MigrateError::Driver("listing the schema's tables", e))?;
        names.push((name, kind));
    }
    let foreign: Vec<String> = names
        .iter()
        .filter(|(name, _)| !OURS.contains(&name.as_str()))
        .map(|(name, kind)| {
            let kind = if kind == "BASE TABLE" { "table".to_owned() } else { kind.to_lowercase() };
            format!("{kind} `{name}`")
        })
        .collect();
    if !foreign.is_empty() {
        let n = foreign.len();
        let mut named: Vec<String> = foreign.into_iter().take(10).collect();
        if n > named.len() {
            named.push(format!("{} more", n - named.len()));
        }
        return Err(MigrateError::Foreign(named.join(", ")));
    }
    if !names.is_empty() && !names.iter().any(|(name, _)| name == "schema_version") {
        return Err(MigrateError::Foreign(
            "a journal's tables without their `schema_version` table".to_owned(),
        ));
    }
    Ok(())
}

/// Creates the schema if needed and applies the migrations it lacks, in one transaction under
/// an advisory lock so that stores opening it at once migrate it once.
pub(crate) fn migrate(client: &mut Client, schema: &str, quoted: &str) -> Result<(), MigrateError> {
    use MigrateError::Driver;
    let mut tx = client.transaction().map_err(|e| Driver("beginning the migration", e))?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('stepjournal schema ' || $1))", &[&schema])
        .map_err(|e| Driver("taking the migration lock", e))?;
    refuse_foreign(&mut tx, schema)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted};
         CREATE TABLE IF NOT EXISTS {quoted}.schema_version (version INTEGER NOT NULL);"
    ))
    .map_err(|e| Driver("creating the schema", e))?;
    let current: Option<i32> = tx
        .query_one(&format!("SELECT max(version) FROM {quoted}.schema_version"), &[])
        .and_then(|row| row.try_get(0))
        .map_err(|e| Driver("reading the schema version", e))?;
    let current = current.unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(MigrateError::Newer(current));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        tx.batch_execute(&sql.replace("{s}", quoted))
            .map_err(|e| Driver("applying a schema migration", e))?;
        let version = i as i32 + 1;
        tx.execute(&format!("INSERT INTO {quoted}.schema_version VALUES ($1)"), &[&version])
            .map_err(|e| Driver("recording the schema version", e))?;
    }
    tx.commit().map_err(|e| Driver("committing the migration", e))
}

/// For a read-only store: checks that the schema exists at this build's version, changing
/// nothing. `Ok(None)` when the schema or its version table is missing.
pub(crate) fn check(
    client: &mut Client,
    schema: &str,
    quoted: &str,
) -> Result<Option<i32>, MigrateError> {
    use MigrateError::Driver;
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
             WHERE table_schema = $1 AND table_name = 'schema_version')",
            &[&schema],
        )
        .and_then(|row| row.try_get(0))
        .map_err(|e| Driver("looking for the schema", e))?;
    if !exists {
        return Ok(None);
    }
    let current: Option<i32> = client
        .query_one(&format!("SELECT max(version) FROM {quoted}.schema_version"), &[])
        .and_then(|row| row.try_get(0))
        .map_err(|e| Driver("reading the schema version", e))?;
    Ok(Some(current.unwrap_or(0)))
}

/// The statements of one connection, prepared when it opens.
#[derive(Debug)]
pub(crate) struct Statements {
    /// `$1` session, `$2` expected, `$3` next, `$4` token, `$5` times, `$6` kinds, `$7` records.
    /// Returns the number of events inserted: all of them, or 0 when the tail was not `$2`.
    pub append: Statement,
    /// `$1` session: the next sequence number, if the session exists.
    pub tail: Statement,
    /// `$1` session, `$2` start, `$3` end: `(seq, record)` in order.
    pub read: Statement,
    /// Every session with events, sorted.
    pub sessions: Statement,
    /// `$1` session: locks its head row (waiting for a writer that holds it).
    pub lock_head: Statement,
    /// `$1` session: inserts a head row at 0 unless one exists, waiting for an uncommitted
    /// insert of the same session to end. Used only in a transaction rolled back after.
    pub claim_head: Statement,
    /// `$1` session, `$2` seq: the token of the batch that starts there.
    pub token_at: Statement,
    /// `$1` session: deletes its events.
    pub delete_events: Statement,
    /// `$1` session: deletes its head row.
    pub delete_head: Statement,
}

impl Statements {
    pub(crate) fn prepare(client: &mut Client, s: &str) -> Result<Self, postgres::Error> {
        let mut p = |sql: String, types: &[Type]| client.prepare_typed(&sql, types);
        Ok(Statements {
            append: p(
                format!(
                    "WITH upd AS (
                         UPDATE {s}.sessions SET next_seq = $3
                         WHERE session = $1 AND next_seq = $2
                         RETURNING 1
                     ), ins AS (
                         INSERT INTO {s}.sessions (session, next_seq)
                         SELECT $1, $3 WHERE $2 = 0
                         ON CONFLICT (session) DO NOTHING
                         RETURNING 1
                     ), ev AS (
                         INSERT INTO {s}.events (session, seq, at, kind, record, token)
                         SELECT $1, $2 + u.n - 1, u.at, u.kind, u.record,
                                CASE WHEN u.n = 1 THEN $4 END
                         FROM unnest($5::int8[], $6::int2[], $7::bytea[])
                              WITH ORDINALITY AS u(at, kind, record, n)
                         WHERE EXISTS (SELECT 1 FROM upd) OR EXISTS (SELECT 1 FROM ins)
                         RETURNING 1
                     )
                     SELECT count(*) FROM ev"
                ),
                &[
                    Type::TEXT,
                    Type::INT8,
                    Type::INT8,
                    Type::BYTEA,
                    Type::INT8_ARRAY,
                    Type::INT2_ARRAY,
                    Type::BYTEA_ARRAY,
                ],
            )?,
            tail: p(
                format!("SELECT next_seq FROM {s}.sessions WHERE session = $1"),
                &[Type::TEXT],
            )?,
            read: p(
                format!(
                    "SELECT seq, record FROM {s}.events
                     WHERE session = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
                ),
                &[Type::TEXT, Type::INT8, Type::INT8],
            )?,
            sessions: p(
                format!("SELECT session FROM {s}.sessions WHERE next_seq > 0 ORDER BY session"),
                &[],
            )?,
            lock_head: p(
                format!("SELECT next_seq FROM {s}.sessions WHERE session = $1 FOR UPDATE"),
                &[Type::TEXT],
            )?,
            claim_head: p(
                format!(
                    "INSERT INTO {s}.sessions (session, next_seq) VALUES ($1, 0)
                     ON CONFLICT (session) DO NOTHING"
                ),
                &[Type::TEXT],
            )?,
            token_at: p(
                format!("SELECT token FROM {s}.events WHERE session = $1 AND seq = $2"),
                &[Type::TEXT, Type::INT8],
            )?,
            delete_events: p(format!("DELETE FROM {s}.events WHERE session = $1"), &[Type::TEXT])?,
            delete_head: p(format!("DELETE FROM {s}.sessions WHERE session = $1"), &[Type::TEXT])?,
        })
    }
}
