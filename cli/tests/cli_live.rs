//! The read commands on a journal another thread is appending to (and deleting from): each run
//! succeeds, sees a consistent prefix, and finds no problem.

mod cli_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cli_support::*;
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_codec::{Entry, SessionId};

/// Appends until `stop`: a session that keeps growing, new sessions, and deletions of old ones.
fn writer(store: Arc<dyn JournalStore>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        append_session(&*store, "growing", &vec![vec![run_started("run-1", Entry::Wake)]], T0);
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            append_session(&*store, "growing", &vec![vec![message(&format!("note {round}"))]], T0);
            append_session(&*store, &format!("live-{round:05}"), &finished(), T0);
            if round >= 3 && round.is_multiple_of(3) {
                store.delete(&SessionId::new(format!("live-{:05}", round - 3)).unwrap()).unwrap();
            }
            round += 1;
            // A runtime between steps. (Opening an SQLite store takes its write lock for a moment
            // to check the schema, so a writer that never lets go would starve every reader.)
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        round
    })
}

fn growing_events(sessions_json: &str) -> u64 {
    sessions_json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["session"] == "growing")
        .map_or(0, |v| v["events"].as_u64().unwrap())
}

fn read_while_written(url: &str, store: Arc<dyn JournalStore>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = writer(Arc::clone(&store), Arc::clone(&stop));
    while store.tail(&SessionId::new("growing").unwrap()).unwrap().get() < 3 {
        std::thread::yield_now();
    }
    let mut seen = 0;
    let mut lines = 0;
    for _ in 0..6 {
        let events = growing_events(&bin_ok(&["sessions", url, "--json"], 0));
        assert!(events >= seen, "the growing session shrank from {seen} to {events}");
        seen = events;
        let shown = bin_ok(&["show", url, "growing"], 0).lines().count();
        assert!(shown >= lines, "the timeline shrank from {lines} to {shown} lines");
        lines = shown;
        let verified = bin_ok(&["verify", url], 0);
        assert!(verified.ends_with("clean: no problems found\n"), "{verified}");
        bin_ok(&["stats", url], 0);
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = handle.join().unwrap();
    assert!(rounds > 0);
    let last = growing_events(&bin_ok(&["sessions", url, "--json"], 0));
    assert_eq!(last, rounds + 1, "after the writer stopped, every event is seen");
    assert!(bin_ok(&["verify", url], 0).ends_with("clean: no problems found\n"));
}

#[test]
fn a_file_journal_is_read_and_verified_while_a_writer_appends_rotates_and_deletes() {
    let place = file_place();
    let store = FileStore::open(place.path(), FileOptions::new().segment_size(8192)).unwrap();
    read_while_written(&place.url, Arc::new(store));
}

#[test]
fn an_sqlite_journal_is_read_and_verified_while_a_writer_appends() {
    let place = sqlite_place();
    read_while_written(&place.url, place.open());
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_postgres_journal_is_read_and_verified_while_a_writer_appends() {
    let place = pg_place();
    read_while_written(&place.url, place.open());
}
