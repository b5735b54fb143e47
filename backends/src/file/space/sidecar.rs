//! Sidecar indexes: for a sealed segment `{id:020}.seg`, a file `{id:020}.idx` holding what the
//! scan of the segment would hand the index builder (each frame's session, place, sequence
//! numbers, what it tells of the session's head and where its last snapshot lies), so that
//! opening reads the sidecar instead of the segment. `docs/format.md` draws the bytes.
//!
//! A sidecar is written by the store's reclaim thread once the segment is sealed: the sealed
//! segment is walked (its checksums checked), and the sidecar created, written, synced and the
//! directory synced. Opening uses one only if it is whole (its checksum), names the segment, and
//! the segment still ends as it did (its length and a checksum of its last bytes); otherwise the
//! segment is scanned as before, and a writable open removes the sidecar so that the reclaim
//! thread writes it again. A journal written before sidecars existed opens by scanning.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use stepjournal_codec::{Limits, UnixMillis};

use crate::file::commit::segment::IoFailure;
use crate::file::format::heads::{BatchHead, Stored, StoredHead};
use crate::file::format::layout::{
    GROUP_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentId, check_segment_header,
};
use crate::file::format::names;
use crate::file::format::walk::{Damage, Flow, FrameKindInfo, GroupView, Visit, walk_segment};
use crate::file::index::BatchLoc;
use crate::file::index::builder::{IndexBuilder, SessionNo};
use crate::file::io::{Io, IoFile};

const MAGIC: &[u8; 4] = b"SJIX";
/// A frame's flags: a deletion frame (else events).
const DELETE: u8 = 1;
/// Its first sequence number is given (else: where the session's last events frame in this
/// sidecar ended).
const FIRST: u8 = 2;
/// Its event count is given (else 1).
const COUNT: u8 = 4;
/// Records the head rule reads follow (else none).
const HEAD: u8 = 8;
/// The place of its last `snapshot` record follows (else it holds none).
const SNAPSHOT: u8 = 16;
/// The sidecar format this build reads and writes: 2 tells where snapshots lie (a sidecar of
/// version 1 does not, and is not used: its segment is scanned, and its sidecar written again).
const VERSION: u32 = 2;
/// The versions whose header is laid out as this one's (for [`recorded_len`]).
const HEADER_VERSIONS: std::ops::RangeInclusive<u32> = 1..=VERSION;
/// Magic, version, segment id, segment length, tail checksum, session count, frame count.
const HEADER_LEN: usize = 4 + 4 + 8 + 8 + 4 + 4 + 8;
/// How many of the segment's last bytes the sidecar's tail checksum covers.
const TAIL: u64 = 64;

/// What a sidecar told, or why it cannot be used.
pub(crate) enum Loaded {
    /// No sidecar.
    Missing,
    /// A sidecar that is damaged, or no longer describes the segment.
    Stale,
    /// The segment's frames, ready to hand to the index builder.
    Frames(Frames),
}

/// A sidecar checked whole: its frames are decoded again as they are handed to the builder,
/// with nothing kept per frame in between (a frame takes a few bytes here and would take dozens
/// decoded: keeping them costs more than decoding them again).
pub(crate) struct Frames {
    /// The segment's length (where its data ends).
    pub len: u64,
    id: SegmentId,
    bytes: Vec<u8>,
    limits: Limits,
    /// How many events frames each session has here, by its number in the sidecar.
    counts: Vec<usize>,
}

/// One frame, as a pass over a sidecar hands it on.
enum Out<'a, 'b> {
    Events { run: BatchLoc, at: UnixMillis, stored: &'b [Stored<'a>], snapshot: Option<u32> },
    Delete { offset: u64, len: u32 },
}

impl Frames {
    /// Hands the frames to `builder`, as the scan of the segment would.
    pub(crate) fn feed(self, builder: &mut IndexBuilder, seg: SegmentId) {
        let limits = self.limits;
        let counts = &self.counts;
        // The builder's number of each of the sidecar's sessions, looked up once per segment,
        // with room made for the session's batches in it.
        let mut numbers: Vec<Option<SessionNo>> = vec![None; counts.len()];
        builder.reserve_sessions(counts.len());
        let fed = frames(&self.bytes, self.id, self.len, &mut |name, k, out| {
            let no = match numbers.get_mut(k) {
                Some(Some(no)) => *no,
                slot => {
                    let no = builder.session(name);
                    builder.reserve(no, counts.get(k).copied().unwrap_or(0));
                    if let Some(slot) = slot {
                        *slot = Some(no);
                    }
                    no
                }
            };
            match out {
                Out::Events { run, at, stored, snapshot } => {
                    let head = BatchHead::of_stored(at, stored, snapshot, &limits);
                    builder.events_of(no, run, head);
                }
                Out::Delete { .. } => builder.delete_of(no, seg),
            }
        });
        // The same bytes were checked by `load`.
        debug_assert!(fed.is_some(), "a sidecar that loaded decodes");
    }
}

/// One frame a sidecar describes, as [`Frames::entries`] lists them for a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub session: String,
    pub offset: u64,
    pub len: u32,
    pub kind: FrameKindInfo,
    /// What an events frame tells of its session's head.
    pub head: Option<BatchHead>,
}

impl Frames {
    /// Every frame the sidecar describes, in its order.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        let limits = self.limits;
        let mut out = Vec::new();
        frames(&self.bytes, self.id, self.len, &mut |name, _, o| {
            out.push(match o {
                Out::Events { run, at, stored, snapshot } => Entry {
                    session: name.to_owned(),
                    offset: run.offset,
                    len: run.len,
                    kind: FrameKindInfo::Events { first: run.first, count: run.count },
                    head: Some(BatchHead::of_stored(at, stored, snapshot, &limits)),
                },
                Out::Delete { offset, len } => Entry {
                    session: name.to_owned(),
                    offset,
                    len,
                    kind: FrameKindInfo::Delete,
                    head: None,
                },
            });
        });
        out
    }
}

/// The CRC32 of the last [`TAIL`] bytes of a segment of `len` bytes.
fn tail_crc(file: &dyn IoFile, len: u64) -> io::Result<u32> {
    let from = len.saturating_sub(TAIL);
    let mut tail = vec![0u8; (len - from) as usize];
    file.read_exact_at(&mut tail, from)?;
    Ok(crc32fast::hash(&tail))
}

/// Reads the sidecar of segment `id` (open as `file`) in `dir`. A sidecar that cannot be read
/// is as good as damaged: the segment is scanned.
pub(crate) fn load(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
    file: &dyn IoFile,
    limits: &Limits,
) -> Loaded {
    let path = dir.join(names::sidecar(id));
    let side = match io.open(&path, true) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Loaded::Missing,
        Err(_) => return Loaded::Stale,
    };
    let (Ok(side_len), Ok(seg_len)) = (side.len(), file.len()) else { return Loaded::Stale };
    // A sidecar holds a few bytes per frame; one larger than its segment is no sidecar.
    if side_len > seg_len.saturating_add(1 << 20) {
        return Loaded::Stale;
    }
    let mut bytes = vec![0u8; side_len as usize];
    if side.read_exact_at(&mut bytes, 0).is_err() {
        return Loaded::Stale;
    }
    // Each session's events frames in the segment, by its number in the sidecar.
    let mut counts: Vec<usize> = Vec::new();
    let checked = frames(&bytes, id, seg_len, &mut |_, k, out| {
        if let Out::Events { .. } = out {
            if counts.len() <= k {
                // `k` numbers one of the sessions the sidecar names, each in its bytes.
                counts.resize(k + 1, 0);
            }
            if let Some(n) = counts.get_mut(k) {
                *n += 1;
            }
        }
    });
    if checked.is_none() {
        return Loaded::Stale;
    }
    // The segment's header is its own: a sidecar never stands for a header that changed (one of
    // a newer format is refused by the walk, whatever the sidecar says).
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    if file.read_exact_at(&mut header, 0).is_err() || check_segment_header(&header, id).is_err() {
        return Loaded::Stale;
    }
    match (u32_at(&bytes, 24), tail_crc(file, seg_len)) {
        (Some(want), Ok(got)) if want == got => {
            Loaded::Frames(Frames { len: seg_len, id, bytes, limits: *limits, counts })
        }
        _ => Loaded::Stale,
    }
}

/// The length segment `id` had when its sidecar in `dir` was written, if the sidecar is whole
/// (its checksum holds) and names the segment, whatever else it says: a sealed segment never
/// changes length, so a shorter one was cut.
pub(crate) fn recorded_len(io: &dyn Io, dir: &Path, id: SegmentId) -> Option<u64> {
    let side = io.open(&dir.join(names::sidecar(id)), true).ok()?;
    let len = side.len().ok()?;
    // A sidecar holds a few bytes per frame of a segment of at most a few GiB.
    let mut bytes = vec![0u8; usize::try_from(len).ok().filter(|n| *n <= 1 << 30)?];
    side.read_exact_at(&mut bytes, 0).ok()?;
    let body_end = bytes.len().checked_sub(4)?;
    let body = bytes.get(..body_end)?;
    let whole = crc32fast::hash(body) == u32_at(&bytes, body_end)?
        && body.get(..4)? == MAGIC
        && HEADER_VERSIONS.contains(&u32_at(body, 4)?)
        && u64_at(body, 8)? == id.0;
    whole.then(|| u64_at(body, 16)).flatten()
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes)
}

/// A cursor over a sidecar's bytes; every read is checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).and_then(|b| b.first().copied())
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

/// Checks a sidecar's bytes for segment `id` of `seg_len` bytes and hands each frame, with its
/// session's name and number in the sidecar, to `each`; `None` if anything is wrong (`each` may
/// have been handed some).
fn frames<'a>(
    bytes: &'a [u8],
    id: SegmentId,
    seg_len: u64,
    each: &mut dyn FnMut(&'a str, usize, Out<'a, '_>),
) -> Option<()> {
    let body_end = bytes.len().checked_sub(4)?;
    let (body, crc) = (bytes.get(..body_end)?, u32_at(bytes, body_end)?);
    if crc32fast::hash(body) != crc || body.get(..4)? != MAGIC || u32_at(body, 4)? != VERSION {
        return None;
    }
    if u64_at(body, 8)? != id.0 || u64_at(body, 16)? != seg_len {
        return None;
    }
    let sessions = u32_at(body, 28)? as usize;
    let count = u64_at(body, 32)?;
    let mut r = Reader { bytes: body, at: HEADER_LEN };
    let mut names = Vec::with_capacity(sessions.min(body.len()));
    for _ in 0..sessions {
        let n = r.varint()?;
        names.push(std::str::from_utf8(r.take(usize::try_from(n).ok()?)?).ok()?);
    }
    let mut end = SEGMENT_HEADER_LEN as u64;
    let mut tails = vec![None::<u64>; names.len()];
    let mut times = vec![0u64; names.len()];
    let mut stored = Vec::new();
    for _ in 0..count {
        let flags = r.byte()?;
        let session = usize::try_from(r.varint()?).ok()?;
        let name = *names.get(session)?;
        if flags & !(DELETE | FIRST | COUNT | HEAD | SNAPSHOT) != 0 {
            return None;
        }
        // The frames tile the segment: each follows the one before, after a group header
        // when it starts a group (the first always does). An entry left out, or moved, makes
        // the sidecar describe another segment.
        let gap = r.varint()?;
        let first_frame = end == SEGMENT_HEADER_LEN as u64;
        if gap != GROUP_HEADER_LEN as u64 && (gap != 0 || first_frame) {
            return None;
        }
        let offset = end.checked_add(gap)?;
        let len = u32::try_from(r.varint()?).ok()?;
        end = offset.checked_add(u64::from(len))?;
        if end > seg_len || len == 0 {
            return None;
        }
        if flags & DELETE != 0 {
            each(name, session, Out::Delete { offset, len });
            continue;
        }
        let tail = tails.get_mut(session)?;
        let first = if flags & FIRST != 0 { r.varint()? } else { (*tail)? };
        let count = if flags & COUNT != 0 { u32::try_from(r.varint()?).ok()? } else { 1 };
        if count == 0 {
            return None;
        }
        *tail = first.checked_add(u64::from(count));
        let d = r.varint()?;
        // Zigzag: times may go back.
        let delta = (d >> 1) as i64 ^ -((d & 1) as i64);
        let at = times.get_mut(session)?;
        *at = at.checked_add_signed(delta)?;
        let at = UnixMillis(*at);
        let items = if flags & HEAD != 0 { r.varint()? } else { 0 };
        stored.clear();
        for _ in 0..items {
            stored.push(match r.byte()? {
                0 => Stored::ClientAnswer,
                1 => Stored::ApprovalDecided,
                2 => Stored::Unreadable,
                3 => {
                    let n = usize::try_from(r.varint()?).ok()?;
                    Stored::Record(r.take(n)?)
                }
                _ => return None,
            });
        }
        let snapshot = match flags & SNAPSHOT {
            0 => None,
            _ => Some(u32::try_from(r.varint()?).ok().filter(|k| *k < count)?),
        };
        let run = BatchLoc { first, count, len, seg: id, offset };
        each(name, session, Out::Events { run, at, stored: &stored, snapshot });
    }
    // The last frame ends where the segment does.
    (r.at == body.len() && end == seg_len).then_some(())
}

/// Collects a walk's frames into a sidecar's bytes.
struct Recorder<'l> {
    limits: &'l Limits,
    sessions: HashMap<String, u64>,
    /// Per session (by number): where its last events frame so far ended, and when.
    tails: Vec<Option<u64>>,
    times: Vec<u64>,
    names: Vec<u8>,
    body: Vec<u8>,
    frames: u64,
    end: u64,
    damaged: bool,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Recorder<'_> {
    fn session(&mut self, name: &str) -> u64 {
        if let Some(k) = self.sessions.get(name) {
            return *k;
        }
        let k = self.sessions.len() as u64;
        self.sessions.insert(name.to_owned(), k);
        self.tails.push(None);
        self.times.push(0);
        put_varint(&mut self.names, name.len() as u64);
        self.names.extend_from_slice(name.as_bytes());
        k
    }
}

impl Visit for Recorder<'_> {
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)> {
        for f in g.frames {
            let k = self.session(g.session(f));
            let StoredHead { last_at: at, stored, snapshot } = match f.kind {
                FrameKindInfo::Events { .. } => {
                    BatchHead::stored_of_frame(g.frame_bytes(f), self.limits)
                }
                FrameKindInfo::Delete => StoredHead::default(),
            };
            let tail = self.tails.get_mut(k as usize);
            let flags = match f.kind {
                FrameKindInfo::Delete => DELETE,
                FrameKindInfo::Events { first, count } => {
                    let known = tail.as_ref().is_some_and(|t| **t == Some(first));
                    if let Some(t) = tail {
                        *t = first.checked_add(u64::from(count));
                    }
                    (if known { 0 } else { FIRST })
                        | (if count == 1 { 0 } else { COUNT })
                        | (if stored.is_empty() { 0 } else { HEAD })
                        | (if snapshot.is_none() { 0 } else { SNAPSHOT })
                }
            };
            self.body.push(flags);
            put_varint(&mut self.body, k);
            put_varint(&mut self.body, f.offset.saturating_sub(self.end));
            put_varint(&mut self.body, u64::from(f.len));
            self.end = f.offset + u64::from(f.len);
            self.frames += 1;
            if let FrameKindInfo::Events { first, count } = f.kind {
                if flags & FIRST != 0 {
                    put_varint(&mut self.body, first);
                }
                if flags & COUNT != 0 {
                    put_varint(&mut self.body, u64::from(count));
                }
                let last = self.times.get_mut(k as usize);
                let delta = at.get().wrapping_sub(last.as_deref().copied().unwrap_or(0)) as i64;
                put_varint(&mut self.body, ((delta << 1) ^ (delta >> 63)) as u64);
                if let Some(t) = last {
                    *t = at.get();
                }
                if flags & HEAD != 0 {
                    put_varint(&mut self.body, stored.len() as u64);
                }
                for s in stored {
                    match s {
                        Stored::ClientAnswer => self.body.push(0),
                        Stored::ApprovalDecided => self.body.push(1),
                        Stored::Unreadable => self.body.push(2),
                        Stored::Record(bytes) => {
                            self.body.push(3);
                            put_varint(&mut self.body, bytes.len() as u64);
                            self.body.extend_from_slice(bytes);
                        }
                    }
                }
                if let Some(k) = snapshot {
                    put_varint(&mut self.body, u64::from(k));
                }
            }
        }
        Ok(())
    }

    fn damage(&mut self, _: &Damage, _: Option<&GroupView<'_>>) -> Flow {
        self.damaged = true;
        Flow::Stop
    }
}

/// Writes the sidecar of sealed segment `id` (open as `file`) in `dir`: walks the segment,
/// then creates, writes and syncs the sidecar and syncs the directory. Returns false, writing
/// nothing, when the segment holds damage (it is then scanned on open, and the damage
/// reported there).
pub(crate) fn write(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
    file: &Arc<dyn IoFile>,
    limits: &Limits,
) -> Result<bool, IoFailure> {
    let seg = dir.join(id.file_name());
    let mut rec = Recorder {
        limits,
        sessions: HashMap::new(),
        tails: Vec::new(),
        times: Vec::new(),
        names: Vec::new(),
        body: Vec::new(),
        frames: 0,
        end: SEGMENT_HEADER_LEN as u64,
        damaged: false,
    };
    let mut buf = Vec::new();
    let walk = walk_segment(&**file, id, false, limits, &mut buf, &mut rec)
        .map_err(|e| IoFailure::new(format!("reading segment {} to index it", seg.display()), e))?;
    if rec.damaged || walk.first.is_some() || walk.end != walk.len {
        return Ok(false);
    }
    let tail = tail_crc(&**file, walk.len)
        .map_err(|e| IoFailure::new(format!("reading segment {}", seg.display()), e))?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + rec.names.len() + rec.body.len() + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&id.0.to_le_bytes());
    bytes.extend_from_slice(&walk.len.to_le_bytes());
    bytes.extend_from_slice(&tail.to_le_bytes());
    bytes.extend_from_slice(&(rec.sessions.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&rec.frames.to_le_bytes());
    bytes.extend_from_slice(&rec.names);
    bytes.extend_from_slice(&rec.body);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let path = dir.join(names::sidecar(id));
    let failed = |what: &str| {
        let what = format!("{what} the sidecar index {}", path.display());
        move |e| IoFailure::new(what, e)
    };
    // One a crash left half-written, or one of an earlier segment of this id.
    if io.entry_kind(&path).map_err(failed("looking at"))?.is_some() {
        io.remove(&path).map_err(failed("removing"))?;
    }
    let side = io.create_new(&path).map_err(failed("creating"))?;
    side.write_all_at(&bytes, 0).map_err(failed("writing"))?;
    side.sync_data().map_err(failed("syncing"))?;
    io.sync_dir(dir).map_err(failed("syncing the directory after writing"))?;
    Ok(true)
}

/// Removes the sidecar of segment `id`, if it has one (the directory is not synced).
pub(crate) fn remove(io: &dyn Io, dir: &Path, id: SegmentId) -> Result<(), IoFailure> {
    let path = dir.join(names::sidecar(id));
    let failed = |what: &str| {
        let what = format!("{what} the sidecar index {}", path.display());
        move |e| IoFailure::new(what, e)
    };
    if io.entry_kind(&path).map_err(failed("looking at"))?.is_some() {
        io.remove(&path).map_err(failed("removing"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_back_and_overlong_ones_are_refused() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(Reader { bytes: &out, at: 0 }.varint(), Some(v));
        }
        assert_eq!(Reader { bytes: &[0xff; 11], at: 0 }.varint(), None);
        assert_eq!(Reader { bytes: &[0x80], at: 0 }.varint(), None);
    }
}
