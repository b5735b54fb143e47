//! Turns on `cfg(stepjournal_pg)` when `STEPJOURNAL_PG_URL` names a PostgreSQL server, so the
//! PostgreSQL suites run; without it they are reported ignored, with the reason. Turns on
//! `cfg(stepjournal_netns)` where network namespaces can be made (running as root, with
//! iproute2's `ip`), for the multi-host partition test; elsewhere it is reported ignored. Turns
//! on `cfg(stepjournal_pgbouncer)` when, beside the server, PgBouncer is installed.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(stepjournal_pg)");
    println!("cargo:rerun-if-env-changed=STEPJOURNAL_PG_URL");
    if std::env::var_os("STEPJOURNAL_PG_URL").is_some_and(|v| !v.is_empty()) {
        println!("cargo:rustc-cfg=stepjournal_pg");
    }
    // The pooled suites need PgBouncer beside the server (`.ci/run` installs Debian's).
    println!("cargo:rustc-check-cfg=cfg(stepjournal_pgbouncer)");
    println!("cargo:rerun-if-env-changed=PATH");
    if std::env::var_os("STEPJOURNAL_PG_URL").is_some_and(|v| !v.is_empty()) && has_pgbouncer() {
        println!("cargo:rustc-cfg=stepjournal_pgbouncer");
    }
    println!("cargo:rustc-check-cfg=cfg(stepjournal_netns)");
    if is_root() && has_ip() {
        println!("cargo:rustc-cfg=stepjournal_netns");
    }
}

/// Whether this process runs as root (its real user id is 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|l| {
            l.strip_prefix("Uid:").and_then(|ids| ids.split_whitespace().next()) == Some("0")
        })
    })
}

/// Whether PgBouncer is installed (on `PATH`, or where Debian puts it).
fn has_pgbouncer() -> bool {
    std::process::Command::new("pgbouncer")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        || std::path::Path::new("/usr/sbin/pgbouncer").exists()
}

/// Whether iproute2's `ip` runs.
fn has_ip() -> bool {
    std::process::Command::new("ip").arg("-V").output().is_ok_and(|out| out.status.success())
}
