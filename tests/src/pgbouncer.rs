//! A PgBouncer of the test's own in front of the server, in `pool_mode = transaction` with a
//! pool of 3 server connections (so consecutive transactions of one client run on different
//! ones), on a free loopback port; stopped when dropped. Run as the `postgres` user when the
//! test runs as root (PgBouncer refuses root).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pg;

#[derive(Debug)]
pub struct Bouncer {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    let on_path =
        Command::new("pgbouncer").arg("--version").output().is_ok_and(|o| o.status.success());
    if on_path { PathBuf::from("pgbouncer") } else { PathBuf::from("/usr/sbin/pgbouncer") }
}

/// The `postgres` user's user (`-u`) or group (`-g`) id.
fn postgres_id(which: &str) -> u32 {
    let out = Command::new("id").args([which, "postgres"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("the postgres user exists")
}

impl Bouncer {
    /// A pooler in front of the server.
    pub fn start() -> Bouncer {
        Self::start_to(pg::server_addr())
    }

    /// A pooler whose server connections go to `server` (the server, or a proxy in front of
    /// it).
    pub fn start_to(server: SocketAddr) -> Bouncer {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let users = dir.path().join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").unwrap();
        let ini = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={} port={}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 500\n\
                 unix_socket_dir =\nlogfile = {}\n\
                 ignore_startup_parameters = extra_float_digits,options\n",
                server.ip(),
                server.port(),
                users.display(),
                dir.path().join("pgbouncer.log").display(),
            ),
        )
        .unwrap();
        let mut command = Command::new(binary());
        if pg::is_root() {
            let _ = Command::new("chown")
                .args(["-R", "postgres", dir.path().to_str().unwrap()])
                .status();
            // PgBouncer itself as the child (not under `runuser`, which waits 2 s after passing
            // a signal on), so that stopping it is immediate.
            command.uid(postgres_id("-u")).gid(postgres_id("-g"));
        }
        let child = command
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < until, "pgbouncer did not listen on {addr} within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        Bouncer { child, addr, _dir: dir }
    }

    /// The pooler's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's URL through this pooler, with `pooler=transaction`.
    pub fn url(&self) -> String {
        pg::with_param(&pg::url_via(self.addr), "pooler", "transaction")
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        // SIGTERM: PgBouncer shuts down at once.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}
