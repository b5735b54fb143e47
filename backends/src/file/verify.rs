//! A read-only check of a journal directory that reports every problem it finds, where it is,
//! and never writes.
//!
//! Opening a journal stops at the first damage (a torn tail is cut, corruption refuses to open).
//! [`verify_dir`] instead walks every segment to its end: each group header, each batch frame and
//! each record inside it is checked, and after damage the scan looks for the next valid group
//! header and carries on from there. Then every session's batches are put in order (a deletion
//! drops the batches before it, compaction's copies of a batch count once, as on open) and checked
//! to continue each other without gaps or overlaps.
//!
//! Each [`FileFinding`] names the segment file, the byte offset (of the damaged record where the
//! record can be told apart, else of the frame or group), the session and sequence number where
//! they can be told (from the intact records of the same batch, or from the damaged record's own
//! header when it continues its session exactly where the session's intact events end), and what
//! is wrong. Damage that opening would cut as a torn tail (bytes a crash left half-written, never
//! acknowledged) is marked [`FileFinding::torn_tail`]. The zeros the writer puts ahead of its data
//! at the newest segment's end are not damage.
//!
//! The batches that passed every check can be read back, per session, with
//! [`VerifyReport::read_session`], for checks of the events themselves (the protocol).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN, peek_len};
use stepjournal_codec::record::RecordRef;
use stepjournal_codec::{DecodeError, Limits, Record, Seq, SessionId};

use super::io::{Io, IoFile, RealIo};
use super::layout::{
    GROUP_HEADER_LEN, GroupHeader, SEGMENT_HEADER_LEN, SegmentId, check_segment_header,
};
use super::scan::{Damage, Verdict, Window, classify};
use crate::StoreError;

/// What is wrong at a [`FileFinding`]'s place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// The segment's header is damaged: nothing in the file can be trusted to be this segment's.
    #[error("the segment header is damaged: {0}")]
    SegmentHeader(DecodeError),
    /// A group header is damaged (or is not where the previous group ends).
    #[error("the group header is damaged: {0}")]
    GroupHeader(DecodeError),
    /// A group's frames run past the end of the file.
    #[error("the group's {len} bytes of frames run past the end of the file ({available} there)")]
    GroupTruncated {
        /// Bytes of frames the header announces.
        len: u64,
        /// Bytes there are.
        available: u64,
    },
    /// A group's frames do not fill it exactly.
    #[error("the group's {frames} frames fill {filled} of its {len} bytes")]
    GroupFill {
        /// Frames the header announces.
        frames: u32,
        /// Bytes they fill.
        filled: u64,
        /// Bytes of frames the header announces.
        len: u64,
    },
    /// A batch frame is damaged and none of its records is: its header is.
    #[error("the batch frame is damaged: {0}")]
    Frame(DecodeError),
    /// A record is damaged (checksum, version, kind, length).
    #[error("the record is damaged: {0}")]
    Record(DecodeError),
    /// A record is intact but its event cannot be decoded.
    #[error("the record's event cannot be decoded: {0}")]
    Payload(DecodeError),
    /// An intact record in a batch of another session, or out of sequence in its batch.
    #[error(
        "misdirected record: the batch holds session {expected_session} from seq \
         {batch_first}, so this record should be seq {expected_seq}, but it says session \
         {found_session} seq {found_seq}"
    )]
    Misdirected {
        /// The session of the batch's first record.
        expected_session: SessionId,
        /// The batch's first sequence number.
        batch_first: Seq,
        /// The sequence number this record should have.
        expected_seq: Seq,
        /// The session the record names.
        found_session: SessionId,
        /// The sequence number the record names.
        found_seq: Seq,
    },
    /// A session's events stop and resume later: some sequence numbers are in no intact batch.
    #[error(
        "seq {from}..{to} of the session are in no intact batch: the events before end at seq {from}, this batch starts at seq {to}"
    )]
    SeqGap {
        /// The first missing sequence number.
        from: Seq,
        /// The first sequence number present again.
        to: Seq,
    },
    /// Two different batches of a session claim the same sequence numbers.
    #[error(
        "a batch of {count} events from seq {first} overlaps the session's events up to seq {tail}"
    )]
    Overlap {
        /// The batch's first sequence number.
        first: Seq,
        /// Its number of events.
        count: u32,
        /// Where the events before it end.
        tail: Seq,
    },
    /// The segment file could not be read (the rest of it is not checked).
    #[error("the segment cannot be read: {0}")]
    Unreadable(String),
}

/// One problem: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFinding {
    /// The segment file.
    pub segment: PathBuf,
    /// The first byte of the damaged unit in the segment: the record where one can be told
    /// apart, else the frame, the group or the segment header.
    pub offset: u64,
    /// How many bytes the damaged unit spans, where its length could be read.
    pub len: Option<u64>,
    /// The session, where intact bytes name it.
    pub session: Option<SessionId>,
    /// The sequence number, where intact bytes tell it.
    pub seq: Option<Seq>,
    /// What is wrong.
    pub problem: FileProblem,
    /// The damage is where a crash leaves half-written bytes that were never acknowledged (the
    /// newest segment's end): opening the journal for writing cuts it. Every other finding is
    /// damage inside acknowledged data, or data that contradicts itself.
    pub torn_tail: bool,
    /// Where the next valid group header after the damage is, when there is one in the same
    /// segment.
    pub valid_after: Option<u64>,
}

impl std::fmt::Display for FileFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "segment {} at byte {}", self.segment.display(), self.offset)?;
        if let Some(len) = self.len {
            write!(f, " ({len} bytes)")?;
        }
        match (&self.session, self.seq) {
            (Some(s), Some(q)) => write!(f, ", session {s} seq {q}")?,
            (Some(s), None) => write!(f, ", session {s}")?,
            _ => {}
        }
        write!(f, ": {}", self.problem)?;
        if self.torn_tail {
            f.write_str(" (a torn tail: never acknowledged; cut when the journal is next opened for writing)")?;
        } else if let Some(at) = self.valid_after {
            write!(f, " (valid data follows at byte {at})")?;
        }
        Ok(())
    }
}

/// A batch that passed every check, where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    first: u64,
    count: u32,
    seg: SegmentId,
    offset: u64,
    len: u32,
}

impl Batch {
    fn end(&self) -> u64 {
        self.first.saturating_add(u64::from(self.count))
    }
}

/// One record of a session as [`VerifyReport::read_session`] returns it: the record and where
/// it is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedRecord {
    /// The record.
    pub record: Record,
    /// Its segment file.
    pub segment: PathBuf,
    /// Its first byte in the segment.
    pub offset: u64,
}

/// A session's intact, ordered batches.
#[derive(Debug, Default)]
struct SessionBatches {
    /// Dense from seq 0 up to the first gap.
    readable: Vec<Batch>,
    /// Events in intact batches after the first gap (not readable in order).
    after_gap: u64,
}

/// What [`verify_dir`] found.
#[derive(Debug)]
pub struct VerifyReport {
    dir: PathBuf,
    limits: Limits,
    /// Every segment file checked, with its length when the check began.
    pub segments: Vec<(PathBuf, u64)>,
    /// Bytes of segment files checked.
    pub bytes: u64,
    /// Every problem, in the order of the files and offsets, then the sequence checks.
    pub findings: Vec<FileFinding>,
    sessions: BTreeMap<String, SessionBatches>,
    files: HashMap<SegmentId, Arc<dyn IoFile>>,
}

impl VerifyReport {
    /// Whether nothing is wrong, torn tails aside.
    pub fn is_clean(&self) -> bool {
        self.findings.iter().all(|f| f.torn_tail)
    }

    /// The sessions with at least one intact batch, by id.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().map(|s| SessionId::from(s.as_str()))
    }

    /// How many events of the session can be read in order from seq 0 (up to its first gap), and
    /// how many intact events come after that gap.
    pub fn session_events(&self, session: &SessionId) -> (u64, u64) {
        self.sessions
            .get(session.as_str())
            .map_or((0, 0), |s| (s.readable.last().map_or(0, Batch::end), s.after_gap))
    }

    /// Reads the session's events from seq 0 up to its first gap, each with its place on disk.
    /// The files are read again: a byte that changed since the check is reported as corrupt.
    pub fn read_session(&self, session: &SessionId) -> Result<Vec<LocatedRecord>, StoreError> {
        let Some(batches) = self.sessions.get(session.as_str()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for b in &batches.readable {
            let path = self.dir.join(b.seg.file_name());
            let place = || format!("segment {} at byte {}", path.display(), b.offset);
            let file = self.files.get(&b.seg).ok_or_else(|| StoreError::Corrupt {
                context: place(),
                source: DecodeError::Malformed { reason: "the segment is no longer open".into() },
            })?;
            buf.resize(b.len as usize, 0);
            file.read_exact_at(&mut buf, b.offset).map_err(|source| StoreError::Io {
                context: format!("reading {} bytes of {}", b.len, place()),
                source,
            })?;
            let corrupt = |source| StoreError::Corrupt { context: place(), source };
            let (frame, _) = Frame::parse(&buf, &self.limits).map_err(corrupt)?;
            let mut at = b.offset + FRAME_HEADER_LEN as u64;
            for (i, r) in frame.records().enumerate() {
                let r = r.map_err(corrupt)?;
                let expected = b.first + i as u64;
                if r.session != session.as_str() || r.seq.get() != expected {
                    return Err(corrupt(DecodeError::Malformed {
                        reason: format!(
                            "the batch changed since it was checked: expected {session} seq \
                             {expected}, found {} seq {}",
                            r.session, r.seq
                        ),
                    }));
                }
                let record = r.to_record().map_err(corrupt)?;
                out.push(LocatedRecord { record, segment: path.clone(), offset: at });
                at += r.bytes.len() as u64;
            }
        }
        Ok(out)
    }
}

/// Checks the journal in `dir` on the real file system. See the [module documentation](self).
///
/// `progress` is called with (bytes checked, bytes to check) as the scan moves on. Only the
/// directory's listing failing is an error; a segment that cannot be read is a finding.
pub fn verify_dir(
    dir: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    verify_dir_with(Arc::new(RealIo), dir, limits, progress)
}

/// [`verify_dir`] through `io` (the real file system or a simulated disk).
pub fn verify_dir_with(
    io: Arc<dyn Io>,
    dir: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    let names = io.list(dir).map_err(|source| StoreError::Io {
        context: format!("listing the journal directory {}", dir.display()),
        source,
    })?;
    let mut ids: Vec<SegmentId> =
        names.iter().filter_map(|n| SegmentId::from_file_name(n)).collect();
    ids.sort_unstable();
    let mut opened = Vec::new();
    for id in &ids {
        // A segment removed since the listing (compaction by a live writer) held nothing live.
        if let Ok(file) = io.open(&dir.join(id.file_name()), true) {
            let len = file.len().unwrap_or(0);
            opened.push((*id, file, len));
        }
    }
    let total: u64 = opened.iter().map(|(_, _, len)| len).sum();
    let mut checker = Checker {
        dir: dir.to_path_buf(),
        limits: *limits,
        findings: Vec::new(),
        sessions: HashMap::new(),
        holes: HashMap::new(),
        done: 0,
        total,
    };
    let mut buf = Vec::new();
    let last = opened.last().map(|(id, _, _)| *id);
    for (id, file, len) in &opened {
        let path = dir.join(id.file_name());
        let is_last = Some(*id) == last;
        let mut seg = SegmentCheck {
            path,
            id: *id,
            last: is_last,
            groups: Vec::new(),
            pending: Vec::new(),
            marks: (0, 0),
        };
        if let Err(e) = checker.segment(&mut seg, &**file, *len, &mut buf, progress) {
            let f = finding(&seg.path, 0, FileProblem::Unreadable(e.to_string()));
            seg.pending.push((f, 0));
        }
        judge(&mut seg, is_last);
        checker.findings.extend(seg.pending.into_iter().map(|(f, _)| f));
        checker.done = checker.done.saturating_add(*len);
        progress(checker.done, total);
    }
    let segments = opened.iter().map(|(id, _, len)| (dir.join(id.file_name()), *len)).collect();
    let files = opened.iter().map(|(id, file, _)| (*id, Arc::clone(file))).collect();
    let (sessions, findings) = checker.finish();
    Ok(VerifyReport {
        dir: dir.to_path_buf(),
        limits: *limits,
        segments,
        bytes: total,
        findings,
        sessions,
        files,
    })
}

fn finding(segment: &Path, offset: u64, problem: FileProblem) -> FileFinding {
    FileFinding {
        segment: segment.to_path_buf(),
        offset,
        len: None,
        session: None,
        seq: None,
        problem,
        torn_tail: false,
        valid_after: None,
    }
}

/// A damaged batch of a session: the first sequence number it held (and how many, where its
/// header says), so that the gap it leaves is not reported a second time.
#[derive(Debug, Clone, Copy)]
struct Hole {
    first: u64,
    count: Option<u32>,
}

/// The scan's state across segments.
struct Checker {
    dir: PathBuf,
    limits: Limits,
    findings: Vec<FileFinding>,
    /// Each session's intact batches since its last deletion, in log order.
    sessions: HashMap<String, Vec<Batch>>,
    /// Each session's damaged batches since its last deletion.
    holes: HashMap<String, Vec<Hole>>,
    /// Bytes of the segments before the current one.
    done: u64,
    total: u64,
}

/// A valid group header: where, and how many bytes it says were durable when it was written.
#[derive(Debug, Clone, Copy)]
struct ValidGroup {
    offset: u64,
    synced: u64,
}

/// One segment being checked: its valid groups, and its findings with the offset of the group
/// each is in (where opening would cut).
struct SegmentCheck {
    path: PathBuf,
    id: SegmentId,
    /// The newest segment: the only one that may end in zeros written ahead of the data.
    last: bool,
    groups: Vec<ValidGroup>,
    pending: Vec<(FileFinding, u64)>,
    /// The lengths of `pending` and `groups` when the step being read began.
    marks: (usize, usize),
}

/// Marks each finding of one segment as a torn tail or not, the way opening decides: by where
/// the damage is, and what the valid groups after it claim was durable.
fn judge(seg: &mut SegmentCheck, last_segment: bool) {
    for (f, cut) in &mut seg.pending {
        let after = || seg.groups.iter().filter(|g| g.offset > *cut);
        f.valid_after = after().map(|g| g.offset).min();
        let damage = Damage {
            offset: f.offset,
            cut: *cut,
            error: DecodeError::Malformed { reason: String::new() },
            // Intact bytes that say something impossible are never a torn write.
            inconsistent: matches!(
                f.problem,
                FileProblem::Misdirected { .. }
                    | FileProblem::Payload(_)
                    | FileProblem::GroupFill { .. }
            ),
            valid_after: f.valid_after.is_some(),
            synced_after: after().map(|g| g.synced).max().unwrap_or(0),
        };
        f.torn_tail = !matches!(f.problem, FileProblem::Unreadable(_))
            && classify(&damage, last_segment) == Verdict::TornTail;
    }
}

/// The session and sequence number a record's header gives, read without its checksum: only
/// for records whose checksum passed (an unknown kind or version is found after it).
fn peek_place(bytes: &[u8]) -> Option<(SessionId, Seq)> {
    let sid_len = usize::from(u16::from_le_bytes(bytes.get(10..12)?.try_into().ok()?));
    let seq = u64::from_le_bytes(bytes.get(12..20)?.try_into().ok()?);
    let sid = std::str::from_utf8(bytes.get(28..28 + sid_len)?).ok()?;
    (!sid.is_empty()).then(|| (SessionId::from(sid), Seq(seq)))
}

/// Whether a record error was found after the record's checksum passed.
fn checksum_passed(e: &DecodeError) -> bool {
    matches!(
        e,
        DecodeError::UnknownKind { .. }
            | DecodeError::UnknownVersion { .. }
            | DecodeError::Malformed { .. }
    )
}

/// Whether every byte from `from` to the end of the file is zero.
fn zeros_from(w: &mut Window<'_>, from: u64, len: u64) -> io::Result<bool> {
    const CHUNK: usize = 1 << 20;
    let mut pos = from;
    while pos < len {
        let bytes = w.bytes(pos, CHUNK)?;
        if bytes.is_empty() {
            break;
        }
        if bytes.iter().any(|b| *b != 0) {
            return Ok(false);
        }
        pos += bytes.len() as u64;
    }
    Ok(true)
}

/// The next valid group header at or after `from`, if any.
fn next_group(w: &mut Window<'_>, from: u64, len: u64) -> io::Result<Option<u64>> {
    const CHUNK: usize = 1 << 20;
    let mut pos = from;
    while pos.saturating_add(GROUP_HEADER_LEN as u64) <= len {
        let n = CHUNK.min((len - pos) as usize);
        let bytes = w.bytes(pos, n)?;
        let mut i = 0usize;
        while i + GROUP_HEADER_LEN <= bytes.len() {
            let here = bytes.get(i..).unwrap_or_default();
            if GroupHeader::magic_at(here) && GroupHeader::parse(here).is_ok() {
                return Ok(Some(pos + i as u64));
            }
            i += 1;
        }
        // The last GROUP_HEADER_LEN - 1 positions of this window are looked at in the next.
        pos += (bytes.len().saturating_sub(GROUP_HEADER_LEN) + 1) as u64;
    }
    Ok(None)
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
                    DecodeError::ChecksumMismatch { .. } => rest
                        .get(4..8)
                        .and_then(|w| w.try_into().ok())
                        .map(|w| u32::from_le_bytes(w) as usize + 8)
                        .filter(|n| *n <= rest.len()),
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

impl Checker {
    fn segment(
        &mut self,
        seg: &mut SegmentCheck,
        file: &dyn IoFile,
        len: u64,
        buf: &mut Vec<u8>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> io::Result<()> {
        let mut len = len;
        let mut pos = None;
        loop {
            match self.scan_from(seg, file, len, &mut pos, buf, progress) {
                Ok(()) => return Ok(()),
                // A writer sealing the segment cut the zeros ahead of its data off while it was
                // read: the step that hit the new end is read again with the new length.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let now = file.len()?;
                    if now >= len {
                        return Err(e);
                    }
                    len = now;
                    let (pending, groups) = seg.marks;
                    seg.pending.truncate(pending);
                    seg.groups.truncate(groups);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Scans the segment from `pos` (`None`: from its header), moving `pos` past each step
    /// done; `seg.marks` is where the current step's findings begin.
    fn scan_from(
        &mut self,
        seg: &mut SegmentCheck,
        file: &dyn IoFile,
        len: u64,
        pos: &mut Option<u64>,
        buf: &mut Vec<u8>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> io::Result<()> {
        let mut w = Window::new(file, len, buf);
        seg.marks = (seg.pending.len(), seg.groups.len());
        let mut at = match *pos {
            Some(at) => at,
            None => match check_segment_header(w.bytes(0, SEGMENT_HEADER_LEN)?, seg.id) {
                Ok(()) => SEGMENT_HEADER_LEN as u64,
                Err(e) => {
                    let mut f = finding(&seg.path, 0, FileProblem::SegmentHeader(e));
                    f.len = Some(SEGMENT_HEADER_LEN as u64);
                    seg.pending.push((f, 0));
                    match next_group(&mut w, 1, len)? {
                        Some(at) => at,
                        None => return Ok(()),
                    }
                }
            },
        };
        *pos = Some(at);
        while at < len {
            seg.marks = (seg.pending.len(), seg.groups.len());
            let g = match GroupHeader::parse(w.bytes(at, GROUP_HEADER_LEN)?) {
                Ok(g) => g,
                // The newest segment's space past its data is zeros written ahead of it.
                Err(_) if seg.last && zeros_from(&mut w, at, len)? => break,
                Err(e) => {
                    seg.pending.push((finding(&seg.path, at, FileProblem::GroupHeader(e)), at));
                    match next_group(&mut w, at + 1, len)? {
                        Some(next) => {
                            at = next;
                            *pos = Some(at);
                            continue;
                        }
                        None => break,
                    }
                }
            };
            let body_at = at + GROUP_HEADER_LEN as u64;
            let end = body_at.saturating_add(u64::from(g.len));
            if end > len {
                let available = len.saturating_sub(body_at);
                let problem = FileProblem::GroupTruncated { len: u64::from(g.len), available };
                let mut f = finding(&seg.path, at, problem);
                f.len = Some(len - at);
                seg.pending.push((f, at));
                // The header is intact: what it says was durable counts, as it does on open.
                seg.groups.push(ValidGroup { offset: at, synced: g.synced });
                match next_group(&mut w, at + 1, len)? {
                    Some(next) => {
                        at = next;
                        *pos = Some(at);
                        continue;
                    }
                    None => break,
                }
            }
            let body = w.bytes(body_at, g.len as usize)?;
            seg.groups.push(ValidGroup { offset: at, synced: g.synced });
            let found = seg.pending.len();
            self.group_body(seg, at, body_at, body, g.frames);
            if seg.pending.len() > found {
                // Opening looks for intact group headers anywhere after damage, inside the
                // damaged group too: what they say was durable counts here as well.
                let mut from = at + 1;
                while let Some(next) = next_group(&mut w, from, len)?.filter(|n| *n < end) {
                    if let Ok(h) = GroupHeader::parse(w.bytes(next, GROUP_HEADER_LEN)?) {
                        seg.groups.push(ValidGroup { offset: next, synced: h.synced });
                    }
                    from = next + 1;
                }
            }
            at = end;
            *pos = Some(at);
            progress(self.done.saturating_add(at), self.total);
        }
        Ok(())
    }

    fn group_body(
        &mut self,
        seg: &mut SegmentCheck,
        cut: u64,
        body_at: u64,
        body: &[u8],
        frames: u32,
    ) {
        let mut at = 0usize;
        for _ in 0..frames {
            let offset = body_at + at as u64;
            let rest = body.get(at..).unwrap_or_default();
            match Frame::parse(rest, &self.limits) {
                Ok((frame, flen)) => {
                    self.frame(seg, cut, offset, &frame, rest.get(..flen).unwrap_or_default());
                    at += flen;
                }
                Err(error) => match self.damaged_frame(seg, cut, offset, rest, error) {
                    Some(flen) => at += flen,
                    // Where the next frame starts cannot be told: the group's rest is skipped.
                    None => return,
                },
            }
        }
        if at != body.len() {
            let problem =
                FileProblem::GroupFill { frames, filled: at as u64, len: body.len() as u64 };
            seg.pending.push((finding(&seg.path, body_at + at as u64, problem), cut));
        }
    }

    /// A frame whose checksum passed: its records must be one session's, in sequence, and
    /// decode.
    fn frame(
        &mut self,
        seg: &mut SegmentCheck,
        cut: u64,
        offset: u64,
        frame: &Frame<'_>,
        bytes: &[u8],
    ) {
        if frame.kind == FrameKind::DeleteSession {
            let s = frame.deleted_session().unwrap_or_default();
            self.sessions.remove(s);
            self.holes.remove(s);
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
                    let mut f = finding(&seg.path, at, FileProblem::Record(e.clone()));
                    let place = match head {
                        Some((s, first)) => {
                            first.checked_add(i).map(|q| (SessionId::from(s), Seq(q)))
                        }
                        None if checksum_passed(&e) => {
                            peek_place(bytes.get((at - offset) as usize..).unwrap_or_default())
                        }
                        None => None,
                    };
                    (f.session, f.seq) = place.map_or((None, None), |(s, q)| (Some(s), Some(q)));
                    seg.pending.push((f, cut));
                    intact = false;
                    break;
                }
            };
            let (s0, first) = *head.get_or_insert((r.session, r.seq.get()));
            // A batch whose first seq is near u64::MAX cannot hold more records: no seq follows.
            let expected = first.checked_add(i);
            let problem = if r.session != s0 || Some(r.seq.get()) != expected {
                Some(FileProblem::Misdirected {
                    expected_session: SessionId::from(s0),
                    batch_first: Seq(first),
                    expected_seq: Seq(expected.unwrap_or(u64::MAX)),
                    found_session: SessionId::from(r.session),
                    found_seq: r.seq,
                })
            } else {
                r.event().err().map(FileProblem::Payload)
            };
            if let Some(problem) = problem {
                let mut f = finding(&seg.path, at, problem);
                f.len = Some(r.bytes.len() as u64);
                f.session = Some(SessionId::from(r.session));
                f.seq = Some(r.seq);
                seg.pending.push((f, cut));
                intact = false;
            }
            at += r.bytes.len() as u64;
        }
        let Some((session, first)) = head else { return };
        if intact {
            let batch =
                Batch { first, count: frame.count, seg: seg.id, offset, len: bytes.len() as u32 };
            self.sessions.entry(session.to_owned()).or_default().push(batch);
        } else {
            let hole = Hole { first, count: Some(frame.count) };
            self.holes.entry(session.to_owned()).or_default().push(hole);
        }
    }

    /// A frame whose checksum (or header) fails. Its records are read one by one to find which
    /// is damaged and whose it is. Returns the frame's length when its records fill it exactly
    /// as its header says (then the next frame can be found).
    fn damaged_frame(
        &mut self,
        seg: &mut SegmentCheck,
        cut: u64,
        offset: u64,
        rest: &[u8],
        error: DecodeError,
    ) -> Option<usize> {
        let header = peek_len(rest, &self.limits).ok().filter(|(n, _)| *n <= rest.len());
        let flen = header.map_or(rest.len(), |(n, _)| n);
        let body = rest.get(FRAME_HEADER_LEN..flen).unwrap_or_default();
        let walked = walk_records(body, &self.limits);
        let good = walked.iter().find_map(|w| w.found.as_ref().ok().map(|p| (w.index, *p)));
        // With no intact record to go by, the first record's own header is believed when it
        // continues its session exactly where the session's intact events end.
        let anchor: Option<(u64, (SessionId, u64))> =
            good.map(|(i, (s, q))| (i, (SessionId::from(s), q))).or_else(|| {
                let (s, q) = peek_place(body)?;
                let tail = self.sessions.get(s.as_str()).and_then(|b| b.last()).map(Batch::end);
                (tail.unwrap_or(0) == q.get()).then_some((0, (s, q.get())))
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
                    finding(&seg.path, body_at + w.offset as u64, FileProblem::Record(e.clone()));
                f.len = w.len.map(|n| n as u64);
                (f.session, f.seq) =
                    place_of(w.index).map_or((None, None), |(s, q)| (Some(s), Some(q)));
                seg.pending.push((f, cut));
                reported = true;
            }
        }
        if !reported {
            let mut f = finding(&seg.path, offset, FileProblem::Frame(error));
            f.len = header.map(|(n, _)| n as u64);
            f.session = anchor.as_ref().map(|(_, (s, _))| s.clone());
            seg.pending.push((f, cut));
        }
        if let Some((s, first)) = place_of(0) {
            let hole = Hole { first: first.get(), count: header.map(|(_, c)| c) };
            self.holes.entry(s.into_string()).or_default().push(hole);
        }
        // The frame's length is trusted only when its records fill it and are as many as its
        // header says.
        let (_, count) = header?;
        let filled = walked.last().and_then(|w| w.len.map(|n| w.offset + n)) == Some(body.len());
        (reported && filled && walked.len() as u64 == u64::from(count)).then_some(flen)
    }

    /// Puts each session's intact batches in order and checks that they continue each other.
    fn finish(self) -> (BTreeMap<String, SessionBatches>, Vec<FileFinding>) {
        let Checker { dir, mut findings, sessions, holes, .. } = self;
        let sessions: BTreeMap<String, Vec<Batch>> = sessions.into_iter().collect();
        let mut out = BTreeMap::new();
        for (name, mut batches) in sessions {
            // Stable: among copies of one batch (compaction's), the latest stays last.
            batches.sort_by_key(|b| b.first);
            let mut kept: Vec<Batch> = Vec::with_capacity(batches.len());
            for b in batches {
                match kept.last_mut() {
                    Some(last) if last.first == b.first && last.count == b.count => *last = b,
                    _ => kept.push(b),
                }
            }
            let holes = holes.get(&name).map(Vec::as_slice).unwrap_or_default();
            let mut tail = 0u64;
            let mut gap = false;
            let mut entry = SessionBatches::default();
            for b in kept {
                let path = dir.join(b.seg.file_name());
                let mut f = finding(
                    &path,
                    b.offset,
                    FileProblem::SeqGap { from: Seq(tail), to: Seq(b.first) },
                );
                f.len = Some(u64::from(b.len));
                f.session = Some(SessionId::from(name.as_str()));
                f.seq = Some(Seq(b.first));
                if b.first < tail {
                    f.problem = FileProblem::Overlap {
                        first: Seq(b.first),
                        count: b.count,
                        tail: Seq(tail),
                    };
                    findings.push(f);
                    continue;
                }
                if b.first > tail {
                    // A damaged batch that held exactly the missing events was reported already.
                    let explained = holes.iter().any(|h| {
                        h.first == tail
                            && h.count
                                .is_none_or(|c| tail.checked_add(u64::from(c)) == Some(b.first))
                    });
                    if !explained {
                        f.seq = Some(Seq(tail));
                        findings.push(f);
                    }
                    gap = true;
                }
                if gap {
                    entry.after_gap += u64::from(b.count);
                } else {
                    entry.readable.push(b);
                }
                tail = b.end();
            }
            out.insert(name, entry);
        }
        (out, findings)
    }
}
