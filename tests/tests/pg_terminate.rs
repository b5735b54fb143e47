//! The server ends the store's connections while several writers append (the audit's
//! connection-kill loop, bounded): `pg_terminate_backend` of every connection of the store,
//! round after round. No acknowledged append is lost, none lands twice, and every log stays
//! dense: a connection lost in the middle of an append is resolved through its batch token.
//! And a start-up with its lease keeper under the same loop. The properties are written once
//! in `support/pg_faults.rs`; `pg_pooler_faults.rs` runs them through a transaction pooler.
#![cfg(feature = "postgres")]

mod support;

use std::time::Duration;

use stepjournal_backends::postgres::PostgresOptions;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};
use stepjournal_tests::sample::stamped_numbered;
use stepjournal_tests::watchdog::Watchdog;
use support::pg::{self, PgFixture};
use support::pg_faults::{self, Route};

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn terminated_connections_lose_no_acknowledged_append_and_duplicate_none() {
    pg_faults::writers_under_kills(&Route::Direct, "terminate");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_connection_ended_while_its_statements_are_prepared_is_opened_again() {
    // The defect: a read, delete or lease call whose new connection the server ended while its
    // statements were being prepared returned the FATAL error at once, where docs/backends.md
    // says such a connection is retried like one lost before anything was sent (as appends
    // did).
    let schema = pg::fresh_schema("prepare_kill");
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let s = SessionId::new("s").unwrap();
    direct.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    let name = format!("sjt_prepare_kill_{}", std::process::id());
    let url = pg::with_param(&pg::url(), "application_name", &name);
    // A store with no connection open yet: its first call opens one and prepares statements.
    let store = PgFixture::guest(&url, &schema, PostgresOptions::default());
    let _watchdog = Watchdog::start("a connection ended while preparing", Duration::from_secs(120));
    // Preparing a statement over `events` waits while another transaction holds the table.
    let mut locker = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let mut hold = locker.transaction().unwrap();
    hold.batch_execute(&format!("LOCK TABLE \"{schema}\".events IN ACCESS EXCLUSIVE MODE"))
        .unwrap();
    let mut killer = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    std::thread::scope(|scope| {
        let reading = scope.spawn(|| store.read_all(&s));
        let waiting = loop {
            let rows = killer
                .query(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                     AND wait_event_type = 'Lock'",
                    &[&name],
                )
                .unwrap();
            if let Some(row) = rows.first() {
                break row.get::<_, i32>(0);
            }
            assert!(!reading.is_finished(), "the read ended before it waited on the lock");
            std::thread::sleep(Duration::from_millis(5));
        };
        let ended: bool =
            killer.query_one("SELECT pg_terminate_backend($1)", &[&waiting]).unwrap().get(0);
        assert!(ended, "the connection preparing its statements was ended");
        hold.commit().unwrap();
        let read = reading.join().unwrap();
        let log = read.unwrap_or_else(|e| panic!("the read was not retried: {e}"));
        assert_eq!(log.len(), 2);
    });
    // Its next calls run on the connection opened again.
    assert_eq!(store.tail(&s).unwrap(), Seq(2));
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_start_up_and_its_lease_keeper_under_connection_kills_recover_every_session_once() {
    pg_faults::start_up_under_kills(&Route::Direct, "startup_kill");
}
