//! What opening cuts at the newest segment's end, and what it keeps and reports: torn tails
//! (their bytes kept aside, their intact frames named, the same for opening and verify),
//! segments a crash left half-created, and files that never were this journal's segments.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::file::io::Io;
use stepjournal_backends::file::layout::SEGMENT_HEADER_LEN;
use stepjournal_backends::file::sim::{Fate, PendingOp, SimDisk};
use stepjournal_backends::file::{
    FileOptions, FileStore, OnCorruption, SegmentId, TORN_COPIES_KEPT, TornFrame, TornTail,
    verify_dir_with,
};
use stepjournal_backends::{Durability, JournalStore, OpenError};
use stepjournal_codec::{Limits, Seq, Stamped, UnixMillis};
use stepjournal_tests::file_fixture::{
    check_prefix, crash_event, crash_session, open_sim, sim_dir,
};

/// Without zeros ahead of the data, so that a segment's length is where its data ends.
fn exact() -> FileOptions {
    FileOptions::new().preallocate(0)
}

fn append(store: &FileStore, s: usize, q: u64, durability: Durability) {
    let e = Stamped::at(UnixMillis(q), crash_event(s, q));
    store.append(&crash_session(s), Seq(q), &[e], durability).unwrap();
}

fn segment(id: u64) -> PathBuf {
    sim_dir().join(SegmentId(id).file_name())
}

/// The files in the journal directory whose names end in `.torn`.
fn kept_aside(disk: &SimDisk) -> Vec<(PathBuf, Vec<u8>)> {
    disk.files(&sim_dir())
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|x| x == "torn"))
        .map(|(p, _)| {
            let bytes = disk.read_file(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn verify(disk: &SimDisk) -> stepjournal_backends::file::VerifyReport {
    verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Limits::default(), &mut |_, _| {}).unwrap()
}

/// The torn tail verify reports, which must be its only finding.
fn verified_torn_tail(disk: &SimDisk) -> TornTail {
    let report = verify(disk);
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    report.findings[0].torn.clone().unwrap()
}

fn without_copy(t: &TornTail) -> TornTail {
    let mut t = t.clone();
    t.kept_in = None;
    t.copies_removed.clear();
    t
}

fn not_a_segment(r: Result<FileStore, OpenError>, path: &Path) {
    match r {
        Err(OpenError::NotASegment { path: named, .. }) => assert_eq!(named, path),
        Err(other) => panic!("expected NotASegment, got {other}"),
        Ok(_) => panic!("the journal opened"),
    }
}

#[test]
fn a_damaged_header_of_the_newest_segment_is_refused_and_the_file_left_alone() {
    // The defect: the newest segment's header damaged with nothing valid after it was taken for
    // a segment a crash left half-created, and a writable open deleted the file.
    let disk = SimDisk::new();
    // A new journal: one segment holding its header, nothing after it.
    drop(open_sim(&disk, exact()).unwrap());
    let path = segment(1);
    assert!(disk.flip_byte(&path, 3, 0x20));
    let before = disk.read_file(&path).unwrap();
    not_a_segment(open_sim(&disk, exact()), &path);
    not_a_segment(open_sim(&disk, exact().read_only(true)), &path);
    assert_eq!(disk.read_file(&path).unwrap(), before, "nothing was changed");
    let report = verify(&disk);
    assert!(!report.is_clean() && !report.findings[0].torn_tail, "{:?}", report.findings);
    // Salvage gives the file up, keeping its bytes aside.
    let salvage = exact().on_corruption(OnCorruption::TruncateAtCorruption);
    let store = open_sim(&disk, salvage).unwrap();
    assert!(store.sessions().unwrap().is_empty());
    assert!(disk.read_file(&path).is_none());
    assert_eq!(kept_aside(&disk), [(sim_dir().join(format!("{}.0.torn", SegmentId(1))), before)]);
}

#[test]
fn a_segment_a_crash_left_half_created_is_removed_and_reported() {
    // A crash while creating a segment leaves it empty, with part of its header, or with zeros
    // where the header was to be: the journal's own torn write.
    for bytes in [Vec::new(), vec![0u8; SEGMENT_HEADER_LEN], b"SJOURNAL\x01\0".to_vec()] {
        let disk = SimDisk::new();
        let store = open_sim(&disk, exact()).unwrap();
        append(&store, 0, 0, Durability::Synced);
        drop(store);
        let half = disk.create_new(&segment(2)).unwrap();
        half.write_all_at(&bytes, 0).unwrap();
        half.sync_data().unwrap();
        disk.sync_dir(&sim_dir()).unwrap();
        let torn = verified_torn_tail(&disk);
        assert_eq!((torn.offset, torn.len, torn.frames.len()), (0, bytes.len() as u64, 0));
        let store = open_sim(&disk, exact()).unwrap();
        assert_eq!(store.torn_tail(), Some(&torn), "nothing to keep: a header can be rebuilt");
        assert!(disk.read_file(&segment(2)).is_none(), "{bytes:?}: removed");
        assert!(kept_aside(&disk).is_empty());
        append(&store, 0, 1, Durability::Synced);
        assert_eq!(check_prefix(&store, 0, 2, 2), 2);
    }
}

#[test]
fn a_torn_tail_is_kept_aside_before_it_is_cut_and_reported_with_its_size() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    append(&store, 0, 0, Durability::Synced);
    append(&store, 0, 1, Durability::Buffered);
    // The power goes while the buffered batch's write is half on disk.
    let after = disk.crash(|op| match op {
        PendingOp::Write { len, .. } => Fate::Tear(len / 2),
        _ => Fate::Keep,
    });
    drop(store);
    let image = after.read_file(&segment(1)).unwrap();
    let torn = verified_torn_tail(&after);
    assert!(torn.frames.is_empty(), "the one frame was torn: {torn}");
    let store = open_sim(&after, exact()).unwrap();
    let cut = store.torn_tail().unwrap().clone();
    assert_eq!(without_copy(&cut), torn, "opening and verify agree");
    assert_eq!(cut.offset + cut.len, image.len() as u64);
    let kept = cut.kept_in.clone().unwrap();
    assert_eq!(kept_aside(&after), [(kept, image[cut.offset as usize..].to_vec())]);
    assert_eq!(after.read_file(&segment(1)).unwrap().len() as u64, cut.offset, "cut");
    assert_eq!(check_prefix(&store, 0, 1, 1), 1);
    // A clean reopen has no torn tail, though it cuts the zeros ahead of the data.
    drop(store);
    let store = open_sim(&after, FileOptions::new()).unwrap();
    assert_eq!(store.torn_tail(), None);
    append(&store, 0, 1, Durability::Synced);
    drop(store);
    let store = open_sim(&after, FileOptions::new()).unwrap();
    assert_eq!(store.torn_tail(), None, "{:?}", store.torn_tail());
}

#[test]
fn a_lost_buffered_group_before_a_later_one_is_a_torn_tail_for_open_and_verify() {
    // The defect this pins: a never-synced buffered group lost, and the next (never made
    // durable) group present. Opening cut both as a torn tail; verify went on after the loss,
    // read the later group, and reported a gap in its session: exit 1 on a journal that opens.
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    append(&store, 0, 0, Durability::Synced);
    append(&store, 0, 1, Durability::Buffered);
    append(&store, 0, 2, Durability::Buffered);
    append(&store, 1, 0, Durability::Buffered);
    let mut first = true;
    let after = disk.crash(|op| match op {
        PendingOp::Write { .. } if first => {
            first = false;
            Fate::Drop
        }
        _ => Fate::Keep,
    });
    drop(store);
    let torn = verified_torn_tail(&after);
    assert_eq!(
        torn.frames,
        [
            TornFrame::Events { session: crash_session(0), first: Seq(2), count: 1 },
            TornFrame::Events { session: crash_session(1), first: Seq(0), count: 1 },
        ],
        "{torn}"
    );
    assert_eq!(torn.sessions(), [crash_session(0), crash_session(1)]);
    let store = open_sim(&after, FileOptions::new()).unwrap();
    assert_eq!(store.torn_tail().map(without_copy), Some(torn));
    assert_eq!(check_prefix(&store, 0, 1, 1), 1);
    assert_eq!(check_prefix(&store, 1, 0, 0), 0);
    let text = store.torn_tail().unwrap().to_string();
    assert!(text.contains("session session-1 seq 0..1") && text.contains(".torn"), "{text}");
}

#[test]
fn a_newest_segment_cut_inside_acknowledged_data_cannot_be_told_from_a_torn_tail() {
    // A limit, stated in docs/backends.md: a crash never cuts synced data, but an operator's
    // copy or a full disk can, and nothing left in the segment tells. Opening cuts it as a torn
    // tail; what it reports (and keeps aside) shows how much was taken.
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    for q in 0..5 {
        append(&store, 0, q, Durability::Synced);
    }
    drop(store);
    let full = disk.read_file(&segment(1)).unwrap().len() as u64;
    let group = (full - SEGMENT_HEADER_LEN as u64) / 5;
    let cut_at = SEGMENT_HEADER_LEN as u64 + 2 * group + group / 2;
    disk.open(&segment(1), false).unwrap().set_len(cut_at).unwrap();
    let torn = verified_torn_tail(&disk);
    assert_eq!((torn.offset, torn.len), (SEGMENT_HEADER_LEN as u64 + 2 * group, group / 2));
    let store = open_sim(&disk, exact()).unwrap();
    assert_eq!(store.torn_tail().map(without_copy), Some(torn));
    assert_eq!(check_prefix(&store, 0, 2, 2), 2, "two of five acknowledged batches remain");
}

#[test]
fn copies_of_tails_cut_at_one_place_are_bounded_and_the_oldest_removed_named() {
    // After 1,000 cuts at the same offset every name `{segment}.{offset}-{n}.torn` was taken and
    // the next open failed ("every name is taken"): a journal torn again and again at one place
    // could no longer be opened for writing.
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    append(&store, 0, 0, Durability::Synced);
    drop(store);
    let path = segment(1);
    let end = disk.read_file(&path).unwrap().len() as u64;
    // The copies 1,000 earlier cuts at this place left.
    let name = |n: u64| match n {
        1 => format!("{}.{end}.torn", SegmentId(1).file_name()),
        n => format!("{}.{end}-{n}.torn", SegmentId(1).file_name()),
    };
    for n in 1..=1000 {
        disk.create_new(&sim_dir().join(name(n))).unwrap();
    }
    for (round, next) in (0..3u8).zip(1001u64..) {
        // Garbage where the next group would go: a torn tail at `end`, cut by the open.
        let f = disk.open(&path, false).unwrap();
        f.write_all_at(&[0xA5 ^ round; 100], end).unwrap();
        f.sync_data().unwrap();
        drop(f);
        let store = open_sim(&disk, exact()).unwrap();
        let cut = store.torn_tail().expect("the garbage is a torn tail").clone();
        assert_eq!(cut.offset, end);
        assert_eq!(cut.kept_in.as_deref(), Some(sim_dir().join(name(next)).as_path()), "{cut}");
        let copies: Vec<PathBuf> = kept_aside(&disk).into_iter().map(|(p, _)| p).collect();
        assert_eq!(copies.len(), TORN_COPIES_KEPT, "round {round}: {copies:?}");
        let expected_removed: Vec<PathBuf> = if round == 0 {
            (1..=1001 - TORN_COPIES_KEPT as u64).map(|n| sim_dir().join(name(n))).collect()
        } else {
            vec![sim_dir().join(name(next - TORN_COPIES_KEPT as u64))]
        };
        assert_eq!(cut.copies_removed, expected_removed, "round {round}");
        let told = cut.to_string();
        assert!(
            told.contains(&name(next - TORN_COPIES_KEPT as u64)) && told.contains("removed"),
            "{told}"
        );
        for (p, _) in kept_aside(&disk) {
            assert!(!cut.copies_removed.contains(&p), "{} was removed and kept", p.display());
        }
        assert_eq!(disk.read_file(&cut.kept_in.clone().unwrap()).unwrap(), vec![0xA5 ^ round; 100]);
        assert_eq!(check_prefix(&store, 0, 1, 1), 1);
        drop(store);
    }
}
