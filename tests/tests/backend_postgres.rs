//! The backend conformance suite on PostgreSQL, each test in a fresh schema dropped after.
//! Needs `STEPJOURNAL_PG_URL`; without it every test is reported ignored, with the reason.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use support::pg::PgFixture;

stepjournal_tests::backend_conformance!(
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    || PgFixture::new("conf")
);
