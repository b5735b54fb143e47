//! The PostgreSQL schema's migrations, and the guard that lets stores opening one schema at once
//! migrate it once, with no advisory lock (missing or a no-op on some Postgres-wire distributed
//! databases):
//!
//! 1. one transaction creates what the guard needs if it is absent (`CREATE ... IF NOT EXISTS`)
//!    and claims the guard's row (`INSERT ... ON CONFLICT DO NOTHING`); it is run again when
//!    racing creators collide (a unique violation, a duplicate schema or table, a
//!    serialization failure);
//! 2. a second transaction locks that row (`SELECT ... FOR UPDATE`), so migrators take turns,
//!    reads the version and applies the migrations it lacks.
//!
//! A schema already at this build's version is only read. A schema that holds tables or views
//! not the store's is refused before anything is created in it.

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Transaction};

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
    // 2: the token of the session's last batch moves to its head row, written by the statement
    // that moves the head: one token per session, replaced by every append, instead of one per
    // batch kept forever. `events.token` is no longer written (tokens earlier builds wrote stay
    // there, unread).
    r#"ALTER TABLE {s}.sessions ADD COLUMN token BYTEA;"#,
    // 3: the session's head beside its tail, moved by every append from what its batch does
    // (no fold of the log to learn it): the last append time, the state of the last run
    // (`run_state` NULL: not known, for the sessions written before this version; 0 no run,
    // 1 open, 2 ended, with `run_id` and `outcome`), whether an answer was appended after the
    // run ended suspended, and the lease of the process running it (`lease_expires` in unix
    // ms by the server's clock). `IF NOT EXISTS`: a schema half-way between versions (taken
    // back by hand) migrates all the same. The last append time of the sessions already
    // stored is read from their last event.
    r#"ALTER TABLE {s}.sessions
        ADD COLUMN IF NOT EXISTS last_at BIGINT,
        ADD COLUMN IF NOT EXISTS run_state SMALLINT,
        ADD COLUMN IF NOT EXISTS run_id TEXT,
        ADD COLUMN IF NOT EXISTS outcome TEXT,
        ADD COLUMN IF NOT EXISTS answered BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN IF NOT EXISTS lease_owner TEXT,
        ADD COLUMN IF NOT EXISTS lease_run TEXT,
        ADD COLUMN IF NOT EXISTS lease_expires BIGINT;
    UPDATE {s}.sessions AS h SET last_at = e.at FROM {s}.events AS e
        WHERE e.session = h.session AND e.seq = h.next_seq - 1 AND h.last_at IS NULL;"#,
    // 4: the `snapshot` rows (kind 17) indexed by place, so that a read from a session's newest
    // snapshot finds it as the last entry of the session's in this index, whatever the length
    // of its history. The condition names the literal kind, as the read does (a partial index
    // serves only a query whose condition implies its own). Built in the migration's
    // transaction, which holds off appends meanwhile. `IF NOT EXISTS` as for 3.
    r#"CREATE INDEX IF NOT EXISTS events_snapshots ON {s}.events (session, seq) WHERE kind = 17;"#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The tables of a journal store's schema (its index, `events_snapshots`, is no table: the
/// check for foreign relations does not see it).
const OURS: [&str; 4] = ["sessions", "events", "schema_version", "schema_lock"];

/// How many times the guard's creation is run again after colliding with a racing creator.
const GUARD_TRIES: u32 = 20;

/// Why a schema could not be brought up to date.
#[derive(Debug)]
pub(crate) enum MigrateError {
    Driver(&'static str, tokio_postgres::Error),
    Newer(i32),
    /// The schema holds relations that are not a journal store's: what was found.
    Foreign(String),
}

/// Creates the schema if needed and applies the migrations it lacks (see the [module
/// documentation](self)).
pub(crate) async fn migrate(
    client: &mut Client,
    schema: &str,
    quoted: &str,
) -> Result<(), MigrateError> {
    use MigrateError::Driver;
    refuse_foreign(client, schema).await?;
    if check(client, schema, quoted).await? == Some(SCHEMA_VERSION)
        && has_guard(client, schema).await?
    {
        return Ok(());
    }
    create_guard(client, quoted).await?;
    let mut attempt = 0;
    loop {
        match migrate_locked(client, quoted).await {
            Err(Driver(_, e)) if collided(&e) && attempt < GUARD_TRIES => {
                attempt += 1;
                tokio::time::sleep(super::shared::backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

/// Whether `e` is a collision with a racing migrator, worth running the transaction again.
fn collided(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        [
            SqlState::UNIQUE_VIOLATION,
            SqlState::DUPLICATE_SCHEMA,
            SqlState::DUPLICATE_TABLE,
            SqlState::DUPLICATE_OBJECT,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(db.code())
    })
}

/// Whether the schema holds the guard's table.
async fn has_guard(client: &mut Client, schema: &str) -> Result<bool, MigrateError> {
    // Unnamed, in one round trip (as every statement outside a transaction here): behind a
    // transaction pooler a statement prepared in one round trip may be gone by the next.
    client
        .query_typed_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
             WHERE table_schema = $1 AND table_name = 'schema_lock')",
            &[(&schema, Type::TEXT)],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| MigrateError::Driver("looking for the migration guard", e))
}

/// Creates the schema, its version table and the guard's table and row, if absent.
async fn create_guard(client: &mut Client, quoted: &str) -> Result<(), MigrateError> {
    use MigrateError::Driver;
    let sql = format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted};
         CREATE TABLE IF NOT EXISTS {quoted}.schema_version (version INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS {quoted}.schema_lock (id INTEGER PRIMARY KEY);
         INSERT INTO {quoted}.schema_lock (id) VALUES (1) ON CONFLICT (id) DO NOTHING;"
    );
    let mut attempt = 0;
    loop {
        let result = async {
            let tx = client.transaction().await?;
            tx.batch_execute(&sql).await?;
            tx.commit().await
        }
        .await;
        match result {
            Ok(()) => return Ok(()),
            Err(e) if collided(&e) && attempt < GUARD_TRIES => {
                attempt += 1;
                tokio::time::sleep(super::shared::backoff(attempt)).await;
            }
            Err(e) => return Err(Driver("creating the schema", e)),
        }
    }
}

/// Under the guard's row lock: reads the version and applies the migrations the schema lacks.
async fn migrate_locked(client: &mut Client, quoted: &str) -> Result<(), MigrateError> {
    use MigrateError::Driver;
    let mut tx = client.transaction().await.map_err(|e| Driver("beginning the migration", e))?;
    tx.query_one(&format!("SELECT id FROM {quoted}.schema_lock WHERE id = 1 FOR UPDATE"), &[])
        .await
        .map_err(|e| Driver("taking the migration guard's row lock", e))?;
    let current = version(&mut tx, quoted).await?;
    if current > SCHEMA_VERSION {
        return Err(MigrateError::Newer(current));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        tx.batch_execute(&sql.replace("{s}", quoted))
            .await
            .map_err(|e| Driver("applying a schema migration", e))?;
        let version = i as i32 + 1;
        tx.execute(&format!("INSERT INTO {quoted}.schema_version VALUES ($1)"), &[&version])
            .await
            .map_err(|e| Driver("recording the schema version", e))?;
    }
    tx.commit().await.map_err(|e| Driver("committing the migration", e))
}

async fn version(tx: &mut Transaction<'_>, quoted: &str) -> Result<i32, MigrateError> {
    let current: Option<i32> = tx
        .query_one(&format!("SELECT max(version) FROM {quoted}.schema_version"), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| MigrateError::Driver("reading the schema version", e))?;
    Ok(current.unwrap_or(0))
}

/// Refuses a schema holding tables or views that are not a journal store's, or a journal's
/// tables without their `schema_version`. A missing or empty schema passes.
async fn refuse_foreign(client: &mut Client, schema: &str) -> Result<(), MigrateError> {
    let failed = |e| MigrateError::Driver("listing the schema's tables", e);
    let rows = client
        .query_typed(
            "SELECT table_name::text, table_type::text FROM information_schema.tables \
             WHERE table_schema = $1 ORDER BY table_name",
            &[(&schema, Type::TEXT)],
        )
        .await
        .map_err(failed)?;
    let mut names = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row.try_get(0).map_err(failed)?;
        let kind: String = row.try_get(1).map_err(failed)?;
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
    let journal = names.iter().any(|(name, _)| name == "sessions" || name == "events");
    if journal && !names.iter().any(|(name, _)| name == "schema_version") {
        return Err(MigrateError::Foreign(
            "a journal's tables without their `schema_version` table".to_owned(),
        ));
    }
    Ok(())
}

/// For a read-only store: checks that the schema exists at this build's version, changing
/// nothing. `Ok(None)` when the schema or its version table is missing.
pub(crate) async fn check(
    client: &mut Client,
    schema: &str,
    quoted: &str,
) -> Result<Option<i32>, MigrateError> {
    use MigrateError::Driver;
    let exists: bool = client
        .query_typed_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
             WHERE table_schema = $1 AND table_name = 'schema_version')",
            &[(&schema, Type::TEXT)],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| Driver("looking for the schema", e))?;
    if !exists {
        return Ok(None);
    }
    let current: Option<i32> = client
        .query_typed_one(&format!("SELECT max(version) FROM {quoted}.schema_version"), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| Driver("reading the schema version", e))?;
    Ok(Some(current.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_index_names_the_snapshot_kind() {
        let condition = format!("WHERE kind = {};", stepjournal_codec::EventKind::Snapshot.code());
        assert!(
            MIGRATIONS.iter().any(|m| m.contains("events_snapshots") && m.ends_with(&condition))
        );
    }
}
