//! The PostgreSQL server the suites run against (`STEPJOURNAL_PG_URL`): its URL and address,
//! URLs through a proxy or a pooler in front of it, and the connection-kill loop (the audit's
//! `pg_terminate_backend` loop) that the backend's and the command's tests run.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};

/// The server's URL, from `STEPJOURNAL_PG_URL`.
pub fn url() -> String {
    std::env::var("STEPJOURNAL_PG_URL")
        .expect("STEPJOURNAL_PG_URL names the PostgreSQL server these tests run against")
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

/// Whether this process runs as root: PostgreSQL's server and PgBouncer refuse to, so a test
/// runs them as the `postgres` user then.
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
