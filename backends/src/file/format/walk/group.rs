//! One group's checks: its header, that its frames lie inside the file, each frame's checksum,
//! the first record of each events frame, and that the frames fill the group.

use std::io;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN};
use stepjournal_codec::{DecodeError, EventKind, Limits, UnixMillis};

use super::window::Window;
use crate::file::format::layout::{GROUP_HEADER_LEN, GroupHeader};

/// What one frame holds, as the index needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKindInfo {
    /// `count` events of the session from sequence number `first`.
    Events { first: u64, count: u32 },
    /// The session was deleted.
    Delete,
}

/// A frame that passed the walk's checks, and where it is in its segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameAt {
    /// The frame's first byte.
    pub offset: u64,
    /// Its length, header included.
    pub len: u32,
    pub kind: FrameKindInfo,
    /// The kind and time of an events frame's first record (read from its header, as the walk
    /// checks it).
    pub first_record: Option<(EventKind, UnixMillis)>,
    /// Where the session id is in the group's body.
    session_at: usize,
    session_len: usize,
}

/// A group whose header is intact: its frames' bytes (as far as the file holds them) and the
/// frames that passed every check, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupView<'a> {
    /// The group header's first byte.
    pub offset: u64,
    pub header: GroupHeader,
    /// The first frame's first byte.
    pub body_at: u64,
    /// The frames' bytes (fewer than the header says when the group runs past the file's end).
    pub body: &'a [u8],
    /// For an intact group, every frame; for a damaged one, those before the damage.
    pub frames: &'a [FrameAt],
}

impl<'a> GroupView<'a> {
    /// The session a frame belongs to.
    pub(crate) fn session(&self, f: &FrameAt) -> &'a str {
        let bytes = self.body.get(f.session_at..f.session_at + f.session_len).unwrap_or_default();
        // The frame parser checked it is UTF-8.
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// A frame's bytes.
    pub(crate) fn frame_bytes(&self, f: &FrameAt) -> &'a [u8] {
        let at = f.offset.saturating_sub(self.body_at) as usize;
        self.body.get(at..at + f.len as usize).unwrap_or_default()
    }
}

/// What is wrong where a segment's bytes stop making sense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The segment header does not check.
    SegmentHeader(DecodeError),
    /// A group header does not check (or is not where the previous group ends).
    GroupHeader(DecodeError),
    /// A group's frames run past the end of the file.
    GroupTruncated { len: u64, available: u64 },
    /// A frame does not check (bounds, checksum).
    Frame(DecodeError),
    /// The first record of a frame whose checksum holds does not check.
    Record(DecodeError),
    /// The frames of a group, each intact, do not fill it exactly.
    GroupFill { frames: u32, filled: u64, len: u64 },
    /// The caller refused an intact frame: it does not fit its session.
    Refused(String),
}

impl Problem {
    /// Intact bytes that say something impossible: never a torn write (a crash cannot leave a
    /// checksum holding over bytes the writer did not write).
    pub(crate) fn inconsistent(&self) -> bool {
        matches!(self, Problem::Record(_) | Problem::GroupFill { .. } | Problem::Refused(_))
    }

    /// Bytes of a format version newer than this build reads: written by a newer stepjournal,
    /// never damage.
    pub(crate) fn is_newer(&self) -> bool {
        matches!(
            self,
            Problem::SegmentHeader(DecodeError::NewerVersion { .. })
                | Problem::Record(DecodeError::NewerVersion { .. })
        )
    }

    /// The problem as a decode error.
    pub(crate) fn to_decode_error(&self) -> DecodeError {
        match self {
            Problem::SegmentHeader(e)
            | Problem::GroupHeader(e)
            | Problem::Frame(e)
            | Problem::Record(e) => e.clone(),
            Problem::GroupTruncated { len, available } => {
                DecodeError::Truncated { needed: *len, available: *available }
            }
            Problem::GroupFill { frames, filled, len } => DecodeError::Malformed {
                reason: format!("the group's {frames} frames fill {filled} of its {len} bytes"),
            },
            Problem::Refused(reason) => DecodeError::Malformed { reason: reason.clone() },
        }
    }
}

/// What the walk found at one group.
pub(super) enum GroupCheck {
    /// Every check passed; the group ends at `end`.
    Whole { header: GroupHeader, end: u64 },
    /// The first problem, at `at`. `header` when the group header is intact; `end` when the
    /// group's frames also lie inside the file.
    Damaged { at: u64, problem: Problem, header: Option<GroupHeader>, end: Option<u64> },
}

/// The group at `pos`, whose header is `header`, with `frames`.
pub(super) fn view_of<'a>(
    w: &'a mut Window<'_>,
    pos: u64,
    header: GroupHeader,
    frames: &'a [FrameAt],
) -> io::Result<GroupView<'a>> {
    let body_at = pos + GROUP_HEADER_LEN as u64;
    let body = w.bytes(body_at, header.len as usize)?;
    Ok(GroupView { offset: pos, header, body_at, body, frames })
}

/// Checks the group at `pos`, filling `frames` with its frames that pass (those before the
/// damage, for a damaged group).
pub(super) fn check_group(
    w: &mut Window<'_>,
    pos: u64,
    limits: &Limits,
    frames: &mut Vec<FrameAt>,
) -> io::Result<GroupCheck> {
    frames.clear();
    let damaged = |at: u64, problem: Problem, header, end| {
        Ok(GroupCheck::Damaged { at, problem, header, end })
    };
    let g = match GroupHeader::parse(w.bytes(pos, GROUP_HEADER_LEN)?) {
        Ok(g) => g,
        Err(e) => return damaged(pos, Problem::GroupHeader(e), None, None),
    };
    let body_at = pos + GROUP_HEADER_LEN as u64;
    let end = body_at + u64::from(g.len);
    let body = w.bytes(body_at, g.len as usize)?;
    // The frames lie inside the file.
    let whole = body.len() as u64 == u64::from(g.len);
    let mut at = 0usize;
    let mut bad: Option<(u64, Problem)> = None;
    for _ in 0..g.frames {
        let offset = body_at + at as u64;
        let rest = body.get(at..).unwrap_or_default();
        let (frame, flen) = match Frame::parse(rest, limits) {
            Ok(parsed) => parsed,
            Err(e) => {
                bad = Some((offset, Problem::Frame(e)));
                break;
            }
        };
        let (kind, session, first_record) = match frame.kind {
            FrameKind::Events => match frame.records().next() {
                Some(Ok(r)) => (
                    FrameKindInfo::Events { first: r.seq.get(), count: frame.count },
                    r.session,
                    Some((r.kind, r.at)),
                ),
                Some(Err(e)) => {
                    let record_at = offset + FRAME_HEADER_LEN as u64;
                    bad = Some((record_at, Problem::Record(e)));
                    break;
                }
                None => {
                    let reason = "an events frame without records".to_owned();
                    bad = Some((offset, Problem::Record(DecodeError::Malformed { reason })));
                    break;
                }
            },
            FrameKind::DeleteSession => {
                (FrameKindInfo::Delete, frame.deleted_session().unwrap_or_default(), None)
            }
        };
        // The session id lies inside `body`: its place, as a distance from the body's start.
        let session_at = (session.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        frames.push(FrameAt {
            offset,
            len: flen as u32,
            kind,
            first_record,
            session_at,
            session_len: session.len(),
        });
        at += flen;
    }
    if !whole {
        let available = body.len() as u64;
        let problem = Problem::GroupTruncated { len: u64::from(g.len), available };
        return damaged(pos, problem, Some(g), None);
    }
    if let Some((offset, problem)) = bad {
        return damaged(offset, problem, Some(g), Some(end));
    }
    if at != body.len() {
        let problem =
            Problem::GroupFill { frames: g.frames, filled: at as u64, len: body.len() as u64 };
        return damaged(body_at + at as u64, problem, Some(g), Some(end));
    }
    Ok(GroupCheck::Whole { header: g, end })
}
