//! One sequential pass over a segment: the groups and frames it holds, and where (if anywhere)
//! its bytes stop making sense.
//!
//! The scan only reads and reports; what damage means (a torn tail to cut, or corruption to
//! refuse) is decided by [`classify`] from the facts the scan gathered.

use std::io;

use stepjournal_codec::batch::{Frame, FrameKind};
use stepjournal_codec::{DecodeError, Limits};

use super::io::IoFile;
use super::layout::{
    GROUP_HEADER_LEN, GroupHeader, SEGMENT_HEADER_LEN, SegmentId, check_segment_header,
};

/// How much a scan reads at a time.
const CHUNK: usize = 4 << 20;

/// A window over a file, refilled with large sequential reads.
#[derive(Debug)]
pub(crate) struct Window<'f> {
    file: &'f dyn IoFile,
    /// The file's length when the scan began; nothing past it is read.
    len: u64,
    buf: &'f mut Vec<u8>,
    /// The file offset of `buf[0]`.
    start: u64,
}

impl<'f> Window<'f> {
    pub(crate) fn new(file: &'f dyn IoFile, len: u64, buf: &'f mut Vec<u8>) -> Self {
        buf.clear();
        Window { file, len, buf, start: 0 }
    }

    /// The bytes `[offset, offset + n)`, clipped to the file's length.
    pub(crate) fn bytes(&mut self, offset: u64, n: usize) -> io::Result<&[u8]> {
        let end = offset.saturating_add(n as u64).min(self.len);
        let n = end.saturating_sub(offset) as usize;
        let have_end = self.start + self.buf.len() as u64;
        if offset < self.start || end > have_end {
            let want = (n.max(CHUNK) as u64).min(self.len.saturating_sub(offset)) as usize;
            self.buf.resize(want, 0);
            let mut got = 0;
            while got < want {
                let Some(rest) = self.buf.get_mut(got..) else { break };
                match self.file.read_at(rest, offset + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.buf.truncate(got);
            self.start = offset;
            if got < want {
                // The file is shorter than when the scan began: a writer sealed it, cutting off
                // the zeros ahead of its data. It ends here.
                self.len = offset + got as u64;
            }
        }
        let from = (offset - self.start) as usize;
        let n = n.min(self.buf.len().saturating_sub(from));
        Ok(self.buf.get(from..from + n).unwrap_or_default())
    }
}

/// What one frame holds, as the index needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKindInfo {
    /// `count` events of the session from sequence number `first`.
    Events { first: u64, count: u32 },
    /// The session was deleted.
    Delete,
}

/// A frame and where it is in its segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameAt {
    /// The frame's first byte.
    pub offset: u64,
    /// Its length, header included.
    pub len: u32,
    pub kind: FrameKindInfo,
    /// Where the session id is in the group's body.
    session_at: usize,
    session_len: usize,
}

/// One whole, valid group: its frames, and the bytes their session ids point into.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupView<'a> {
    body: &'a [u8],
    pub frames: &'a [FrameAt],
}

impl<'a> GroupView<'a> {
    /// The session a frame belongs to.
    pub(crate) fn session(&self, f: &FrameAt) -> &'a str {
        let bytes = self.body.get(f.session_at..f.session_at + f.session_len).unwrap_or_default();
        // The frame parser checked it is UTF-8.
        std::str::from_utf8(bytes).unwrap_or_default()
    }
}

/// Where a segment's bytes stop making sense.
#[derive(Debug, Clone)]
pub(crate) struct Damage {
    /// The first damaged byte found (a group header or a frame).
    pub offset: u64,
    /// Where the segment would be cut: the start of the damaged group (0: the segment header is
    /// damaged, the whole file is unusable).
    pub cut: u64,
    /// What was wrong.
    pub error: DecodeError,
    /// The bytes are intact but say something impossible (a frame that does not continue its
    /// session): never a torn write.
    pub inconsistent: bool,
    /// Whether a valid group header follows the damage.
    pub valid_after: bool,
    /// The largest `synced` claimed by a valid group header after the damage: those bytes were
    /// durable before the later group was written.
    pub synced_after: u64,
}

/// What a scan of one segment found.
#[derive(Debug, Clone)]
pub(crate) struct SegmentScan {
    /// The file's length (where the scan found it ending, if it shrank meanwhile).
    pub len: u64,
    /// The end of the last whole, valid group (the segment header's end if none).
    pub end: u64,
    /// Groups handed to the caller.
    pub groups: u64,
    pub damage: Option<Damage>,
}

/// What damage means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Bytes a crash left half-written: cut them (and everything after).
    TornTail,
    /// Damage inside acknowledged data.
    Corruption,
}

/// Decides what damage in a segment means. Only the last segment can hold bytes that were never
/// synced (a segment is synced whole before the next one is created), and only bytes at or after
/// the durable point that later groups claim: damage before a later group's `synced` was
/// acknowledged data.
pub(crate) fn classify(damage: &Damage, last_segment: bool) -> Verdict {
    if damage.inconsistent || !last_segment {
        return Verdict::Corruption;
    }
    if damage.cut == 0 && damage.valid_after {
        // A segment's header is synced before any group is written after it.
        return Verdict::Corruption;
    }
    if damage.valid_after && damage.synced_after > damage.cut {
        return Verdict::Corruption;
    }
    Verdict::TornTail
}

/// Reads segment `id` from its header to its end, handing each whole, valid group's frames to
/// `on_group` in order. `on_group` may refuse a group by returning the index of the frame that
/// does not fit and why; that is recorded as inconsistent damage. The scan stops at the first
/// damage and then only looks for valid group headers after it.
pub(crate) fn scan_segment(
    file: &dyn IoFile,
    id: SegmentId,
    limits: &Limits,
    buf: &mut Vec<u8>,
    mut on_group: impl FnMut(GroupView<'_>) -> Result<(), (usize, String)>,
) -> io::Result<SegmentScan> {
    let len = file.len()?;
    let mut w = Window::new(file, len, buf);
    let mut scan = SegmentScan { len, end: SEGMENT_HEADER_LEN as u64, groups: 0, damage: None };
    let header = w.bytes(0, SEGMENT_HEADER_LEN)?;
    if let Err(error) = check_segment_header(header, id) {
        let damage = look_after(&mut w, 0, 0, error, false)?;
        scan.end = 0;
        scan.damage = Some(damage);
        scan.len = w.len;
        return Ok(scan);
    }
    let mut frames: Vec<FrameAt> = Vec::new();
    let mut pos = SEGMENT_HEADER_LEN as u64;
    while pos < w.len {
        match check_group(&mut w, pos, limits, &mut frames) {
            Ok(next) => {
                let body_at = pos + GROUP_HEADER_LEN as u64;
                let body = w.bytes(body_at, (next - body_at) as usize)?;
                if let Err((i, reason)) = on_group(GroupView { body, frames: &frames }) {
                    let at = frames.get(i).map_or(pos, |f| f.offset);
                    frames.clear();
                    let error = DecodeError::Malformed { reason };
                    scan.damage = Some(look_after(&mut w, pos, at, error, true)?);
                    scan.len = w.len;
                    return Ok(scan);
                }
                frames.clear();
                scan.groups += 1;
                pos = next;
                scan.end = pos;
            }
            Err(Bad::Io(e)) => return Err(e),
            Err(Bad::Data { at, error }) => {
                frames.clear();
                scan.damage = Some(look_after(&mut w, pos, at, error, false)?);
                scan.len = w.len;
                return Ok(scan);
            }
        }
    }
    scan.len = w.len;
    Ok(scan)
}

enum Bad {
    Io(io::Error),
    Data { at: u64, error: DecodeError },
}

impl From<io::Error> for Bad {
    fn from(e: io::Error) -> Self {
        Bad::Io(e)
    }
}

/// Checks the group at `pos` and fills `frames`; returns the offset after it.
fn check_group(
    w: &mut Window<'_>,
    pos: u64,
    limits: &Limits,
    frames: &mut Vec<FrameAt>,
) -> Result<u64, Bad> {
    let bad = |at: u64, error: DecodeError| Bad::Data { at, error };
    let header = w.bytes(pos, GROUP_HEADER_LEN)?;
    let g = GroupHeader::parse(header).map_err(|e| bad(pos, e))?;
    let body_at = pos + GROUP_HEADER_LEN as u64;
    let end = body_at + u64::from(g.len);
    if end > w.len {
        let available = w.len.saturating_sub(body_at);
        return Err(bad(pos, DecodeError::Truncated { needed: u64::from(g.len), available }));
    }
    let body = w.bytes(body_at, g.len as usize)?;
    let mut at = 0usize;
    for _ in 0..g.frames {
        let offset = body_at + at as u64;
        let rest = body.get(at..).unwrap_or_default();
        let (frame, flen) = Frame::parse(rest, limits).map_err(|e| bad(offset, e))?;
        let (kind, session) = match frame.kind {
            FrameKind::Events => {
                let first = match frame.records().next() {
                    Some(Ok(r)) => r,
                    Some(Err(e)) => return Err(bad(offset, e)),
                    None => {
                        let reason = "an events frame without records".to_owned();
                        return Err(bad(offset, DecodeError::Malformed { reason }));
                    }
                };
                let kind = FrameKindInfo::Events { first: first.seq.get(), count: frame.count };
                (kind, first.session)
            }
            FrameKind::DeleteSession => {
                (FrameKindInfo::Delete, frame.deleted_session().unwrap_or_default())
            }
        };
        // The session id lies inside `body`: its place, as a distance from the body's start.
        let session_at = (session.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        frames.push(FrameAt {
            offset,
            len: flen as u32,
            kind,
            session_at,
            session_len: session.len(),
        });
        at += flen;
    }
    if at != body.len() {
        let reason =
            format!("the group's {} frames fill {at} of its {} bytes", g.frames, body.len());
        return Err(bad(body_at + at as u64, DecodeError::Malformed { reason }));
    }
    Ok(end)
}

/// After damage in the group at `cut` (found at `at`): is any valid group header further on,
/// and what durable point do they claim?
fn look_after(
    w: &mut Window<'_>,
    cut: u64,
    at: u64,
    error: DecodeError,
    inconsistent: bool,
) -> io::Result<Damage> {
    let mut damage =
        Damage { offset: at, cut, error, inconsistent, valid_after: false, synced_after: 0 };
    let mut pos = cut + 1;
    while pos + GROUP_HEADER_LEN as u64 <= w.len {
        let n = CHUNK.min((w.len - pos) as usize);
        let bytes = w.bytes(pos, n)?;
        let mut i = 0usize;
        while i + GROUP_HEADER_LEN <= bytes.len() {
            let here = bytes.get(i..).unwrap_or_default();
            if GroupHeader::magic_at(here)
                && let Ok(g) = GroupHeader::parse(here)
            {
                damage.valid_after = true;
                damage.synced_after = damage.synced_after.max(g.synced);
            }
            i += 1;
        }
        // The last GROUP_HEADER_LEN - 1 positions of this window are looked at in the next.
        pos += (bytes.len().saturating_sub(GROUP_HEADER_LEN) + 1) as u64;
    }
    Ok(damage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::io::Io;
    use crate::file::sim::SimDisk;

    #[test]
    fn a_file_that_shrinks_under_a_scan_ends_where_it_now_ends() {
        // A read-only scan takes the newest segment's length; its writer may seal it meanwhile,
        // cutting the zeros ahead of its data.
        let disk = SimDisk::new();
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let f = disk.create_new(std::path::Path::new("/d/s")).unwrap();
        f.write_all_at(&[7u8; 100], 0).unwrap();
        let mut buf = Vec::new();
        let mut w = Window::new(&*f, 100, &mut buf);
        f.set_len(60).unwrap();
        assert_eq!(w.bytes(10, 80).unwrap(), &[7u8; 50][..]);
        assert_eq!(w.len, 60);
        assert!(w.bytes(70, 10).unwrap().is_empty());
    }

    fn damage(cut: u64, valid_after: bool, synced_after: u64) -> Damage {
        Damage {
            offset: cut,
            cut,
            error: DecodeError::Malformed { reason: "x".into() },
            inconsistent: false,
            valid_after,
            synced_after,
        }
    }

    #[test]
    fn damage_with_nothing_valid_after_it_in_the_last_segment_is_a_torn_tail() {
        assert_eq!(classify(&damage(100, false, 0), true), Verdict::TornTail);
        assert_eq!(classify(&damage(0, false, 0), true), Verdict::TornTail);
    }

    #[test]
    fn damage_before_a_later_groups_durable_point_is_corruption() {
        assert_eq!(classify(&damage(100, true, 200), true), Verdict::Corruption);
        assert_eq!(classify(&damage(100, true, 100), true), Verdict::TornTail);
        assert_eq!(classify(&damage(0, true, 32), true), Verdict::Corruption);
    }

    #[test]
    fn damage_in_a_sealed_segment_or_an_impossible_frame_is_corruption() {
        assert_eq!(classify(&damage(100, false, 0), false), Verdict::Corruption);
        let mut d = damage(100, false, 0);
        d.inconsistent = true;
        assert_eq!(classify(&d, true), Verdict::Corruption);
    }
}
