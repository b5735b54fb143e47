//! verify names the first damaged byte, once: a frame whose length field is damaged is reported
//! at that frame (where opening and a read name it), and the frames after it in its group are
//! read as usual; a zeroed block is one finding.

use std::path::PathBuf;
use std::sync::Arc;

use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, SegmentId, VerifyReport, verify_dir_with};
use stepjournal_codec::Limits;
use stepjournal_tests::file_fixture::{crash_session, grouped_journal, open_sim, sim_dir};

const SESSIONS: usize = 5;
const ROUNDS: u64 = 3;

fn verify(disk: &SimDisk) -> VerifyReport {
    verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Limits::default(), &mut |_, _| {}).unwrap()
}

fn segment() -> PathBuf {
    sim_dir().join(SegmentId(1).file_name())
}

/// A journal whose round-1 group holds one frame for each of sessions 1..5; the offset of each
/// session's round-1 record (its frame's one record, 16 bytes into the frame).
fn journal() -> (SimDisk, Vec<u64>) {
    let disk = SimDisk::new();
    drop(grouped_journal(&disk, FileOptions::new().preallocate(0), SESSIONS, ROUNDS));
    let report = verify(&disk);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let records = (1..SESSIONS)
        .map(|s| report.read_session(&crash_session(s)).unwrap()[1].offset)
        .collect::<Vec<_>>();
    // One group: each frame right after the one before.
    for pair in records.windows(2) {
        assert!(pair[0] < pair[1], "{records:?}");
    }
    (disk, records)
}

/// Every session but those `damaged` reads whole; those read up to their damaged batch.
fn others_intact(report: &VerifyReport, damaged: &[usize]) {
    for s in 0..SESSIONS {
        let (before, after) = report.session_events(&crash_session(s));
        if damaged.contains(&s) {
            // Sessions 1.. lose round 1; session 0 (in the next group) round 2.
            assert_eq!(before, if s == 0 { 2 } else { 1 }, "session {s}");
        } else {
            assert_eq!((before, after), (ROUNDS, 0), "session {s}: {:?}", report.findings);
        }
    }
}

#[test]
fn a_damaged_frame_length_is_reported_at_that_frame_once() {
    // A flip in a frame's length field (byte 672, the length of the frame at 666) was reported
    // at byte 1052, an intact frame of another session, and the batches of the other sessions
    // after it in the group as missing; opening and export rightly named 666.
    let mut cases = 0;
    for (i, record) in journal().1.into_iter().enumerate() {
        let frame = record - 16;
        for (byte, mask) in [(4, 0x01), (4, 0x80), (5, 0x02), (6, 0x01), (7, 0x10)] {
            let (disk, _) = journal();
            assert!(disk.flip_byte(&segment(), frame + byte, mask));
            let report = verify(&disk);
            let what = format!("session {} frame at {frame}, byte +{byte} ^ {mask:#x}", i + 1);
            assert_eq!(report.findings.len(), 1, "{what}: {:#?}", report.findings);
            let f = &report.findings[0];
            assert!(!f.torn_tail, "{what}: {f}");
            assert_eq!((f.segment.clone(), f.offset), (segment(), frame), "{what}: {f}");
            assert_eq!(f.session, Some(crash_session(i + 1)), "{what}: {f}");
            others_intact(&report, &[i + 1]);
            // Opening names the same byte.
            let refused = open_sim(&disk, FileOptions::new()).unwrap_err().to_string();
            assert!(refused.contains(&format!("byte {frame}")), "{what}: {refused}");
            cases += 1;
        }
    }
    println!("{cases} length-field flips, each one finding at its frame");
}

#[test]
fn a_zeroed_block_is_one_finding_at_its_first_damaged_record() {
    // A block of zeros inside a frame was reported as a burst of 8-byte "records", one finding
    // each.
    let mut cases = 0;
    let records = journal().1;
    for (i, record) in records.iter().copied().enumerate() {
        for (from, len) in [(10u64, 40u64), (0, 64), (20, 8)] {
            let (disk, _) = journal();
            let path = segment();
            let mut image = disk.read_file(&path).unwrap();
            let at = (record + from) as usize;
            let len = (len as usize).min(image.len() - at);
            image[at..at + len].fill(0);
            for (k, b) in image.iter().enumerate() {
                let old = disk.read_file(&path).unwrap()[k];
                if old != *b {
                    assert!(disk.flip_byte(&path, k as u64, old ^ b));
                }
            }
            let report = verify(&disk);
            let what = format!("session {}: {len} zeros at {at}", i + 1);
            assert_eq!(report.findings.len(), 1, "{what}: {:#?}", report.findings);
            let f = &report.findings[0];
            assert_eq!(f.segment, path, "{what}");
            assert!(f.offset <= at as u64 && f.offset >= record - 16, "{what}: {f}");
            // The frames the block touches: this one, and the next when it reaches its header.
            let mut touched: Vec<usize> = (i..records.len())
                .filter(|k| records[*k] - 16 < (at + len) as u64)
                .map(|k| k + 1)
                .collect();
            // And session 0's next group, when it reaches past the end of this one.
            let frame_len = records[1] - records[0];
            if (at + len) as u64 > records[records.len() - 1] - 16 + frame_len {
                touched.push(0);
            }
            others_intact(&report, &touched);
            cases += 1;
        }
    }
    println!("{cases} zeroed blocks, each one finding");
}
