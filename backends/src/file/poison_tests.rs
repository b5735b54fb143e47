//! The poison names the first real failure, whichever thread reaches the state lock first.

use std::path::Path;
use std::sync::Arc;

use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

use super::commit::write::sync_active;
use super::io::sim::{OpKind, SimDisk};
use super::{FileOptions, FileStore};
use crate::{AppendError, Durability, JournalStore, StoreError};

fn event(at: u64) -> Stamped {
    Stamped::at(UnixMillis(at), Message { role: Role::User, text: "q".repeat(40) })
}

#[test]
fn a_later_append_is_told_the_first_failure_not_that_an_earlier_one_happened() {
    // A sync of the active segment that failed on the reclaim thread set the writer's "failed"
    // flag before that thread poisoned the store; a group written in between was refused with
    // "an earlier write or sync of the journal failed", and that text became the poison every
    // later call repeated: neither the errno nor the file was ever named. Here the reclaim
    // thread's window is taken by calling its sync directly.
    let disk = SimDisk::new();
    let dir = Path::new("/j");
    let store = FileStore::open_with(Arc::new(disk.clone()), dir, FileOptions::new()).unwrap();
    let s = SessionId::new("s").unwrap();
    store.append(&s, Seq(0), &[event(0)], Durability::Buffered).unwrap();
    disk.fail_next(OpKind::SyncData);
    let first = sync_active(store.core()).unwrap_err().to_string();
    let segment = "00000000000000000001.seg";
    let injected = "simulated I/O failure of SyncData";
    assert!(first.contains(segment) && first.contains(injected), "{first}");
    let refused = store.append(&s, Seq(1), &[event(1)], Durability::Synced).unwrap_err();
    let told = match &refused {
        AppendError::Store(StoreError::Io { .. } | StoreError::Poisoned { .. }) => {
            refused.to_string()
        }
        other => panic!("the append fails on the earlier failure: {other}"),
    };
    assert!(told.contains(&first), "the append names the first failure: {told}");
    let poisoned = store.append(&s, Seq(1), &[event(1)], Durability::Synced).unwrap_err();
    match &poisoned {
        AppendError::Store(StoreError::Poisoned { first_failure }) => {
            assert_eq!(first_failure, &first, "the poison is the first failure's text");
        }
        other => panic!("the store is poisoned: {other}"),
    }
    let read = store.read(&s, Seq(0)..Seq(1)).unwrap_err();
    assert!(read.to_string().contains(injected), "{read}");
}
