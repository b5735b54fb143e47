//! The one walk over a segment's groups and frames, shared by opening and by
//! [`verify_dir`](super::verify_dir): where the bytes stop making sense, and what that means.
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

use super::io::IoFile;
use super::layout::{SEGMENT_HEADER_LEN, SegmentId, check_segment_header};
pub(crate) use group::{FrameAt, FrameKindInfo, GroupView, Problem};
use group::{GroupCheck, check_group, view_of};
use survey::Survey;
use window::Window;

/// What damage means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Bytes a crash left half-written: cut them (and everything after).
    TornTail,
    /// Damage inside acknowledged data.
    Corruption,
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

/// Decides what damage in a segment means. Only the newest segment can hold bytes that were
/// never synced (a segment is synced whole before the next one is created), and only bytes at or
/// after the durable point later groups claim: damage before a later group's `synced` was
/// acknowledged data.
pub(crate) fn classify(
    problem: &Problem,
    cut: u64,
    last_segment: bool,
    valid_after: bool,
    synced_after: u64,
) -> Verdict {
    if problem.inconsistent() || !last_segment {
        return Verdict::Corruption;
    }
    if cut == 0 && valid_after {
        // A segment's header is synced before any group is written after it.
        return Verdict::Corruption;
    }
    if valid_after && synced_after > cut {
        return Verdict::Corruption;
    }
    Verdict::TornTail
}

/// What the caller does with each group the walk finds.
pub(crate) trait Visit {
    /// An intact group. Refusing it (the index of the frame that does not fit, and why) makes it
    /// damage that is never a torn write.
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)>;

    /// Damage judged [`Verdict::Corruption`], with the damaged group when its header is intact.
    /// Returns whether the walk goes on to the next group after it.
    fn damage(&mut self, d: &Damage, group: Option<&GroupView<'_>>) -> Flow;
}

/// Whether the walk goes on after damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Stop,
    Go,
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
    /// The damage a torn tail begins with (the walk stops there).
    pub torn: Option<Damage>,
}

/// Walks segment `id` (`last`: the newest segment) from its header to its end, handing each
/// intact group and each corruption to `visit` in order. See the [module documentation](self).
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
    if let Err(e) = check_segment_header(w.bytes(0, SEGMENT_HEADER_LEN)?, id) {
        walk.end = 0;
        let d = judge(surveyed(&mut survey, &mut w, 0)?, last, 0, 0, Problem::SegmentHeader(e));
        walk.len = w.len;
        let next = d.valid_after;
        if !record(&mut walk, &d, visit, None) {
            return Ok(walk);
        }
        match next {
            Some(at) => pos = at,
            None => return Ok(walk),
        }
    }
    while pos < w.len {
        match check_group(&mut w, pos, limits, &mut frames)? {
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
                let d = judge(s, last, at, pos, Problem::Refused(reason));
                if !record(&mut walk, &d, visit, Some(&view_of(&mut w, pos, header, &frames)?)) {
                    break;
                }
                pos = end;
            }
            GroupCheck::Damaged { at, problem, header, end } => {
                let s = surveyed(&mut survey, &mut w, pos)?;
                if last && !problem.inconsistent() && s.zeros_from(pos) {
                    // The zeros the writer puts ahead of its data: the data ends here.
                    break;
                }
                let d = judge(s, last, at, pos, problem);
                let go = match header {
                    Some(header) => {
                        let view = view_of(&mut w, pos, header, &frames)?;
                        record(&mut walk, &d, visit, Some(&view))
                    }
                    None => record(&mut walk, &d, visit, None),
                };
                if !go {
                    break;
                }
                // On after the damaged group: at its end when its extent can be trusted, else at
                // the next intact group header.
                match end.or(d.valid_after) {
                    Some(next) => pos = next,
                    None => break,
                }
            }
        }
    }
    walk.len = w.len;
    Ok(walk)
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
fn judge(s: &Survey, last: bool, offset: u64, cut: u64, problem: Problem) -> Damage {
    let (valid_after, synced_after) = s.after(cut);
    let verdict = classify(&problem, cut, last, valid_after.is_some(), synced_after);
    Damage { offset, cut, problem, valid_after, synced_after, verdict }
}

/// Records damage in the walk's result and tells the caller of corruption; returns whether the
/// walk goes on.
fn record(
    walk: &mut SegmentWalk,
    d: &Damage,
    visit: &mut dyn Visit,
    group: Option<&GroupView<'_>>,
) -> bool {
    if walk.first.is_none() {
        walk.first = Some(d.clone());
    }
    match d.verdict {
        Verdict::TornTail => {
            walk.torn = Some(d.clone());
            false
        }
        Verdict::Corruption => visit.damage(d, group) == Flow::Go,
    }
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::DecodeError;

    use super::*;

    fn problem() -> Problem {
        Problem::Frame(DecodeError::Malformed { reason: "x".into() })
    }

    #[test]
    fn damage_with_nothing_valid_after_it_in_the_last_segment_is_a_torn_tail() {
        assert_eq!(classify(&problem(), 100, true, false, 0), Verdict::TornTail);
        assert_eq!(classify(&problem(), 0, true, false, 0), Verdict::TornTail);
    }

    #[test]
    fn damage_before_a_later_groups_durable_point_is_corruption() {
        assert_eq!(classify(&problem(), 100, true, true, 200), Verdict::Corruption);
        assert_eq!(classify(&problem(), 100, true, true, 100), Verdict::TornTail);
        assert_eq!(classify(&problem(), 0, true, true, 32), Verdict::Corruption);
    }

    #[test]
    fn damage_in_a_sealed_segment_or_an_impossible_frame_is_corruption() {
        assert_eq!(classify(&problem(), 100, true, false, 0), Verdict::TornTail);
        assert_eq!(classify(&problem(), 100, false, false, 0), Verdict::Corruption);
        let fill = Problem::GroupFill { frames: 1, filled: 10, len: 20 };
        assert_eq!(classify(&fill, 100, true, false, 0), Verdict::Corruption);
        let record = Problem::Record(DecodeError::UnknownKind { code: 99 });
        assert_eq!(classify(&record, 100, true, false, 0), Verdict::Corruption);
    }
}
