//! The file backend: the conformance suite on real files and on the simulated disk, and its own
//! behaviour (rotation, reopening, deletion and space, locking, read-only opening).

use stepjournal_backends::file::FileOptions;
use stepjournal_tests::file_fixture::{RealFixture, SimFixture};

mod real_files {
    use super::*;
    stepjournal_tests::backend_conformance!(|| RealFixture::new(FileOptions::new()));
}

mod small_segments {
    use super::*;
    stepjournal_tests::backend_conformance!(|| RealFixture::new(
        FileOptions::new().segment_size(4096)
    ));
}

mod simulated_disk {
    use super::*;
    stepjournal_tests::backend_conformance!(|| SimFixture::new(
        FileOptions::new().segment_size(8192)
    ));
}

use std::sync::Barrier;

use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileStore, LOCK_FILE};
use stepjournal_backends::{AppendError, Durability, JournalStore, OpenError, StoreError};
use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}
use stepjournal_tests::file_fixture::{
    check_prefix, crash_event, crash_session, dir_size, open_sim,
};
use stepjournal_tests::sample::{numbered, stamped_numbered};

fn append_events(store: &dyn JournalStore, s: usize, from: u64, n: u64) {
    let events: Vec<Stamped> =
        (from..from + n).map(|q| Stamped::at(UnixMillis(q), crash_event(s, q))).collect();
    store.append(&crash_session(s), Seq(from), &events, Durability::Synced).unwrap();
}

#[test]
fn rotation_seals_segments_and_reopening_rebuilds_every_session() {
    let opts = FileOptions::new().segment_size(4096);
    let mut f = RealFixture::new(opts);
    let mut tails = [0u64; 6];
    for round in 0..60u64 {
        for (s, tail) in tails.iter_mut().enumerate() {
            let n = 1 + (round + s as u64) % 4;
            append_events(&*f, s, *tail, n);
            *tail += n;
        }
    }
    let segments = f.index_size().segments;
    assert!(segments > 10, "4 KiB segments rotate: {segments}");
    f.reopen(opts);
    for (s, tail) in tails.iter().enumerate() {
        assert_eq!(check_prefix(&*f, s, *tail, *tail), *tail);
    }
    assert_eq!(f.index_size().segments, segments);
    // Appends continue after the reopen.
    append_events(&*f, 0, tails[0], 2);
    assert_eq!(f.tail(&crash_session(0)).unwrap(), Seq(tails[0] + 2));
}

#[test]
fn the_index_keeps_one_entry_per_batch_not_per_event() {
    let f = RealFixture::new(FileOptions::new());
    append_events(&*f, 0, 0, 500);
    append_events(&*f, 0, 500, 500);
    append_events(&*f, 1, 0, 1);
    let size = f.index_size();
    assert_eq!((size.sessions, size.batches), (2, 3));
    assert_eq!(f.read(&crash_session(0), Seq(499)..Seq(502)).unwrap().len(), 3);
}

#[test]
fn a_second_writer_is_refused_naming_the_directory() {
    let f = RealFixture::new(FileOptions::new());
    let err = FileStore::open(f.dir.path(), FileOptions::new()).unwrap_err();
    match &err {
        OpenError::Locked { dir, lock } => {
            assert_eq!(dir, f.dir.path());
            assert_eq!(lock, &f.dir.path().join(LOCK_FILE));
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(err.to_string().contains(&f.dir.path().display().to_string()), "{err}");
}

#[test]
fn the_lock_is_released_when_the_store_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    append_events(&store, 0, 0, 1);
    drop(store);
    let store = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 1, 1), 1);
}

#[test]
fn a_read_only_store_takes_no_lock_reads_a_snapshot_and_refuses_writes() {
    let f = RealFixture::new(FileOptions::new().segment_size(4096));
    for q in 0..40 {
        append_events(&*f, 0, q, 1);
    }
    let ro = FileStore::open_read_only(f.dir.path()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(check_prefix(&ro, 0, 40, 40), 40);
    // The writer goes on; the read-only store keeps what it saw.
    append_events(&*f, 0, 40, 1);
    assert_eq!(ro.tail(&crash_session(0)).unwrap(), Seq(40));
    let e = Stamped::at(UnixMillis(0), numbered(0));
    let err = ro.append(&crash_session(0), Seq(40), &[e], Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Store(StoreError::ReadOnly { .. })), "{err:?}");
    assert!(matches!(ro.delete(&crash_session(0)), Err(StoreError::ReadOnly { .. })));
    // A fresh read-only open sees the new append.
    let ro = FileStore::open_read_only(f.dir.path()).unwrap();
    assert_eq!(check_prefix(&ro, 0, 41, 41), 41);
}

#[test]
fn a_read_only_open_of_a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = FileStore::open_read_only(&missing).unwrap_err();
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
    assert!(!missing.exists(), "a read-only open creates nothing");
}

#[test]
fn disk_use_stays_bounded_when_sessions_are_created_and_deleted_forever() {
    let opts = FileOptions::new().segment_size(8192);
    let f = RealFixture::new(opts);
    // One session lives through it all, written now and then.
    let mut keeper = 0u64;
    let mut peak = 0u64;
    let mut sizes = Vec::new();
    for round in 0..400usize {
        let s = 1 + round;
        for q in 0..6 {
            append_events(&*f, s, q, 1);
        }
        if round % 10 == 0 {
            append_events(&*f, 0, keeper, 1);
            keeper += 1;
        }
        // Sessions live a while, then are deleted.
        if round >= 3 {
            assert!(f.delete(&crash_session(round - 2)).unwrap());
            f.wait_reclaimed();
        }
        let size = dir_size(f.dir.path());
        peak = peak.max(size);
        sizes.push(size);
    }
    let written = f.stats().bytes;
    assert!(written > 20 * 8192, "the workload wrote {written} bytes");
    let late_peak = sizes[200..].iter().copied().max().unwrap();
    assert!(
        late_peak <= 12 * 8192,
        "the directory holds {late_peak} bytes after {written} were written"
    );
    assert_eq!(check_prefix(&*f, 0, keeper, keeper), keeper);
}

/// The highest segment id in `dir`.
fn newest_segment(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".seg").and_then(|d| d.parse().ok()))
        .max()
        .unwrap()
}

fn append_text(store: &dyn JournalStore, s: &SessionId, at: u64, bytes: usize) {
    let e = Stamped::at(UnixMillis(at), Message { role: Role::User, text: "y".repeat(bytes) });
    store.append(s, Seq(at), &[e], Durability::Synced).unwrap();
}

#[test]
fn a_deleted_session_stays_deleted_after_the_segment_of_its_deletion_is_removed() {
    // A deletion frame may be removed only once no older frame of its session remains, or the
    // session would come back on the next open.
    let opts = FileOptions::new().segment_size(4096).compact_when_dead(75);
    let mut f = RealFixture::new(opts);
    let (live, gone, filler) = (sid("live"), sid("gone"), sid("filler"));
    // The first segment stays: more than a quarter of it is live.
    for q in 0..3 {
        append_text(&*f, &live, q, 600);
    }
    for q in 0..3 {
        append_text(&*f, &gone, q, 10);
    }
    // Fill the rest of the first segment and a second one with a session deleted next, so the
    // segment that takes the deletion frames holds nothing live.
    let mut q = 0;
    while newest_segment(f.dir.path()) < 3 {
        append_text(&*f, &filler, q, 200);
        q += 1;
    }
    assert!(f.delete(&gone).unwrap());
    assert!(f.delete(&filler).unwrap());
    let deletions_in = newest_segment(f.dir.path());
    // Seal that segment (its frames all dead by then) so it can be removed.
    let other = sid("other");
    let mut r = 0;
    while newest_segment(f.dir.path()) == deletions_in {
        append_text(&*f, &other, r, 200);
        r += 1;
    }
    assert!(f.delete(&other).unwrap());
    f.wait_reclaimed();
    let first = f.dir.path().join(format!("{:020}.seg", 1));
    assert!(first.exists(), "the first segment holds live data");
    f.reopen(opts);
    assert!(f.read_all(&gone).unwrap().is_empty(), "a deleted session came back");
    assert!(f.read_all(&filler).unwrap().is_empty(), "a deleted session came back");
    assert_eq!(f.sessions().unwrap(), vec![live.clone()]);
    assert_eq!(f.read_all(&live).unwrap().len(), 3);
    // The id can start again, and stays its new self after another reopen.
    append_text(&*f, &gone, 0, 5);
    f.reopen(opts);
    assert_eq!(f.read_all(&gone).unwrap().len(), 1);
}

#[test]
fn compaction_moves_live_batches_out_of_mostly_dead_segments() {
    let opts = FileOptions::new().segment_size(4096);
    let mut f = RealFixture::new(opts);
    let keep = sid("keep");
    append_text(&*f, &keep, 0, 50);
    let mut n = 0;
    while newest_segment(f.dir.path()) < 4 {
        let s = sid(&format!("temp-{n}"));
        append_text(&*f, &s, 0, 300);
        assert!(f.delete(&s).unwrap());
        n += 1;
    }
    f.wait_reclaimed();
    assert!(
        !f.dir.path().join(format!("{:020}.seg", 1)).exists(),
        "the first segment's one live batch was moved and the segment removed"
    );
    append_text(&*f, &keep, 1, 50);
    f.reopen(opts);
    let log = f.read_all(&keep).unwrap();
    assert_eq!(log.iter().map(|r| r.seq.get()).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(f.sessions().unwrap(), vec![keep]);
}

#[test]
fn concurrent_appenders_share_syncs() {
    // Appenders that queue while a group's sync runs are written together: one write and one
    // sync for all of them. The sync is held until they are all queued.
    const FOLLOWERS: usize = 15;
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new().preallocate(0)).unwrap();
    for round in 0..3u64 {
        disk.hold_syncs();
        std::thread::scope(|scope| {
            let store = &store;
            scope.spawn(move || append_events(store, 0, round, 1));
            // The first appender leads: its group is written, its sync held.
            disk.wait_for_held_syncs(1);
            for t in 1..=FOLLOWERS {
                scope.spawn(move || append_events(store, t, round, 1));
            }
            while store.queued() < FOLLOWERS {
                std::thread::yield_now();
            }
            disk.release_syncs();
        });
        let stats = store.stats();
        let appends = (round + 1) * (FOLLOWERS as u64 + 1);
        assert_eq!(stats.appends, appends, "{stats:?}");
        assert_eq!(stats.groups, 2 * (round + 1), "the followers share one group: {stats:?}");
        assert_eq!(stats.syncs, 2 * (round + 1), "and one sync: {stats:?}");
    }
    for t in 0..=FOLLOWERS {
        assert_eq!(check_prefix(&store, t, 3, 3), 3);
    }
}

#[test]
fn racing_appends_to_one_session_have_exactly_one_winner_even_while_a_sync_is_pending() {
    // Eight appenders aim at the same position while the winner's sync cannot finish: the
    // others are refused against the pending tail, not the acknowledged one.
    const RACERS: u64 = 8;
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    let s = SessionId::new("contested").unwrap();
    for round in 0..10u64 {
        disk.hold_syncs();
        let barrier = Barrier::new(RACERS as usize);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            for t in 0..RACERS {
                let (store, s, barrier, tx) = (&store, &s, &barrier, tx.clone());
                scope.spawn(move || {
                    barrier.wait();
                    let e = stamped_numbered(t, 1);
                    tx.send(store.append(s, Seq(round), &e, Durability::Synced)).unwrap();
                });
            }
            // Seven answers come while the sync is held; they are all refusals.
            for _ in 1..RACERS {
                match rx.recv().unwrap() {
                    Err(AppendError::Conflict { expected, actual }) => {
                        assert_eq!((expected, actual), (Seq(round), Seq(round + 1)));
                    }
                    other => panic!("round {round}: {other:?} while the winner's sync is held"),
                }
            }
            assert_eq!(store.tail(&s).unwrap(), Seq(round), "nothing acknowledged yet");
            disk.release_syncs();
            let ack = rx.recv().unwrap().unwrap();
            assert_eq!(ack.next, Seq(round + 1));
        });
    }
    assert_eq!(store.read_all(&s).unwrap().len(), 10);
}

/// A journal of one segment on real files, and the name of its second segment.
fn journal_with_one_segment() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    append_events(&store, 0, 0, 3);
    drop(store);
    let second = dir.path().join(stepjournal_backends::file::SegmentId(2).file_name());
    (dir, second)
}

fn not_a_segment(r: Result<FileStore, OpenError>, path: &std::path::Path) -> String {
    match r {
        Err(e @ OpenError::NotASegment { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            text
        }
        Err(other) => panic!("expected NotASegment, got {other}"),
        Ok(_) => panic!("a journal with {} opened", path.display()),
    }
}

#[test]
fn a_dangling_symlink_named_like_a_segment_is_a_problem_for_verify_and_refused_by_open() {
    // The defect: verify skipped a segment it could not open ("0 segments ... clean", exit 0)
    // while other commands failed on it; a read-only open skipped it too.
    let (dir, second) = journal_with_one_segment();
    std::os::unix::fs::symlink(dir.path().join("gone"), &second).unwrap();
    let report =
        stepjournal_backends::file::verify_dir(dir.path(), &Default::default(), &mut |_, _| {})
            .unwrap();
    assert!(!report.is_clean(), "{:?}", report.findings);
    let f = report.findings.iter().find(|f| f.segment == second).unwrap();
    assert!(!f.torn_tail);
    assert!(f.to_string().contains("symbolic link to nothing"), "{f}");
    not_a_segment(FileStore::open_read_only(dir.path()), &second);
    not_a_segment(FileStore::open(dir.path(), FileOptions::new()), &second);
    assert!(second.symlink_metadata().is_ok(), "the link is left where it is");
}

#[test]
fn a_named_pipe_named_like_a_segment_is_refused_without_being_opened() {
    // The defect: opening a FIFO waits for a writer, so `sessions`, `verify` and `stats` hung on
    // `mkfifo J/00000000000000000002.seg`. A writer end is held here so that a regression
    // fails instead of hanging: the old code opened the pipe, read nothing and removed it as a
    // half-created segment.
    let (dir, second) = journal_with_one_segment();
    let made = std::process::Command::new("mkfifo").arg(&second).status().unwrap();
    assert!(made.success());
    let _writer = std::fs::OpenOptions::new().read(true).write(true).open(&second).unwrap();
    let report =
        stepjournal_backends::file::verify_dir(dir.path(), &Default::default(), &mut |_, _| {})
            .unwrap();
    let f = report.findings.iter().find(|f| f.segment == second).unwrap();
    assert!(!f.torn_tail && f.to_string().contains("named pipe"), "{f}");
    assert!(!report.is_clean());
    let text = not_a_segment(FileStore::open_read_only(dir.path()), &second);
    assert!(text.contains("named pipe"), "{text}");
    not_a_segment(FileStore::open(dir.path(), FileOptions::new()), &second);
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&second.metadata().unwrap().file_type()),
        "the pipe is left where it is"
    );
}

/// Verifies the journal on the simulated disk.
fn verify_sim(disk: &SimDisk) -> stepjournal_backends::file::VerifyReport {
    stepjournal_backends::file::verify_dir_with(
        std::sync::Arc::new(disk.clone()),
        &stepjournal_tests::file_fixture::sim_dir(),
        &Default::default(),
        &mut |_, _| {},
    )
    .unwrap()
}

#[test]
fn a_segment_that_cannot_be_opened_is_a_problem_for_verify() {
    // A root-owned 0600 segment read by another user: opening it fails. Verify used to skip it
    // and call the journal clean.
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    append_events(&store, 0, 0, 2);
    drop(store);
    let seg = stepjournal_tests::file_fixture::sim_dir()
        .join(stepjournal_backends::file::SegmentId(1).file_name());
    disk.forbid_open(&seg);
    let report = verify_sim(&disk);
    assert!(!report.is_clean(), "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!((f.segment.as_path(), f.offset), (seg.as_path(), 0));
    assert!(f.to_string().contains("permission denied"), "{f}");
    let err = open_sim(&disk, FileOptions::new().read_only(true)).unwrap_err();
    assert!(err.to_string().contains(&seg.display().to_string()), "{err}");
}

#[test]
fn a_text_file_named_like_the_only_segment_is_refused_not_deleted() {
    // The defect: a file shorter than a segment header was taken for a segment a crash left
    // half-created, and a writable open deleted it, whatever it held.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(stepjournal_backends::file::SegmentId(1).file_name());
    std::fs::write(&path, "my notes\n").unwrap();
    let text = not_a_segment(FileStore::open(dir.path(), FileOptions::new()), &path);
    assert!(text.contains("not what a crash leaves"), "{text}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes\n");
    let report =
        stepjournal_backends::file::verify_dir(dir.path(), &Default::default(), &mut |_, _| {})
            .unwrap();
    assert!(!report.is_clean(), "{:?}", report.findings);
}

#[path = "backend_file/room.rs"]
mod room;

#[path = "backend_file/snapshot.rs"]
mod snapshot;

#[path = "backend_file/trim.rs"]
mod trim;

mod committer {
    //! The completion-based path: async appends answered by the store's committer thread.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Duration;

    use stepjournal_backends::file::FileOptions;
    use stepjournal_backends::file::sim::{OpKind, SimDisk};
    use stepjournal_backends::{AppendError, Durability, JournalStore, StoreError};
    use stepjournal_codec::{Seq, Stamped, UnixMillis};
    use stepjournal_tests::file_fixture::{check_prefix, crash_event, crash_session, open_sim};
    use stepjournal_tests::watchdog::Watchdog;

    fn one(s: usize, q: u64) -> [Stamped; 1] {
        [Stamped::at(UnixMillis(q), crash_event(s, q))]
    }

    /// A waker that counts its wakes (the room tests use it too).
    pub(super) struct CountingWaker(pub(super) AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_async_append_is_written_by_the_committer_thread_not_by_its_caller() {
        // Were the caller to write its own group, the call would block at the held sync and
        // the watchdog would end the test.
        let _watchdog =
            Watchdog::start("an async append on an idle store", Duration::from_secs(60));
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new().preallocate(0)).unwrap();
        disk.hold_syncs();
        let future = store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced);
        disk.wait_for_held_syncs(1);
        assert!(!future.is_ready(), "answered before its sync returned");
        assert_eq!(store.tail(&crash_session(0)).unwrap(), Seq(0), "acknowledged too early");
        disk.release_syncs();
        let ack = future.wait().unwrap();
        assert_eq!((ack.first, ack.next, ack.durability), (Seq(0), Seq(1), Durability::Synced));
        assert_eq!(check_prefix(&store, 0, 1, 1), 1);
    }

    #[test]
    fn an_async_append_wakes_the_task_that_polled_it_once_its_group_is_durable() {
        let _watchdog = Watchdog::start("the committer's wake", Duration::from_secs(60));
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new().preallocate(0)).unwrap();
        disk.hold_syncs();
        let mut future =
            store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced);
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut future).poll(&mut cx).is_pending());
        disk.wait_for_held_syncs(1);
        assert_eq!(counter.0.load(Ordering::SeqCst), 0, "woken before the sync returned");
        disk.release_syncs();
        while counter.0.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        match std::pin::Pin::new(&mut future).poll(&mut cx) {
            Poll::Ready(Ok(ack)) => assert_eq!(ack.next, Seq(1)),
            other => panic!("after the wake: {other:?}"),
        }
    }

    #[test]
    fn async_appends_queued_behind_a_sync_share_one_group_and_one_sync() {
        const SESSIONS: usize = 200;
        let _watchdog = Watchdog::start("the committer's groups", Duration::from_secs(60));
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new().preallocate(0)).unwrap();
        disk.hold_syncs();
        let first = store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced);
        disk.wait_for_held_syncs(1);
        // One thread queues the rest while the first group's sync is held: no thread waits per
        // append.
        let rest: Vec<_> = (1..SESSIONS)
            .map(|s| store.append_async(&crash_session(s), Seq(0), &one(s, 0), Durability::Synced))
            .collect();
        assert_eq!(store.queued(), SESSIONS - 1);
        disk.release_syncs();
        first.wait().unwrap();
        for f in rest {
            assert_eq!(f.wait().unwrap().next, Seq(1));
        }
        let stats = store.stats();
        assert_eq!((stats.appends, stats.groups, stats.syncs), (SESSIONS as u64, 2, 2));
        let metrics = store.metrics();
        assert_eq!((metrics.appends, metrics.groups, metrics.syncs), (SESSIONS as u64, 2, 2));
        assert_eq!(metrics.max_group, SESSIONS as u64 - 1);
        for s in 0..SESSIONS {
            assert_eq!(check_prefix(&store, s, 1, 1), 1);
        }
    }

    #[test]
    fn dropping_the_store_writes_the_async_appends_it_had_queued() {
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new()).unwrap();
        let futures: Vec<_> = (0..50)
            .map(|s| store.append_async(&crash_session(s), Seq(0), &one(s, 0), Durability::Synced))
            .collect();
        drop(store);
        for f in futures {
            assert_eq!(f.wait().unwrap().next, Seq(1));
        }
        // Every one was synced before it was answered: a power loss keeps them all.
        let store = open_sim(&disk.crash_lose_unsynced(), FileOptions::new()).unwrap();
        for s in 0..50 {
            assert_eq!(check_prefix(&store, s, 1, 1), 1);
        }
    }

    #[test]
    fn a_failed_sync_fails_the_async_appends_of_its_group_and_everything_queued_behind_it() {
        let _watchdog = Watchdog::start("the failed group's answers", Duration::from_secs(60));
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new().preallocate(0)).unwrap();
        disk.hold_syncs();
        let first = store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced);
        disk.wait_for_held_syncs(1);
        let queued: Vec<_> = (1..4)
            .map(|s| store.append_async(&crash_session(s), Seq(0), &one(s, 0), Durability::Synced))
            .collect();
        disk.fail_next(OpKind::SyncData);
        disk.release_syncs();
        let err = first.wait().unwrap_err();
        assert!(matches!(err, AppendError::OutcomeUnknown { .. }), "{err:?}");
        for f in queued {
            let err = f.wait().unwrap_err();
            assert!(err.is_poisoned() && err.to_string().contains("fdatasync"), "{err}");
        }
        let later = store.append_async(&crash_session(9), Seq(0), &one(9, 0), Durability::Synced);
        assert!(later.is_ready(), "a poisoned store answers at once");
        assert!(later.wait().unwrap_err().is_poisoned());
        assert!(matches!(store.tail(&crash_session(0)), Err(StoreError::Poisoned { .. })));
        assert_eq!(store.metrics().poisoned, 1);
    }

    #[test]
    fn a_refused_async_append_is_answered_at_once() {
        let disk = SimDisk::new();
        let store = open_sim(&disk, FileOptions::new()).unwrap();
        store.append(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced).unwrap();
        let conflict =
            store.append_async(&crash_session(0), Seq(0), &one(0, 0), Durability::Synced);
        assert!(conflict.is_ready());
        assert!(matches!(
            conflict.wait(),
            Err(AppendError::Conflict { expected: Seq(0), actual: Seq(1) })
        ));
        let empty = store.append_async(&crash_session(0), Seq(1), &[], Durability::Synced);
        assert!(matches!(empty.wait(), Err(AppendError::EmptyBatch)));
    }
}

mod heads {
    //! Session heads kept in the index as batches land, and rebuilt on open from the records.

    use stepjournal_backends::file::{FileOptions, FileStore};
    use stepjournal_backends::{Durability, JournalStore, LeaseTaken, OwnerId, RunState};
    use stepjournal_codec::{
        CallId, ClientAnswer, Entry, Event, RawJson, RunEnded, RunId, RunOutcome, RunStarted,
        SessionId, Stamped, UnixMillis,
    };
    use stepjournal_tests::file_fixture::RealFixture;
    use stepjournal_tests::sample::numbered;

    fn append(store: &dyn JournalStore, s: &SessionId, at: u64, events: Vec<Event>) {
        let events: Vec<Stamped> =
            events.into_iter().map(|e| Stamped::at(UnixMillis(at), e)).collect();
        let tail = store.tail(s).unwrap();
        store.append(s, tail, &events, Durability::Synced).unwrap();
    }

    fn started(run: &str) -> Event {
        RunStarted { run: RunId::from(run), entry: Entry::Wake, by: None }.into()
    }

    fn ended(run: &str, outcome: RunOutcome) -> Event {
        RunEnded { run: RunId::from(run), outcome, error: None, by: None }.into()
    }

    #[test]
    fn heads_rebuilt_on_open_equal_the_heads_kept_as_batches_landed() {
        // Small segments: sessions' batches spread over rotated segments, and compaction
        // copies the live ones of mostly dead segments.
        let opts = FileOptions::new().segment_size(4096);
        let mut f = RealFixture::new(opts);
        let mut at = 1_000;
        for round in 0..40u64 {
            for k in 0..6u64 {
                let s = SessionId::new(format!("h-{k}").as_str()).unwrap();
                let run = format!("r{round}");
                let events = match (round + k) % 4 {
                    0 => vec![started(&run), numbered(round)],
                    1 => vec![
                        numbered(round),
                        ended(&format!("r{}", round.saturating_sub(1)), RunOutcome::Suspended),
                    ],
                    2 => vec![Event::from(ClientAnswer {
                        call: CallId::from("c"),
                        output: RawJson::parse("1").unwrap(),
                    })],
                    _ => vec![numbered(round)],
                };
                at += 1;
                append(&*f, &s, at, events);
            }
            // Short-lived sessions make segments mostly dead, so compaction moves the others.
            let temp = SessionId::new(format!("temp-{round}").as_str()).unwrap();
            append(&*f, &temp, at, vec![started("t"), numbered(0)]);
            assert!(f.delete(&temp).unwrap());
        }
        // Every kind of event: each alone (its head read from its record header on open), and
        // all in one batch (its records read).
        let alone = SessionId::new("every-kind-alone").unwrap();
        let together = SessionId::new("every-kind-together").unwrap();
        for e in stepjournal_tests::sample::every_event_type() {
            at += 1;
            append(&*f, &alone, at, vec![e]);
        }
        append(&*f, &together, at, stepjournal_tests::sample::every_event_type());
        assert!(f.index_size().segments > 1, "{:?}", f.index_size());
        let live = f.heads().unwrap();
        assert_eq!(live.len(), 8);
        assert!(live.iter().any(|h| h.answered_while_suspended), "{live:?}");
        assert!(live.iter().any(|h| matches!(h.run, RunState::Open { .. })), "{live:?}");
        let read_only = FileStore::open_read_only(f.dir.path()).unwrap();
        assert_eq!(read_only.heads().unwrap(), live, "a read-only open rebuilds the same heads");
        drop(read_only);
        f.reopen(opts);
        assert_eq!(f.heads().unwrap(), live, "reopening rebuilds the same heads");
    }

    #[test]
    fn the_file_store_keeps_no_leases_and_reports_whether_a_writer_is_live() {
        let f = RealFixture::new(FileOptions::new());
        let s = SessionId::new("leased").unwrap();
        append(&*f, &s, 1, vec![started("r1")]);
        let taken = f
            .take_lease(
                &s,
                &OwnerId::new("me"),
                &RunId::from("r1"),
                std::time::Duration::from_secs(30),
                false,
            )
            .unwrap();
        assert_eq!(taken, LeaseTaken::NotKept);
        assert_eq!(f.head(&s).unwrap().unwrap().lease, None);
        assert!(f.writer_is_live().unwrap(), "a writable store is the writer");
        let reader = FileStore::open_read_only(f.dir.path()).unwrap();
        assert!(reader.writer_is_live().unwrap(), "the writer holds the lock");
        assert_eq!(
            reader.head(&s).unwrap().unwrap().run,
            RunState::Open { run: RunId::from("r1") }
        );
        drop(f);
        assert!(!reader.writer_is_live().unwrap(), "the writer is gone");
        // Asking creates no lock file where there is none.
        let empty = tempfile::tempdir().unwrap();
        drop(FileStore::open(empty.path(), FileOptions::new()).unwrap());
        std::fs::remove_file(empty.path().join(stepjournal_backends::file::LOCK_FILE)).unwrap();
        let reader = FileStore::open_read_only(empty.path()).unwrap();
        assert!(!reader.writer_is_live().unwrap());
        assert!(!empty.path().join(stepjournal_backends::file::LOCK_FILE).exists());
    }

    #[test]
    fn asking_whether_a_writer_is_live_never_keeps_a_writer_out() {
        // A reader's question takes the lock for an instant: a writer opening in that instant
        // waits it out instead of being refused as if another writer held the journal.
        let dir = tempfile::tempdir().unwrap();
        drop(FileStore::open(dir.path(), FileOptions::new()).unwrap());
        let reader = FileStore::open_read_only(dir.path()).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    reader.writer_is_live().unwrap();
                }
            });
            for i in 0..200 {
                let store = FileStore::open(dir.path(), FileOptions::new())
                    .unwrap_or_else(|e| panic!("open {i} beside a reader asking: {e}"));
                drop(store);
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
}

#[test]
fn reads_racing_compaction_find_the_batches_where_they_moved() {
    // With one sealed segment kept open, a read often opens a segment afresh, and compaction
    // may remove it in between (its batches moved to the newest segment): the read starts
    // again from the index instead of failing.
    let opts = FileOptions::new().segment_size(4096).max_open_segments(1);
    let f = RealFixture::new(opts);
    let keep = sid("keep");
    // Small enough for compaction: a quarter of a segment at most.
    for q in 0..8 {
        append_text(&*f, &keep, q, 5);
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let before = newest_segment(f.dir.path());
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let log = f.read_all(&keep).unwrap();
                assert_eq!(log.len(), 8);
                assert!(log.iter().enumerate().all(|(i, r)| r.seq == Seq(i as u64)));
                reads += 1;
            }
            reads
        });
        for n in 0..300 {
            let s = sid(&format!("temp-{n}"));
            append_text(&*f, &s, 0, 300);
            assert!(f.delete(&s).unwrap());
        }
        f.wait_reclaimed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    assert!(newest_segment(f.dir.path()) > before + 10, "segments were rotated and compacted");
    assert!(
        !f.dir.path().join(stepjournal_backends::file::SegmentId(1).file_name()).exists(),
        "the keeper's first segment was compacted away"
    );
    assert_eq!(f.read_all(&keep).unwrap().len(), 8);
}

#[test]
fn a_read_only_store_meeting_a_segment_its_writer_removed_reads_the_directory_again() {
    // A read-only store holds the journal as it was when opened; with segments no longer held
    // open for its whole life, a segment the writer compacted away since cannot be read where
    // the store's index says. The store reads the directory again, as a new open would, and
    // answers from the journal as it is then (never an error, never a false corruption).
    let opts = FileOptions::new().segment_size(4096);
    let f = RealFixture::new(opts);
    let (keep, filler) = (sid("keep"), sid("filler"));
    for q in 0..8 {
        append_text(&*f, &keep, q, 5);
    }
    let mut q = 0;
    while newest_segment(f.dir.path()) < 2 {
        append_text(&*f, &filler, q, 200);
        q += 1;
    }
    // One segment kept open: the newest, scanned last; the keeper's is closed again.
    let ro = FileStore::open(f.dir.path(), FileOptions::new().read_only(true).max_open_segments(1))
        .unwrap();
    let first = f.dir.path().join(stepjournal_backends::file::SegmentId(1).file_name());
    // The first segment is now mostly dead: compaction moves the keeper out and removes it.
    assert!(f.delete(&filler).unwrap());
    f.wait_reclaimed();
    assert!(!first.exists());
    assert_eq!(ro.tail(&filler).unwrap(), Seq(q), "the snapshot holds the filler");
    let log = ro.read_all(&keep).unwrap();
    assert_eq!(log.iter().map(|r| r.seq.get()).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert_eq!(ro.tail(&filler).unwrap(), Seq(0), "read again, it holds the journal as it is now");
}

#[test]
fn a_writer_whose_lock_file_was_removed_stops_writing_rather_than_interleave_with_a_second() {
    // The defect: the lock is an flock on a path that can be unlinked; with LOCK removed under
    // a live writer, a second writer created and locked a new LOCK and the two interleaved their
    // groups in one segment. The first now finds its lock file replaced before its next group
    // and stops, poisoned, writing nothing more.
    let dir = tempfile::tempdir().unwrap();
    let first = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    append_events(&first, 0, 0, 2);
    std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
    let second = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    let e = [Stamped::at(UnixMillis(2), crash_event(0, 2))];
    let err = first.append(&crash_session(0), Seq(2), &e, Durability::Synced).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("lock file") && text.contains(LOCK_FILE), "{text}");
    assert!(matches!(err, AppendError::Store(StoreError::Io { .. })), "nothing landed: {err:?}");
    assert!(
        first
            .append(&crash_session(0), Seq(2), &e, Durability::Buffered)
            .unwrap_err()
            .is_poisoned()
    );
    append_events(&second, 0, 2, 3);
    append_events(&second, 1, 0, 1);
    drop((first, second));
    let store = FileStore::open(dir.path(), FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 5, 5), 5);
    assert_eq!(check_prefix(&store, 1, 1, 1), 1);
}

#[test]
fn a_lock_file_replaced_on_the_simulated_disk_stops_the_writer_before_its_next_synced_group() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    append_events(&store, 0, 0, 1);
    let writes = disk.ops();
    disk.replace_lock_file(&stepjournal_tests::file_fixture::sim_dir().join(LOCK_FILE));
    let e = [Stamped::at(UnixMillis(1), crash_event(0, 1))];
    let err = store.append(&crash_session(0), Seq(1), &e, Durability::Synced).unwrap_err();
    assert!(err.to_string().contains("no longer the file this writer locked"), "{err}");
    assert_eq!(disk.ops(), writes, "nothing was written after the lock was found replaced");
    // Another writer can take the journal now, and finds only what the first acknowledged.
    let other = open_sim(&disk, FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&other, 0, 1, 1), 1);
}

/// A journal on the simulated disk whose first segment holds the first four batches of `keep`
/// and batches of `filler`, and whose second holds `keep`'s next two and enough live data to
/// stay; and its writer. After the disk's next listing, the writer starts a third segment and
/// deletes `filler`: the first segment is then mostly dead, and compaction copies `keep`'s
/// batches to the third segment (which that listing does not hold) and removes the first.
fn journal_compacting_after_the_next_listing(
    opts: FileOptions,
) -> (SimDisk, std::sync::Arc<FileStore>) {
    let disk = SimDisk::new();
    let writer = std::sync::Arc::new(open_sim(&disk, opts).unwrap());
    let newest = |store: &FileStore| store.index_size().segments;
    let (keep, filler, big) = (sid("keep"), sid("filler"), sid("big"));
    for q in 0..4 {
        append_text(&*writer, &keep, q, 5);
    }
    let mut q = 0;
    while newest(&writer) < 2 {
        append_text(&*writer, &filler, q, 200);
        q += 1;
    }
    for q in 4..6 {
        append_text(&*writer, &keep, q, 5);
    }
    for q in 0..3 {
        append_text(&*writer, &big, q, 400);
    }
    assert_eq!(newest(&writer), 2);
    let w = std::sync::Arc::clone(&writer);
    disk.after_next_list(move || {
        let more = sid("more");
        let mut q = 0;
        while w.index_size().segments < 3 {
            append_text(&*w, &more, q, 300);
            q += 1;
        }
        assert!(w.delete(&sid("filler")).unwrap());
        w.wait_reclaimed();
    });
    (disk, writer)
}

#[test]
fn a_read_only_open_racing_compaction_reads_the_moved_batches_instead_of_refusing() {
    // The defect: a read-only open listed the segments, then found one gone and skipped it as
    // holding nothing live; but compaction had moved its live batches to a segment made after
    // the listing, so the session's later batches no longer continued its earlier ones and the
    // open refused with false corruption ("a batch of session filler starts at seq 13, but the
    // session's events before it end at seq 0"). Here the writer rotates and compacts between
    // the reader's listing and its opening of what it listed.
    let opts = FileOptions::new().segment_size(4096).preallocate(0);
    let (disk, _writer) = journal_compacting_after_the_next_listing(opts);
    let first = stepjournal_tests::file_fixture::sim_dir()
        .join(stepjournal_backends::file::SegmentId(1).file_name());
    let reader = open_sim(&disk, opts.read_only(true))
        .unwrap_or_else(|e| panic!("a read-only open racing compaction refused: {e}"));
    assert!(disk.read_file(&first).is_none(), "the first segment was compacted away");
    let log = reader.read_all(&sid("keep")).unwrap();
    assert_eq!(log.iter().map(|r| r.seq.get()).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
    assert!(reader.read_all(&sid("filler")).unwrap().is_empty(), "the deletion is in the snapshot");
}

#[test]
fn verify_racing_compaction_reports_no_false_gap() {
    // The same race for verify: a segment removed between the listing and its reading was
    // skipped as holding nothing live, and the session whose batches compaction had moved was
    // reported with a gap. The check now starts again from a new listing.
    let opts = FileOptions::new().segment_size(4096).preallocate(0);
    let (disk, _writer) = journal_compacting_after_the_next_listing(opts);
    let report = verify_sim(&disk);
    assert!(report.is_clean(), "{:?}", report.findings);
    let log = report.read_session(&sid("keep")).unwrap();
    assert_eq!(log.len(), 6);
}

#[test]
fn verify_finds_the_segments_a_listing_racing_a_writer_left_out() {
    // The defect: a directory listing taken while the writer creates and removes segments can
    // leave out one that is there all along (seen on ext4 beside a writer rotating 4 KiB
    // segments: "seq 3187..3189 of the session are in no intact batch" for a batch in the
    // segment the listing left out). Ids are given out in order, so those the listing skips are
    // looked up by name, as are those after its newest.
    // Segments of single-event groups are a quarter headers: kept below compaction's bar.
    let opts = FileOptions::new().segment_size(4096).preallocate(0).compact_when_dead(50);
    let (disk, writer, _, events) = three_segments_on_a_sim_disk(opts);
    drop(writer);
    let name = |id: u64| stepjournal_backends::file::SegmentId(id).file_name();
    for hidden in [vec![name(2)], vec![name(3)], vec![name(1), name(2), name(3)]] {
        disk.hide_from_listing(&hidden);
        let report = verify_sim(&disk);
        assert!(report.is_clean(), "{hidden:?}: {:?}", report.findings);
        assert_eq!(report.segments.len(), 3, "{hidden:?}");
        assert_eq!(report.session_events(&crash_session(0)), (events, 0), "{hidden:?}");
        assert_eq!(report.read_session(&crash_session(0)).unwrap().len() as u64, events);
    }
    // A sidecar the listing leaves out is checked against its segment all the same: one that
    // says another seq for a frame is named.
    let sidecar = stepjournal_tests::file_fixture::sim_dir().join(name(1)).with_extension("idx");
    let mut forged =
        stepjournal_tests::sidecar_forge::Sidecar::decode(&disk.read_file(&sidecar).unwrap())
            .unwrap();
    forged.frames[0].first += 1;
    {
        use stepjournal_backends::file::io::Io;
        disk.remove(&sidecar).unwrap();
        let f = disk.create_new(&sidecar).unwrap();
        f.write_all_at(&forged.encode(), 0).unwrap();
        f.sync_data().unwrap();
    }
    disk.hide_from_listing(&[sidecar.file_name().unwrap().to_str().unwrap().to_owned()]);
    let report = verify_sim(&disk);
    assert!(
        report.findings.iter().any(|f| f.segment == sidecar),
        "the damaged sidecar is named: {:?}",
        report.findings
    );
}

/// Appends events of 200 bytes to `session` from seq `q` until the journal has `segments`
/// segments; returns the next seq.
fn fill_until(writer: &FileStore, session: &SessionId, mut q: u64, segments: u64) -> u64 {
    while writer.index_size().segments < segments {
        append_text(writer, session, q, 200);
        q += 1;
    }
    q
}

#[test]
fn a_read_only_open_finds_the_segments_a_listing_racing_a_writer_left_out() {
    // The same listing for a read-only open: a segment left out that holds a session's
    // deletion brought the deleted session back (its batches are in an earlier segment the
    // deletion frame guards).
    let opts = FileOptions::new().segment_size(4096).preallocate(0);
    let disk = SimDisk::new();
    let writer = open_sim(&disk, opts).unwrap();
    let (keep, gone, more) = (sid("keep"), sid("gone"), sid("more"));
    append_text(&writer, &keep, 0, 5);
    append_text(&writer, &gone, 0, 5);
    let q = fill_until(&writer, &more, 0, 2);
    assert!(writer.delete(&gone).unwrap());
    let q = fill_until(&writer, &more, q, 3);
    writer.wait_reclaimed();
    disk.hide_from_listing(&[stepjournal_backends::file::SegmentId(2).file_name()]);
    let reader = open_sim(&disk, opts.read_only(true)).unwrap();
    assert!(reader.read_all(&gone).unwrap().is_empty(), "the deleted session stays deleted");
    assert!(!reader.sessions().unwrap().contains(&gone));
    assert_eq!(reader.read_all(&more).unwrap().len() as u64, q);
    assert_eq!(reader.read_all(&keep).unwrap().len(), 1);
}

#[test]
fn a_read_back_from_verify_follows_moved_batches_and_says_when_the_writer_deleted_the_session() {
    // Beside a live writer, a session the check read can be deleted before it is read back
    // (a short-lived session): its segment removed, its batches copied nowhere. The read back
    // looked for them in vain 64 times, then said they "kept moving"; it says now that the
    // session was deleted, and reads a session whose batches moved from where they went.
    let opts = FileOptions::new().segment_size(4096).preallocate(0);
    let disk = SimDisk::new();
    let writer = open_sim(&disk, opts).unwrap();
    let (keep, temp, filler) = (sid("keep"), sid("temp"), sid("filler"));
    append_text(&writer, &keep, 0, 5);
    append_text(&writer, &temp, 0, 5);
    append_text(&writer, &keep, 1, 5);
    fill_until(&writer, &filler, 0, 2);
    writer.wait_reclaimed();
    let report = verify_sim(&disk);
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.session_events(&temp), (1, 0));
    assert!(writer.delete(&temp).unwrap());
    assert!(writer.delete(&filler).unwrap());
    writer.wait_reclaimed();
    let first = stepjournal_tests::file_fixture::sim_dir()
        .join(stepjournal_backends::file::SegmentId(1).file_name());
    assert!(disk.read_file(&first).is_none(), "segment 1 was compacted away");
    let moved = report.read_session(&keep).unwrap();
    assert_eq!(moved.iter().map(|l| l.record.seq.get()).collect::<Vec<_>>(), vec![0, 1]);
    assert!(moved.iter().all(|l| l.segment != first), "{moved:?}");
    match report.read_session(&temp) {
        Err(StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::Interrupted
                && source.to_string().contains("deleted the session") => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn verify_whose_listed_segments_were_all_removed_before_it_read_them_looks_again() {
    // The defect: when every segment of a listing was gone by the time the check looked at
    // them (the writer had moved on and compacted them all), the check ended there, having
    // read nothing of the segments the batches had moved to.
    let opts = FileOptions::new().segment_size(4096).preallocate(0);
    let disk = SimDisk::new();
    let writer = std::sync::Arc::new(open_sim(&disk, opts).unwrap());
    let (keep, filler) = (sid("keep"), sid("filler"));
    for q in 0..4 {
        append_text(&*writer, &keep, q, 5);
    }
    let mut q = 0;
    while writer.index_size().segments < 2 {
        append_text(&*writer, &filler, q, 200);
        q += 1;
    }
    let w = std::sync::Arc::clone(&writer);
    disk.after_next_list(move || {
        // Both listed segments are emptied and compacted away: segment 1 once the filler is
        // deleted, and segment 2 once it is sealed and the second filler deleted too.
        let more = sid("more");
        let mut q = 0;
        while w.index_size().segments < 3 {
            append_text(&*w, &more, q, 300);
            q += 1;
        }
        assert!(w.delete(&sid("filler")).unwrap());
        assert!(w.delete(&more).unwrap());
        w.wait_reclaimed();
    });
    let report = verify_sim(&disk);
    let dir = stepjournal_tests::file_fixture::sim_dir();
    for id in [1, 2] {
        let seg = dir.join(stepjournal_backends::file::SegmentId(id).file_name());
        assert!(disk.read_file(&seg).is_none(), "segment {id} was compacted away");
    }
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.session_events(&keep), (4, 0), "{:?}", report.segments);
    assert_eq!(report.read_session(&keep).unwrap().len(), 4);
}

/// A journal on a simulated disk in 4 KiB segments, written until it has three (two sealed),
/// with the reclaim thread done (the sealed segments' sidecars written); its writer, still open,
/// the path of its first segment and how many events of session 0 it holds.
fn three_segments_on_a_sim_disk(
    opts: FileOptions,
) -> (SimDisk, FileStore, std::path::PathBuf, u64) {
    let disk = SimDisk::new();
    let writer = open_sim(&disk, opts).unwrap();
    let mut q = 0;
    while writer.index_size().segments < 3 {
        append_events(&writer, 0, q, 1);
        q += 1;
    }
    writer.wait_reclaimed();
    let first = stepjournal_tests::file_fixture::sim_dir()
        .join(stepjournal_backends::file::SegmentId(1).file_name());
    (disk, writer, first, q)
}

#[test]
fn a_read_only_open_beside_a_live_writer_still_refuses_real_corruption() {
    // A refusal a race could cause is looked at again before it is reported; damage that stays
    // where it is, in a sealed segment, is reported all the same.
    // Segments of single-event groups are a quarter headers: kept below compaction's bar.
    let opts = FileOptions::new().segment_size(4096).preallocate(0).compact_when_dead(50);
    let (disk, writer, first, _) = three_segments_on_a_sim_disk(opts);
    // A segment without its sidecar index is scanned on open (one with it: below).
    let sidecar = first.with_extension("idx");
    stepjournal_backends::file::io::Io::remove(&disk, &sidecar).unwrap();
    assert!(disk.flip_byte(&first, 100, 0x10));
    assert!(writer.writer_is_live().unwrap());
    let err = open_sim(&disk, opts.read_only(true)).unwrap_err();
    assert!(matches!(err, OpenError::Store(StoreError::Corrupt { .. })), "{err:?}");
    assert!(err.to_string().contains(&first.display().to_string()), "{err}");
}

#[test]
fn damage_inside_a_sealed_segment_read_from_its_sidecar_is_found_by_the_read_and_by_verify() {
    // An open that reads a sealed segment's sidecar does not read the segment: damage inside it
    // is found when the batch it hit is read (or by verify), never handed on.
    // Segments of single-event groups are a quarter headers: kept below compaction's bar.
    let opts = FileOptions::new().segment_size(4096).preallocate(0).compact_when_dead(50);
    let (disk, writer, first, q) = three_segments_on_a_sim_disk(opts);
    drop(writer);
    assert!(disk.read_file(&first.with_extension("idx")).is_some());
    assert!(disk.flip_byte(&first, 100, 0x10));
    let store = open_sim(&disk, opts).unwrap();
    let err = store.read_all(&crash_session(0)).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(&first.display().to_string()), "{err}");
    drop(store);
    let report = verify_sim(&disk);
    assert!(!report.is_clean());
    assert!(
        report.findings.iter().any(|f| f.to_string().contains(&first.display().to_string())),
        "{:?}",
        report.findings
    );
    // Salvage scans every segment, sidecar or not: it keeps what precedes the damage.
    let salvage =
        opts.on_corruption(stepjournal_backends::file::OnCorruption::TruncateAtCorruption);
    let store = open_sim(&disk, salvage).unwrap();
    let kept = check_prefix(&store, 0, 0, q);
    assert!(kept < q, "salvage kept {kept} of {q} events");
    drop(store);
    assert!(verify_sim(&disk).is_clean());
}

mod bytes_read {
    //! What reads and opens read, counted in bytes through the I/O layer: reading a session
    //! reads about what its batches occupy, whatever the other sessions wrote between them; an
    //! open reads the sidecar indexes of sealed segments and scans only the newest.

    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use stepjournal_backends::SessionHead;
    use stepjournal_backends::file::io::{EntryKind, Io, IoFile, IoLock};
    use stepjournal_codec::{Limits, batch};
    use stepjournal_tests::file_fixture::sim_dir;

    use super::*;

    /// The simulated disk, counting every byte read from any of its files.
    #[derive(Debug, Clone)]
    pub(super) struct Counting {
        pub(super) disk: SimDisk,
        pub(super) read: Arc<AtomicU64>,
    }

    #[derive(Debug)]
    struct CountingFile {
        file: Arc<dyn IoFile>,
        read: Arc<AtomicU64>,
    }

    impl IoFile for CountingFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let n = self.file.read_at(buf, offset)?;
            self.read.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.file.write_all_at(buf, offset)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.file.sync_data()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.file.set_len(len)
        }
        fn len(&self) -> std::io::Result<u64> {
            self.file.len()
        }
    }

    impl Counting {
        fn wrap(&self, file: Arc<dyn IoFile>) -> Arc<dyn IoFile> {
            Arc::new(CountingFile { file, read: Arc::clone(&self.read) })
        }
    }

    impl Io for Counting {
        fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
            self.disk.create_dir_all(dir)
        }
        fn create_new(&self, path: &Path) -> std::io::Result<Arc<dyn IoFile>> {
            self.disk.create_new(path).map(|f| self.wrap(f))
        }
        fn open(&self, path: &Path, read_only: bool) -> std::io::Result<Arc<dyn IoFile>> {
            self.disk.open(path, read_only).map(|f| self.wrap(f))
        }
        fn entry_kind(&self, path: &Path) -> std::io::Result<Option<EntryKind>> {
            self.disk.entry_kind(path)
        }
        fn remove(&self, path: &Path) -> std::io::Result<()> {
            self.disk.remove(path)
        }
        fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
            self.disk.list(dir)
        }
        fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
            self.disk.sync_dir(dir)
        }
        fn try_lock(&self, path: &Path) -> std::io::Result<Option<Box<dyn IoLock>>> {
            self.disk.try_lock(path)
        }
        fn lock_is_held(&self, path: &Path) -> std::io::Result<bool> {
            self.disk.lock_is_held(path)
        }
    }

    /// `sessions` sessions appended in turn for `rounds` rounds, `events` events per batch;
    /// returns the disk and the bytes the first session's batches occupy (frames, headers
    /// included, encoded as the store encodes them).
    fn interleaved(
        options: FileOptions,
        sessions: usize,
        rounds: u64,
        events: u64,
    ) -> (Counting, u64) {
        let io = Counting { disk: SimDisk::new(), read: Arc::default() };
        let store = FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options).unwrap();
        let limits = Limits::default();
        let mut own = 0;
        let mut frame = Vec::new();
        for round in 0..rounds {
            for s in 0..sessions {
                let from = round * events;
                let batch = stamped_numbered(s as u64 * 1_000_000 + from, events);
                let session = sid(&format!("s{s}"));
                if s == 0 {
                    frame.clear();
                    own += batch::encode_into(&mut frame, &session, Seq(from), &batch, &limits)
                        .unwrap() as u64;
                }
                store.append(&session, Seq(from), &batch, Durability::Buffered).unwrap();
            }
        }
        (io, own)
    }

    /// Reads session `s0` through a store opened fresh on `io`; returns the bytes read for it.
    fn bytes_to_read(io: &Counting, options: FileOptions, expected: u64) -> u64 {
        let store = FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options).unwrap();
        let before = io.read.load(Ordering::Relaxed);
        let records = store.read_all(&sid("s0")).unwrap();
        assert_eq!(records.len() as u64, expected);
        io.read.load(Ordering::Relaxed) - before
    }

    #[test]
    fn a_session_interleaved_one_to_three_reads_at_most_1_3_times_its_batches() {
        let options = FileOptions::new().segment_size(256 << 10);
        let (io, own) = interleaved(options, 4, 300, 4);
        let read = bytes_to_read(&io, options, 300 * 4);
        assert!(read * 10 <= own * 13, "read {read} bytes for batches of {own}");
        assert!(read >= own, "read {read} bytes for batches of {own}");
    }

    #[test]
    fn a_session_written_alone_is_read_in_few_large_reads_and_no_more_bytes() {
        let options = FileOptions::new().segment_size(256 << 10);
        let (io, own) = interleaved(options, 1, 300, 4);
        let read = bytes_to_read(&io, options, 300 * 4);
        assert!(read * 10 <= own * 13, "read {read} bytes for batches of {own}");
    }

    fn sidecars(disk: &SimDisk) -> Vec<(std::path::PathBuf, u64)> {
        let mut found: Vec<_> = disk
            .files(&sim_dir())
            .into_iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        found.sort();
        found
    }

    fn segments(disk: &SimDisk) -> Vec<(std::path::PathBuf, u64)> {
        let mut found: Vec<_> = disk
            .files(&sim_dir())
            .into_iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "seg"))
            .collect();
        found.sort();
        found
    }

    /// Opens the journal on `io`; returns the store and the bytes the open read.
    fn open_counted(io: &Counting, options: FileOptions) -> (FileStore, u64) {
        let before = io.read.load(Ordering::Relaxed);
        let store = FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options).unwrap();
        (store, io.read.load(Ordering::Relaxed) - before)
    }

    /// Everything an open rebuilds: each session's head and events.
    fn rebuilt(store: &FileStore) -> Vec<(SessionHead, Vec<stepjournal_codec::Record>)> {
        let mut out = Vec::new();
        for h in store.heads().unwrap() {
            let events = store.read_all(&h.session).unwrap();
            out.push((h, events));
        }
        out
    }

    /// A journal of many sealed segments: four sessions interleaved, one with every kind of
    /// event (alone and together, so heads are read from the sidecars), one deleted.
    fn many_segments(options: FileOptions) -> Counting {
        let io = Counting { disk: SimDisk::new(), read: Arc::default() };
        let store = FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options).unwrap();
        // Events of about 256 bytes, one or four to a batch, as an agent's are.
        let text = |s: usize, q: u64| Stamped {
            at: UnixMillis(1_700_000_000_000 + q),
            event: Message { role: Role::User, text: format!("{s}.{q} {}", "z".repeat(220)) }
                .into(),
        };
        for round in 0..150u64 {
            for s in 0..4usize {
                let n = if s % 2 == 0 { 1 } else { 4 };
                let from = round * n;
                let batch: Vec<Stamped> = (from..from + n).map(|q| text(s, q)).collect();
                store
                    .append(&sid(&format!("s{s}")), Seq(from), &batch, Durability::Buffered)
                    .unwrap();
            }
        }
        let every = sid("every-kind");
        let mut at = 0u64;
        for round in 0..3 {
            for e in stepjournal_tests::sample::every_event_type() {
                let stamped = vec![Stamped::at(UnixMillis(at), e)];
                store.append(&every, Seq(at), &stamped, Durability::Buffered).unwrap();
                at += 1;
            }
            let all: Vec<Stamped> = stepjournal_tests::sample::every_event_type()
                .into_iter()
                .map(|e| Stamped::at(UnixMillis(round), e))
                .collect();
            let n = all.len() as u64;
            store.append(&every, Seq(at), &all, Durability::Buffered).unwrap();
            at += n;
        }
        assert!(store.delete(&sid("s2")).unwrap());
        // More batches, so the deletion lies in a sealed segment.
        for s in [0usize, 1, 3] {
            let session = sid(&format!("s{s}"));
            let tail = store.tail(&session).unwrap().get();
            for q in tail..tail + 40 {
                store.append(&session, Seq(q), &[text(s, q)], Durability::Buffered).unwrap();
            }
        }
        store.wait_reclaimed();
        io
    }

    #[test]
    fn an_open_reads_the_sidecars_of_sealed_segments_and_scans_only_the_newest() {
        let options = FileOptions::new().segment_size(16 << 10);
        let io = many_segments(options);
        let segs = segments(&io.disk);
        let sides = sidecars(&io.disk);
        assert!(segs.len() >= 6, "{segs:?}");
        assert_eq!(sides.len(), segs.len() - 1, "a sidecar for every sealed segment: {sides:?}");
        let (store, read) = open_counted(&io, options);
        let sealed: u64 = segs.iter().take(segs.len() - 1).map(|(_, n)| n).sum();
        let newest = segs.last().unwrap().1;
        assert!(
            read <= newest + sealed * 3 / 100,
            "the open read {read} bytes: newest segment {newest}, sealed {sealed}"
        );
        let with_sidecars = rebuilt(&store);
        drop(store);
        // Without sidecars (a journal written before them), the scan rebuilds the same.
        for (path, _) in &sides {
            io.disk.remove(path).unwrap();
        }
        let (store, scanned) = open_counted(&io, options.read_only(true));
        assert!(scanned >= sealed, "the open scanned {scanned} bytes of {sealed}");
        assert_eq!(rebuilt(&store), with_sidecars);
        drop(store);
        // A writable open has the reclaim thread write them again.
        let (store, _) = open_counted(&io, options);
        store.wait_reclaimed();
        drop(store);
        assert_eq!(sidecars(&io.disk), sides);
    }

    #[test]
    fn a_damaged_or_cut_sidecar_is_not_used_and_a_writable_open_writes_it_again() {
        let options = FileOptions::new().segment_size(16 << 10);
        let io = many_segments(options);
        let (store, clean) = open_counted(&io, options.read_only(true));
        let expected = rebuilt(&store);
        drop(store);
        let sides = sidecars(&io.disk);
        let (flipped, cut) = (&sides[0].0, &sides[1].0);
        assert!(io.disk.flip_byte(flipped, sides[0].1 / 2, 0x10));
        io.disk.open(cut, false).unwrap().set_len(sides[1].1 / 2).unwrap();
        let (store, read) = open_counted(&io, options.read_only(true));
        assert!(read > clean, "the two segments were scanned: {read} bytes against {clean}");
        assert_eq!(rebuilt(&store), expected);
        drop(store);
        let (store, _) = open_counted(&io, options);
        assert_eq!(rebuilt(&store), expected);
        store.wait_reclaimed();
        drop(store);
        assert_eq!(sidecars(&io.disk), sides, "written again, whole");
        // (The writable open cut the zeros ahead of the newest segment's data, which the first
        // read-only open read.)
        let (store, read) = open_counted(&io, options.read_only(true));
        assert!(read <= clean, "{read} bytes against {clean}");
        assert_eq!(rebuilt(&store), expected);
    }

    #[test]
    fn a_sidecar_of_a_segment_that_changed_is_not_used() {
        // A segment cut (salvage) or replaced keeps a sidecar that no longer describes it.
        let options = FileOptions::new().segment_size(16 << 10);
        let io = many_segments(options);
        let (store, _) = open_counted(&io, options.read_only(true));
        let expected = rebuilt(&store);
        drop(store);
        let segs = segments(&io.disk);
        let (first, len) = &segs[0];
        // Its last byte flipped: the sidecar's checksum of the segment's tail no longer holds,
        // so the segment is scanned and the damage found.
        assert!(io.disk.flip_byte(first, len - 1, 0x01));
        let opened = FileStore::open_with(Arc::new(io.clone()), &sim_dir(), options);
        assert!(matches!(opened, Err(OpenError::Store(StoreError::Corrupt { .. }))), "{opened:?}");
        assert!(io.disk.flip_byte(first, len - 1, 0x01));
        let (store, _) = open_counted(&io, options.read_only(true));
        assert_eq!(rebuilt(&store), expected);
    }
}
