//! The PostgreSQL backend behind PgBouncer in transaction mode (`?pooler=transaction`): the
//! backend conformance suite and the lease suite, each test through a PgBouncer of its own whose
//! pool of 3 server connections hands consecutive transactions of one client to different
//! server connections; no statement is prepared and no session setting made. Needs
//! `STEPJOURNAL_PG_URL` and PgBouncer (`.ci/run` installs Debian's); without them every test is
//! reported ignored, with the reason.
#![cfg(feature = "postgres")]

mod support;

use std::ops::Deref;

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_tests::pgbouncer::Bouncer;
use support::pg::{self, PgFixture};

/// A store in a fresh schema through a PgBouncer of its own (the store, then the pooler, go
/// when it is dropped: the schema is dropped through the pooler).
struct Pooled {
    fixture: PgFixture,
    _bouncer: Bouncer,
}

impl Deref for Pooled {
    type Target = PostgresStore;
    fn deref(&self) -> &PostgresStore {
        &self.fixture
    }
}

fn pooled(tag: &str) -> Pooled {
    let bouncer = Bouncer::start();
    let fixture = PgFixture::at(&bouncer.url(), &pg::fresh_schema(tag), PostgresOptions::default());
    Pooled { fixture, _bouncer: bouncer }
}

stepjournal_tests::backend_conformance!(
    #[cfg_attr(
        not(stepjournal_pgbouncer),
        ignore = "STEPJOURNAL_PG_URL is not set or PgBouncer is not installed: the pooled suite needs both"
    )]
    || pooled("pool")
);

stepjournal_tests::backend_lease_conformance!(
    #[cfg_attr(
        not(stepjournal_pgbouncer),
        ignore = "STEPJOURNAL_PG_URL is not set or PgBouncer is not installed: the pooled suite needs both"
    )]
    || pooled("poollease")
);
