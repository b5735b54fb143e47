//! A sidecar index is trusted only as far as it proves itself: one that leaves a frame out is not
//! used, an open whose sidecars leave a session's sequence with a gap scans the segments instead,
//! and verify checks every sidecar opening would use against its segment.

use std::path::PathBuf;
use std::sync::Arc;

use stepjournal_backends::JournalStore;
use stepjournal_backends::file::io::Io;
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileProblem, VerifyReport, verify_dir_with};
use stepjournal_codec::Limits;
use stepjournal_tests::file_fixture::{
    append_crash_event, check_prefix, crash_session, open_sim, sim_dir,
};
use stepjournal_tests::sidecar_forge::Sidecar;

/// The session whose events all lie in segment 1.
const EARLY: usize = 9;
const EARLY_EVENTS: u64 = 6;

fn options() -> FileOptions {
    // Segments of single-event groups are a quarter headers: kept below compaction's bar, so
    // that each segment stays where the test put its batches.
    FileOptions::new().segment_size(4096).compact_when_dead(50)
}

fn side(id: u64) -> PathBuf {
    sim_dir().join(format!("{id:020}.idx"))
}

fn verify(disk: &SimDisk) -> VerifyReport {
    verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Limits::default(), &mut |_, _| {}).unwrap()
}

/// Session 9's events first (all in segment 1), then sessions 0..3 in turn until segment 3 is
/// started; the sealed segments' sidecars written. Returns how many events each of 0..3 has.
fn journal(disk: &SimDisk) -> u64 {
    let store = open_sim(disk, options()).unwrap();
    for q in 0..EARLY_EVENTS {
        append_crash_event(&store, EARLY, q);
    }
    let mut q = 0;
    while disk.read_file(&sim_dir().join(format!("{:020}.seg", 3))).is_none() {
        for s in 0..3 {
            append_crash_event(&store, s, q);
        }
        q += 1;
    }
    store.wait_reclaimed();
    assert!(disk.read_file(&side(1)).is_some(), "segment 1's sidecar is written");
    q
}

fn rewrite(disk: &SimDisk, path: &std::path::Path, bytes: &[u8]) {
    disk.remove(path).unwrap();
    let f = disk.create_new(path).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    f.sync_data().unwrap();
}

/// Segment 1's sidecar, decoded, and the index of session 9's last frame in it.
fn early_sidecar(disk: &SimDisk) -> (Sidecar, usize) {
    let sidecar = Sidecar::decode(&disk.read_file(&side(1)).unwrap()).unwrap();
    let session = crash_session(EARLY).to_string();
    let last = sidecar.frames.iter().rposition(|f| f.session == session).unwrap();
    assert_eq!(sidecar.frames[last].first, EARLY_EVENTS - 1);
    (sidecar, last)
}

#[test]
fn a_sidecar_missing_an_entry_is_not_used() {
    // A sidecar that left out one frame (its checksum, segment id, length and last 64 bytes all
    // matching) was used: export returned 5 of session 9's 6 events with verify clean, and the
    // writer then appended a second seq 5.
    let disk = SimDisk::new();
    let rounds = journal(&disk);
    let (mut sidecar, last) = early_sidecar(&disk);
    sidecar.frames.remove(last);
    rewrite(&disk, &side(1), &sidecar.encode());
    for read_only in [true, false] {
        let store = open_sim(&disk, options().read_only(read_only)).unwrap();
        let tail = store.tail(&crash_session(EARLY)).unwrap().get();
        assert_eq!(tail, EARLY_EVENTS, "read_only {read_only}: every event of session 9");
        assert_eq!(check_prefix(&store, EARLY, EARLY_EVENTS, EARLY_EVENTS), EARLY_EVENTS);
        for s in 0..3 {
            assert_eq!(check_prefix(&store, s, rounds, rounds), rounds);
        }
    }
    let report = verify(&disk);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn an_open_whose_sidecars_leave_a_gap_scans_and_verify_names_the_sidecar() {
    // A sidecar whose entries tile the segment but name another seq (forged, or from another
    // journal) was used by opening, which refused the journal ("intact batches that do not fit
    // their session") though every segment was intact; verify ignored sidecars and was clean.
    let disk = SimDisk::new();
    let rounds = journal(&disk);
    let (mut sidecar, last) = early_sidecar(&disk);
    let offset = sidecar.frames[last].offset;
    sidecar.frames[last].first += 1;
    rewrite(&disk, &side(1), &sidecar.encode());
    let report = verify(&disk);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!((f.segment.clone(), f.offset), (side(1), offset), "{f}");
    assert!(matches!(&f.problem, FileProblem::Sidecar(what) if what.contains("seq 6..7")), "{f}");
    for read_only in [true, false] {
        let store = open_sim(&disk, options().read_only(read_only)).unwrap();
        assert_eq!(check_prefix(&store, EARLY, EARLY_EVENTS, EARLY_EVENTS), EARLY_EVENTS);
        for s in 0..3 {
            assert_eq!(check_prefix(&store, s, rounds, rounds), rounds);
        }
    }
}

#[test]
fn verify_names_a_sidecar_whose_entries_name_other_sessions() {
    // Two entries of the same length swapped between sessions: each session's sequence stays
    // dense, so opening cannot tell; verify compares every entry with the frame at its place.
    let disk = SimDisk::new();
    journal(&disk);
    let mut sidecar = Sidecar::decode(&disk.read_file(&side(1)).unwrap()).unwrap();
    let (a, b) = (0..sidecar.frames.len())
        .flat_map(|i| (i + 1..sidecar.frames.len()).map(move |j| (i, j)))
        .find(|(i, j)| {
            let (x, y) = (&sidecar.frames[*i], &sidecar.frames[*j]);
            x.len == y.len && x.session != y.session && x.first == y.first
        })
        .expect("two frames of one length and one seq in two sessions");
    let (sa, sb) = (sidecar.frames[a].session.clone(), sidecar.frames[b].session.clone());
    sidecar.frames[a].session = sb;
    sidecar.frames[b].session = sa;
    rewrite(&disk, &side(1), &sidecar.encode());
    let report = verify(&disk);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!((f.segment.clone(), f.offset), (side(1), sidecar.frames[a].offset), "{f}");
}
