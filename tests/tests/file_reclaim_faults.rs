//! The file backend's reclaim thread meets damage and failures off the append path: they are
//! reported and tried again, and the appends go on; only a failure of the append path poisons.

use std::sync::Arc;

use stepjournal_backends::file::layout::{GROUP_HEADER_LEN, SEGMENT_HEADER_LEN};
use stepjournal_backends::file::sim::{OpKind, SimDisk};
use stepjournal_backends::file::{FileOptions, FileStore, verify_dir_with};
use stepjournal_backends::{Durability, JournalStore, StoreError};
use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};
use stepjournal_tests::file_fixture::{open_sim, sim_dir};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn text(at: u64, bytes: usize) -> Stamped {
    Stamped::at(UnixMillis(at), Message { role: Role::User, text: "q".repeat(bytes) })
}

fn append(store: &FileStore, s: &SessionId, at: u64, bytes: usize) {
    store.append(s, Seq(at), &[text(at, bytes)], Durability::Synced).unwrap();
}

fn options() -> FileOptions {
    FileOptions::new().segment_size(4096)
}

fn seg(id: u64) -> std::path::PathBuf {
    sim_dir().join(format!("{id:020}.seg"))
}

fn side(id: u64) -> std::path::PathBuf {
    sim_dir().join(format!("{id:020}.idx"))
}

fn exists(disk: &SimDisk, path: &std::path::Path) -> bool {
    disk.read_file(path).is_some()
}

/// Segment 1 holds `victim`'s batch first, then `keeper`'s, then `filler-*` batches; the store
/// goes on to segment 2, and segment 1's sidecar is written.
fn first_segment_sealed(disk: &SimDisk) -> FileStore {
    let store = open_sim(disk, options()).unwrap();
    append(&store, &sid("victim"), 0, 200);
    append(&store, &sid("keeper"), 0, 200);
    let mut n = 0;
    while !exists(disk, &seg(2)) {
        append(&store, &sid(&format!("filler-{n}")), 0, 400);
        n += 1;
    }
    store.wait_reclaimed();
    assert!(exists(disk, &side(1)), "segment 1's sidecar is written");
    store
}

fn delete_fillers(store: &FileStore) {
    for s in store.sessions().unwrap() {
        if s.as_str().starts_with("filler-") {
            assert!(store.delete(&s).unwrap());
        }
    }
}

#[test]
fn damage_compaction_finds_leaves_that_segment_alone_and_never_poisons() {
    // One flipped byte inside a live batch of a sealed segment opened through its sidecar
    // poisoned the store when the reclaim thread compacted the segment: every append to every
    // session failed with "compacting segment ... corrupt data", on every writable open.
    let disk = SimDisk::new();
    drop(first_segment_sealed(&disk));
    // Inside the victim's frame, past its header: the sidecar's tail check does not see it.
    let victim_at = (SEGMENT_HEADER_LEN + GROUP_HEADER_LEN) as u64;
    assert!(disk.flip_byte(&seg(1), victim_at + 60, 0x40));
    for open in 0..2 {
        let store = open_sim(&disk, options()).unwrap();
        if open == 0 {
            // Segment 1 is now mostly dead: the reclaim thread compacts it.
            delete_fillers(&store);
        } else {
            append(&store, &sid("late"), 0, 3000);
            append(&store, &sid("late"), 1, 3000);
        }
        store.wait_reclaimed();
        let stats = store.stats();
        assert_eq!(stats.segments_left_damaged, 1, "open {open}: {stats:?}");
        let problem = store.reclaim_problem().expect("the damage is reported");
        assert!(
            problem.contains("00000000000000000001.seg")
                && problem.contains(&format!("byte {victim_at}"))
                && problem.contains("victim"),
            "open {open}: {problem}"
        );
        // Every session appends; the damaged batch alone fails to read, naming its place.
        let k = store.tail(&sid("keeper")).unwrap().get();
        append(&store, &sid("keeper"), k, 10);
        assert_eq!(store.read(&sid("keeper"), Seq(0)..Seq(9)).unwrap().len(), k as usize + 1);
        let err = store.read(&sid("victim"), Seq(0)..Seq(1)).unwrap_err();
        assert!(!matches!(err, StoreError::Poisoned { .. }), "open {open}: {err}");
        assert!(exists(&disk, &seg(1)), "the damaged segment is left where it is");
        drop(store);
    }
    let report =
        verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Default::default(), &mut |_, _| {})
            .unwrap();
    let named =
        report.findings.iter().any(|f| f.segment == seg(1) && f.to_string().contains("byte"));
    assert!(named, "verify names the damage: {:?}", report.findings);
}

#[test]
fn a_sidecar_that_cannot_be_written_is_reported_and_written_once_it_can_be() {
    // An ENOSPC writing an optional sidecar poisoned the store: a full disk for a sidecar stopped
    // every session.
    let disk = SimDisk::new();
    disk.fail_named(OpKind::Create, ".idx");
    let store = open_sim(&disk, options()).unwrap();
    let s = sid("s");
    let mut q = 0;
    while !exists(&disk, &seg(3)) {
        append(&store, &s, q, 500);
        q += 1;
    }
    store.wait_reclaimed();
    assert_eq!(store.metrics().poisoned, 0);
    assert!(store.stats().reclaim_failures >= 1, "{:?}", store.stats());
    assert!(store.metrics().reclaim_failures >= 1);
    let problem = store.reclaim_problem().unwrap();
    assert!(problem.contains(".idx") && problem.contains("ENOSPC"), "{problem}");
    assert!(!exists(&disk, &side(1)));
    append(&store, &s, q, 500);
    q += 1;
    disk.heal();
    // Sealing another segment asks the thread to look again: every sidecar gets written.
    while !exists(&disk, &seg(4)) {
        append(&store, &s, q, 500);
        q += 1;
    }
    store.wait_reclaimed();
    for id in 1..=3 {
        assert!(exists(&disk, &side(id)), "sidecar {id} written once the disk had room");
    }
    drop(store);
    let store = open_sim(&disk, options()).unwrap();
    assert_eq!(store.tail(&s).unwrap().get(), q);
}

/// Fails one removal step (`kind` on files named `name`) while the reclaim thread removes
/// segment 1, until healed; checks that the appends go on and that the removal is made in full
/// once the disk is healed.
fn removal_failing_is_tried_again(kind: OpKind, name: &str) {
    let disk = SimDisk::new();
    let store = first_segment_sealed(&disk);
    let (victim, keeper) = (sid("victim"), sid("keeper"));
    let segments = store.index_size().segments;
    disk.fail_named(kind, name);
    assert!(store.delete(&victim).unwrap());
    assert!(store.delete(&keeper).unwrap());
    delete_fillers(&store);
    store.wait_reclaimed();
    assert_eq!(store.metrics().poisoned, 0, "{kind:?}: {:?}", store.reclaim_problem());
    assert!(store.stats().reclaim_failures >= 1, "{kind:?}: {:?}", store.stats());
    assert_eq!(store.index_size().segments, segments, "{kind:?}: segment 1 not forgotten yet");
    let problem = store.reclaim_problem().unwrap();
    assert!(problem.contains("00000000000000000001"), "{kind:?}: {problem}");
    // The appends go on.
    append(&store, &sid("after"), 0, 10);
    disk.heal();
    // More deletions ask the thread to look again, and the removal is finished.
    append(&store, &sid("gone"), 0, 10);
    assert!(store.delete(&sid("gone")).unwrap());
    store.wait_reclaimed();
    assert!(!exists(&disk, &seg(1)), "{kind:?}: segment 1 removed on the next try");
    assert!(store.index_size().segments < segments, "{kind:?}");
    assert_eq!(store.metrics().poisoned, 0, "{kind:?}");
    drop(store);
    let store = open_sim(&disk, options()).unwrap();
    assert_eq!(store.sessions().unwrap(), vec![sid("after")], "{kind:?}");
}

#[test]
fn a_failed_unlink_of_a_dead_segment_is_reported_and_tried_again() {
    // A failed unlink of a dead segment poisoned the store.
    removal_failing_is_tried_again(OpKind::Remove, ".seg");
}

#[test]
fn a_failed_directory_sync_after_a_removal_is_reported_and_tried_again() {
    // A failed directory sync after removing a dead segment poisoned the store.
    removal_failing_is_tried_again(OpKind::SyncDir, "journal");
}

#[test]
fn the_reclaim_thread_removes_nothing_once_the_lock_file_is_replaced() {
    // The reclaim thread removed segments and wrote sidecars without looking at the lock file,
    // as the committer does before each group: beside another writer that had taken the
    // journal, it would remove files that writer counts on.
    let disk = SimDisk::new();
    let store = open_sim(&disk, options()).unwrap();
    let only = sid("only");
    let mut q = 0;
    while !exists(&disk, &seg(2)) {
        append(&store, &only, q, 500);
        q += 1;
    }
    store.wait_reclaimed();
    // The deletion that leaves segment 1 with nothing needed is written, its sync held; the lock
    // file is replaced meanwhile, so the deletion lands and the thread is asked to look.
    disk.hold_syncs();
    std::thread::scope(|scope| {
        let deleting = scope.spawn(|| store.delete(&only));
        disk.wait_for_held_syncs(1);
        disk.record_ops();
        disk.replace_lock_file(&sim_dir().join(stepjournal_backends::file::LOCK_FILE));
        disk.release_syncs();
        assert!(deleting.join().unwrap().unwrap());
    });
    store.wait_reclaimed();
    let removed: Vec<_> =
        disk.op_log().into_iter().filter(|(k, _)| matches!(k, OpKind::Remove)).collect();
    assert!(removed.is_empty(), "removed after the lock was lost: {removed:?}");
    assert!(exists(&disk, &seg(1)));
    let err = store.append(&only, Seq(0), &[text(0, 10)], Durability::Synced).unwrap_err();
    assert!(err.to_string().contains("lock file"), "{err}");
}
