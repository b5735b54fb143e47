//! The PostgreSQL store in the shapes Postgres-wire distributed databases accept: no advisory
//! lock in its migration, one modification of each table per statement (checked on the
//! statements' text in the backend's unit tests), and one batch token per session instead of
//! one per batch kept forever. Run against PostgreSQL (no distributed engine can be installed
//! here); the lost-connection and race suites in `tests/` cover the resolution through the
//! head row's token.

mod cli_support;

use std::sync::Barrier;

use cli_support::*;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore, SCHEMA_VERSION};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId, Stamped, UnixMillis};

fn server() -> String {
    std::env::var("STEPJOURNAL_PG_URL").unwrap()
}

fn client() -> postgres::Client {
    postgres::Client::connect(&server(), postgres::NoTls).unwrap()
}

fn with(url: &str, query: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{query}")
}

fn stamped(n: u64) -> Vec<Stamped> {
    (0..n).map(|i| Stamped::at(UnixMillis(T0 + i), message(&format!("m{i}")))).collect()
}

/// A schema shadowing `pg_advisory_xact_lock` with a function that fails, and the search path
/// that finds it first: a database where advisory locks are missing.
struct NoAdvisoryLocks {
    schema: String,
}

impl NoAdvisoryLocks {
    fn new() -> Self {
        let schema = format!("sj_noadvisory_{}", std::process::id());
        client()
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {schema};
                 CREATE OR REPLACE FUNCTION {schema}.pg_advisory_xact_lock(bigint) RETURNS void
                 LANGUAGE plpgsql AS $$ BEGIN
                     RAISE EXCEPTION 'advisory locks are not supported' USING ERRCODE = '0A000';
                 END $$;"
            ))
            .unwrap();
        NoAdvisoryLocks { schema }
    }

    /// `url` with its connections' search path finding the failing function first.
    fn url(&self, url: &str) -> String {
        with(url, &format!("options=-c%20search_path%3D{},pg_catalog,public", self.schema))
    }
}

impl Drop for NoAdvisoryLocks {
    fn drop(&mut self) {
        let _ = client().batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
    }
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn stores_opening_one_new_schema_at_once_migrate_it_once_without_advisory_locks() {
    // Defect: the migration took `pg_advisory_xact_lock`, missing or a no-op on some
    // Postgres-compatible distributed databases.
    let shadow = NoAdvisoryLocks::new();
    let place = pg_place();
    let url = shadow.url(&place.url);
    let barrier = Barrier::new(6);
    let stores: Vec<PostgresStore> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    PostgresStore::connect(&url, PostgresOptions::default())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    let s = SessionId::new("shared").unwrap();
    stores[2].append(&s, Seq(0), &stamped(3), Durability::Synced).unwrap();
    for store in &stores {
        assert_eq!(store.tail(&s).unwrap(), Seq(3));
    }
    let schema = stores[0].schema().to_owned();
    let versions: Vec<i32> = client()
        .query(&format!("SELECT version FROM \"{schema}\".schema_version ORDER BY version"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>(), "each migration once");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_session_keeps_one_batch_token_however_many_batches_it_has() {
    // Defect: every batch's token was kept forever on its first event's row.
    let place = pg_place();
    let store = PostgresStore::connect(&place.url, PostgresOptions::default()).unwrap();
    let schema = store.schema().to_owned();
    let s = SessionId::new("many").unwrap();
    for i in 0..20 {
        store.append(&s, Seq(i * 2), &stamped(2), Durability::Buffered).unwrap();
    }
    let mut c = client();
    let kept: i64 = c
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".events WHERE token IS NOT NULL"),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(kept, 0, "no token on the events' rows");
    let head: Option<Vec<u8>> = c
        .query_one(&format!("SELECT token FROM \"{schema}\".sessions WHERE session = 'many'"), &[])
        .unwrap()
        .get(0);
    assert_eq!(head.map(|t| t.len()), Some(16), "the last batch's token on the head row");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_schema_an_earlier_build_wrote_is_migrated_and_goes_on_where_it_was() {
    // The schema as version 1 left it: a session of 3 events with its token on an event row.
    let place = pg_place();
    let schema = place.url.rsplit_once("schema=").unwrap().1.to_owned();
    let first = PostgresStore::connect(&place.url, PostgresOptions::default()).unwrap();
    let s = SessionId::new("old").unwrap();
    first.append(&s, Seq(0), &stamped(3), Durability::Synced).unwrap();
    drop(first);
    let mut c = client();
    c.batch_execute(&format!(
        "ALTER TABLE \"{schema}\".sessions DROP COLUMN token;
         DELETE FROM \"{schema}\".schema_version WHERE version > 1;
         UPDATE \"{schema}\".events SET token = '\\x00112233445566778899aabbccddeeff'
             WHERE session = 'old' AND seq = 0;"
    ))
    .unwrap();
    let store = PostgresStore::connect(&place.url, PostgresOptions::default()).unwrap();
    store.append(&s, Seq(3), &stamped(2), Durability::Synced).unwrap();
    assert_eq!(store.read_all(&s).unwrap().len(), 5);
    let version: i32 = c
        .query_one(&format!("SELECT max(version) FROM \"{schema}\".schema_version"), &[])
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
}
