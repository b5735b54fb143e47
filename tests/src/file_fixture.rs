//! Fixtures for the file backend: a store on real files in a temporary directory, or on a
//! simulated disk; and checks shared by its suites.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::JournalStore;
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_codec::{Seq, SessionId};

use crate::sample::numbered;

/// A file store on real files; the temporary directory lives as long as the fixture.
#[derive(Debug)]
pub struct RealFixture {
    // Invariant: Some except inside `reopen`.
    store: Option<FileStore>,
    pub dir: tempfile::TempDir,
}

impl RealFixture {
    /// A fresh store with these options in a new temporary directory.
    pub fn new(options: FileOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path(), options).unwrap();
        RealFixture { store: Some(store), dir }
    }

    /// Closes the store (releasing its lock) and opens the directory again with these options.
    pub fn reopen(&mut self, options: FileOptions) {
        drop(self.store.take());
        self.store = Some(FileStore::open(self.dir.path(), options).unwrap());
    }
}

impl std::ops::Deref for RealFixture {
    type Target = FileStore;
    fn deref(&self) -> &FileStore {
        self.store.as_ref().unwrap()
    }
}

/// The directory the simulated-disk fixtures use.
pub fn sim_dir() -> PathBuf {
    PathBuf::from("/journal")
}

/// A file store on a simulated disk.
#[derive(Debug)]
pub struct SimFixture {
    pub store: FileStore,
    pub disk: SimDisk,
}

impl SimFixture {
    /// A fresh store with these options on a new simulated disk.
    pub fn new(options: FileOptions) -> Self {
        let disk = SimDisk::new();
        let store = open_sim(&disk, options).unwrap();
        SimFixture { store, disk }
    }
}

impl std::ops::Deref for SimFixture {
    type Target = FileStore;
    fn deref(&self) -> &FileStore {
        &self.store
    }
}

/// Opens the journal in [`sim_dir`] on `disk`.
pub fn open_sim(
    disk: &SimDisk,
    options: FileOptions,
) -> Result<FileStore, stepjournal_backends::OpenError> {
    FileStore::open_with(Arc::new(disk.clone()), &sim_dir(), options)
}

/// The event a crash test writes at `seq` of session number `s`: recognisable, so a record in
/// the wrong place is caught.
pub fn crash_event(s: usize, seq: u64) -> stepjournal_codec::Event {
    numbered(s as u64 * 1_000_000 + seq)
}

/// The session names crash tests use.
pub fn crash_session(s: usize) -> SessionId {
    SessionId::new(format!("session-{s}").as_str()).unwrap()
}

/// Checks that session `s` holds a dense prefix of the crash test's events, at least `acked`
/// of them, at most `attempted`; returns its length.
pub fn check_prefix(store: &dyn JournalStore, s: usize, acked: u64, attempted: u64) -> u64 {
    let session = crash_session(s);
    let log = store.read_all(&session).unwrap();
    let tail = store.tail(&session).unwrap();
    assert_eq!(tail, Seq(log.len() as u64), "{session}: the tail agrees with the events");
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.seq, Seq(i as u64), "{session}: seqs are dense");
        assert_eq!(r.event, crash_event(s, i as u64), "{session} seq {i} holds another event");
    }
    let n = log.len() as u64;
    assert!(n >= acked, "{session}: {acked} appends were acknowledged, only {n} survived");
    assert!(n <= attempted, "{session}: {n} events, but only {attempted} were attempted");
    n
}

/// The total size of the files in `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
}

/// Appends event `q` of session `s` (as [`crash_event`] numbers them), synced.
pub fn append_crash_event(store: &dyn JournalStore, s: usize, q: u64) {
    let e = stepjournal_codec::Stamped::at(stepjournal_codec::UnixMillis(q), crash_event(s, q));
    store
        .append(&crash_session(s), Seq(q), &[e], stepjournal_backends::Durability::Synced)
        .unwrap();
}

/// A journal on `disk` (at [`sim_dir`]) whose groups hold several frames: each round `q`,
/// session 0's event `q` is a group of its own, its sync held until the events `q` of sessions
/// `1..sessions` are queued behind it; they then share the next group, one frame each, in
/// session order. Returns the store, open.
pub fn grouped_journal(
    disk: &SimDisk,
    options: FileOptions,
    sessions: usize,
    rounds: u64,
) -> FileStore {
    let store = open_sim(disk, options).unwrap();
    for q in 0..rounds {
        // The reclaim thread idle first: a sync of its own held at the gate would be taken for
        // the leader's.
        store.wait_reclaimed();
        disk.hold_syncs();
        std::thread::scope(|scope| {
            let store = &store;
            scope.spawn(move || append_crash_event(store, 0, q));
            disk.wait_for_held_syncs(1);
            for s in 1..sessions {
                // One at a time, so that the frames are in session order.
                scope.spawn(move || append_crash_event(store, s, q));
                while store.queued() < s {
                    std::thread::yield_now();
                }
            }
            disk.release_syncs();
        });
    }
    store
}
