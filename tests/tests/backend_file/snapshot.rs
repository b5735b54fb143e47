//! `read_from_snapshot` on the file store: it reads the batches from the session's newest
//! snapshot on, never those before it; the index keeps where that snapshot lies as batches land,
//! through compaction and reopening (from sidecar indexes and from scans of sealed and active
//! segments), forgets it on deletion, and a crash that loses a snapshot's unsynced batch leaves
//! it at an earlier snapshot or none.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use stepjournal_backends::file::io::Io;
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{
    Event, EventKind, Limits, Message, Role, Seq, SessionId, Stamped, UnixMillis, batch,
};
use stepjournal_tests::file_fixture::{open_sim, sim_dir};
use stepjournal_tests::sample::{every_event_type, numbered};
use stepjournal_tests::sidecar_forge::Sidecar;

use super::bytes_read::Counting;
use super::{sid, verify_sim};

/// A `snapshot` event (the store does not look into it).
fn snapshot() -> Event {
    every_event_type().into_iter().find(|e| e.kind() == EventKind::Snapshot).unwrap()
}

/// A batch of `n` events from seq `from`, the one at `snap` (a seq in it) a snapshot.
fn events(from: u64, n: u64, snap: Option<u64>) -> Vec<Stamped> {
    (from..from + n)
        .map(|q| {
            let e = if Some(q) == snap { snapshot() } else { numbered(q) };
            Stamped::at(UnixMillis(1_700_000_000_000 + q), e)
        })
        .collect()
}

/// Appends `events(from, n, snap)` to `s` at `durability`; returns the tail after it.
fn put(
    store: &dyn JournalStore,
    s: &SessionId,
    from: u64,
    n: u64,
    snap: Option<u64>,
    durability: Durability,
) -> u64 {
    store.append(s, Seq(from), &events(from, n, snap), durability).unwrap().next.get()
}

/// What `read_from_snapshot` gives for `s`, checked against the whole log cut at its last
/// snapshot (and its async form against it): the seq of the snapshot it starts at, if any.
fn newest_snapshot(store: &FileStore, s: &SessionId) -> Option<u64> {
    let got = store.read_from_snapshot(s).unwrap();
    assert_eq!(store.read_from_snapshot_async(s).wait().unwrap(), got, "{s}: the async form");
    let mut all = store.read_all(s).unwrap();
    stepjournal_backends::from_last_snapshot(&mut all);
    assert_eq!(got, all, "{s}: the log from its last snapshot on");
    got.first().filter(|r| r.event.kind() == EventKind::Snapshot).map(|r| r.seq.get())
}

/// The bytes of the frames the store writes for `events(from, n, snap)` of `s`.
fn frame_len(s: &SessionId, from: u64, n: u64, snap: Option<u64>) -> u64 {
    let mut frame = Vec::new();
    batch::encode_into(&mut frame, s, Seq(from), &events(from, n, snap), &Limits::default())
        .unwrap() as u64
}

#[test]
fn reading_from_a_snapshot_reads_the_bytes_of_the_batches_from_it_on_not_the_whole_log() {
    // 200 batches of 4 events; the snapshot at seq 762, in the batch at 760; 9 batches after it.
    let options = FileOptions::new();
    let io = Counting { disk: SimDisk::new(), read: Arc::default() };
    let open = || FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options).unwrap();
    let s = sid("long");
    let other = sid("other");
    let (mut whole, mut suffix) = (0, 0);
    {
        let store = open();
        for k in 0..200u64 {
            let from = k * 4;
            let snap = (k == 190).then_some(from + 2);
            put(&store, &s, from, 4, snap, Durability::Buffered);
            // Another session between them, so that the suffix is not one run of bytes.
            put(&store, &other, k, 1, None, Durability::Buffered);
            let len = frame_len(&s, from, 4, snap);
            whole += len;
            if k >= 190 {
                suffix += len;
            }
        }
        store.wait_reclaimed();
        let read = |f: &dyn Fn() -> usize| {
            let before = io.read.load(Ordering::Relaxed);
            let n = f();
            (n, io.read.load(Ordering::Relaxed) - before)
        };
        let (n, from_snapshot) = read(&|| store.read_from_snapshot(&s).unwrap().len());
        assert_eq!(n, 800 - 762);
        assert!(from_snapshot >= suffix, "read {from_snapshot} bytes for a suffix of {suffix}");
        assert!(
            from_snapshot * 10 <= suffix * 13,
            "read {from_snapshot} bytes for a suffix of {suffix} (the whole log: {whole})"
        );
        let (n, all) = read(&|| store.read_all(&s).unwrap().len());
        assert_eq!(n, 800);
        assert!(all >= whole && all > 10 * from_snapshot, "{all} {whole} {from_snapshot}");
        assert_eq!(newest_snapshot(&store, &s), Some(762));
    }
    // Reopened, it reads as little.
    let store = open();
    let before = io.read.load(Ordering::Relaxed);
    let records = store.read_from_snapshot(&s).unwrap();
    let read = io.read.load(Ordering::Relaxed) - before;
    assert_eq!(records.first().map(|r| r.seq), Some(Seq(762)));
    assert!(read >= suffix && read * 10 <= suffix * 13, "read {read} for a suffix of {suffix}");
}

/// The sidecar index files on `disk`, in order.
fn sidecars(disk: &SimDisk) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = disk
        .files(&sim_dir())
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    found.sort();
    found
}

/// Replaces the file at `path` on `disk` with `bytes`, synced.
fn replace(disk: &SimDisk, path: &std::path::Path, bytes: &[u8]) {
    disk.remove(path).unwrap();
    let f = disk.create_new(path).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    f.sync_data().unwrap();
    disk.sync_dir(&sim_dir()).unwrap();
}

#[test]
fn reopening_finds_the_newest_snapshot_in_sidecars_in_scanned_sealed_segments_and_the_active_one() {
    let options = FileOptions::new().segment_size(4096).preallocate(0);
    let disk = SimDisk::new();
    let (s, gone, never) = (sid("kept"), sid("gone"), sid("never"));
    let mut tail = 0;
    {
        let store = open_sim(&disk, options).unwrap();
        // The snapshot at seq 61, in a batch that a later segment seals.
        for k in 0..120u64 {
            let snap = (k == 20).then_some(tail + 1);
            tail = put(&store, &s, tail, 3, snap, Durability::Synced);
        }
        put(&store, &never, 0, 2, None, Durability::Synced);
        // A session with a snapshot, deleted, and written again without one.
        put(&store, &gone, 0, 3, Some(2), Durability::Synced);
        assert!(store.delete(&gone).unwrap());
        assert_eq!(newest_snapshot(&store, &gone), None);
        put(&store, &gone, 0, 2, None, Durability::Synced);
        assert_eq!(newest_snapshot(&store, &s), Some(61));
        store.wait_reclaimed();
    }
    // The sidecar of the segment holding it says where it lies: once.
    let with_snapshot: Vec<(PathBuf, usize)> = sidecars(&disk)
        .into_iter()
        .flat_map(|p| {
            let side = Sidecar::decode(&disk.read_file(&p).unwrap()).unwrap();
            let at: Vec<usize> = side
                .frames
                .iter()
                .enumerate()
                .filter(|(_, f)| f.snapshot.is_some())
                .map(|(k, _)| k)
                .collect();
            at.into_iter().map(move |k| (p.clone(), k))
        })
        .collect();
    assert_eq!(with_snapshot.len(), 1, "{with_snapshot:?}");
    let (side_path, frame) = with_snapshot[0].clone();
    let side = Sidecar::decode(&disk.read_file(&side_path).unwrap()).unwrap();
    assert_eq!((side.frames[frame].first, side.frames[frame].snapshot), (60, Some(1)));

    let reopened = |disk: &SimDisk| {
        let store = open_sim(disk, options).unwrap();
        let got = (
            newest_snapshot(&store, &s),
            newest_snapshot(&store, &gone),
            newest_snapshot(&store, &never),
        );
        assert_eq!(store.read_from_snapshot(&gone).unwrap().len(), 2, "the new life only");
        store.wait_reclaimed();
        got
    };
    assert_eq!(reopened(&disk), (Some(61), None, None), "from the sidecars");

    // Opening takes the place from the sidecar: one that says another place is believed.
    let mut forged = side.clone();
    forged.frames[frame].snapshot = Some(0);
    replace(&disk, &side_path, &forged.encode());
    {
        let store = open_sim(&disk, options).unwrap();
        let first = store.read_from_snapshot(&s).unwrap().first().map(|r| r.seq);
        assert_eq!(first, Some(Seq(60)), "the forged sidecar's place");
    }
    replace(&disk, &side_path, &side.encode());

    // Without sidecars, the sealed segments are scanned.
    for p in sidecars(&disk) {
        disk.remove(&p).unwrap();
    }
    disk.sync_dir(&sim_dir()).unwrap();
    assert_eq!(reopened(&disk), (Some(61), None, None), "from the scans");
    assert!(!sidecars(&disk).is_empty(), "the writable open wrote them again");

    // Snapshots in the active segment: one in a batch, then one alone (the newest, known from
    // its record's header), then a batch after them.
    let alone;
    {
        let store = open_sim(&disk, options).unwrap();
        tail = put(&store, &s, tail, 4, Some(tail + 1), Durability::Synced);
        alone = tail;
        tail = put(&store, &s, tail, 1, Some(tail), Durability::Synced);
        put(&store, &s, tail, 2, None, Durability::Synced);
        assert_eq!(newest_snapshot(&store, &s), Some(alone));
    }
    assert_eq!(reopened(&disk), (Some(alone), None, None), "from the active segment");
    let report = verify_sim(&disk);
    assert!(report.is_clean(), "{:?}", report.findings);
}

/// The segment files on `disk`, in order of their ids.
fn segments(disk: &SimDisk) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = disk
        .files(&sim_dir())
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    found.sort();
    found
}

/// A message of about `bytes` bytes, numbered `q`.
fn bulky(q: u64, bytes: usize) -> Stamped {
    let text = format!("{q}:{}", "z".repeat(bytes));
    Stamped::at(UnixMillis(q), Message { role: Role::User, text })
}

#[test]
fn compaction_moves_the_snapshot_s_batch_and_the_index_still_reads_from_it() {
    let options = FileOptions::new().segment_size(4096).preallocate(0);
    let disk = SimDisk::new();
    let (s, junk) = (sid("kept"), sid("junk"));
    let mut tail = 0;
    {
        let store = open_sim(&disk, options).unwrap();
        // The kept session's batches among bulky ones of a session deleted later: the segments
        // holding them are then mostly dead, and compacted.
        let mut snapshot_segment = None;
        for k in 0..12u64 {
            let snap = (k == 5).then_some(tail + 1);
            tail = put(&store, &s, tail, 2, snap, Durability::Synced);
            if snap.is_some() {
                // The newest segment holds it.
                snapshot_segment = segments(&disk).pop();
            }
            store.append(&junk, Seq(k), &[bulky(k, 700)], Durability::Synced).unwrap();
        }
        let snapshot_segment = snapshot_segment.unwrap();
        assert_ne!(segments(&disk).pop(), Some(snapshot_segment.clone()), "it was sealed");
        assert!(store.delete(&junk).unwrap());
        store.wait_reclaimed();
        assert_eq!(store.reclaim_problem(), None);
        assert!(
            !segments(&disk).contains(&snapshot_segment),
            "the segment holding the snapshot was compacted away: {:?}",
            segments(&disk)
        );
        assert_eq!(store.read_all(&s).unwrap().len() as u64, tail);
        assert_eq!(newest_snapshot(&store, &s), Some(11));
    }
    let store = open_sim(&disk, options).unwrap();
    assert_eq!(newest_snapshot(&store, &s), Some(11), "after a reopen");
    drop(store);
    let report = verify_sim(&disk);
    assert!(report.is_clean(), "{:?}", report.findings);
}

#[test]
fn a_crash_that_loses_a_snapshot_s_batch_leaves_the_one_before_it_or_none() {
    let options = FileOptions::new();
    let disk = SimDisk::new();
    let (a, b) = (sid("earlier"), sid("first"));
    let store = open_sim(&disk, options).unwrap();
    // Synced: "earlier" with a snapshot at seq 3, "first" with none.
    put(&store, &a, 0, 5, Some(3), Durability::Synced);
    put(&store, &b, 0, 3, None, Durability::Synced);
    // Not synced: a newer snapshot of each, and a batch after them.
    put(&store, &a, 5, 3, Some(6), Durability::Buffered);
    put(&store, &a, 8, 2, None, Durability::Buffered);
    put(&store, &b, 3, 1, Some(3), Durability::Buffered);
    assert_eq!((newest_snapshot(&store, &a), newest_snapshot(&store, &b)), (Some(6), Some(3)));
    let crashed = disk.crash_lose_unsynced();
    drop(store);

    let store = open_sim(&crashed, options).unwrap();
    assert_eq!((store.tail(&a).unwrap(), store.tail(&b).unwrap()), (Seq(5), Seq(3)), "lost");
    assert_eq!(newest_snapshot(&store, &a), Some(3), "the synced snapshot");
    assert_eq!(newest_snapshot(&store, &b), None);
    assert_eq!(store.read_from_snapshot(&b).unwrap().len(), 3, "the whole log");
    // Appends go on from the tail, and a new snapshot is found again.
    put(&store, &b, 3, 2, Some(4), Durability::Synced);
    assert_eq!(newest_snapshot(&store, &b), Some(4));
    drop(store);
    let store = open_sim(&crashed, options).unwrap();
    assert_eq!((newest_snapshot(&store, &a), newest_snapshot(&store, &b)), (Some(3), Some(4)));
}
