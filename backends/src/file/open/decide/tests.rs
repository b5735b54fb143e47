//! The decision on facts made up by hand: no disk, every rule of what opening changes.

use stepjournal_codec::{DecodeError, Seq, SessionId};

use super::*;
use crate::file::format::torn::TornFrame;
use crate::file::format::walk::{FrameKindInfo, HeldFrame, Problem, Torn};

const HEADER: u64 = SEGMENT_HEADER_LEN as u64;
const MODES: [OnCorruption; 2] = [OnCorruption::Refuse, OnCorruption::TruncateAtCorruption];

fn dir() -> &'static Path {
    Path::new("/j")
}

fn path(id: u64) -> PathBuf {
    dir().join(SegmentId(id).file_name())
}

/// A segment walked to its end without damage: its data ends at `end`, the file at `len`.
fn intact(id: u64, end: u64, len: u64) -> Segment {
    let walk = SegmentWalk { len, end, first: None, torn: None };
    Segment { id: SegmentId(id), found: Found::Walked(walk) }
}

fn from_sidecar(id: u64, len: u64) -> Segment {
    Segment { id: SegmentId(id), found: Found::Sidecar { len } }
}

fn unread(id: u64) -> Segment {
    Segment { id: SegmentId(id), found: Found::Unread }
}

fn damage(offset: u64, cut: u64, problem: Problem, verdict: Verdict) -> Damage {
    Damage { offset, cut, problem, valid_after: None, synced_after: 0, verdict }
}

/// A segment of `len` bytes walked to its first damage `d`, which begins the torn tail `torn`
/// (of `held` bytes and `frames`) when the walk judged it one.
fn damaged(id: u64, len: u64, d: Damage, torn: Option<(u64, Vec<HeldFrame>)>) -> Segment {
    let torn = torn.map(|(held, frames)| Torn { damage: d.clone(), len: held, frames });
    let end = if d.cut < HEADER { 0 } else { d.cut };
    let walk = SegmentWalk { len, end, first: Some(d), torn };
    Segment { id: SegmentId(id), found: Found::Walked(walk) }
}

fn checksum() -> Problem {
    Problem::Frame(DecodeError::ChecksumMismatch { stored: 1, computed: 2 })
}

/// Nothing to change, appends going on in `newest`.
fn nothing(newest: Newest) -> Repairs {
    Repairs {
        asides: Vec::new(),
        removals: Vec::new(),
        sidecars_kept: BTreeSet::new(),
        sidecars_removed: Vec::new(),
        cuts: Vec::new(),
        newest,
        torn: None,
    }
}

fn kept(id: u64, len: u64) -> Newest {
    Newest::Kept { id: SegmentId(id), len }
}

#[test]
fn a_clean_journal_changes_nothing_and_appends_go_on_in_its_newest_segment() {
    let segments = [intact(1, 4096, 4096), intact(2, 500, 500)];
    for mode in MODES {
        let r = decide(dir(), mode, &segments, &[]).unwrap();
        assert_eq!(r, nothing(kept(2, 500)), "{mode:?}");
    }
}

#[test]
fn zeros_after_the_data_of_the_last_segment_are_cut_and_nothing_is_kept_aside() {
    let segments = [intact(1, 4096, 4096), intact(2, 300, 1 << 20)];
    for mode in MODES {
        let r = decide(dir(), mode, &segments, &[]).unwrap();
        let cuts = vec![Cut { id: SegmentId(2), at: 300 }];
        assert_eq!(r, Repairs { cuts, ..nothing(kept(2, 300)) }, "{mode:?}");
    }
}

#[test]
fn a_torn_tail_in_the_last_segment_is_kept_aside_cut_and_reported() {
    let d = damage(310, 300, checksum(), Verdict::TornTail);
    let held =
        HeldFrame { session: "s".into(), kind: FrameKindInfo::Events { first: 3, count: 1 } };
    let segments = [intact(1, 4096, 4096), damaged(2, 1 << 20, d, Some((120, vec![held])))];
    for mode in MODES {
        let r = decide(dir(), mode, &segments, &[]).unwrap();
        let torn = r.torn.clone().unwrap();
        assert_eq!((torn.segment.as_path(), torn.offset, torn.len), (path(2).as_path(), 300, 120));
        let frame =
            TornFrame::Events { session: SessionId::from_stored("s"), first: Seq(3), count: 1 };
        assert_eq!((torn.frames, torn.kept_in), (vec![frame], None));
        let expected = Repairs {
            asides: vec![Aside { id: SegmentId(2), bytes: 300..420 }],
            cuts: vec![Cut { id: SegmentId(2), at: 300 }],
            torn: r.torn.clone(),
            ..nothing(kept(2, 300))
        };
        assert_eq!(r, expected, "{mode:?}");
    }
}

#[test]
fn a_segment_torn_inside_its_header_is_removed_and_appends_go_on_in_the_one_before() {
    // A crash while creating segment 2 left 11 bytes of its header.
    let header = Problem::SegmentHeader(DecodeError::Truncated { needed: HEADER, available: 11 });
    let d = damage(0, 0, header, Verdict::TornTail);
    let segments = [from_sidecar(1, 4096), damaged(2, 11, d, Some((11, Vec::new())))];
    for mode in MODES {
        let r = decide(dir(), mode, &segments, &[SegmentId(1)]).unwrap();
        let torn = r.torn.clone().unwrap();
        assert_eq!((torn.offset, torn.len), (0, 11));
        let expected = Repairs {
            // Nothing kept aside: a header can be rebuilt.
            removals: vec![SegmentId(2)],
            // Appends go on in segment 1 again: its sidecar goes, to be written anew once sealed.
            sidecars_removed: vec![SegmentId(1)],
            torn: r.torn.clone(),
            ..nothing(kept(1, 4096))
        };
        assert_eq!(r, expected, "{mode:?}");
    }
}

/// Segment 2 of 3 is damaged at byte 500, in its group at byte 480; 3 was not read.
fn corrupt_sealed_segment() -> [Segment; 3] {
    let d = damage(500, 480, checksum(), Verdict::Corruption);
    [from_sidecar(1, 4096), damaged(2, 4096, d, None), unread(3)]
}

#[test]
fn corruption_inside_a_sealed_segment_refuses_to_open_naming_the_segment_and_offset() {
    let segments = corrupt_sealed_segment();
    let e = decide(dir(), OnCorruption::Refuse, &segments, &[SegmentId(1)]).unwrap_err();
    let OpenError::Store(StoreError::Corrupt { context, .. }) = &e else { panic!("{e:?}") };
    let at = format!("segment {} at byte 500 (inside a sealed segment", path(2).display());
    assert!(context.starts_with(&at), "{context}");
}

#[test]
fn salvage_cuts_a_sealed_segment_at_its_corruption_and_removes_every_later_segment() {
    let segments = corrupt_sealed_segment();
    let sidecars = [SegmentId(3), SegmentId(1)];
    let r = decide(dir(), OnCorruption::TruncateAtCorruption, &segments, &sidecars).unwrap();
    let expected = Repairs {
        // Acknowledged data salvage gives up is not kept aside.
        removals: vec![SegmentId(3)],
        sidecars_kept: BTreeSet::from([SegmentId(1)]),
        sidecars_removed: vec![SegmentId(3)],
        cuts: vec![Cut { id: SegmentId(2), at: 480 }],
        ..nothing(kept(2, 480))
    };
    assert_eq!(r, expected);
}

#[test]
fn a_newest_file_that_is_not_a_segment_is_refused_or_set_aside_whole_by_salvage() {
    let bad_magic = DecodeError::Malformed { reason: "not a stepjournal segment".into() };
    let d = damage(0, 0, Problem::SegmentHeader(bad_magic), Verdict::NotASegment);
    let segments = [intact(1, 4096, 4096), damaged(2, 6, d, None)];
    let e = decide(dir(), OnCorruption::Refuse, &segments, &[]).unwrap_err();
    assert!(matches!(&e, OpenError::NotASegment { path: p, .. } if *p == path(2)), "{e:?}");
    let r = decide(dir(), OnCorruption::TruncateAtCorruption, &segments, &[]).unwrap();
    let expected = Repairs {
        asides: vec![Aside { id: SegmentId(2), bytes: 0..6 }],
        removals: vec![SegmentId(2)],
        ..nothing(kept(1, 4096))
    };
    assert_eq!(r, expected);
}

#[test]
fn with_no_segment_kept_appends_go_on_in_a_new_segment_after_every_one_listed() {
    assert_eq!(
        decide(dir(), OnCorruption::Refuse, &[], &[]).unwrap(),
        nothing(Newest::New(SegmentId(1)))
    );
    let header = Problem::SegmentHeader(DecodeError::Truncated { needed: HEADER, available: 0 });
    let d = damage(0, 0, header, Verdict::TornTail);
    let segments = [damaged(5, 0, d, Some((0, Vec::new())))];
    let r = decide(dir(), OnCorruption::Refuse, &segments, &[]).unwrap();
    assert_eq!((r.removals, r.newest), (vec![SegmentId(5)], Newest::New(SegmentId(6))));
}

#[test]
fn the_sidecars_read_are_kept_and_every_other_sidecar_file_is_removed_in_listing_order() {
    let segments = [from_sidecar(1, 4096), from_sidecar(2, 4096), intact(3, 900, 900)];
    let sidecars = [SegmentId(3), SegmentId(1), SegmentId(7), SegmentId(2)];
    let r = decide(dir(), OnCorruption::Refuse, &segments, &sidecars).unwrap();
    assert_eq!(r.sidecars_kept, BTreeSet::from([SegmentId(1), SegmentId(2)]));
    assert_eq!(r.sidecars_removed, vec![SegmentId(3), SegmentId(7)]);
    assert_eq!(r.newest, kept(3, 900));
}
