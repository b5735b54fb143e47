//! Trims on the file store: a batch holding a `trimmed` drops the whole batches before its
//! `before` from the index as it lands; the segments that held only those frames are removed
//! or compacted (the bytes come back); and reopening finds the log as the trim left it, from
//! sidecar indexes and from scans, whether the dropped frames are still on disk or already
//! gone, with the head unknown until a run begins or ends in what is kept.

use stepjournal_backends::file::FileOptions;
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::{Durability, JournalStore, RunState};
use stepjournal_codec::{
    Entry, Event, EventKind, Message, Role, RunEnded, RunId, RunOutcome, RunStarted, Seq,
    SessionId, Stamped, UnixMillis,
};
use stepjournal_tests::conformance::trimmed_event;
use stepjournal_tests::file_fixture::{open_sim, sim_dir};
use stepjournal_tests::sample::every_event_type;

use super::{sid, verify_sim};

fn snapshot() -> Event {
    every_event_type().into_iter().find(|e| e.kind() == EventKind::Snapshot).unwrap()
}

fn at(q: u64, event: Event) -> Stamped {
    Stamped::at(UnixMillis(1_700_000_000_000 + q), event)
}

/// A message of about `bytes` bytes, numbered `q`.
fn bulky(q: u64, bytes: usize) -> Event {
    Message { role: Role::User, text: format!("{q}:{}", "z".repeat(bytes)) }.into()
}

/// The bytes of the journal's files.
fn journal_bytes(disk: &SimDisk) -> u64 {
    disk.files(&sim_dir()).iter().map(|(_, len)| len).sum()
}

/// Writes `s`: a run begun at seq 0, then 40 batches of a bulky message with a snapshot every
/// 10 batches (at seqs 11, 22, 33, 44), each beside a batch of `other`. Returns the tail.
fn write(store: &dyn JournalStore, s: &SessionId, other: &SessionId) -> u64 {
    let run: Event = RunStarted { run: RunId::new("r1"), entry: Entry::Wake, by: None }.into();
    store.append(s, Seq(0), &[at(0, run)], Durability::Synced).unwrap();
    let mut tail = 1;
    for k in 0..40u64 {
        let mut batch = vec![at(tail, bulky(tail, 600))];
        if k % 10 == 9 {
            batch.push(at(tail + 1, snapshot()));
        }
        tail = store.append(s, Seq(tail), &batch, Durability::Synced).unwrap().next.get();
        store.append(other, Seq(k), &[at(k, bulky(k, 60))], Durability::Synced).unwrap();
    }
    tail
}

#[test]
fn a_trim_frees_the_segments_of_what_it_dropped_and_reopening_keeps_the_log_as_it_left_it() {
    let options = FileOptions::new().segment_size(4096).preallocate(0).compact_when_dead(25);
    let disk = SimDisk::new();
    let (s, other) = (sid("long"), sid("other"));
    let (tail, kept) = {
        let store = open_sim(&disk, options).unwrap();
        let tail = write(&store, &s, &other);
        let whole = store.read_all(&s).unwrap();
        let snapshots: Vec<u64> = whole
            .iter()
            .filter(|r| r.event.kind() == EventKind::Snapshot)
            .map(|r| r.seq.get())
            .collect();
        assert_eq!(snapshots, vec![11, 22, 33, 44]);
        store.wait_reclaimed();
        let full = journal_bytes(&disk);
        // Keep from the third snapshot: three quarters of the session's bytes go.
        let tail = store
            .append(&s, Seq(tail), &[at(tail, trimmed_event(33, 0))], Durability::Synced)
            .unwrap()
            .next
            .get();
        let kept = store.read_all(&s).unwrap();
        assert_eq!(kept.first().map(|r| r.seq), Some(Seq(32)), "the batch holding seq 33");
        assert_eq!(&kept[..kept.len() - 1], &whole[32..]);
        store.wait_reclaimed();
        assert_eq!(store.reclaim_problem(), None);
        let after = journal_bytes(&disk);
        assert!(
            after * 100 < full * 60,
            "the segments of the dropped frames are reclaimed: {full} bytes, then {after}"
        );
        (tail, kept)
    };
    // Reopened from sidecars and scans, the dropped frames gone from disk.
    let store = open_sim(&disk, options).unwrap();
    assert_eq!(store.read_all(&s).unwrap(), kept);
    assert_eq!(store.tail(&s).unwrap(), Seq(tail));
    assert_eq!(store.read_from_snapshot(&s).unwrap().first().map(|r| r.seq), Some(Seq(44)));
    let head = store.head(&s).unwrap().unwrap();
    assert_eq!(head.run, RunState::Unknown, "the run began in what was dropped");
    assert_eq!(store.read_all(&other).unwrap().len(), 40);
    let ended: Event =
        RunEnded { run: RunId::new("r1"), outcome: RunOutcome::Completed, error: None, by: None }
            .into();
    store.append(&s, Seq(tail), &[at(tail, ended)], Durability::Synced).unwrap();
    assert!(matches!(store.head(&s).unwrap().unwrap().run, RunState::Ended { .. }));
    drop(store);
    let report = verify_sim(&disk);
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.session_events(&s), (tail + 1, 0));
}

#[test]
fn reopening_drops_the_frames_a_trim_dropped_while_they_are_still_on_disk() {
    // No compaction: every frame stays where it was written, and opening must drop the ones
    // before the trim itself (from a scan of the active segment and from sidecars of sealed
    // ones alike).
    for segment_size in [4096, 1 << 20] {
        let options = FileOptions::new().segment_size(segment_size).preallocate(0);
        let options = options.compact_when_dead(100);
        let disk = SimDisk::new();
        let (s, other) = (sid("long"), sid("other"));
        let kept = {
            let store = open_sim(&disk, options).unwrap();
            let tail = write(&store, &s, &other);
            store
                .append(&s, Seq(tail), &[at(tail, trimmed_event(22, 0))], Durability::Synced)
                .unwrap();
            store.wait_reclaimed();
            store.read_all(&s).unwrap()
        };
        assert_eq!(kept.first().map(|r| r.seq), Some(Seq(21)), "{segment_size}");
        let store = open_sim(&disk, options).unwrap();
        assert_eq!(store.read_all(&s).unwrap(), kept, "{segment_size}");
        assert_eq!(store.head(&s).unwrap().unwrap().run, RunState::Unknown, "{segment_size}");
        drop(store);
        let report = verify_sim(&disk);
        assert!(report.is_clean(), "{segment_size}: {:?}", report.findings);
        // Deleted, then written again: a new log from seq 0, the old trim forgotten.
        let store = open_sim(&disk, options).unwrap();
        assert!(store.delete(&s).unwrap());
        write(&store, &s, &other_again(&other));
        drop(store);
        let store = open_sim(&disk, options).unwrap();
        assert_eq!(store.read_all(&s).unwrap().first().map(|r| r.seq), Some(Seq(0)));
        assert!(matches!(store.head(&s).unwrap().unwrap().run, RunState::Open { .. }));
    }
}

/// Another session to interleave with a rewrite (the first one's seqs are taken).
fn other_again(other: &SessionId) -> SessionId {
    SessionId::new(format!("{other}-again")).unwrap()
}
