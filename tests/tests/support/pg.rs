//! A PostgreSQL store in a fresh schema, dropped when the fixture is.

use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

/// The reason PostgreSQL tests are ignored when no server is named.
pub const NO_SERVER: &str = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server";

/// The server's URL, from `STEPJOURNAL_PG_URL`.
pub fn url() -> String {
    std::env::var("STEPJOURNAL_PG_URL")
        .expect("STEPJOURNAL_PG_URL names the PostgreSQL server these tests run against")
}

/// A schema name no other test (or test process) uses.
pub fn fresh_schema(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("sjt_{tag}_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// `url` with `key=value` added to its query.
pub fn with_param(url: &str, key: &str, value: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={value}")
}

/// The server URL split around its host and port: (`postgres://user@`, `host:port`, `/db?...`).
fn split_url() -> (String, String, String) {
    let url = url();
    let (scheme, rest) = url.split_once("://").expect("STEPJOURNAL_PG_URL is a postgres:// URL");
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(cut);
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h.to_owned()),
        None => (String::new(), authority.to_owned()),
    };
    let hostport = if hostport.contains(':') { hostport } else { format!("{hostport}:5432") };
    (format!("{scheme}://{user}"), hostport, tail.to_owned())
}

/// The server named by `STEPJOURNAL_PG_URL`.
pub fn server_addr() -> SocketAddr {
    split_url().1.to_socket_addrs().unwrap().next().unwrap()
}

/// The server's URL pointed at `addr` (a proxy) instead.
pub fn url_via(addr: SocketAddr) -> String {
    let (head, _, tail) = split_url();
    format!("{head}{addr}{tail}")
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

/// What a connection-kill loop ended.
#[derive(Debug, Default)]
pub struct Killed {
    /// Every connection it ended.
    pub all: AtomicU64,
    /// Those running a statement or in a transaction when it ended them (not idle).
    pub busy: AtomicU64,
}

/// The connection-kill loop: until `done`, ends every server connection whose
/// `application_name` is `name` (`pg_terminate_backend`), a round every `every(round)`, and
/// counts them in `killed`.
pub fn kill_loop(
    name: &str,
    done: &std::sync::atomic::AtomicBool,
    killed: &Killed,
    every: impl Fn(u64) -> std::time::Duration,
) {
    let mut killer = postgres::Client::connect(&url(), postgres::NoTls).unwrap();
    let mut round = 0u64;
    while !done.load(Ordering::SeqCst) {
        let rows = killer
            .query(
                "SELECT coalesce(state <> 'idle', false), pg_terminate_backend(pid) \
                 FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .unwrap();
        killed.all.fetch_add(rows.len() as u64, Ordering::SeqCst);
        let busy = rows.iter().filter(|r| r.get::<_, bool>(0)).count();
        killed.busy.fetch_add(busy as u64, Ordering::SeqCst);
        round += 1;
        std::thread::sleep(every(round));
    }
}
