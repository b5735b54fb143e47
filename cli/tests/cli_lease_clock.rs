//! The command judges a runtime's lease by the store's clock, not its own: run under `faketime`
//! a minute ahead, it still sees a live 30 s lease as live, on SQLite and on PostgreSQL.
//!
//! These tests need `faketime` (Debian package `faketime`). Without it they say they are
//! skipped, and why; under `CI=true` (`.ci/run`, which installs it) they fail instead.

mod cli_support;

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use cli_support::*;
use stepjournal::writer::JournalOptions;
use stepjournal::{Journal, Reply};
use stepjournal_backends::OwnerId;
use stepjournal_codec::{CallKind, Entry, Replay, SessionId};
use stepjournal_recovery::MemoryRegistry;

/// How far ahead the command's clock is put: past the runtime's 30 s lease.
const AHEAD: &str = "+60s";

/// Whether `faketime` runs here. Without it, under `CI=true` the test fails; elsewhere it says
/// it is skipped, and why.
fn has_faketime() -> bool {
    let why = match Command::new("faketime").args(["-f", AHEAD, "true"]).output() {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!("`faketime -f {AHEAD} true` exited {}: {}", out.status, stderr(&out)),
        Err(e) => format!("no `faketime` on PATH ({e}); `apt-get install -y faketime` adds it"),
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "this test needs faketime, which CI installs (.ci/run): {why}"
    );
    println!("skipped: this test runs the command under faketime: {why}");
    false
}

/// Runs the binary with its clock `AHEAD` of this machine's.
fn ahead(args: &[&str]) -> Output {
    Command::new("faketime")
        .args(["-f", AHEAD, env!("CARGO_BIN_EXE_stepjournal")])
        .args(args)
        .output()
        .expect("faketime runs the binary")
}

/// The row of `session` in `sessions --json` run ahead.
fn row_ahead(url: &str, session: &str) -> serde_json::Value {
    let out = ahead(&["sessions", url, "--json"]);
    assert_eq!(out.status.code(), Some(0), "sessions: {}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["session"] == session)
        .unwrap_or_else(|| panic!("no row for session {session}"))
}

/// Asserts the command run ahead refused with exit 2, calling the session running.
fn refused(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what} ran: stdout {}\nstderr {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
    assert!(stderr(out).contains("is running"), "{what}: {}", stderr(out));
}

/// Regression (issue #23, item 9): the command judged leases by its own clock, but a lease
/// expires by the store's. Run with its clock a minute ahead (`faketime`), `delete` removed a
/// session whose runtime held a valid 30 s lease, and `sessions` called it crashed. Here this
/// process is the runtime: its journal holds the lease of a run with a client call open (its
/// keeper renews it); the command, a minute ahead, must call the run running, refuse `delete`
/// (named and by age) and `answer`, and leave every event where it was.
fn a_live_lease_holds_against_a_clock_a_minute_ahead(place: &Place) {
    if !has_faketime() {
        return;
    }
    let store = place.open();
    let registry = MemoryRegistry::new().with_tool("ask_user", Replay::Unsafe);
    let options = JournalOptions::new()
        .owner(OwnerId::new("runtime-host:1"))
        .lease_ttl(Duration::from_secs(30));
    let journal = Journal::new(Arc::clone(&store), Arc::new(registry), options).unwrap();
    let session = SessionId::new("leased").unwrap();
    let run = journal.begin_run(&session, Entry::NewTurn { message: "ask".into() }).unwrap();
    let ask = call("c1", "ask_user", Replay::Unsafe, CallKind::Client);
    let step = run.commit_reply(Reply::new("Which day?").call(ask)).unwrap();
    let tail = store.tail(&session).unwrap();

    let row = row_ahead(&place.url, "leased");
    // The binary's own clock is a minute ahead (its AGE is the time since the last append by
    // its clock): faketime reached it, so what follows tests what it claims to.
    let age = row["age_ms"].as_u64().unwrap();
    assert!(
        age >= 60_000,
        "{}: faketime did not move the binary's clock (age {age} ms)",
        place.name
    );
    assert_eq!(row["state"], "running", "{}: {row}", place.name);

    let shown = ahead(&["show", &place.url, "leased"]);
    assert_eq!(shown.status.code(), Some(0), "show: {}", stderr(&shown));
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("running") && !shown.contains("crashed"), "{}: {shown}", place.name);

    refused(&ahead(&["delete", &place.url, "leased", "--yes"]), "delete");
    let by_age = ahead(&["delete", &place.url, "--older-than", "30s", "--yes"]);
    assert_eq!(by_age.status.code(), Some(0), "delete --older-than: {}", stderr(&by_age));
    let said = String::from_utf8(by_age.stdout).unwrap();
    assert!(said.contains("no session to delete"), "{}: {said}", place.name);
    refused(&ahead(&["answer", &place.url, "leased", "c1", "--output", "\"monday\""]), "answer");
    assert_eq!(store.tail(&session).unwrap(), tail, "{}: the command wrote or deleted", place.name);

    drop((step, run));
}

#[test]
fn a_live_lease_holds_against_a_command_clock_a_minute_ahead_on_sqlite() {
    a_live_lease_holds_against_a_clock_a_minute_ahead(&sqlite_place());
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_live_lease_holds_against_a_command_clock_a_minute_ahead_on_postgres() {
    a_live_lease_holds_against_a_clock_a_minute_ahead(&pg_place());
}
