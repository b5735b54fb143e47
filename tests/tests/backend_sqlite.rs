//! The backend conformance suite on SQLite, plus what only a database file can show: reopening,
//! several handles on one file, damaged rows, durability levels.
#![cfg(feature = "sqlite")]

use std::ops::Deref;

use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
use stepjournal_backends::{AppendError, Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};
use stepjournal_tests::sample::{numbered, stamped_numbered};

/// A store in a fresh temporary directory, removed with it.
struct Fixture {
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

impl Deref for Fixture {
    type Target = SqliteStore;
    fn deref(&self) -> &SqliteStore {
        &self.store
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("journal.sqlite"), SqliteOptions::default());
    Fixture { store: store.unwrap(), _dir: dir }
}

stepjournal_tests::backend_conformance!(fixture);
stepjournal_tests::backend_lease_conformance!(fixture);

#[test]
fn appends_survive_closing_and_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite");
    let s = SessionId::new("reopen").unwrap();
    {
        let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        store.append(&s, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
        store.append(&s, Seq(3), &stamped_numbered(3, 2), Durability::Buffered).unwrap();
    }
    let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let log = store.read_all(&s).unwrap();
    assert_eq!(log.len(), 5);
    assert!(log.iter().all(|r| r.event == numbered(r.seq.get())));
    let err = store.append(&s, Seq(3), &stamped_numbered(3, 1), Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Conflict { actual: Seq(5), .. }), "{err:?}");
}

#[test]
fn a_second_handle_sees_the_first_ones_appends_and_deletes() {
    let f = fixture();
    let other = SqliteStore::open(f.path(), SqliteOptions::default()).unwrap();
    let s = SessionId::new("shared").unwrap();
    f.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    assert_eq!(other.tail(&s).unwrap(), Seq(2));
    other.append(&s, Seq(2), &stamped_numbered(2, 1), Durability::Synced).unwrap();
    assert_eq!(f.read_all(&s).unwrap().len(), 3);
    assert!(other.delete(&s).unwrap());
    assert_eq!(f.tail(&s).unwrap(), Seq(0));
    assert!(f.sessions().unwrap().is_empty());
}

#[test]
fn an_in_memory_database_is_refused_with_the_reason() {
    let err = SqliteStore::open(":memory:", SqliteOptions::default()).unwrap_err().to_string();
    assert!(err.contains("not WAL"), "{err}");
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/journal.sqlite");
    let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("opening the database") && err.contains("no/such/dir"), "{err}");
}
