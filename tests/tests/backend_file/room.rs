//! The committer's bounded queue: appenders that find it full wait in line, in order, before
//! their compare-and-set; one that gives up leaves nothing.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use stepjournal_backends::file::FileOptions;
use stepjournal_backends::file::sim::{OpKind, SimDisk};
use stepjournal_backends::{AppendAck, AppendError, AppendFuture, Durability, JournalStore};
use stepjournal_codec::{Limits, Seq, Stamped, UnixMillis, batch};
use stepjournal_tests::file_fixture::{
    check_prefix, crash_event, crash_session, open_sim, sim_dir,
};
use stepjournal_tests::watchdog::Watchdog;

use super::committer::CountingWaker;

fn one(s: usize, q: u64) -> [Stamped; 1] {
    [Stamped::at(UnixMillis(q), crash_event(s, q))]
}

fn poll(future: &mut AppendFuture) -> Poll<Result<AppendAck, AppendError>> {
    let waker = Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))));
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

/// The size of the frame of the batch `one(s, 0)` (events of sessions differ in size): what it
/// takes in the queue.
fn frame_of(s: usize) -> u64 {
    let mut frame = Vec::new();
    batch::encode_into(&mut frame, &crash_session(s), Seq(0), &one(s, 0), &Limits::default())
        .unwrap();
    frame.len() as u64
}

/// The room of [`store_with_full_queue`]`(_, frames)`: the batches of sessions 1 to `frames`.
fn room(frames: u64) -> u64 {
    (1..=frames as usize).map(frame_of).sum()
}

/// A store whose queue has room for the batches of sessions 1 to `frames`, its first group's
/// sync held (the appender of session 0 leads it), and those queued behind it.
fn store_with_full_queue(
    disk: &SimDisk,
    frames: u64,
) -> (stepjournal_backends::file::FileStore, Vec<AppendFuture>) {
    let options = FileOptions::new().preallocate(0).max_queued_bytes(room(frames));
    let store = open_sim(disk, options).unwrap();
    disk.hold_syncs();
    let mut futures =
        vec![store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced)];
    disk.wait_for_held_syncs(1);
    for s in 1..=frames as usize {
        futures.push(store.append_async(&crash_session(s), Seq(0), &one(s, 0), Durability::Synced));
    }
    assert_eq!(store.queued(), frames as usize, "the queue holds what it has room for");
    assert_eq!(store.stats().waited_for_room, 0);
    (store, futures)
}

#[test]
fn appenders_beyond_the_room_wait_in_line_and_land_after_what_was_queued() {
    let _watchdog = Watchdog::start("the line for room", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, mut futures) = store_with_full_queue(&disk, 4);
    // Ten more: none is queued, each waits in line once polled.
    let mut waiting: Vec<_> = (5..15)
        .map(|s| store.append_async(&crash_session(s), Seq(0), &one(s, 0), Durability::Synced))
        .collect();
    for f in &mut waiting {
        assert!(poll(f).is_pending());
    }
    assert_eq!(store.queued(), 4, "the queue grew past its room");
    assert_eq!(store.stats().waited_for_room, 10);
    disk.release_syncs();
    futures.append(&mut waiting);
    for (s, f) in futures.into_iter().enumerate() {
        assert_eq!(f.wait().unwrap().next, Seq(1), "session {s}");
    }
    let stats = store.stats();
    assert_eq!(stats.appends, 15);
    assert_eq!(stats.most_queued_bytes, room(4), "the queue held more than its room");
    for s in 0..15 {
        assert_eq!(check_prefix(&store, s, 1, 1), 1);
    }
    // The waiters' batches lie after the queued ones (the segment holds each session's name in
    // its frame). Which waiters are called first is the line's unit tests' to check: here each
    // waiter is polled only when the one before it is answered.
    let segments = disk.files(&sim_dir());
    let bytes: Vec<u8> = segments
        .iter()
        .filter(|(path, _)| path.extension().is_some_and(|e| e == "seg"))
        .flat_map(|(path, _)| disk.read_file(path).unwrap())
        .collect();
    let at = |s: usize| {
        let name = crash_session(s).to_string().into_bytes();
        bytes.windows(name.len()).position(|w| w == name.as_slice()).unwrap()
    };
    let queued = (1..5).map(at).max().unwrap();
    let waited = (5..15).map(at).min().unwrap();
    assert!(queued < waited, "a waiter's batch landed before a queued one");
}

#[test]
fn an_append_dropped_while_it_waits_for_room_leaves_nothing() {
    let _watchdog = Watchdog::start("a dropped waiter", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 2);
    // Session 1 has a batch queued at seq 0; its next waits in line at seq 1, then is dropped.
    let mut second = store.append_async(&crash_session(1), Seq(1), &one(1, 1), Durability::Synced);
    assert!(poll(&mut second).is_pending());
    // Someone behind it in line.
    let mut behind = store.append_async(&crash_session(7), Seq(0), &one(7, 0), Durability::Synced);
    assert!(poll(&mut behind).is_pending());
    drop(second);
    disk.release_syncs();
    for f in futures {
        f.wait().unwrap();
    }
    assert_eq!(behind.wait().unwrap().next, Seq(1), "the line moved past the one that left");
    assert_eq!(store.tail(&crash_session(1)).unwrap(), Seq(1), "the dropped batch landed");
    // The seq it would have taken is free: an append there lands.
    let again = store.append(&crash_session(1), Seq(1), &one(1, 1), Durability::Synced).unwrap();
    assert_eq!(again.next, Seq(2));
    assert_eq!(check_prefix(&store, 1, 2, 2), 2);
}

#[test]
fn a_waiter_is_checked_against_its_sessions_tail_when_it_enters_not_when_it_arrived() {
    let _watchdog = Watchdog::start("a waiter's compare-and-set", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 2);
    // Two appenders of one new session race: the first waits in line, the second arrives
    // after it and waits behind it; both expect seq 0: the first to enter wins.
    let mut first = store.append_async(&crash_session(9), Seq(0), &one(9, 0), Durability::Synced);
    let mut second = store.append_async(&crash_session(9), Seq(0), &one(9, 0), Durability::Synced);
    assert!(poll(&mut first).is_pending() && poll(&mut second).is_pending());
    disk.release_syncs();
    for f in futures {
        f.wait().unwrap();
    }
    assert_eq!(first.wait().unwrap().next, Seq(1));
    assert!(matches!(
        second.wait(),
        Err(AppendError::Conflict { expected: Seq(0), actual: Seq(1) })
    ));
    assert_eq!(check_prefix(&store, 9, 1, 1), 1);
}

#[test]
fn a_later_append_of_a_session_waits_behind_its_earlier_one_called_but_not_polled() {
    let _watchdog = Watchdog::start("a session's appends in line", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 1);
    // Session 9's first append waits in line and is never polled before the next is made.
    let first = store.append_async(&crash_session(9), Seq(0), &one(9, 0), Durability::Synced);
    disk.release_syncs();
    // Once the queued batches are answered the leader has taken them and called the line: the
    // queue is empty and no one waits uncalled.
    for f in futures {
        f.wait().unwrap();
    }
    assert_eq!(store.queued(), 0);
    // The next append of session 9 comes after the first, though the first has not entered.
    let second = store.append_async(&crash_session(9), Seq(1), &one(9, 1), Durability::Synced);
    assert_eq!(store.stats().waited_for_room, 2, "the second waits behind the first");
    assert_eq!(first.wait().unwrap().next, Seq(1));
    assert_eq!(second.wait().unwrap().next, Seq(2));
    assert_eq!(check_prefix(&store, 9, 2, 2), 2);
}

#[test]
fn a_waiter_that_loses_its_compare_and_set_calls_the_line_behind_it() {
    let _watchdog = Watchdog::start("a refused waiter", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 1);
    // Session 1 already has a batch queued at seq 0: this one, expecting seq 0 too, loses.
    let loser = store.append_async(&crash_session(1), Seq(0), &one(1, 0), Durability::Synced);
    disk.release_syncs();
    for f in futures {
        f.wait().unwrap();
    }
    // Made after the loser was called, a later append of session 1 waits behind it.
    let later = store.append_async(&crash_session(1), Seq(1), &one(1, 1), Durability::Synced);
    assert!(matches!(
        loser.wait(),
        Err(AppendError::Conflict { expected: Seq(0), actual: Seq(1) })
    ));
    // The loser queued nothing: nothing leads, yet the later one is called.
    assert_eq!(later.wait().unwrap().next, Seq(2));
    assert_eq!(check_prefix(&store, 1, 2, 2), 2);
}

#[test]
fn a_thread_of_the_sync_api_waits_in_line_too() {
    let _watchdog = Watchdog::start("a sync waiter", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 2);
    let store = Arc::new(store);
    let blocked = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store.append(&crash_session(8), Seq(0), &one(8, 0), Durability::Synced)
        })
    };
    while store.stats().waited_for_room == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(store.queued(), 2);
    disk.release_syncs();
    assert_eq!(blocked.join().unwrap().unwrap().next, Seq(1));
    for f in futures {
        f.wait().unwrap();
    }
    assert_eq!(check_prefix(store.as_ref(), 8, 1, 1), 1);
}

#[test]
fn waiters_are_told_when_the_store_is_poisoned_and_nothing_of_theirs_is_written() {
    let _watchdog = Watchdog::start("waiters of a poisoned store", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 2);
    let mut waiter = store.append_async(&crash_session(6), Seq(0), &one(6, 0), Durability::Synced);
    assert!(poll(&mut waiter).is_pending());
    disk.fail_next(OpKind::SyncData);
    disk.release_syncs();
    for f in futures {
        assert!(f.wait().is_err());
    }
    let err = waiter.wait().unwrap_err();
    assert!(err.is_poisoned(), "{err}");
}

#[test]
fn waiters_are_told_when_the_store_is_closed_and_nothing_of_theirs_is_written() {
    let _watchdog = Watchdog::start("waiters of a closed store", Duration::from_secs(60));
    let disk = SimDisk::new();
    let (store, futures) = store_with_full_queue(&disk, 2);
    let mut waiter = store.append_async(&crash_session(6), Seq(0), &one(6, 0), Durability::Synced);
    assert!(poll(&mut waiter).is_pending());
    let closing = std::thread::spawn(move || drop(store));
    // The drop waits for the held group; the waiter was told first.
    let err = waiter.wait().unwrap_err();
    assert!(err.to_string().contains("closed while the batch waited for room"), "{err}");
    disk.release_syncs();
    closing.join().unwrap();
    for f in futures {
        f.wait().unwrap();
    }
    let store = open_sim(&disk.crash_lose_unsynced(), FileOptions::new()).unwrap();
    assert_eq!(store.tail(&crash_session(6)).unwrap(), Seq(0), "the waiter's batch landed");
    assert_eq!(store.tail(&crash_session(2)).unwrap(), Seq(1), "a queued batch was lost");
}

#[test]
fn a_batch_larger_than_the_room_goes_alone_into_an_empty_queue() {
    let _watchdog = Watchdog::start("a large batch", Duration::from_secs(60));
    let disk = SimDisk::new();
    let options = FileOptions::new().max_queued_bytes(1);
    let store = open_sim(&disk, options).unwrap();
    let events: Vec<Stamped> =
        (0..20).map(|q| Stamped::at(UnixMillis(q), crash_event(3, q))).collect();
    let futures: Vec<_> = (0..5u64)
        .map(|b| {
            let range = (b * 4) as usize..(b * 4 + 4) as usize;
            store.append_async(&crash_session(3), Seq(b * 4), &events[range], Durability::Synced)
        })
        .collect();
    for f in futures {
        f.wait().unwrap();
    }
    assert_eq!(check_prefix(&store, 3, 20, 20), 20);
    assert!(store.stats().most_queued_bytes > 1);
}
