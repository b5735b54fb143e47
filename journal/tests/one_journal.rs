//! One journal per store in a process: a second journal over a store a live journal of the
//! process runs over is refused, whatever handle it is given.

use std::sync::Arc;

use serde_json::{Value, json};
use stepjournal::backends::memory::MemoryStore;
use stepjournal::backends::{JournalStore, SeparateProcess, StoreIdentity};
use stepjournal::codec::{Entry, Replay, SessionId};
use stepjournal::{
    CallCtx, Coded, ErrorCode, Journal, JournalError, JournalOptions, RecoverOptions, ToolError,
    Tools,
};

fn tools() -> Tools {
    Tools::new().tool("search", json!({}), Replay::Safe, |_: Value, _: CallCtx| async {
        Ok::<_, ToolError>(json!({"hits": 1}))
    })
}

fn journal(store: Arc<dyn JournalStore>) -> Result<Journal, JournalError> {
    Journal::new(store, Arc::new(tools()), JournalOptions::new())
}

#[test]
fn a_second_journal_over_one_store_is_refused_until_the_first_is_gone() {
    // Regression: two `Journal`s over one store in one process went undetected, and the
    // second's `recover_all` fenced the first's live run mid-body (it was not the second's own,
    // so it looked crashed).
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let first = journal(store.clone()).unwrap();
    let session = SessionId::new("s").unwrap();
    let run = first.begin_run(&session, Entry::NewTurn { message: "go".into() }).unwrap();
    let refused = journal(store.clone()).unwrap_err();
    assert!(matches!(refused, JournalError::StoreInUse { .. }), "{refused}");
    assert_eq!(refused.code(), ErrorCode::StoreInUse);
    // A clone is the same journal: it lists nothing of its own live run.
    let again = first.clone();
    let report = futures_executor::block_on(again.recover_all(
        &tools(),
        RecoverOptions::new(),
        |_, _| async {},
    ))
    .unwrap();
    assert!(report.recovered.is_empty(), "the live run was not taken for a crashed one");
    assert_eq!(run.status(), stepjournal::RunStatus::Open);
    drop((first, again, run));
    assert!(journal(store).is_ok(), "once the first journal is gone, the store is free");
}

#[test]
fn a_test_standing_for_several_processes_says_so_with_separate_handles() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let one = journal(Arc::new(SeparateProcess(store.clone()))).unwrap();
    let other = journal(Arc::new(SeparateProcess(store.clone()))).unwrap();
    assert_eq!(SeparateProcess(store.clone()).identity(), StoreIdentity::OwnProcess);
    drop((one, other));
}

#[cfg(feature = "sqlite")]
#[test]
fn two_handles_on_one_database_file_are_one_store() {
    use stepjournal::backends::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite");
    let a = Arc::new(SqliteStore::open(&path, Default::default()).unwrap());
    let b = Arc::new(SqliteStore::open(&path, Default::default()).unwrap());
    // The same file, named another way.
    let c = Arc::new(
        SqliteStore::open(dir.path().join(".").join("journal.sqlite"), Default::default()).unwrap(),
    );
    assert_eq!(a.identity(), b.identity());
    assert_eq!(a.identity(), c.identity());
    let _first = journal(a).unwrap();
    assert!(matches!(journal(b), Err(JournalError::StoreInUse { .. })));
    assert!(matches!(journal(c), Err(JournalError::StoreInUse { .. })));
    let other = tempfile::tempdir().unwrap();
    let elsewhere = Arc::new(
        SqliteStore::open(other.path().join("journal.sqlite"), Default::default()).unwrap(),
    );
    assert!(journal(elsewhere).is_ok(), "another database is another store");
}
