//! Turns on `cfg(stepjournal_pg)` when `STEPJOURNAL_PG_URL` names a PostgreSQL server, so the
//! command's PostgreSQL tests run; without it they are reported ignored, with the reason.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(stepjournal_pg)");
    println!("cargo:rerun-if-env-changed=STEPJOURNAL_PG_URL");
    if std::env::var_os("STEPJOURNAL_PG_URL").is_some_and(|v| !v.is_empty()) {
        println!("cargo:rustc-cfg=stepjournal_pg");
    }
}
