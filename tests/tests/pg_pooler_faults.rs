//! The PostgreSQL store's crash properties under the connection-kill loop, through a PgBouncer
//! of each test's own in `pool_mode = transaction` (`?pooler=transaction`): the server ends
//! every server connection that runs the store's transactions, round after round, in a
//! transaction (PgBouncer passes the server's `FATAL` on and ends the client's connection) or
//! idle in the pool; the pool of 3 server connections hands consecutive transactions of one
//! client to different ones. The same properties as on a direct connection (`pg_terminate.rs`,
//! written once in `support/pg_faults.rs`). Needs `STEPJOURNAL_PG_URL` and PgBouncer; without
//! them every test is reported ignored, with the reason.
#![cfg(feature = "postgres")]

mod support;

use support::pg_faults::{self, Route};

#[test]
#[cfg_attr(
    not(stepjournal_pgbouncer),
    ignore = "STEPJOURNAL_PG_URL is not set or PgBouncer is not installed: the pooled suite needs both"
)]
fn server_connections_ended_behind_the_pooler_lose_no_acknowledged_append_and_duplicate_none() {
    pg_faults::writers_under_kills(&Route::pooled(), "pool_terminate");
}

#[test]
#[cfg_attr(
    not(stepjournal_pgbouncer),
    ignore = "STEPJOURNAL_PG_URL is not set or PgBouncer is not installed: the pooled suite needs both"
)]
fn a_start_up_and_its_lease_keeper_behind_the_pooler_under_connection_kills_recover_every_session_once()
 {
    pg_faults::start_up_under_kills(&Route::pooled(), "pool_startup_kill");
}
