//! A PostgreSQL store in a fresh schema, dropped when the fixture is.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
pub use stepjournal_tests::pg::{Killed, kill_loop, server_addr, url, url_via, with_param};

/// The reason PostgreSQL tests are ignored when no server is named.
pub const NO_SERVER: &str = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server";

/// A schema name no other test (or test process) uses.
pub fn fresh_schema(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("sjt_{tag}_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// A store in its own schema; the schema is dropped with the fixture.
pub struct PgFixture {
    store: Option<PostgresStore>,
    owner: bool,
}

impl PgFixture {
    /// A store in a fresh schema at `url` (or the server's URL).
    pub fn new(tag: &str) -> Self {
        Self::at(&url(), &fresh_schema(tag), PostgresOptions::default())
    }

    /// A store in `schema` at `url`.
    pub fn at(url: &str, schema: &str, options: PostgresOptions) -> Self {
        let store = PostgresStore::connect(&with_param(url, "schema", schema), options);
        PgFixture { store: Some(store.unwrap()), owner: true }
    }

    /// A fresh schema owned by a fixture (dropped with it), and a second store on it to hand
    /// to a journal (an `Arc` the fixture does not hold).
    pub fn with_handle(tag: &str) -> (Self, PostgresStore) {
        let schema = fresh_schema(tag);
        let fixture = Self::at(&url(), &schema, PostgresOptions::default());
        let handle = with_param(&url(), "schema", &schema);
        (fixture, PostgresStore::connect(&handle, PostgresOptions::default()).unwrap())
    }

    /// A second store on a schema another fixture owns: dropping it leaves the schema.
    pub fn guest(url: &str, schema: &str, options: PostgresOptions) -> Self {
        let mut fixture = Self::at(url, schema, options);
        fixture.owner = false;
        fixture
    }
}

impl Deref for PgFixture {
    type Target = PostgresStore;
    fn deref(&self) -> &PostgresStore {
        self.store.as_ref().unwrap()
    }
}

impl Drop for PgFixture {
    fn drop(&mut self) {
        if let Some(store) = self.store.take().filter(|_| self.owner) {
            let schema = store.schema().to_owned();
            if let Err(e) = store.drop_schema() {
                eprintln!("could not drop test schema {schema}: {e}");
            }
        }
    }
}
