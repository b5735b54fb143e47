//! What verify reads in the frames of a group, beyond what the walk checks: every record of an
//! intact frame (one session, in sequence, each event decoding), and, in a damaged group, which
//! record is damaged and whose it is.
//!
//! The walk already decided what the damage means; this only describes it, finding by finding.

use std::path::Path;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN, peek_len};
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{DecodeError, Limits, Seq, SessionId};

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
    /// A batch that passed every check.
    fn batch(&mut self, session: &str, run: BatchLoc);
    /// A batch that did not.
    fn hole(&mut self, session: &str, hole: Hole);
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
    /// the first: intact frames are read record by record, damaged ones pinned down, and the
    /// frames after a damaged one read on where its length can be trusted.
    pub(super) fn group(&self, sink: &mut dyn Sink, body_at: u64, body: &[u8], frames: u32) {
        let mut at = 0usize;
        for _ in 0..frames {
            let offset = body_at + at as u64;
            let rest = body.get(at..).unwrap_or_default();
            match Frame::parse(rest, self.limits) {
                Ok((frame, flen)) => {
                    self.frame(sink, offset, &frame, rest.get(..flen).unwrap_or_default());
                    at += flen;
                }
                Err(error) => match self.damaged_frame(sink, offset, rest, error) {
                    Some(flen) => at += flen,
                    // Where the next frame starts cannot be told: the group's rest is skipped.
                    None => return,
                },
            }
        }
        if at != body.len() {
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
                r.event().err().map(FileProblem::Payload)
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
            sink.batch(session, run);
        } else {
            sink.hole(session, Hole { first, count: Some(frame.count) });
        }
    }

    /// A frame whose checksum (or header) fails. Its records are read one by one to find which
    /// is damaged and whose it is. Returns the frame's length when its records fill it exactly
    /// as its header says (then the next frame can be found).
    fn damaged_frame(
        &self,
        sink: &mut dyn Sink,
        offset: u64,
        rest: &[u8],
        error: DecodeError,
    ) -> Option<usize> {
        let header = peek_len(rest, self.limits).ok().filter(|(n, _)| *n <= rest.len());
        let flen = header.map_or(rest.len(), |(n, _)| n);
        let body = rest.get(FRAME_HEADER_LEN..flen).unwrap_or_default();
        let walked = walk_records(body, self.limits);
        let good = walked.iter().find_map(|w| w.found.as_ref().ok().map(|p| (w.index, *p)));
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
        for w in &walked {
            if let Err(e @ DecodeError::ChecksumMismatch { .. }) = &w.found {
                let mut f =
                    finding(self.path, body_at + w.offset as u64, FileProblem::Record(e.clone()));
                f.len = w.len.map(|n| n as u64);
                (f.session, f.seq) =
                    place_of(w.index).map_or((None, None), |(s, q)| (Some(s), Some(q)));
                sink.finding(f);
                reported = true;
            }
        }
        if !reported {
            let mut f = finding(self.path, offset, FileProblem::Frame(error));
            f.len = header.map(|(n, _)| n as u64);
            f.session = anchor.as_ref().map(|(_, (s, _))| s.clone());
            sink.finding(f);
        }
        if let Some((s, first)) = place_of(0) {
            sink.hole(s.as_str(), Hole { first: first.get(), count: header.map(|(_, c)| c) });
        }
        // The frame's length is trusted only when its records fill it and are as many as its
        // header says.
        let (_, count) = header?;
        let filled = walked.last().and_then(|w| w.len.map(|n| w.offset + n)) == Some(body.len());
        (reported && filled && walked.len() as u64 == u64::from(count)).then_some(flen)
    }
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
/// either what it says (session, seq) or why it cannot be read.
struct Walked<'a> {
    index: u64,
    offset: usize,
    len: Option<usize>,
    found: Result<(&'a str, u64), DecodeError>,
}

/// Reads the records of a damaged frame's body one by one, stepping over a record whose
/// checksum fails when its length can still be read.
fn walk_records<'a>(body: &'a [u8], limits: &Limits) -> Vec<Walked<'a>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut index = 0u64;
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
                let step = match &e {
                    DecodeError::ChecksumMismatch { .. } => {
                        record::peek_len(rest, limits).ok().filter(|n| *n <= rest.len())
                    }
                    _ => None,
                };
                out.push(Walked { index, offset: pos, len: step, found: Err(e) });
                match step {
                    Some(n) => pos += n,
                    None => break,
                }
            }
        }
        index += 1;
    }
    out
}
