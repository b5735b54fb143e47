//! `Journal::close`: the store is let go at once (the file store's directory lock released, its
//! threads stopped, the claim of one journal per store given up) while handles of the journal
//! and its runs still exist, and every later call through them is refused as closed.

mod writer_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use stepjournal::{BeginError, Journal, JournalOptions};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{JournalStore, StoreError};
use stepjournal_codec::{Entry, RunOutcome, Seq};
use writer_support::*;

/// The names of this process's threads that are stepjournal's.
fn our_threads() -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = task.unwrap().path().join("comm");
        if let Ok(name) = std::fs::read_to_string(comm) {
            let name = name.trim().to_owned();
            if name.starts_with("stepjournal") {
                names.push(name);
            }
        }
    }
    names.sort();
    names
}

#[test]
fn a_closed_journal_lets_go_of_its_file_store_at_once_and_refuses_what_comes_after() {
    let dir = tempfile::tempdir().unwrap();
    assert!(our_threads().is_empty(), "{:?}", our_threads());
    let store: Arc<dyn JournalStore> =
        Arc::new(FileStore::open(dir.path(), FileOptions::new()).unwrap());
    let options = JournalOptions::new().retain_ended_for(Duration::from_secs(3600));
    let journal = Journal::new(store.clone(), Arc::new(registry()), options).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    // An async read starts a reading thread.
    let read = futures_executor::block_on(journal.state_async(&session())).unwrap();
    assert_eq!(read.runs().len(), 1);
    let running = our_threads();
    assert!(running.iter().any(|t| t.starts_with("stepjournal-fil")), "{running:?}");

    let shut = futures_executor::block_on(journal.close(Duration::ZERO)).unwrap();
    assert!(shut.abandoned.is_empty());
    // The journal, its run and the store are all still held here: the lock was let go all
    // the same, and a new journal over the directory may be made in this process at once.
    let again = Arc::new(FileStore::open(dir.path(), FileOptions::new()).unwrap());
    assert_eq!(again.tail(&session()).unwrap(), Seq(3));
    let second = Journal::new(again.clone(), Arc::new(registry()), JournalOptions::new());
    assert!(second.is_ok(), "the claim went with the close: {:?}", second.err());

    // Every later call through the closed handles is refused as closed.
    let closed = |e: &StoreError| matches!(e, StoreError::Closed { .. });
    assert!(store.tail(&session()).is_err_and(|e| closed(&e)));
    let refused = journal.begin_run(&sid("other"), Entry::NewTurn { message: "go".into() });
    assert!(matches!(&refused, Err(BeginError::ShuttingDown { .. })), "{refused:?}");
    assert!(journal.state(&session()).is_err_and(|e| closed(&e)));
    drop(second);
    drop(again);

    // The closed store's threads stopped (the reading thread and the retention thread within
    // their second), with its handles still held.
    let start = Instant::now();
    while !our_threads().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "still running: {:?}", our_threads());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop((journal, run, store));
}
