//! PostgreSQL clusters of a test's own: a primary and a streaming standby (PostgreSQL's `initdb`,
//! `pg_ctl`, `pg_basebackup`, run as the `postgres` user when the test runs as root), on free
//! loopback ports, in a temporary directory, stopped when dropped; and a [`Pair`] of them failed
//! over: the primary killed with SIGKILL, the standby promoted, a new standby built from it. The
//! shared server is not touched.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stepjournal_tests::pg::is_root;

/// PostgreSQL's server binaries: `pg_config --bindir`, else Debian's directory.
pub fn bin_dir() -> Option<PathBuf> {
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
pub fn pg(bin: &Path, program: &str, args: &[&str]) -> std::process::Output {
    let root = is_root();
    let mut command = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    };
    command.args(args).stdin(Stdio::null()).output().expect("the server binary runs")
}

pub fn ok(out: std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One cluster of this test.
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    pub port: u16,
    running: bool,
}

impl Cluster {
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new primary: `synchronous` names every standby as synchronous.
    pub fn primary(bin: &Path, root: &Path, name: &str, port: u16, synchronous: bool) -> Cluster {
        let data = root.join(name);
        ok(
            pg(bin, "initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]),
            "initdb",
        );
        let mut c = Cluster { bin: bin.to_owned(), data, port, running: false };
        c.configure(synchronous);
        c.start();
        c
    }

    /// A streaming standby of `primary`, from its base backup.
    pub fn standby_of(
        primary: &Cluster,
        root: &Path,
        name: &str,
        port: u16,
        synchronous: bool,
    ) -> Cluster {
        let data = root.join(name);
        let from = primary.port.to_string();
        ok(
            pg(
                &primary.bin,
                "pg_basebackup",
                &["-h", "127.0.0.1", "-p", &from, "-U", "postgres", "-D", data.to_str().unwrap()]
                    .into_iter()
                    .chain(["-R", "-X", "stream", "-c", "fast"])
                    .collect::<Vec<_>>(),
            ),
            "pg_basebackup",
        );
        let mut c = Cluster { bin: primary.bin.clone(), data, port, running: false };
        c.configure(synchronous);
        c.start();
        c
    }

    pub fn configure(&mut self, synchronous: bool) {
        // Each cluster's socket (and its lock file) in a directory of its own beside its data
        // (a base backup copies the data directory): a new cluster on a killed one's port finds
        // no lock file left by it.
        let sockets = self.data.with_extension("sockets");
        std::fs::create_dir(&sockets).unwrap();
        if is_root() {
            let _ = Command::new("chown").arg("postgres").arg(&sockets).status();
        }
        let sockets = sockets.to_str().unwrap().to_owned();
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

    pub fn start(&mut self) {
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
    pub fn kill(&mut self) {
        let pid = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_owned();
        let _ = Command::new("kill").args(["-9", &pid]).status();
        // The backends exit once they see their postmaster gone.
        std::thread::sleep(Duration::from_millis(200));
        self.running = false;
    }

    pub fn promote(&self) {
        ok(
            pg(&self.bin, "pg_ctl", &["-D", self.data.to_str().unwrap(), "-w", "promote"]),
            "promote",
        );
    }

    pub fn stop(&mut self) {
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
    pub fn wait_for_standby(&self, state: &str) {
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

/// The server binaries, or `None` (the test then says it is skipped; under `CI=true` it fails).
pub fn server_binaries() -> Option<PathBuf> {
    let bin = bin_dir();
    if bin.is_none() {
        assert!(std::env::var("CI").is_err(), "CI=true: PostgreSQL's server binaries are missing");
        eprintln!("skipped: PostgreSQL's server binaries (initdb, pg_ctl) are not installed");
    }
    bin
}

/// A primary and its streaming standby, failed over as often as a test asks. The clusters take
/// turns on three loopback ports (a new standby takes the port of the primary killed before it),
/// and the URL names all three (`target_session_attrs=read-write`): a client started before any
/// failover reaches whichever cluster is primary after any number of them.
pub struct Pair {
    pub primary: Cluster,
    pub standby: Cluster,
    synchronous: bool,
    ports: [u16; 3],
    built: usize,
    root: tempfile::TempDir,
}

impl Pair {
    /// A primary and a standby, synchronous (every standby named in
    /// `synchronous_standby_names`) or asynchronous, the standby streaming.
    pub fn start(bin: &Path, synchronous: bool) -> Pair {
        let root = tempfile::tempdir().unwrap();
        if is_root() {
            let _ =
                Command::new("chown").args(["postgres", root.path().to_str().unwrap()]).status();
        }
        let ports = [free_port(), free_port(), free_port()];
        let primary = Cluster::primary(bin, root.path(), "c0", ports[0], synchronous);
        let standby = Cluster::standby_of(&primary, root.path(), "c1", ports[1], synchronous);
        let pair = Pair { primary, standby, synchronous, ports, built: 2, root };
        pair.primary.wait_for_standby(pair.state());
        pair
    }

    fn state(&self) -> &'static str {
        if self.synchronous { "sync" } else { "async" }
    }

    /// The three hosts; `database` on them.
    pub fn url(&self, database: &str) -> String {
        let [a, b, c] = self.ports;
        format!(
            "postgres://postgres@127.0.0.1:{a},127.0.0.1:{b},127.0.0.1:{c}/{database}\
             ?target_session_attrs=read-write&connect_timeout=2&resolve_timeout=30000"
        )
    }

    /// Kills the primary (SIGKILL), promotes the standby and builds a new standby of it at once,
    /// on the killed primary's port: with synchronous replication the promoted standby's commits
    /// wait until one streams. Returns how long the pair had no primary that could commit.
    pub fn fail_over(&mut self) -> Duration {
        let started = Instant::now();
        self.primary.kill();
        let port = self.primary.port;
        self.standby.promote();
        let name = format!("c{}", self.built);
        self.built += 1;
        let fresh =
            Cluster::standby_of(&self.standby, self.root.path(), &name, port, self.synchronous);
        self.standby.wait_for_standby(self.state());
        let old = std::mem::replace(&mut self.primary, std::mem::replace(&mut self.standby, fresh));
        drop(old);
        started.elapsed()
    }
}
