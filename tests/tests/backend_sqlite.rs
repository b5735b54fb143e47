//! The backend conformance suite on SQLite, plus what only a database file can show: reopening,
//! several handles on one file, damaged rows, durability levels.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use std::ops::Deref;

use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
use stepjournal_backends::{AppendError, Durability, JournalStore, StoreError};
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
