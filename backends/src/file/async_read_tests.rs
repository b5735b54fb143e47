//! An async caller's reads run on the store's reading threads and answer as the sync reads do;
//! the sync reads start none.

use std::path::Path;
use std::sync::Arc;

use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

use super::io::sim::SimDisk;
use super::{FileOptions, FileStore};
use crate::{Durability, JournalStore};

fn events(from: u64, n: u64) -> Vec<Stamped> {
    (from..from + n)
        .map(|i| Stamped::at(UnixMillis(i), Message { role: Role::User, text: format!("m{i}") }))
        .collect()
}

#[test]
fn async_reads_run_on_reading_threads_and_answer_as_the_sync_reads() {
    let store = FileStore::open_with(Arc::new(SimDisk::new()), Path::new("/j"), FileOptions::new())
        .unwrap();
    let s = SessionId::new("s").unwrap();
    for b in 0..10 {
        store.append(&s, Seq(b * 3), &events(b * 3, 3), Durability::Buffered).unwrap();
    }
    let whole = store.read(&s, Seq(0)..Seq(u64::MAX)).unwrap();
    let part = store.read(&s, Seq(4)..Seq(11)).unwrap();
    let from = store.read_from_snapshot(&s).unwrap();
    let heads = store.heads().unwrap();
    assert_eq!(store.reading_threads(), 0, "a sync read starts no thread");
    assert_eq!(store.read_async(&s, Seq(0)..Seq(u64::MAX)).wait().unwrap(), whole);
    assert_eq!(store.reading_threads(), 1);
    assert_eq!(store.read_async(&s, Seq(4)..Seq(11)).wait().unwrap(), part);
    assert_eq!(store.read_from_snapshot_async(&s).wait().unwrap(), from);
    assert_eq!(store.heads_async().wait().unwrap(), heads);
    assert_eq!(whole.len(), 30);
    assert_eq!(part.len(), 7);
    let missing = SessionId::new("none").unwrap();
    assert!(store.read_async(&missing, Seq(0)..Seq(9)).wait().unwrap().is_empty());
    assert!((1..=crate::readers::MAX_THREADS).contains(&store.reading_threads()));
}

#[test]
fn a_read_in_flight_when_the_store_is_dropped_still_answers() {
    let store = FileStore::open_with(Arc::new(SimDisk::new()), Path::new("/j"), FileOptions::new())
        .unwrap();
    let s = SessionId::new("s").unwrap();
    store.append(&s, Seq(0), &events(0, 5), Durability::Buffered).unwrap();
    let reads: Vec<_> = (0..8).map(|_| store.read_async(&s, Seq(0)..Seq(5))).collect();
    drop(store);
    for read in reads {
        assert_eq!(read.wait().unwrap().len(), 5);
    }
}
