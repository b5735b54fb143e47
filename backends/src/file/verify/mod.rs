//! A read-only check of a journal directory that reports every problem it finds, where it is,
//! and never writes.
//!
//! [`verify_dir`] walks the segments with the walk opening uses (`walk`), so the two judge the
//! same bytes the same way: damage opening would cut as a torn tail is reported as one finding
//! marked [`FileFinding::torn_tail`] (nothing after it in the segment counts, for either), and
//! damage opening refuses is reported as a problem. Where opening stops at the first corruption,
//! verify carries on at the next group and reports what else it finds. Every record of every
//! intact frame is also read, as a read of its session would (one session, in sequence, each
//! event decoding): a problem there is found by the read that meets it, not by opening, and
//! verify reports it too. Then every session's batches are put in order as opening puts them (a
//! deletion drops the batches before it, compaction's copies of a batch count once) and checked
//! to continue each other without gaps or overlaps.
//!
//! Each [`FileFinding`] names the segment file, the byte offset (of the damaged record where the
//! record can be told apart, else of the frame or group), the session and sequence number where
//! they can be told (from the intact records of the same batch, or from the damaged record's own
//! header when it continues its session exactly where the session's intact events end), and what
//! is wrong. The zeros the writer puts ahead of its data at the newest segment's end are not
//! damage.
//!
//! The batches that passed every check can be read back, per session, with
//! [`VerifyReport::read_session`], for checks of the events themselves (the protocol); and
//! [`ReadAround`] (`read_around`) reads a damaged journal through its check, every intact
//! session whole, as a read-only [`JournalStore`](crate::JournalStore).

mod finding;
mod frames;
mod read_around;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_codec::batch::Frame;
use stepjournal_codec::{DecodeError, Limits, Record, Seq, SessionId};

use super::files::SegmentFiles;
use super::format::heads::BatchHead;
use super::format::layout::{GROUP_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentId};
use super::format::names;
use super::format::torn::TornTail;
use super::format::walk::{Damage, Flow, FrameKindInfo, GroupView, Problem, Visit, walk_segment};
use super::index::BatchLoc;
use super::index::builder::{Built, IndexBuilder, MisfitKind};
use super::io::{EntryKind, Io, IoFile, RealIo};
use super::options::FileOptions;
use super::read::{ReadFailure, read_batches};
use super::space::sidecar::{self, Entry, Loaded};
use crate::StoreError;
use finding::finding;
pub use finding::{FileFinding, FileProblem};
use frames::{Frames, Hole, Sink};
pub use read_around::{DamagedSession, ReadAround};

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

/// What [`verify_dir`] found.
#[derive(Debug)]
pub struct VerifyReport {
    io: Arc<dyn Io>,
    dir: PathBuf,
    limits: Limits,
    /// The segment files, opened again (a few at a time) for `read_session`.
    files: SegmentFiles,
    /// Every segment file checked, with its length when the check began.
    pub segments: Vec<(PathBuf, u64)>,
    /// Bytes of segment files checked.
    pub bytes: u64,
    /// Every problem, in the order of the files and offsets, then the sequence checks.
    pub findings: Vec<FileFinding>,
    /// What the check could not read beside a live writer that kept changing the segments,
    /// said plainly: not damage, and not a finding (empty for a journal no writer changed).
    pub unchecked: Vec<String>,
    built: Built,
}

impl VerifyReport {
    /// Whether nothing is wrong, torn tails aside.
    pub fn is_clean(&self) -> bool {
        self.findings.iter().all(|f| f.torn_tail)
    }

    /// The sessions with at least one intact batch, by id.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.built.names().map(SessionId::from_stored)
    }

    /// How many events of the session can be read in order from seq 0 (up to its first gap), and
    /// how many intact events come after that gap.
    pub fn session_events(&self, session: &SessionId) -> (u64, u64) {
        self.built.session(session.as_str()).map_or((0, 0), |s| (s.log.tail(), s.after_gap))
    }

    /// Reads the session's events from seq 0 up to its first gap, each with its place on disk.
    /// The files are read again: a byte that changed since the check is reported as corrupt.
    /// Beside a live writer, a batch whose segment compaction removed since the check is read
    /// where it was copied to (a later segment), and the read goes on from there; one found
    /// nowhere [`ATTEMPTS`] times in a row, or [`LOOKS`] looks in all, fail the read with an
    /// `Interrupted` I/O error saying it moved (or that the writer deleted the session), never
    /// as damage.
    pub fn read_session(&self, session: &SessionId) -> Result<Vec<LocatedRecord>, StoreError> {
        let Some(ordered) = self.built.session(session.as_str()) else {
            return Ok(Vec::new());
        };
        let mut runs = ordered.log.runs.clone();
        let mut out = Vec::new();
        let mut stuck = 0;
        // Each look makes progress (a batch read, or one found where it moved), but a writer
        // that compacts all the time can move the batches on between every look and the read
        // after it: bounded all the same (each look walks the segments after the one gone).
        let mut looks = LOOKS;
        loop {
            let read = read_batches(
                &self.dir,
                &self.files,
                &self.limits,
                session.as_str(),
                &runs,
                |run, r, offset| {
                    let record = r.to_record()?;
                    let segment = self.dir.join(run.seg.file_name());
                    out.push(LocatedRecord { record, segment, offset });
                    Ok(())
                },
            );
            let seg = match read {
                Ok(()) => return Ok(out),
                Err(ReadFailure::Store(e)) => return Err(e),
                Err(ReadFailure::Gone { seg, .. }) => seg,
            };
            // The batches read stay read (a batch is handed on whole or not at all before its
            // segment is found gone); the rest are looked for where they moved.
            let next = out.last().map_or(0, |l| l.record.seq.get().saturating_add(1));
            let before = runs.len();
            runs.retain(|r| r.first >= next);
            self.files.forget(seg);
            let moved = match self.moved(session.as_str(), seg, &mut runs)? {
                Moved::Found => true,
                Moved::Nowhere => false,
                Moved::Deleted => {
                    let why = "the live writer deleted the session after the check read it";
                    return Err(self.not_read_back(session, why));
                }
            };
            let progress = moved || runs.len() < before;
            stuck = if progress { 0 } else { stuck + 1 };
            looks = looks.saturating_sub(1);
            if stuck >= ATTEMPTS || looks == 0 {
                let why = format!(
                    "its batch from seq {next} kept moving while it was looked for (a live \
                     writer compacting)"
                );
                return Err(self.not_read_back(session, &why));
            }
            if !progress {
                super::race::pause(stuck);
            }
        }
    }

    /// The error of a read back that a live writer's changes stopped: an `Interrupted` I/O
    /// error saying why, and that it is not damage.
    fn not_read_back(&self, session: &SessionId, why: &str) -> StoreError {
        StoreError::Io {
            context: format!(
                "reading session {session} back from the journal in {}",
                self.dir.display()
            ),
            source: std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                format!("{why}: not read back, not damage"),
            ),
        }
    }

    /// Finds where the session's batches that were in segment `gone` (removed since the check)
    /// were copied to: the segments after it now, walked for the session's frames up to its
    /// first deletion (what follows a deletion is the session written anew, not a copy), the
    /// latest copy of each batch winning; the runs in `gone` and after it are replaced by those
    /// found.
    fn moved(
        &self,
        session: &str,
        gone: SegmentId,
        runs: &mut [BatchLoc],
    ) -> Result<Moved, StoreError> {
        let later = super::listing::segments(&*self.io, &self.dir, Some(gone))?.ids;
        let mut copies: HashMap<(u64, u32), BatchLoc> = HashMap::new();
        let mut deleted = false;
        let mut buf = Vec::new();
        for (k, id) in later.iter().enumerate() {
            let Ok(file) = self.files.get(*id) else { continue };
            let mut find =
                FindCopies { session, seg: *id, copies: &mut copies, deleted: &mut deleted };
            let last = k + 1 == later.len();
            // A segment that cannot be read now is passed over: the read fails as before.
            let _ = walk_segment(&*file, *id, last, &self.limits, &mut buf, &mut find);
            if deleted {
                break;
            }
        }
        let mut found = false;
        for run in runs.iter_mut().filter(|r| r.seg >= gone) {
            if let Some(copy) = copies.get(&(run.first, run.count)) {
                found |= run.seg == gone;
                *run = *copy;
            }
        }
        Ok(match (found, deleted) {
            (true, _) => Moved::Found,
            // A deletion of the session after every segment the check had seen it in: written
            // after the check read the session (a deletion it had seen would have dropped the
            // batches before it).
            (false, true) => Moved::Deleted,
            (false, false) => Moved::Nowhere,
        })
    }
}

/// What [`VerifyReport::moved`] found of the batches of a segment removed since the check.
enum Moved {
    /// At least one of them, copied to a later segment.
    Found,
    /// None, and a deletion of the session: it was deleted since the check.
    Deleted,
    /// None: they moved on again, or are not there yet.
    Nowhere,
}

/// Collects the latest copy of each of a session's batches in one segment's intact groups, up
/// to a deletion of the session.
struct FindCopies<'a, 'm> {
    session: &'a str,
    seg: SegmentId,
    copies: &'m mut HashMap<(u64, u32), BatchLoc>,
    /// Set at a deletion of the session: nothing after it is a copy.
    deleted: &'m mut bool,
}

impl Visit for FindCopies<'_, '_> {
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)> {
        for f in g.frames.iter().filter(|f| g.session(f) == self.session) {
            if *self.deleted {
                break;
            }
            match f.kind {
                FrameKindInfo::Events { first, count } => {
                    let run =
                        BatchLoc { first, count, len: f.len, seg: self.seg, offset: f.offset };
                    self.copies.insert((first, count), run);
                }
                FrameKindInfo::Delete => *self.deleted = true,
            }
        }
        Ok(())
    }

    fn damage(&mut self, _: &Damage, _: Option<&GroupView<'_>>) -> Flow {
        Flow::Go
    }
}

/// Checks the journal in `dir` on the real file system, reading every segment to its end and
/// never writing (safe while a writer runs).
///
/// The segments are walked as opening walks them, so the two agree: damage opening would cut
/// as a torn tail is one finding marked [`FileFinding::torn_tail`], and damage opening refuses
/// is a problem; after a problem the check carries on at the next group. Every record of every
/// intact frame is read as a read of its session would, and each session's batches are put in
/// order as opening puts them and checked to continue each other. Each [`FileFinding`] names the
/// segment file and byte offset, and the session and sequence number where intact bytes tell
/// them. The batches that passed can be read back with [`VerifyReport::read_session`].
///
/// `progress` is called with (bytes checked, bytes to check) as the scan moves on. Only the
/// directory's listing failing is an error; a segment that cannot be read is a finding.
pub fn verify_dir(
    dir: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    verify_through(Arc::new(RealIo), dir, limits, progress)
}

/// [`verify_dir`] through `io` (the real file system or a simulated disk). Feature `testing`.
#[cfg(feature = "testing")]
pub fn verify_dir_with(
    io: Arc<dyn Io>,
    dir: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    verify_through(io, dir, limits, progress)
}

/// How many times the check lists the directory again for segments a live writer created
/// since it last looked.
const ROUNDS: u32 = super::race::ATTEMPTS;

/// How many times in a row a read back from the report may find a batch gone and nowhere else
/// before it gives up (each time after a pause, [`super::race::pause`]).
const ATTEMPTS: u32 = super::race::ATTEMPTS;

/// How many times a read back from the report looks for batches a live writer moved, in all.
const LOOKS: u32 = 4 * ATTEMPTS;

/// Checks the journal. Beside a live writer the segments change while they are read: the
/// writer seals the newest and starts another, and compaction copies a sealed segment's live
/// batches to the newest segment before it removes it. So the check reads the segments it
/// found (`listing`: the directory's listing, with what a listing can leave out looked up by
/// name) in order, the newest last, and then looks again: segments created meanwhile are read
/// too (the newest one found is read as sealed once a newer one exists), and the newest is read
/// as the newest only once nothing is found after it. A segment gone before it was read is
/// passed over: its batches were copied, before it was removed, into a segment that was the
/// newest then, which this check reads later. What it could not read before the writer moved
/// on again is said in [`VerifyReport::unchecked`], never reported as damage.
fn verify_through(
    io: Arc<dyn Io>,
    dir: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    let mut checker = Checker {
        findings: Vec::new(),
        builder: IndexBuilder::default(),
        holes: HashMap::new(),
        unnamed: Vec::new(),
        done: 0,
        total: 0,
    };
    let mut segments = Vec::new();
    let mut unchecked = Vec::new();
    let mut buf = Vec::new();
    // Every segment up to this one has been read (or was gone, or is no segment).
    let mut read_upto: Option<SegmentId> = None;
    let mut found = super::listing::segments(&*io, dir, None)?;
    for round in 0..ROUNDS {
        unchecked.extend(found.note.take());
        if found.ids.is_empty() {
            break;
        }
        // Each entry is looked at before any is opened (opening a named pipe would wait for a
        // writer); one that is not a regular file is a finding, and is no segment.
        let mut files = Vec::with_capacity(found.ids.len());
        for &id in &found.ids {
            let path = dir.join(id.file_name());
            match look_at(&*io, &path) {
                Ok(Some(())) => files.push(id),
                Ok(None) => {}
                Err(problem) => checker.findings.push(finding(&path, 0, problem)),
            }
            read_upto = Some(id);
        }
        let Some((&newest, sealed)) = files.split_last() else {
            // Every one found was gone already: the writer moved on, and what they held is in
            // segments after them.
            found = super::listing::segments(&*io, dir, read_upto)?;
            continue;
        };
        for id in sealed {
            check_segment(
                &*io,
                dir,
                *id,
                false,
                limits,
                &mut checker,
                &mut segments,
                &mut buf,
                progress,
            );
        }
        found = super::listing::segments(&*io, dir, Some(newest))?;
        if found.ids.is_empty() {
            // Read as the newest only if a second look agrees: a listing can leave out the
            // newest segment, and the ids before it can be gone already.
            found = super::listing::segments(&*io, dir, Some(newest))?;
        }
        let newer = !found.ids.is_empty();
        if newer && round + 1 == ROUNDS {
            unchecked.push(format!(
                "segments after {} were created while the check ran and were not checked (a \
                 live writer kept starting new ones)",
                dir.join(newest.file_name()).display()
            ));
        }
        check_segment(
            &*io,
            dir,
            newest,
            !newer,
            limits,
            &mut checker,
            &mut segments,
            &mut buf,
            progress,
        );
        if !newer {
            break;
        }
    }
    let (built, findings) = checker.finish(dir);
    let bytes = segments.iter().map(|(_, len)| len).sum();
    Ok(VerifyReport {
        io: Arc::clone(&io),
        dir: dir.to_path_buf(),
        limits: *limits,
        files: SegmentFiles::new(io, dir, true, FileOptions::new().max_open_segments),
        segments,
        bytes,
        findings,
        unchecked,
        built,
    })
}

/// What the entry at `path` is: `Some` a regular file, `None` gone, or the problem (not a
/// regular file, or not even that can be told).
fn look_at(io: &dyn Io, path: &Path) -> Result<Option<()>, FileProblem> {
    match io.entry_kind(path) {
        Ok(Some(EntryKind::File)) => Ok(Some(())),
        Ok(None) => Ok(None),
        Ok(Some(kind)) => Err(FileProblem::NotAFile(kind.to_string())),
        Err(e) => Err(FileProblem::Unreadable(e.to_string())),
    }
}

/// Reads segment `id` (`last`: the newest) into the check; a sealed segment's sidecar, if it
/// has one, is checked against it. A segment gone before it was opened is passed over.
#[expect(clippy::too_many_arguments, reason = "the check's state, passed down one level")]
fn check_segment(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
    last: bool,
    limits: &Limits,
    checker: &mut Checker,
    segments: &mut Vec<(PathBuf, u64)>,
    buf: &mut Vec<u8>,
    progress: &mut dyn FnMut(u64, u64),
) {
    let path = dir.join(id.file_name());
    let Opened { file, len } = match open_entry(io, &path) {
        Ok(Some(opened)) => opened,
        // Removed since it was listed, by a live writer: its batches are in a later segment.
        Ok(None) => return,
        Err(problem) => {
            checker.findings.push(finding(&path, 0, problem));
            return;
        }
    };
    segments.push((path.clone(), len));
    if !last && let Some(recorded) = sidecar::recorded_len(io, dir, id).filter(|r| *r > len) {
        let mut f = finding(&path, len, FileProblem::SegmentCut { len, recorded });
        f.len = Some(recorded - len);
        checker.findings.push(f);
    }
    checker.total = checker.total.saturating_add(len);
    checker.builder.add_segment(id);
    let frames = Frames { path: &path, seg: id, limits };
    // A sealed segment's sidecar, which opening would read instead, is checked against the
    // frames the walk finds (looked for by name: a listing may leave one out).
    let mut seg =
        SegmentCheck { checker, frames, progress: &mut *progress, seen: (!last).then(Vec::new) };
    match walk_segment(&*file, id, last, limits, buf, &mut seg) {
        Ok(walk) => {
            let seen = seg.seen.take();
            if let Some(seen) = seen.filter(|_| walk.first.is_none() && walk.end == walk.len)
                && let Loaded::Frames(described) = sidecar::load(io, dir, id, &*file, limits)
                && let Some(f) = sidecar_disagrees(dir, id, &described.entries(), &seen)
            {
                checker.findings.push(f);
            }
            if let Some(t) = &walk.torn {
                let mut f = damage_finding(&path, &t.damage);
                f.torn_tail = true;
                f.torn = Some(TornTail::new(&path, t));
                checker.findings.push(f);
            }
        }
        Err(e) => {
            checker.findings.push(finding(&path, 0, FileProblem::Unreadable(e.to_string())));
        }
    }
    checker.done = checker.done.saturating_add(len);
    progress(checker.done, checker.total);
}

/// A segment file opened for the check, with its length then.
struct Opened {
    file: Arc<dyn IoFile>,
    len: u64,
}

/// Opens the segment file at `path` read-only, with its length, after looking at what it is
/// (opening a named pipe would wait for a writer). `None`: it is gone.
fn open_entry(io: &dyn Io, path: &Path) -> Result<Option<Opened>, FileProblem> {
    let unreadable = |e: std::io::Error| FileProblem::Unreadable(e.to_string());
    match io.entry_kind(path).map_err(unreadable)? {
        Some(EntryKind::File) => {}
        None => return Ok(None),
        Some(kind) => return Err(FileProblem::NotAFile(kind.to_string())),
    }
    let file = match io.open(path, true) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match io.entry_kind(path).map_err(unreadable)? {
                None => Ok(None),
                Some(_) => Err(unreadable(e)),
            };
        }
        Err(e) => return Err(unreadable(e)),
    };
    let len = file.len().map_err(unreadable)?;
    Ok(Some(Opened { file, len }))
}

/// The finding for damage the walk found, as far as the walk's own facts describe it.
fn damage_finding(path: &Path, d: &Damage) -> FileFinding {
    let (problem, len) = match &d.problem {
        p if p.is_newer() => (FileProblem::NewerFormat(p.to_decode_error()), None),
        Problem::SegmentHeader(e) => {
            (FileProblem::SegmentHeader(e.clone()), Some(SEGMENT_HEADER_LEN as u64))
        }
        Problem::GroupHeader(e) => (FileProblem::GroupHeader(e.clone()), None),
        Problem::GroupTruncated { len, available } => (
            FileProblem::GroupTruncated { len: *len, available: *available },
            Some(GROUP_HEADER_LEN as u64 + available),
        ),
        Problem::Frame(e) => (FileProblem::Frame(e.clone()), None),
        Problem::Record(e) => (FileProblem::Record(e.clone()), None),
        Problem::GroupFill { frames, filled, len } => {
            (FileProblem::GroupFill { frames: *frames, filled: *filled, len: *len }, None)
        }
        Problem::Refused(reason) => {
            (FileProblem::Frame(DecodeError::Malformed { reason: reason.clone() }), None)
        }
    };
    let mut f = finding(path, d.offset, problem);
    f.len = len;
    f.valid_after = d.valid_after;
    f
}

/// The check's state across segments.
struct Checker {
    findings: Vec<FileFinding>,
    /// The intact batches, ordered as opening orders them.
    builder: IndexBuilder,
    /// Each session's damaged batches since its last deletion.
    holes: HashMap<String, Vec<Hole>>,
    /// The damaged batches whose session could not be read: segment, offset, events.
    unnamed: Vec<(SegmentId, u64, u32)>,
    /// Bytes of the segments before the current one.
    done: u64,
    total: u64,
}

impl Sink for Checker {
    fn finding(&mut self, f: FileFinding) {
        self.findings.push(f);
    }

    fn batch(&mut self, session: &str, run: BatchLoc, trim: Option<u64>) {
        self.builder.events(session, run, BatchHead::of_trim(trim));
    }

    fn hole(&mut self, session: &str, hole: Hole) {
        self.holes.entry(session.to_owned()).or_default().push(hole);
    }

    fn unnamed_hole(&mut self, seg: SegmentId, offset: u64, count: u32) {
        self.unnamed.push((seg, offset, count));
    }

    fn delete(&mut self, session: &str, at: SegmentId) {
        self.builder.delete(session, at);
        self.holes.remove(session);
    }

    fn tail(&self, session: &str) -> Option<u64> {
        self.builder.last(session).map(BatchLoc::end)
    }
}

impl Checker {
    /// Puts each session's intact batches in order and reports those that do not continue the
    /// session (a gap a damaged batch already reported is not reported again).
    fn finish(self, dir: &Path) -> (Built, Vec<FileFinding>) {
        let Checker { mut findings, builder, holes, mut unnamed, .. } = self;
        let built = builder.finish();
        for m in &built.misfits {
            let holes = holes.get(&m.session).map(Vec::as_slice).unwrap_or_default();
            let (problem, seq) = match m.kind {
                MisfitKind::Gap { from, to } => {
                    if explained(holes, from, to) {
                        continue;
                    }
                    // A damaged batch already reported, whose session could not be read, of
                    // exactly the gap's events and before the batch after the gap: that batch
                    // (each explains one gap).
                    let unread = unnamed.iter().position(|(seg, offset, count)| {
                        u64::from(*count) == to.saturating_sub(from)
                            && (*seg, *offset) < (m.seg, m.offset)
                    });
                    if let Some(i) = unread {
                        unnamed.remove(i);
                        continue;
                    }
                    (FileProblem::SeqGap { from: Seq(from), to: Seq(to) }, from)
                }
                MisfitKind::Overlap { first, count, tail } => {
                    (FileProblem::Overlap { first: Seq(first), count, tail: Seq(tail) }, first)
                }
            };
            let mut f = finding(&dir.join(m.seg.file_name()), m.offset, problem);
            f.len = Some(u64::from(m.len));
            f.session = Some(SessionId::from_stored(m.session.as_str()));
            f.seq = Some(Seq(seq));
            findings.push(f);
        }
        (built, findings)
    }
}

/// Whether damaged batches already reported hold exactly the events of the gap `from..to`: one
/// after the other from `from`, up to `to` (or to one whose length could not be read).
fn explained(holes: &[Hole], from: u64, to: u64) -> bool {
    let mut at = from;
    while at < to {
        match holes.iter().find(|h| h.first == at).map(|h| h.count) {
            Some(None) => return true,
            Some(Some(count)) if count > 0 => at = at.saturating_add(u64::from(count)),
            _ => return false,
        }
    }
    at == to
}

/// One segment being checked.
struct SegmentCheck<'a> {
    checker: &'a mut Checker,
    frames: Frames<'a>,
    progress: &'a mut dyn FnMut(u64, u64),
    /// The frames of the intact groups, as a sidecar describes them: kept when the segment has a
    /// sidecar to check.
    seen: Option<Vec<Entry>>,
}

/// The first place where the sidecar of segment `id` (its `described` frames) and the frames
/// the walk `seen` in the segment disagree, as a finding naming the sidecar.
fn sidecar_disagrees(
    dir: &Path,
    id: SegmentId,
    described: &[Entry],
    seen: &[Entry],
) -> Option<FileFinding> {
    let tell = |e: &Entry| match e.kind {
        FrameKindInfo::Events { first, count } => format!(
            "session {} seq {first}..{} ({} bytes)",
            e.session,
            first.saturating_add(u64::from(count)),
            e.len
        ),
        FrameKindInfo::Delete => format!("the deletion of session {} ({} bytes)", e.session, e.len),
    };
    let seg = id.file_name();
    let mut seen_at = seen.iter().peekable();
    let mut problem = None;
    for d in described {
        // Frames the sidecar skipped.
        if let Some(s) = seen_at.next_if(|s| s.offset < d.offset) {
            problem = Some((
                s.offset,
                format!("it leaves out {} at byte {} of {seg}", tell(s), s.offset),
            ));
            break;
        }
        match seen_at.next_if(|s| s.offset == d.offset) {
            Some(s) if s == d => {}
            Some(s) if s.kind == d.kind && s.session == d.session && s.len == d.len => {
                problem = Some((
                    d.offset,
                    format!(
                        "for {} at byte {} of {seg} it holds another head (the events the head rule reads)",
                        tell(s),
                        d.offset
                    ),
                ));
                break;
            }
            Some(s) => {
                problem = Some((
                    d.offset,
                    format!(
                        "it says {} at byte {} of {seg}, where the segment holds {}",
                        tell(d),
                        d.offset,
                        tell(s)
                    ),
                ));
                break;
            }
            None => {
                problem = Some((
                    d.offset,
                    format!(
                        "it says {} at byte {} of {seg}, where no intact frame begins",
                        tell(d),
                        d.offset
                    ),
                ));
                break;
            }
        }
    }
    if problem.is_none()
        && let Some(s) = seen_at.next()
    {
        problem =
            Some((s.offset, format!("it leaves out {} at byte {} of {seg}", tell(s), s.offset)));
    }
    let (offset, what) = problem?;
    Some(finding(&dir.join(names::sidecar(id)), offset, FileProblem::Sidecar(what)))
}

impl Visit for SegmentCheck<'_> {
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)> {
        if let Some(seen) = &mut self.seen {
            for f in g.frames {
                let head = match f.kind {
                    FrameKindInfo::Events { .. } => {
                        Some(BatchHead::of_frame(g.frame_bytes(f), self.frames.limits))
                    }
                    FrameKindInfo::Delete => None,
                };
                let session = g.session(f).to_owned();
                seen.push(Entry { session, offset: f.offset, len: f.len, kind: f.kind, head });
            }
        }
        for f in g.frames {
            let bytes = g.frame_bytes(f);
            match Frame::parse(bytes, self.frames.limits) {
                Ok((frame, _)) => self.frames.frame(self.checker, f.offset, &frame, bytes),
                // The walk checked it: the bytes cannot differ.
                Err(e) => {
                    let problem = FileProblem::Frame(e);
                    self.checker.findings.push(finding(self.frames.path, f.offset, problem));
                }
            }
        }
        (self.progress)(self.checker.done.saturating_add(g.offset), self.checker.total);
        Ok(())
    }

    fn damage(&mut self, d: &Damage, group: Option<&GroupView<'_>>) -> Flow {
        let before = self.checker.findings.len();
        // The group's header holds and its frames lie in the file: each frame is read, to say
        // which record is damaged and whose it is.
        if let (Problem::Frame(_) | Problem::Record(_) | Problem::GroupFill { .. }, Some(g)) =
            (&d.problem, group)
        {
            self.frames.group(self.checker, g.body_at, g.body, g.header.frames);
        }
        if self.checker.findings.len() == before {
            let f = damage_finding(self.frames.path, d);
            // Damage that begins where the last damage found ends (a zeroed block across the
            // end of a group and the next group's header) is the same damage: one finding.
            let last = before.checked_sub(1).and_then(|i| self.checker.findings.get_mut(i));
            match last.filter(|l| {
                l.segment == f.segment
                    && !l.torn_tail
                    && l.len.map(|n| l.offset + n) == Some(f.offset)
            }) {
                Some(l) => {
                    l.len = f
                        .len
                        .map(|n| f.offset + n - l.offset)
                        .or_else(|| d.valid_after.map(|v| v.saturating_sub(l.offset)));
                    return Flow::Go;
                }
                None => self.checker.findings.push(f),
            }
        }
        for f in self.checker.findings.get_mut(before..).unwrap_or_default() {
            f.valid_after = d.valid_after;
        }
        Flow::Go
    }
}
