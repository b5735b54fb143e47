//! The one walk over a segment's groups and frames, shared by opening and by
//! [`verify_dir`](crate::file::verify_dir): where the bytes stop making sense, and what that means.
//!
//! The walk checks the segment header, then each group in turn: its header, that its frames lie
//! inside the file, each frame's checksum, the first record of each events frame (its session and
//! first sequence number are what the index needs) and that the frames fill the group. The first
//! problem in a group is that group's [`Damage`]. At the segment's first damage every later byte
//! is searched once for intact group headers: what they say was durable decides what the damage
//! means ([`classify`]), the same way for both callers.
//!
//! - A torn tail runs from the damaged group to the segment's end: nothing after it counts, so
//!   the walk stops there for both callers.
//! - Corruption is handed to the caller's [`Visit::damage`]: opening stops (refusing, or salvaging
//!   what precedes it); verify carries on at the next group and reports what else it finds.
//! - Zeros from a group boundary to the end of the newest segment are the space the writer put
//!   ahead of its data, not damage: the segment's data ends there.

mod group;
mod survey;
mod window;

use std::io;

use stepjournal_codec::Limits;

use super::layout::{
    GroupHeader, SEGMENT_HEADER_LEN, SegmentId, check_segment_header, encode_segment_header,
};
use crate::file::io::IoFile;
pub(crate) use group::{FrameAt, FrameKindInfo, GroupView, Problem};
use group::{GroupCheck, check_group, view_of};
use survey::Survey;
use window::Window;

/// What damage means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Bytes a crash left half-written (or a segment it left half-created): cut them (and
    /// everything after).
    TornTail,
    /// Damage inside acknowledged data.
    Corruption,
    /// The newest segment's header never was one this journal wrote, and the file is not what a
    /// crash leaves while creating a segment: not this journal's torn tail.
    NotASegment,
    /// A segment header or record of a format version newer than this build reads: written by a
    /// newer stepjournal, never cut, removed or reported as damage.
    Newer,
}

/// Where a segment's bytes stop making sense, and what that means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// The first damaged byte found (a record, frame, group header or the segment header).
    pub offset: u64,
    /// Where the segment would be cut: the start of the damaged group (0: the segment header is
    /// damaged, the whole file is unusable).
    pub cut: u64,
    pub problem: Problem,
    /// The first intact group header after `cut`.
    pub valid_after: Option<u64>,
    /// The most bytes of the segment an intact group header after `cut` says were durable when
    /// its group was written: damage before that point was acknowledged data.
    pub synced_after: u64,
    pub verdict: Verdict,
}

/// The facts [`classify`] judges damage by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    /// Where the segment would be cut (0: its header is damaged).
    pub cut: u64,
    /// Whether the segment is the newest.
    pub last_segment: bool,
    /// Whether an intact group header follows the cut.
    pub valid_after: bool,
    /// The most bytes an intact group header after the cut says were durable.
    pub synced_after: u64,
    /// With a damaged segment header: the file is shorter than a header and each of its bytes
    /// is the header's this journal writes for the segment, or zero (a crash while creating it).
    pub half_created: bool,
}

/// Decides what damage in a segment means. Only the newest segment can hold bytes that were
/// never synced (a segment is synced whole before the next one is created), and only bytes at or
/// after the durable point later groups claim: damage before a later group's `synced` was
/// acknowledged data. A segment's header is synced before anything is written after it, so a
/// damaged header is a torn write only in a file a crash left half-created.
pub(crate) fn classify(problem: &Problem, facts: Facts) -> Verdict {
    if problem.is_newer() {
        return Verdict::Newer;
    }
    if problem.inconsistent() || !facts.last_segment {
        return Verdict::Corruption;
    }
    if facts.cut == 0 {
        return match (facts.valid_after, facts.half_created) {
            (true, _) => Verdict::Corruption,
            (false, true) => Verdict::TornTail,
            (false, false) => Verdict::NotASegment,
        };
    }
    if facts.valid_after && facts.synced_after > facts.cut {
        return Verdict::Corruption;
    }
    Verdict::TornTail
}

/// What the caller does with each group the walk finds.
pub(crate) trait Visit {
    /// An intact group. Refusing it (the index of the frame that does not fit, and why) makes it
    /// damage that is never a torn write.
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)>;

    /// Damage that is not a torn tail ([`Verdict::Corruption`], [`Verdict::NotASegment`], or
    /// bytes of a newer format, [`Verdict::Newer`]),
    /// with the damaged group when its header is intact. Returns whether the walk goes on to the
    /// next group after it.
    fn damage(&mut self, d: &Damage, group: Option<&GroupView<'_>>) -> Flow;
}

/// Whether the walk goes on after damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Stop,
    Go,
}

/// An intact frame inside a torn tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldFrame {
    pub session: String,
    pub kind: FrameKindInfo,
}

/// A torn tail: the damage it begins with, the bytes it holds, its intact frames.
#[derive(Debug, Clone)]
pub(crate) struct Torn {
    pub damage: Damage,
    /// From the cut to the last non-zero byte (a half-created segment: the file's length).
    pub len: u64,
    pub frames: Vec<HeldFrame>,
}

/// What a walk of one segment found.
#[derive(Debug, Clone)]
pub(crate) struct SegmentWalk {
    /// The file's length (where the walk found it ending, if it shrank meanwhile).
    pub len: u64,
    /// The end of the segment's data: the end of the last intact group before the first damage
    /// (the segment header's end if none; 0 if the segment header is damaged).
    pub end: u64,
    /// The first damage.
    pub first: Option<Damage>,
    /// The torn tail the segment ends in (the walk stops there).
    pub torn: Option<Torn>,
}

/// Walks segment `id` (`last`: the newest segment) from its header to its end, handing each
/// intact group and each damage that is not a torn tail to `visit` in order. See the
/// [module documentation](self).
pub(crate) fn walk_segment(
    file: &dyn IoFile,
    id: SegmentId,
    last: bool,
    limits: &Limits,
    buf: &mut Vec<u8>,
    visit: &mut dyn Visit,
) -> io::Result<SegmentWalk> {
    let len = file.len()?;
    let mut w = Window::new(file, len, buf);
    let mut walk = SegmentWalk { len, end: SEGMENT_HEADER_LEN as u64, first: None, torn: None };
    let mut survey: Option<Survey> = None;
    let mut frames: Vec<FrameAt> = Vec::new();
    let mut pos = SEGMENT_HEADER_LEN as u64;
    let header = w.bytes(0, SEGMENT_HEADER_LEN)?;
    if let Err(e) = check_segment_header(header, id) {
        let half_created = header.len() as u64 == len && is_half_created(header, id);
        walk.end = 0;
        let s = surveyed(&mut survey, &mut w, 0)?;
        let d = judge(s, last, 0, 0, Problem::SegmentHeader(e), half_created);
        walk.first = Some(d.clone());
        walk.len = w.len;
        if d.verdict == Verdict::TornTail {
            walk.torn = Some(Torn { damage: d, len: w.len, frames: Vec::new() });
            return Ok(walk);
        }
        let go = visit.damage(&d, None);
        match d.valid_after {
            Some(at) if go == Flow::Go => pos = at,
            _ => return Ok(walk),
        }
    }
    while pos < w.len {
        let (d, header, end) = match check_group(&mut w, pos, limits, &mut frames)? {
            GroupCheck::Whole { header, end } => {
                let refused = visit.group(&view_of(&mut w, pos, header, &frames)?).err();
                let Some((i, reason)) = refused else {
                    if walk.first.is_none() {
                        walk.end = end;
                    }
                    pos = end;
                    continue;
                };
                let at = frames.get(i).map_or(pos, |f| f.offset);
                let s = surveyed(&mut survey, &mut w, pos)?;
                (judge(s, last, at, pos, Problem::Refused(reason), false), Some(header), Some(end))
            }
            GroupCheck::Damaged { at, problem, header, end } => {
                let s = surveyed(&mut survey, &mut w, pos)?;
                if last && !problem.inconsistent() && s.zeros_from(pos) {
                    // The zeros the writer puts ahead of its data: the data ends here.
                    break;
                }
                (judge(s, last, at, pos, problem, false), header, end)
            }
        };
        walk.first.get_or_insert_with(|| d.clone());
        if d.verdict == Verdict::TornTail {
            let s = surveyed(&mut survey, &mut w, pos)?;
            walk.torn = Some(torn_tail(&mut w, s, limits, d, header, end, &mut frames)?);
            break;
        }
        let go = match header {
            Some(header) => visit.damage(&d, Some(&view_of(&mut w, pos, header, &frames)?)),
            None => visit.damage(&d, None),
        };
        if go == Flow::Stop {
            break;
        }
        // On after the damaged group: at its end when its extent can be trusted, else at the
        // next intact group header.
        match end.or(d.valid_after) {
            Some(next) => pos = next,
            None => break,
        }
    }
    walk.len = w.len;
    Ok(walk)
}

/// Whether the bytes of a file shorter than a segment header are what a crash while creating
/// segment `id` leaves: each byte the header's or zero.
fn is_half_created(bytes: &[u8], id: SegmentId) -> bool {
    let header = encode_segment_header(id);
    bytes.len() <= header.len() && bytes.iter().zip(header).all(|(b, h)| *b == h || *b == 0)
}

/// The survey of the segment from `from`, made the first time it is needed.
fn surveyed<'s>(
    survey: &'s mut Option<Survey>,
    w: &mut Window<'_>,
    from: u64,
) -> io::Result<&'s Survey> {
    if survey.is_none() {
        *survey = Some(Survey::of(w, from)?);
    }
    Ok(survey.get_or_insert_with(Survey::default))
}

/// The damage at `offset` in the group at `cut`, judged against what the survey found after it.
fn judge(
    s: &Survey,
    last: bool,
    offset: u64,
    cut: u64,
    problem: Problem,
    half_created: bool,
) -> Damage {
    let (valid_after, synced_after) = s.after(cut);
    let facts = Facts {
        cut,
        last_segment: last,
        valid_after: valid_after.is_some(),
        synced_after,
        half_created,
    };
    let verdict = classify(&problem, facts);
    Damage { offset, cut, problem, valid_after, synced_after, verdict }
}

/// What the torn tail beginning with `d` (in the group at `d.cut`, whose header and end are
/// given when intact) holds: its bytes, and its intact frames (those before the damage in that
/// group, then those of every group found after it).
fn torn_tail(
    w: &mut Window<'_>,
    s: &Survey,
    limits: &Limits,
    d: Damage,
    header: Option<GroupHeader>,
    end: Option<u64>,
    frames: &mut Vec<FrameAt>,
) -> io::Result<Torn> {
    let mut held = Vec::new();
    let mut hold = |g: &GroupView<'_>| {
        held.extend(
            g.frames.iter().map(|f| HeldFrame { session: g.session(f).to_owned(), kind: f.kind }),
        );
    };
    if let Some(header) = header {
        hold(&view_of(w, d.cut, header, frames)?);
    }
    let mut next = end.or(d.valid_after);
    while let Some(pos) = next.filter(|p| *p < w.len) {
        next = match check_group(w, pos, limits, frames)? {
            GroupCheck::Whole { header, end } => {
                hold(&view_of(w, pos, header, frames)?);
                Some(end)
            }
            GroupCheck::Damaged { header, end, .. } => {
                if let Some(header) = header {
                    hold(&view_of(w, pos, header, frames)?);
                }
                end.or(s.after(pos).0)
            }
        };
    }
    let len = s.last_nonzero.map_or(0, |z| (z + 1).saturating_sub(d.cut));
    Ok(Torn { damage: d, len, frames: held })
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::DecodeError;

    use super::*;

    fn facts(cut: u64, last_segment: bool, valid_after: bool, synced_after: u64) -> Facts {
        Facts { cut, last_segment, valid_after, synced_after, half_created: false }
    }

    fn problem() -> Problem {
        Problem::Frame(DecodeError::Malformed { reason: "x".into() })
    }

    #[test]
    fn damage_with_nothing_valid_after_it_in_the_last_segment_is_a_torn_tail() {
        assert_eq!(classify(&problem(), facts(100, true, false, 0)), Verdict::TornTail);
    }

    #[test]
    fn a_damaged_header_with_nothing_after_it_is_torn_only_in_a_half_created_file() {
        let header = Problem::SegmentHeader(DecodeError::Malformed { reason: "x".into() });
        let half = Facts { half_created: true, ..facts(0, true, false, 0) };
        assert_eq!(classify(&header, half), Verdict::TornTail);
        assert_eq!(classify(&header, facts(0, true, false, 0)), Verdict::NotASegment);
        assert_eq!(classify(&header, Facts { valid_after: true, ..half }), Verdict::Corruption);
        assert_eq!(classify(&header, Facts { last_segment: false, ..half }), Verdict::Corruption);
        let id = SegmentId(3);
        let full = encode_segment_header(id);
        assert!(is_half_created(&[], id));
        assert!(is_half_created(&full[..11], id));
        assert!(is_half_created(&[0u8; 32], id));
        let mut partly_zero = full;
        partly_zero[20..].fill(0);
        assert!(is_half_created(&partly_zero, id));
        assert!(!is_half_created(b"hello\n", id), "a text file is not a half-created segment");
        assert!(!is_half_created(&encode_segment_header(SegmentId(4))[..20], id));
    }

    #[test]
    fn damage_before_a_later_groups_durable_point_is_corruption() {
        assert_eq!(classify(&problem(), facts(100, true, true, 200)), Verdict::Corruption);
        assert_eq!(classify(&problem(), facts(100, true, true, 100)), Verdict::TornTail);
        assert_eq!(classify(&problem(), facts(0, true, true, 32)), Verdict::Corruption);
    }

    #[test]
    fn damage_in_a_sealed_segment_or_an_impossible_frame_is_corruption() {
        assert_eq!(classify(&problem(), facts(100, true, false, 0)), Verdict::TornTail);
        assert_eq!(classify(&problem(), facts(100, false, false, 0)), Verdict::Corruption);
        let fill = Problem::GroupFill { frames: 1, filled: 10, len: 20 };
        assert_eq!(classify(&fill, facts(100, true, false, 0)), Verdict::Corruption);
        let record = Problem::Record(DecodeError::UnknownKind { code: 99 });
        assert_eq!(classify(&record, facts(100, true, false, 0)), Verdict::Corruption);
    }
}
