//! What verify reads in the frames of a group, beyond what the walk checks: every record of an
//! intact frame (one session, in sequence, each event decoding), and, in a damaged group, which
//! record is damaged and whose it is.
//!
//! The walk already decided what the damage means; this only describes it, finding by finding.

use std::path::Path;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN, peek_len};
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{DecodeError, Event, Limits, Seq, SessionId};

use super::finding::{FileFinding, FileProblem, finding};
use crate::file::format::layout::SegmentId;
use crate::file::index::BatchLoc;

/// A damaged batch of a session: the first sequence number it held (and how many, where its
/// header says), so that the gap it leaves is not reported a second time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hole {
    pub first: u64,
    pub count: Option<u32>,
}

/// Where what the frames hold goes, in log order.
pub(super) trait Sink {
    /// A problem found.
    fn finding(&mut self, f: FileFinding);
    /// A batch that passed every check; `trim`, the `before` of its last `trimmed` event.
    fn batch(&mut self, session: &str, run: BatchLoc, trim: Option<u64>);
    /// A batch that did not.
    fn hole(&mut self, session: &str, hole: Hole);
    /// A damaged batch of `count` events whose session cannot be read, at byte `offset` of
    /// segment `seg`.
    fn unnamed_hole(&mut self, seg: SegmentId, offset: u64, count: u32);
    /// A deletion frame in segment `at`.
    fn delete(&mut self, session: &str, at: SegmentId);
    /// Where the session's last intact batch so far ends.
    fn tail(&self, session: &str) -> Option<u64>;
}

/// One segment's frames being read.
pub(super) struct Frames<'a> {
    pub path: &'a Path,
    pub seg: SegmentId,
    pub limits: &'a Limits,
}

impl Frames<'_> {
    /// The frames of a group whose header is intact and whose frames lie inside the file, from
    /// the first: intact frames are read record by record, damaged ones pinned down, and after a
    /// damaged frame the reading goes on at the next frame that checks (where its own length
    /// says, else the first one found after it), so one damage is one finding and the frames
    /// after it are read as usual.
    pub(super) fn group(&self, sink: &mut dyn Sink, body_at: u64, body: &[u8], frames: u32) {
        let mut at = 0usize;
        let mut read = 0u32;
        let mut damaged = false;
        // Once a frame is damaged its group's frame count no longer tells where the frames end:
        // they are read to the group's end.
        while (read < frames || damaged) && at < body.len() {
            let offset = body_at + at as u64;
            let rest = body.get(at..).unwrap_or_default();
            match Frame::parse(rest, self.limits) {
                Ok((frame, flen)) => {
                    self.frame(sink, offset, &frame, rest.get(..flen).unwrap_or_default());
                    at += flen;
                }
                Err(error) => {
                    damaged = true;
                    at += self.damaged_frame(sink, offset, rest, error);
                }
            }
            read = read.saturating_add(1);
        }
        if !damaged && at != body.len() {
            let problem =
                FileProblem::GroupFill { frames, filled: at as u64, len: body.len() as u64 };
            sink.finding(finding(self.path, body_at + at as u64, problem));
        }
    }

    /// A frame whose checksum passed: its records must be one session's, in sequence, and
    /// decode.
    pub(super) fn frame(&self, sink: &mut dyn Sink, offset: u64, frame: &Frame<'_>, bytes: &[u8]) {
        if frame.kind == FrameKind::DeleteSession {
            sink.delete(frame.deleted_session().unwrap_or_default(), self.seg);
            return;
        }
        let mut head: Option<(&str, u64)> = None;
        let mut intact = true;
        let mut trim = None;
        let mut at = offset + FRAME_HEADER_LEN as u64;
        for (i, r) in frame.records().enumerate() {
            let i = i as u64;
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    let problem = match e {
                        DecodeError::NewerVersion { .. } => FileProblem::NewerFormat(e.clone()),
                        _ => FileProblem::Record(e.clone()),
                    };
                    let mut f = finding(self.path, at, problem);
                    let place = match head {
                        Some((s, first)) => {
                            first.checked_add(i).map(|q| (SessionId::from_stored(s), Seq(q)))
                        }
                        None if checksum_passed(&e) => {
                            let rest = bytes.get((at - offset) as usize..).unwrap_or_default();
                            record::peek_place(rest).map(|(s, q)| (SessionId::from_stored(s), q))
                        }
                        None => None,
                    };
                    (f.session, f.seq) = place.map_or((None, None), |(s, q)| (Some(s), Some(q)));
                    sink.finding(f);
                    intact = false;
                    break;
                }
            };
            let (s0, first) = *head.get_or_insert((r.session, r.seq.get()));
            // A batch whose first seq is near u64::MAX cannot hold more records: no seq follows.
            let expected = first.checked_add(i);
            let problem = if r.session != s0 || Some(r.seq.get()) != expected {
                Some(FileProblem::Misdirected {
                    expected_session: SessionId::from_stored(s0),
                    batch_first: Seq(first),
                    expected_seq: Seq(expected.unwrap_or(u64::MAX)),
                    found_session: SessionId::from_stored(r.session),
                    found_seq: r.seq,
                })
            } else {
                match r.event() {
                    Ok(Event::Trimmed(t)) => {
                        trim = Some(t.before.get());
                        None
                    }
                    Ok(_) => None,
                    Err(e) => Some(FileProblem::Payload(e)),
                }
            };
            if let Some(problem) = problem {
                let mut f = finding(self.path, at, problem);
                f.len = Some(r.bytes.len() as u64);
                f.session = Some(SessionId::from_stored(r.session));
                f.seq = Some(r.seq);
                sink.finding(f);
                intact = false;
            }
            at += r.bytes.len() as u64;
        }
        let Some((session, first)) = head else { return };
        if intact {
            let run = BatchLoc {
                first,
                count: frame.count,
                len: bytes.len() as u32,
                seg: self.seg,
                offset,
            };
            sink.batch(session, run, trim);
        } else {
            sink.hole(session, Hole { first, count: Some(frame.count) });
        }
    }

    /// A frame whose checksum (or header) fails, at the start of `rest` (the rest of its
    /// group). Finds where it ends (see [`frame_extent`]), then reads its records one by one to
    /// find which is damaged and whose it is: each run of damaged records is one finding at its
    /// first byte (a zeroed block is one finding, not one per 8 bytes that look like a record);
    /// with every record intact the damage is in the frame's header, reported at the frame.
    /// Returns the frame's length as found (at least one byte).
    fn damaged_frame(
        &self,
        sink: &mut dyn Sink,
        offset: u64,
        rest: &[u8],
        error: DecodeError,
    ) -> usize {
        let header = peek_len(rest, self.limits).ok();
        let (flen, header_holds) = frame_extent(rest, header.map(|(n, _)| n), self.limits);
        let body = rest.get(FRAME_HEADER_LEN..flen).unwrap_or_default();
        let walked = walk_records(body, self.limits);
        // The records the frame's own header covers, when its length lies inside what was
        // found: those after it may be another frame's whose header was damaged too.
        let own = header
            .map(|(n, _)| n.saturating_sub(FRAME_HEADER_LEN))
            .filter(|n| *n <= body.len())
            .unwrap_or(body.len());
        let good = walked
            .iter()
            .filter(|w| w.offset < own)
            .find_map(|w| w.found.as_ref().ok().map(|p| (w.index, *p)));
        // With no intact record to go by, the first record's own header is believed when it
        // continues its session exactly where the session's intact events end.
        let anchor: Option<(u64, (SessionId, u64))> =
            good.map(|(i, (s, q))| (i, (SessionId::from_stored(s), q))).or_else(|| {
                let (s, q) = record::peek_place(body)?;
                (sink.tail(s).unwrap_or(0) == q.get())
                    .then(|| (0, (SessionId::from_stored(s), q.get())))
            });
        let place_of = |index: u64| {
            let (gi, (s, q)) = anchor.as_ref()?;
            let seq = q.checked_add(index)?.checked_sub(*gi)?;
            Some((s.clone(), Seq(seq)))
        };
        let body_at = offset + FRAME_HEADER_LEN as u64;
        let mut reported = false;
        // The frame's own header is damaged when its length does not lead to the next frame,
        // its count is not the records found, or its kind or reserved bits are impossible: then
        // the damage begins at the frame, and the frame is the one finding.
        let filled = walked.last().and_then(|w| w.len.map(|n| w.offset + n)) == Some(body.len());
        let word = |at: usize| {
            rest.get(at..at + 2).and_then(|b| b.try_into().ok()).map(u16::from_le_bytes)
        };
        let kind = word(12).unwrap_or(0);
        let reserved = word(14).unwrap_or(1);
        let header_damaged = !header_holds
            || (filled
                && header.is_some_and(|(_, c)| u64::from(c) != walked.len() as u64 && kind == 1))
            || !matches!(kind, 1 | 2)
            || reserved != 0;
        let mut i = if header_damaged { walked.len() } else { 0 };
        while let Some(w) = walked.get(i) {
            // A record whose checksum fails is the damage; one that cannot be read at all (its
            // length runs past the frame) says only that the frame is damaged.
            let Err(e @ DecodeError::ChecksumMismatch { .. }) = &w.found else {
                i += 1;
                continue;
            };
            // The run of damaged records from this one: it ends at the next intact record, or
            // at the frame's end.
            let next = walked.iter().skip(i + 1).position(|n| n.found.is_ok()).map(|k| i + 1 + k);
            let until = next.and_then(|k| walked.get(k)).map_or(body.len(), |n| n.offset);
            let mut f =
                finding(self.path, body_at + w.offset as u64, FileProblem::Record(e.clone()));
            f.len = Some(until.saturating_sub(w.offset) as u64);
            (f.session, f.seq) =
                place_of(w.index).map_or((None, None), |(s, q)| (Some(s), Some(q)));
            sink.finding(f);
            reported = true;
            i = next.unwrap_or(walked.len());
        }
        if !reported {
            let mut f = finding(self.path, offset, FileProblem::Frame(error));
            f.len = Some(flen as u64);
            f.seq = place_of(0).map(|(_, q)| q);
            f.session = anchor.as_ref().map(|(_, (s, _))| s.clone());
            sink.finding(f);
        }
        // The count the header gives when its length holds or lies inside what was found; else
        // the records found, when they fill the frame.
        let count = match header {
            Some((n, c)) if header_holds || (FRAME_HEADER_LEN..=flen).contains(&n) => Some(c),
            _ if filled => u32::try_from(walked.len()).ok(),
            _ => None,
        };
        match (place_of(0), count) {
            (Some((s, first)), count) => sink.hole(s.as_str(), Hole { first: first.get(), count }),
            (None, Some(count)) => sink.unnamed_hole(self.seg, offset, count),
            (None, None) => {}
        }
        // Intact records past what the header covers: a damaged frame's that followed, each a
        // hole of its session.
        for w in walked.iter().filter(|w| w.offset >= own) {
            if let Ok((s, q)) = w.found {
                sink.hole(s, Hole { first: q, count: Some(1) });
            }
        }
        flen.max(1)
    }
}

/// Where a damaged frame at the start of `rest` (the rest of its group) ends, and whether that
/// is where its header's length `said` puts it: there, when the group ends there or a frame
/// that checks starts there; else at the first byte after the frame's start where a frame that
/// checks starts (its length field was damaged); else at the group's end.
fn frame_extent(rest: &[u8], said: Option<usize>, limits: &Limits) -> (usize, bool) {
    let frame_at = |at: usize| {
        at == rest.len() || rest.get(at..).is_some_and(|r| Frame::parse(r, limits).is_ok())
    };
    if let Some(n) = said.filter(|n| *n >= FRAME_HEADER_LEN && *n <= rest.len())
        && frame_at(n)
    {
        return (n, true);
    }
    let next = (1..rest.len()).find(|at| frame_at(*at)).unwrap_or(rest.len());
    (next, false)
}

/// Whether a record error was found after the record's checksum passed.
fn checksum_passed(e: &DecodeError) -> bool {
    matches!(
        e,
        DecodeError::UnknownKind { .. }
            | DecodeError::UnknownVersion { .. }
            | DecodeError::NewerVersion { .. }
            | DecodeError::Malformed { .. }
    )
}

/// A record's place inside a damaged frame: its index and offset in the frame's body, and
/// either what it says (session, seq) or why it cannot be read. A run of damaged bytes between
/// intact records is one entry (counted as one record), whatever it looks like inside.
struct Walked<'a> {
    index: u64,
    offset: usize,
    len: Option<usize>,
    found: Result<(&'a str, u64), DecodeError>,
}

/// Reads the records of a damaged frame's body one by one. Where a record does not check, the
/// next intact record is looked for (at the damaged record's own length when its checksum is all
/// that fails, else at the first byte where a record checks), and everything between is one
/// damaged entry.
fn walk_records<'a>(body: &'a [u8], limits: &Limits) -> Vec<Walked<'a>> {
    let mut out: Vec<Walked<'a>> = Vec::new();
    let mut pos = 0usize;
    let mut index = 0u64;
    let intact = |at: usize| body.get(at..).and_then(|r| RecordRef::parse(r, limits).ok());
    while pos < body.len() {
        let rest = body.get(pos..).unwrap_or_default();
        match RecordRef::parse(rest, limits) {
            Ok((r, n)) => {
                out.push(Walked {
                    index,
                    offset: pos,
                    len: Some(n),
                    found: Ok((r.session, r.seq.get())),
                });
                pos += n;
            }
            Err(e) => {
                let own = match &e {
                    DecodeError::ChecksumMismatch { .. } => record::peek_len(rest, limits)
                        .ok()
                        .filter(|n| *n > 0 && *n <= rest.len())
                        .filter(|n| *n == rest.len() || intact(pos + n).is_some()),
                    _ => None,
                };
                let next = own
                    .map(|n| pos + n)
                    .or_else(|| (pos + 1..body.len()).find(|at| intact(*at).is_some()));
                let len = next.unwrap_or(body.len()) - pos;
                out.push(Walked { index, offset: pos, len: Some(len), found: Err(e) });
                pos += len;
            }
        }
        index += 1;
    }
    out
}
