//! Opening a file journal whose segment bytes are arbitrary, on the simulated disk.
//!
//! The input's first byte holds flags; the rest is cut into segment files before each
//! `SJOURNAL` (the segment magic), so a journal's segments concatenated are an input that
//! rebuilds that journal. A file is named by the id its header carries when that id is usable,
//! else by its place. With the *reseal* flag every checksum (segment header, group headers,
//! frames, records) is recomputed first, so the scan and the index are reached past the
//! checksums.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use stepjournal_backends::file::io::Io;
use stepjournal_backends::file::layout::{GROUP_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentId};
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileStore, OnCorruption};
use stepjournal_backends::file::{FileProblem, verify_dir_with};
use stepjournal_backends::{Durability, JournalStore, OpenError, StoreError};
use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped, UnixMillis};

use super::codec::{SMALL_LIMITS, reseal_frames_in};
use super::{ensure, le_u32, le_u64, put_u32};

const MAGIC: &[u8; 8] = b"SJOURNAL";
/// The most segment files an input makes.
const MAX_SEGMENTS: usize = 8;
/// Flag bits of the first byte.
const RESEAL: u8 = 1;
const SMALL: u8 = 2;

/// Where the `file_journal` target puts its journal on the simulated disk.
pub fn dir() -> PathBuf {
    PathBuf::from("/fuzz/journal")
}

/// Cuts `data` into segment files (before each magic) and names them.
fn segments(data: &[u8]) -> Vec<(SegmentId, Vec<u8>)> {
    let mut starts: Vec<usize> = Vec::new();
    if !data.starts_with(MAGIC) && !data.is_empty() {
        starts.push(0);
    }
    let mut i = 0;
    while i + MAGIC.len() <= data.len() {
        if data.get(i..i + MAGIC.len()) == Some(MAGIC.as_slice()) {
            starts.push(i);
            i += MAGIC.len();
        } else {
            i += 1;
        }
    }
    starts.truncate(MAX_SEGMENTS);
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(data.len());
        let bytes = data.get(start..end).unwrap_or_default().to_vec();
        let wanted = le_u64(&bytes, 16).filter(|id| (1..=1_000_000).contains(id));
        let id = match wanted {
            Some(id) if !used.contains(&id) => id,
            _ => (k as u64 + 1..).find(|id| !used.contains(id)).unwrap_or(u64::MAX),
        };
        used.insert(id);
        out.push((SegmentId(id), bytes));
    }
    out
}

/// Recomputes every checksum of a segment, its header naming `id`.
fn reseal_segment(id: SegmentId, seg: &mut [u8]) {
    if seg.len() < SEGMENT_HEADER_LEN {
        return;
    }
    if let Some(dst) = seg.get_mut(16..24) {
        dst.copy_from_slice(&id.0.to_le_bytes());
    }
    let crc = seg.get(..24).map(crc32fast::hash).unwrap_or(0);
    put_u32(seg, 24, crc);
    let mut pos = SEGMENT_HEADER_LEN;
    while pos + GROUP_HEADER_LEN <= seg.len() {
        let len = le_u32(seg, pos + 8).unwrap_or(0) as usize;
        let frames = le_u32(seg, pos + 12).unwrap_or(0) as usize;
        let body = pos + GROUP_HEADER_LEN;
        reseal_frames_in(seg, body, body.saturating_add(len), frames);
        let crc = seg.get(pos + 4..pos + GROUP_HEADER_LEN).map(crc32fast::hash).unwrap_or(0);
        put_u32(seg, pos, crc);
        pos = body.saturating_add(len);
    }
}

/// The segment files (resealed if the flags say so), the limits and whether it was resealed, as
/// an input of the `file_journal` target describes them.
pub fn journal_of_input(data: &[u8]) -> (Vec<(SegmentId, Vec<u8>)>, Limits, bool) {
    let (flags, rest) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
    let mut segs = segments(rest);
    if flags & RESEAL != 0 {
        for (id, bytes) in &mut segs {
            reseal_segment(*id, bytes);
        }
    }
    let limits = if flags & SMALL != 0 { SMALL_LIMITS } else { Limits::default() };
    (segs, limits, flags & RESEAL != 0)
}

/// A new simulated disk holding the segments, synced.
pub fn build_disk(segments: &[(SegmentId, Vec<u8>)]) -> Result<SimDisk, String> {
    let disk = SimDisk::new();
    let dir = dir();
    let io_err = |e: std::io::Error| format!("building the journal on the simulated disk: {e}");
    disk.create_dir_all(&dir).map_err(io_err)?;
    for (id, bytes) in segments {
        let file = disk.create_new(&dir.join(id.file_name())).map_err(io_err)?;
        file.write_all_at(bytes, 0).map_err(io_err)?;
        file.sync_data().map_err(io_err)?;
    }
    disk.sync_dir(&dir).map_err(io_err)?;
    Ok(disk)
}

/// A session's events, or the precise error reading them gave.
type Contents = Vec<(SessionId, Result<Vec<Record>, Damaged>)>;

/// A located corruption error met reading a session. Two are equal whatever they say: copies of
/// one batch may sit in two segments (compaction), and two opens may read different copies.
#[derive(Debug, Clone)]
struct Damaged(String);

impl PartialEq for Damaged {
    fn eq(&self, _: &Damaged) -> bool {
        true
    }
}

fn open(disk: &SimDisk, options: FileOptions) -> Result<FileStore, OpenError> {
    FileStore::open_with(Arc::new(disk.clone()), &dir(), options)
}

/// A read may fail only as corruption naming the segment and byte: a record whose checksum holds
/// but whose event does not decode is found when it is read, not when the journal is opened.
fn damaged(e: &StoreError, what: &str) -> Result<String, String> {
    match e {
        // A byte made into a record version past those this build reads: a newer format's bytes.
        StoreError::Corrupt { context, .. } | StoreError::NewerFormat { context, .. }
            if context.contains(".seg") && context.contains(" at byte ") =>
        {
            Ok(e.to_string())
        }
        other => Err(format!("{what}: a read failed other than as located corruption: {other}")),
    }
}

/// Every session's events, checked to be dense from 0 and to agree with the tail.
fn contents(store: &FileStore, what: &str) -> Result<Contents, String> {
    let sessions = store.sessions().map_err(|e| format!("{what}: sessions(): {e}"))?;
    ensure!(sessions.windows(2).all(|w| w.first() < w.get(1)), "{what}: sessions unsorted");
    let mut out = Vec::new();
    for s in sessions {
        let log = match store.read_all(&s) {
            Ok(log) => log,
            Err(e) => {
                let e = damaged(&e, &format!("{what}: reading {s}"))?;
                out.push((s, Err(Damaged(e))));
                continue;
            }
        };
        ensure!(!log.is_empty(), "{what}: session {s} is listed but holds nothing");
        for (i, r) in log.iter().enumerate() {
            ensure!(
                r.seq == Seq(i as u64) && r.session == s,
                "{what}: {s} event {i} is {} seq {}",
                r.session,
                r.seq
            );
        }
        let tail = store.tail(&s).map_err(|e| format!("{what}: tail of {s}: {e}"))?;
        ensure!(tail == Seq(log.len() as u64), "{what}: {s} has tail {tail}, {} events", log.len());
        let part = store
            .read(&s, Seq(1)..Seq(2))
            .map_err(|e| format!("{what}: reading {s} from seq 1: {e}"))?;
        ensure!(part.as_slice() == log.get(1..2).unwrap_or_default(), "{what}: {s} range read");
        out.push((s, Ok(log)));
    }
    Ok(out)
}

/// The first session whose events differ between `a` and `b`, and how.
fn first_difference(a: &Contents, b: &Contents) -> String {
    let summary = |c: &Contents, s: &SessionId| match c.iter().find(|(x, _)| x == s) {
        None => "absent".to_owned(),
        Some((_, Ok(log))) => format!("{} events", log.len()),
        Some((_, Err(e))) => e.0.clone(),
    };
    let sessions: BTreeSet<&SessionId> = a.iter().chain(b).map(|(s, _)| s).collect();
    sessions
        .into_iter()
        .find(|s| a.iter().find(|(x, _)| x == *s) != b.iter().find(|(x, _)| x == *s))
        .map(|s| format!("{s}: {} against {}", summary(a, s), summary(b, s)))
        .unwrap_or_default()
}

/// An open that failed must say what and where: corruption names the segment and the byte.
fn precise(e: &OpenError, what: &str) -> Result<(), String> {
    match e {
        OpenError::Store(
            StoreError::Corrupt { context, .. } | StoreError::NewerFormat { context, .. },
        ) => {
            ensure!(
                context.contains(".seg") && context.contains(" at byte "),
                "{what}: a corruption error that names no segment and byte: {e}"
            );
            Ok(())
        }
        // The newest segment's header never was one a writer wrote, nor a crash half-wrote.
        OpenError::NotASegment { path, .. } => {
            ensure!(
                path.extension().is_some_and(|x| x == "seg"),
                "{what}: a refusal that names no segment: {e}"
            );
            Ok(())
        }
        other => Err(format!("{what}: an error other than corruption on a sound disk: {other}")),
    }
}

/// Builds the journal the input describes and opens it read-only and writable, refusing and
/// salvaging corruption: no panic; refusals name segment and byte; read-only and writable opens
/// agree; salvage always opens; what opens is dense, survives reopening and a power loss
/// unchanged, and takes appends.
pub fn check_file_journal_bytes(data: &[u8]) -> Result<(), String> {
    let (segs, limits, _) = journal_of_input(data);
    let base = FileOptions::new().segment_size(4096).preallocate(4096).limits(limits);

    let disk = build_disk(&segs)?;
    let report = verify_dir_with(Arc::new(disk.clone()), &dir(), &limits, &mut |_, _| {});
    let mut refused = None;
    let mut salvaged = None;
    for mode in [OnCorruption::Refuse, OnCorruption::TruncateAtCorruption] {
        let what = format!("{mode:?}");
        let options = base.on_corruption(mode);
        let ro = open(&disk, options.read_only(true));
        let rw_disk = build_disk(&segs)?;
        let rw = open(&rw_disk, options);
        let (ro, rw) = match (ro, rw) {
            (Ok(ro), Ok(rw)) => (ro, rw),
            (Err(a), Err(b)) => {
                precise(&a, &format!("{what} read-only"))?;
                precise(&b, &what)?;
                // Salvage opens any damage; a newer format is no damage, and no mode cuts it.
                let newer = matches!(b, OpenError::Store(StoreError::NewerFormat { .. }));
                ensure!(mode == OnCorruption::Refuse || newer, "salvage refused to open: {b}");
                continue;
            }
            (Ok(_), Err(e)) => return Err(format!("{what}: read-only opens, writable fails: {e}")),
            (Err(e), Ok(_)) => return Err(format!("{what}: writable opens, read-only fails: {e}")),
        };
        // The torn tail each reports is the same, and what verify calls one when nothing else
        // stops opening.
        let mut cut = rw.torn_tail().cloned();
        if let Some(t) = &mut cut {
            ensure!(
                t.kept_in.is_some() == (t.offset > 0 && t.len > 0),
                "{what}: the torn tail's bytes are kept aside exactly when it held some: {t}"
            );
            t.kept_in = None;
            t.copies_removed.clear();
        }
        ensure!(
            ro.torn_tail() == cut.as_ref(),
            "{what}: read-only and writable opens report different torn tails: {:?} and {cut:?}",
            ro.torn_tail()
        );
        if mode == OnCorruption::Refuse
            && let Ok(report) = &report
        {
            let verified = report.findings.iter().find_map(|f| f.torn.as_ref());
            ensure!(
                verified == cut.as_ref(),
                "{what}: verify reports the torn tail {verified:?}, opening {cut:?}"
            );
        }
        let seen = contents(&ro, &format!("{what} read-only"))?;
        let kept = contents(&rw, &what)?;
        ensure!(
            seen == kept,
            "{what}: read-only and writable opens read different events: {}",
            first_difference(&seen, &kept)
        );
        drop(rw);
        let again = open(&rw_disk, options).map_err(|e| format!("{what}: reopening: {e}"))?;
        ensure!(contents(&again, &what)? == kept, "{what}: reopening changed the events");
        drop(again);
        let after_loss = rw_disk.crash_lose_unsynced();
        let store = open(&after_loss, options)
            .map_err(|e| format!("{what}: opening after a power loss: {e}"))?;
        ensure!(
            contents(&store, &what)? == kept,
            "{what}: a power loss after recovery changed the events"
        );
        takes_appends(&store, &kept).map_err(|e| format!("{what}: {e}"))?;
        if mode == OnCorruption::Refuse {
            refused = Some(kept);
        } else {
            salvaged = Some(kept);
        }
    }
    if let (Some(refused), Some(salvaged)) = (&refused, &salvaged) {
        ensure!(refused == salvaged, "salvage changed a journal that opens without it");
    }
    // Opening and verify walk the bytes the same way: what verify finds clean opens, and what
    // opens holds no problem verify reports other than one found only by reading records
    // (a record of an intact frame that is misdirected, damaged or does not decode).
    let report = report.as_ref().map_err(|e| format!("verify_dir failed on a sound disk: {e}"))?;
    match &refused {
        None => ensure!(
            !report.is_clean(),
            "verify finds nothing wrong, yet the journal does not open: {:?}",
            report.findings
        ),
        Some(_) => {
            let structural = report.findings.iter().find(|f| {
                !f.torn_tail
                    && !matches!(
                        f.problem,
                        FileProblem::Misdirected { .. }
                            | FileProblem::Payload(_)
                            | FileProblem::Record(_)
                            | FileProblem::NewerFormat(_)
                    )
            });
            ensure!(structural.is_none(), "the journal opens, yet verify reports {structural:?}");
        }
    }
    Ok(())
}

/// After recovery: each readable session whose id keeps the session-id rule takes an append at
/// its tail (a stored id that breaks it is refused, as on every write path), a new session one at
/// 0, both synced and read back.
fn takes_appends(store: &FileStore, kept: &Contents) -> Result<(), String> {
    let event = |n: u64| Stamped::at(UnixMillis(n), crate::sample::numbered(n));
    let fresh = SessionId::from_stored("fuzz-after-recovery");
    let mut targets: Vec<(SessionId, u64)> = kept
        .iter()
        .filter_map(|(s, log)| Some((s.clone(), log.as_ref().ok()?.len() as u64)))
        .filter(|(s, _)| *s != fresh && s.validate().is_ok())
        .take(3)
        .collect();
    if !kept.iter().any(|(s, _)| *s == fresh) {
        targets.push((fresh, 0));
    }
    for (s, tail) in &targets {
        store
            .append(s, Seq(*tail), &[event(*tail)], Durability::Synced)
            .map_err(|e| format!("appending to {s} at {tail} after recovery: {e}"))?;
        let log = store.read_all(s).map_err(|e| format!("reading {s} after an append: {e}"))?;
        ensure!(
            log.len() as u64 == tail + 1
                && log.last().map(|r| &r.event) == Some(&event(*tail).event),
            "{s}: the append after recovery does not read back"
        );
    }
    Ok(())
}
