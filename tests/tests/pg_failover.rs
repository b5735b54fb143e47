//! A primary with a synchronous streaming standby, killed with SIGKILL while 8 writers append
//! through a multi-host URL (`target_session_attrs=read-write`); the standby is promoted, the
//! writers go on against it, and a new synchronous standby is built from it before the next
//! kill. After every failover, every append acknowledged as `Synced` is on the new primary, in
//! place, and every log is dense; an append whose outcome was unknown is resolved by reading
//! the tail. The same with asynchronous replication counts what was lost.
//!
//! The clusters are this test's own (PostgreSQL's `initdb`, `pg_ctl`, `pg_basebackup`, run as the
//! `postgres` user when the test runs as root), on free loopback ports, in a temporary
//! directory, and stopped at the end; the shared server is not touched. Three failovers by
//! default; `STEPJOURNAL_FAILOVERS=N` runs N (the full run).
#![cfg(feature = "postgres")]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_backends::{AppendError, Durability, JournalStore};
use stepjournal_codec::{Record, Seq, SessionId};
use stepjournal_tests::sample::stamped_numbered;
use stepjournal_tests::watchdog::Watchdog;

const WRITERS: usize = 8;

/// PostgreSQL's server binaries: `pg_config --bindir`, else Debian's directory.
fn bin_dir() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok();
    let from_config = out
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let debian = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|dirs| {
        let mut versions: Vec<PathBuf> = dirs.flatten().map(|d| d.path().join("bin")).collect();
        versions.sort();
        versions.pop()
    });
    [from_config, debian].into_iter().flatten().find(|d| d.join("initdb").exists())
}

/// Runs a server binary as the `postgres` user when this process is root (the server refuses
/// to run as root), else as this user.
fn pg(bin: &Path, program: &str, args: &[&str]) -> std::process::Output {
    let root = rustix_is_root();
    let mut command = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    };
    command.args(args).stdin(Stdio::null()).output().expect("the server binary runs")
}

fn rustix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn ok(out: std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One cluster of this test.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    running: bool,
}

impl Cluster {
    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new primary: `synchronous` names every standby as synchronous.
    fn primary(bin: &Path, root: &Path, name: &str, synchronous: bool) -> Cluster {
        let data = root.join(name);
        ok(
            pg(bin, "initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]),
            "initdb",
        );
        let mut c = Cluster { bin: bin.to_owned(), data, port: free_port(), running: false };
        c.configure(synchronous);
        c.start();
        c
    }

    /// A streaming standby of `primary`, from its base backup.
    fn standby_of(primary: &Cluster, root: &Path, name: &str, synchronous: bool) -> Cluster {
        let data = root.join(name);
        let port = primary.port.to_string();
        ok(
            pg(
                &primary.bin,
                "pg_basebackup",
                &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-D", data.to_str().unwrap()]
                    .into_iter()
                    .chain(["-R", "-X", "stream", "-c", "fast"])
                    .collect::<Vec<_>>(),
            ),
            "pg_basebackup",
        );
        let mut c = Cluster { bin: primary.bin.clone(), data, port: free_port(), running: false };
        c.configure(synchronous);
        c.start();
        c
    }

    fn configure(&mut self, synchronous: bool) {
        let sockets = self.data.parent().unwrap().to_str().unwrap().to_owned();
        let names = if synchronous { "'*'" } else { "''" };
        let conf = format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{sockets}'\n\
             wal_level = replica\nmax_wal_senders = 10\nhot_standby = on\nfsync = on\n\
             synchronous_commit = on\nsynchronous_standby_names = {names}\n\
             wal_sender_timeout = 5s\nwal_receiver_timeout = 5s\n",
            self.port
        );
        let path = self.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&conf);
        std::fs::write(&path, text).unwrap();
    }

    fn start(&mut self) {
        let log = self.data.parent().unwrap().join(format!("{}.log", self.port));
        let out = pg(
            &self.bin,
            "pg_ctl",
            &["-D", self.data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "start"],
        );
        ok(out, "pg_ctl start");
        self.running = true;
    }

    /// SIGKILL of the postmaster: its children notice and exit, nothing is flushed.
    fn kill(&mut self) {
        let pid = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_owned();
        let _ = Command::new("kill").args(["-9", &pid]).status();
        // The backends exit once they see their postmaster gone.
        std::thread::sleep(Duration::from_millis(200));
        self.running = false;
    }

    fn promote(&self) {
        ok(
            pg(&self.bin, "pg_ctl", &["-D", self.data.to_str().unwrap(), "-w", "promote"]),
            "promote",
        );
    }

    fn stop(&mut self) {
        if self.running {
            let _ = pg(
                &self.bin,
                "pg_ctl",
                &["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"],
            );
            self.running = false;
        }
    }

    /// Waits until the primary has a standby streaming in `state` (`sync` or `async`).
    fn wait_for_standby(&self, state: &str) {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(mut c) = postgres::Client::connect(&self.url(), postgres::NoTls)
                && let Ok(rows) = c.query(
                    "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1",
                    &[&state],
                )
                && !rows.is_empty()
            {
                return;
            }
            assert!(Instant::now() < until, "no {state} standby of port {} after 60 s", self.port);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the writers' acknowledged appends were: each session's acknowledged tail and its
/// records as written.
type Acked = Vec<(SessionId, u64)>;

/// Appends from `WRITERS` threads to their own sessions until `stop`, through `url` (both
/// hosts); each returns its session and the tail acknowledged last. An append whose outcome is
/// unknown, or that failed, is followed by a read of the tail when the store answers again.
fn write(url: &str, round: usize, stop: &AtomicBool, unknown: &AtomicU64) -> Acked {
    let mut options = PostgresOptions::default();
    options.max_retries = 50;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let options = options.clone();
                scope.spawn(move || {
                    let store = connect(url, options);
                    let s = SessionId::new(format!("round-{round}-writer-{w}")).unwrap();
                    let mut tail = Seq(0);
                    let mut acked = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let batch = stamped_numbered(tail.get(), 1 + (w as u64 % 3));
                        match store.append(&s, tail, &batch, Durability::Synced) {
                            Ok(ack) => {
                                tail = ack.next;
                                acked = tail.get();
                            }
                            Err(e) => {
                                if matches!(e, AppendError::OutcomeUnknown { .. }) {
                                    unknown.fetch_add(1, Ordering::SeqCst);
                                }
                                // Learn where the log is once the (new) primary answers.
                                std::thread::sleep(Duration::from_millis(50));
                                if let Ok(t) = store.tail(&s) {
                                    tail = t;
                                }
                            }
                        }
                    }
                    (s, acked)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn connect(url: &str, options: PostgresOptions) -> PostgresStore {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match PostgresStore::connect(url, options.clone()) {
            Ok(store) => return store,
            Err(e) => {
                assert!(Instant::now() < until, "no primary to open {url} on: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Checks on `primary` that every session holds at least its acknowledged tail, each event as
/// written (`stamped_numbered`), dense from 0; returns the acknowledged events lost.
fn lost(primary: &Cluster, acked: &Acked) -> u64 {
    let store = connect(&primary.url(), PostgresOptions::default());
    let mut lost = 0;
    for (s, tail) in acked {
        let records: Vec<Record> = store.read_all(s).unwrap();
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.seq, Seq(i as u64), "{s}: the log is dense");
            assert_eq!(r.event, stamped_numbered(i as u64, 1)[0].event, "{s} seq {i} as written");
        }
        lost += tail.saturating_sub(records.len() as u64);
    }
    lost
}

/// `failovers` rounds: writers appending while the primary is killed and the standby
/// promoted; the acknowledged appends lost, over every round, and how many were unknown.
fn failovers(bin: &Path, failovers: usize, synchronous: bool) -> (u64, u64, u64) {
    let root = tempfile::tempdir().unwrap();
    if rustix_is_root() {
        let _ = Command::new("chown").args(["postgres", root.path().to_str().unwrap()]).status();
    }
    let mut primary = Cluster::primary(bin, root.path(), "c0", synchronous);
    let state = if synchronous { "sync" } else { "async" };
    let mut standby = Cluster::standby_of(&primary, root.path(), "c1", synchronous);
    primary.wait_for_standby(state);
    let (mut lost_total, mut acked_total, unknown) = (0u64, 0u64, AtomicU64::new(0));
    for round in 0..failovers {
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write\
             &connect_timeout=2&resolve_timeout=30000",
            primary.port, standby.port
        );
        let stop = AtomicBool::new(false);
        let kill_after = Duration::from_millis(300 + 137 * (round as u64 % 5));
        let next = format!("c{}", round + 2);
        let (acked, fresh) = std::thread::scope(|scope| {
            let writers = scope.spawn(|| write(&url, round, &stop, &unknown));
            std::thread::sleep(kill_after);
            primary.kill();
            standby.promote();
            // The promoted standby has no standby of its own: with synchronous replication its
            // commits wait until one streams, so one is built from it at once (the writers'
            // appends meanwhile wait, or fail and are retried).
            let fresh = Cluster::standby_of(&standby, root.path(), &next, synchronous);
            standby.wait_for_standby(state);
            // The writers go on against the new primary for a while.
            std::thread::sleep(Duration::from_millis(800));
            stop.store(true, Ordering::SeqCst);
            (writers.join().unwrap(), fresh)
        });
        acked_total += acked.iter().map(|(_, t)| t).sum::<u64>();
        lost_total += lost(&standby, &acked);
        // The promoted standby is the primary, the fresh one its standby; the old primary goes.
        let old = std::mem::replace(&mut primary, std::mem::replace(&mut standby, fresh));
        drop(old);
    }
    (lost_total, acked_total, unknown.load(Ordering::SeqCst))
}

/// The server binaries, or `None` (the test then says it is skipped; under `CI=true` it fails).
fn server_binaries() -> Option<PathBuf> {
    let bin = bin_dir();
    if bin.is_none() {
        assert!(std::env::var("CI").is_err(), "CI=true: PostgreSQL's server binaries are missing");
        eprintln!("skipped: PostgreSQL's server binaries (initdb, pg_ctl) are not installed");
    }
    bin
}

fn rounds() -> usize {
    std::env::var("STEPJOURNAL_FAILOVERS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_synchronous_standby_promoted_mid_load_holds_every_acknowledged_append() {
    let Some(bin) = server_binaries() else { return };
    let n = rounds();
    let _watchdog = Watchdog::start("the failovers", Duration::from_secs(60 + 40 * n as u64));
    let (lost, acked, unknown) = failovers(&bin, n, true);
    eprintln!(
        "synchronous standby: {n} failovers, {acked} acknowledged events checked on the new \
         primaries, {lost} lost, {unknown} appends of unknown outcome resolved by the tail"
    );
    assert_eq!(lost, 0, "an acknowledged append was lost with synchronous replication");
    assert!(acked > 0, "the writers appended");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn an_asynchronous_standby_promoted_mid_load_is_counted_for_what_it_loses() {
    let Some(bin) = server_binaries() else { return };
    let n = rounds();
    let _watchdog = Watchdog::start("the failovers", Duration::from_secs(60 + 40 * n as u64));
    let (lost, acked, unknown) = failovers(&bin, n, false);
    // Not a promise: what asynchronous replication may lose, said and counted.
    eprintln!(
        "asynchronous standby: {n} failovers, {acked} acknowledged events checked, {lost} lost, \
         {unknown} of unknown outcome"
    );
    assert!(acked > 0, "the writers appended");
}
