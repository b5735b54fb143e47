//! The file journal check behind `stepjournal verify` (`stepjournal_backends::file::verify_dir`), on
//! segments written byte by byte: gaps, overlaps, deletions, compaction's copies, misdirected
//! records, unknown kinds, damaged group headers, zeros ahead of the data.

mod cli_support;

use std::path::Path;

use cli_support::*;
use stepjournal_backends::file::layout::{
    GROUP_HEADER_LEN, GroupHeader, SegmentId, encode_segment_header,
};
use stepjournal_backends::file::{FileProblem, VerifyReport, verify_dir};
use stepjournal_codec::batch;
use stepjournal_codec::{DecodeError, Limits, Record, Seq, SessionId, Stamped, UnixMillis};

fn stamped(n: usize) -> Vec<Stamped> {
    (0..n).map(|i| Stamped::at(UnixMillis(T0 + i as u64), message(&format!("m{i}")))).collect()
}

/// A batch frame of `n` messages of `session` from `first`.
fn frame(session: &str, first: u64, n: usize) -> Vec<u8> {
    let mut b = Vec::new();
    batch::encode_into(
        &mut b,
        &SessionId::new(session).unwrap(),
        Seq(first),
        &stamped(n),
        &Limits::default(),
    )
    .unwrap();
    b
}

fn delete(session: &str) -> Vec<u8> {
    let mut b = Vec::new();
    batch::encode_delete_into(&mut b, &SessionId::new(session).unwrap(), &Limits::default())
        .unwrap();
    b
}

/// A group of frames.
fn group(frames: &[Vec<u8>]) -> Vec<u8> {
    synced_group(frames, 0)
}

/// A group of frames written when the segment's first `synced` bytes were durable.
fn synced_group(frames: &[Vec<u8>], synced: u64) -> Vec<u8> {
    let body: Vec<u8> = frames.concat();
    let mut g = vec![0u8; GROUP_HEADER_LEN];
    GroupHeader { len: body.len() as u32, frames: frames.len() as u32, synced }.encode_into(&mut g);
    g.extend_from_slice(&body);
    g
}

/// Writes segment `id` holding `groups` into `dir`; returns each group's offset.
fn segment(dir: &Path, id: u64, groups: &[Vec<u8>]) -> Vec<u64> {
    let mut bytes = encode_segment_header(SegmentId(id)).to_vec();
    let mut offsets = Vec::new();
    for g in groups {
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(g);
    }
    std::fs::write(dir.join(SegmentId(id).file_name()), bytes).unwrap();
    offsets
}

fn check(dir: &Path) -> VerifyReport {
    verify_dir(dir, &Limits::default(), &mut |_, _| {}).unwrap()
}

fn problems(r: &VerifyReport) -> Vec<&FileProblem> {
    r.findings.iter().filter(|f| !f.torn_tail).map(|f| &f.problem).collect()
}

#[test]
fn a_gap_in_a_session_is_reported_at_the_batch_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let at = segment(
        dir.path(),
        1,
        &[group(&[frame("a", 0, 2)]), group(&[frame("a", 5, 1), frame("b", 0, 1)])],
    );
    let r = check(dir.path());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.problem, FileProblem::SeqGap { from: Seq(2), to: Seq(5) });
    assert_eq!((f.session.as_ref().map(SessionId::as_str), f.seq), (Some("a"), Some(Seq(2))));
    assert_eq!(f.offset, at[1] + GROUP_HEADER_LEN as u64);
    assert!(!f.torn_tail);
    assert_eq!(r.session_events(&SessionId::new("a").unwrap()), (2, 1));
    assert_eq!(r.read_session(&SessionId::new("a").unwrap()).unwrap().len(), 2);
    assert_eq!(r.read_session(&SessionId::new("b").unwrap()).unwrap().len(), 1);
}

#[test]
fn a_deletion_forgives_the_gaps_before_it_and_compaction_copies_count_once() {
    let dir = tempfile::tempdir().unwrap();
    segment(
        dir.path(),
        1,
        &[
            group(&[frame("a", 0, 1), frame("a", 3, 1)]),
            group(&[delete("a")]),
            group(&[frame("a", 0, 2), frame("c", 0, 2)]),
            group(&[frame("c", 2, 1)]),
        ],
    );
    // Compaction copied c's first batch to segment 2.
    segment(dir.path(), 2, &[group(&[frame("c", 0, 2)])]);
    let r = check(dir.path());
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(r.session_events(&SessionId::new("a").unwrap()), (2, 0));
    let c = r.read_session(&SessionId::new("c").unwrap()).unwrap();
    assert_eq!(c.iter().map(|l| l.record.seq.get()).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(c[0].segment.ends_with(SegmentId(2).file_name()), "the latest copy is read");
}

#[test]
fn overlapping_batches_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    segment(dir.path(), 1, &[group(&[frame("a", 0, 3)]), group(&[frame("a", 1, 1)])]);
    let r = check(dir.path());
    assert_eq!(problems(&r), [&FileProblem::Overlap { first: Seq(1), count: 1, tail: Seq(3) }]);
}

#[test]
fn a_misdirected_record_is_reported_with_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let rec = |s: &str, seq: u64| Record {
        session: SessionId::new(s).unwrap(),
        seq: Seq(seq),
        at: UnixMillis(T0),
        event: message("x"),
    };
    let mut mixed = Vec::new();
    batch::encode_records_into(&mut mixed, &[rec("a", 0), rec("b", 0)], &Limits::default())
        .unwrap();
    segment(dir.path(), 1, &[group(&[mixed]), group(&[frame("c", 0, 1)])]);
    let r = check(dir.path());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert!(
        matches!(&f.problem, FileProblem::Misdirected { expected_session, found_session, .. }
        if expected_session.as_str() == "a" && found_session.as_str() == "b"),
        "{:?}",
        f.problem
    );
    assert!(!f.torn_tail, "intact bytes that contradict themselves are never a torn write");
    assert_eq!(r.session_events(&SessionId::new("a").unwrap()), (0, 0));
}

#[test]
fn an_unknown_event_kind_is_reported_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = frame("a", 0, 2);
    // The second record's kind byte, with both checksums made right again: a newer writer's.
    let first_len = 8 + u32::from_le_bytes(f[20..24].try_into().unwrap()) as usize;
    let rec = batch::HEADER_LEN + first_len;
    f[rec + 9] = 99;
    let rec_len = 8 + u32::from_le_bytes(f[rec + 4..rec + 8].try_into().unwrap()) as usize;
    let crc = crc32(&f[rec + 4..rec + rec_len]);
    f[rec..rec + 4].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32(&f[4..]);
    f[0..4].copy_from_slice(&crc.to_le_bytes());
    let at = segment(dir.path(), 1, &[group(&[f]), group(&[frame("b", 0, 1)])]);
    let r = check(dir.path());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let found = &r.findings[0];
    assert_eq!(found.problem, FileProblem::Record(DecodeError::UnknownKind { code: 99 }));
    assert_eq!(
        (found.session.as_ref().map(SessionId::as_str), found.seq),
        (Some("a"), Some(Seq(1)))
    );
    assert_eq!(found.offset, at[0] + (GROUP_HEADER_LEN + rec) as u64);
}

/// CRC-32 (IEEE), bit by bit: the polynomial the format names.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn a_damaged_group_header_is_stepped_over_to_the_valid_data_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = group(&[frame("a", 0, 1)]);
    // The second group was written once the first was durable.
    let durable = 32 + first.len() as u64;
    let at = segment(dir.path(), 1, &[first, synced_group(&[frame("b", 0, 2)], durable)]);
    let path = dir.path().join(SegmentId(1).file_name());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at[0] as usize + 9] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let r = check(dir.path());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert!(matches!(f.problem, FileProblem::GroupHeader(DecodeError::ChecksumMismatch { .. })));
    assert_eq!((f.offset, f.valid_after, f.torn_tail), (at[0], Some(at[1]), false));
    assert_eq!(r.session_events(&SessionId::new("b").unwrap()), (2, 0));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "verify never writes");
}

#[test]
fn damage_at_a_sealed_segments_end_is_corruption_but_at_the_newest_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let torn = |dir: &Path, id: u64| {
        segment(dir, id, &[group(&[frame(&format!("s{id}"), 0, 2)])]);
        let path = dir.join(SegmentId(id).file_name());
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 3).unwrap();
    };
    torn(dir.path(), 1);
    torn(dir.path(), 2);
    let r = check(dir.path());
    let kinds: Vec<(u64, bool)> = r
        .findings
        .iter()
        .map(|f| (u64::from(f.segment.ends_with(SegmentId(2).file_name())) + 1, f.torn_tail))
        .collect();
    assert_eq!(kinds, [(1, false), (2, true)], "{:?}", r.findings);
    assert!(matches!(r.findings[0].problem, FileProblem::GroupTruncated { .. }));
    assert!(!r.is_clean());
}

#[test]
fn zeros_ahead_of_the_data_end_only_the_newest_segment() {
    let dir = tempfile::tempdir().unwrap();
    for id in [1, 2] {
        segment(dir.path(), id, &[group(&[frame(&format!("s{id}"), 0, 1)])]);
        let path = dir.path().join(SegmentId(id).file_name());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0u8; 4096]);
        std::fs::write(&path, bytes).unwrap();
    }
    let r = check(dir.path());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert!(r.findings[0].segment.ends_with(SegmentId(1).file_name()));
    assert!(!r.findings[0].torn_tail);
    assert_eq!(r.session_events(&SessionId::new("s2").unwrap()), (1, 0));
}
