//! Turns on `cfg(stepjournal_pg)` when `STEPJOURNAL_PG_URL` names a PostgreSQL server, so the
//! command's PostgreSQL tests run; without it they are reported ignored, with the reason. Turns
//! on `cfg(stepjournal_pgbouncer)` when, beside the server, PgBouncer is installed (the tests of
//! the command behind a transaction pooler).

fn main() {
    println!("cargo:rustc-check-cfg=cfg(stepjournal_pg)");
    println!("cargo:rerun-if-env-changed=STEPJOURNAL_PG_URL");
    let server = std::env::var_os("STEPJOURNAL_PG_URL").is_some_and(|v| !v.is_empty());
    if server {
        println!("cargo:rustc-cfg=stepjournal_pg");
    }
    println!("cargo:rustc-check-cfg=cfg(stepjournal_pgbouncer)");
    println!("cargo:rerun-if-env-changed=PATH");
    if server && has_pgbouncer() {
        println!("cargo:rustc-cfg=stepjournal_pgbouncer");
    }
}

/// Whether PgBouncer is installed (on `PATH`, or where Debian puts it).
fn has_pgbouncer() -> bool {
    std::process::Command::new("pgbouncer")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        || std::path::Path::new("/usr/sbin/pgbouncer").exists()
}
