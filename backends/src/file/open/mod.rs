//! Opening a journal: lock, scan every segment once in order (a sealed segment with a sidecar
//! index that still describes it is read from the sidecar instead), decide what damage means,
//! apply the decision (cut a torn tail, remove a half-created segment), then accept appends.
//!
//! Nothing is written before the whole directory has been read and judged: a refusal leaves the
//! files as they were.

mod aside;

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex};

use super::commit::answer::Answers;
use super::commit::segment::{IoFailure, create_segment};
use super::commit::state::{Active, Core, Counters, State, Writer};
use super::files::SegmentFiles;
use super::format::heads::BatchHead;
use super::format::layout::{LOCK_FILE, SEGMENT_HEADER_LEN, SegmentId};
use super::format::names;
use super::format::torn::TornTail;
use super::format::walk::{Damage, Flow, FrameKindInfo, GroupView, Verdict, Visit, walk_segment};
use super::index::BatchLoc;
use super::index::builder::{IndexBuilder, Misfit};
use super::io::{EntryKind, Io, IoFile};
use super::options::{FileOptions, OnCorruption};
use super::space::reclaim::remove_unneeded;
use super::space::sidecar::{self, Loaded};
use aside::set_aside;
use stepjournal_codec::{DecodeError, Limits};

use crate::{OpenError, StoreError};

/// What opening will change on disk, decided before anything is changed.
#[derive(Debug)]
enum Repair {
    /// Cut the segment at this length (a torn tail, or salvage).
    Cut { id: SegmentId, file: Arc<dyn IoFile>, at: u64 },
    /// Remove the segment (its header is torn, or salvage drops it).
    Remove { id: SegmentId },
}

/// Bytes of a segment to copy aside before they are cut.
#[derive(Debug)]
struct Aside {
    id: SegmentId,
    file: Arc<dyn IoFile>,
    bytes: Range<u64>,
}

/// The newest segment kept, where appends go on.
#[derive(Debug)]
struct Newest {
    id: SegmentId,
    file: Arc<dyn IoFile>,
    /// Where its data ends (and the next group goes).
    len: u64,
    /// Whether opening cuts it there (a torn tail, or zeros ahead of the data): the cut is
    /// synced with it.
    cut: bool,
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError::Store(StoreError::Io { context, source })
}

fn failure(f: IoFailure) -> OpenError {
    OpenError::Store(StoreError::Io { context: f.context, source: f.source })
}

fn not_a_segment(path: PathBuf, d: &Damage) -> OpenError {
    let what = format!(
        "its header is not one this journal writes ({}), and it is not what a crash leaves while \
         creating a segment",
        d.problem.to_decode_error()
    );
    OpenError::NotASegment { path, what }
}

fn corruption(path: &Path, d: &Damage, last: bool) -> OpenError {
    let why = if !last {
        "inside a sealed segment"
    } else if d.problem.inconsistent() {
        "intact bytes that contradict themselves"
    } else {
        "followed by data written after this point was durable"
    };
    OpenError::Store(StoreError::Corrupt {
        context: format!(
            "segment {} at byte {} ({why}; this is not a torn write: refusing to open; \
             OnCorruption::TruncateAtCorruption keeps what precedes it)",
            path.display(),
            d.offset
        ),
        source: d.problem.to_decode_error(),
    })
}

/// Adds each intact group's frames to the index being built. With `stop` (salvage after a misfit), the
/// group that holds the frame at `stop` is refused, and the walk stops there.
struct Indexer<'a> {
    builder: &'a mut IndexBuilder,
    seg: SegmentId,
    stop: Option<&'a Misfit>,
    limits: &'a Limits,
}

impl Visit for Indexer<'_> {
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)> {
        if let Some(m) = self.stop.filter(|m| m.seg == self.seg)
            && let Some(i) = g.frames.iter().position(|f| f.offset >= m.offset)
        {
            return Err((i, m.reason()));
        }
        for f in g.frames {
            let s = g.session(f);
            match f.kind {
                FrameKindInfo::Events { first, count } => {
                    let run =
                        BatchLoc { first, count, len: f.len, seg: self.seg, offset: f.offset };
                    // A batch of one event (the usual) is known from the header the walk read.
                    let one = f.first_record.filter(|_| count == 1);
                    let head = one
                        .and_then(|(kind, at)| BatchHead::of_one(kind, at))
                        .unwrap_or_else(|| BatchHead::of_frame(g.frame_bytes(f), self.limits));
                    self.builder.events(s, run, head);
                }
                FrameKindInfo::Delete => self.builder.delete(s, self.seg),
            }
        }
        Ok(())
    }

    fn damage(&mut self, _: &Damage, _: Option<&GroupView<'_>>) -> Flow {
        Flow::Stop
    }
}

/// How many times a read-only open reads the directory again when a writer changed it under the
/// read.
const READ_ATTEMPTS: u32 = super::race::ATTEMPTS;

/// Opens the journal. A read-only open beside a live writer reads a consistent set of segments:
/// see [`open_read_only`].
pub(crate) fn open(
    io: Arc<dyn Io>,
    dir: &Path,
    options: FileOptions,
) -> Result<OpenedStore, OpenError> {
    options.validate()?;
    if options.read_only {
        return open_read_only(io, dir, options);
    }
    match open_once(io, dir, options)? {
        Some(opened) => Ok(opened),
        // Only a read-only scan reports a changed directory (a writer holds the lock).
        None => Err(changing(dir, None)),
    }
}

/// A read-only open, which takes no lock, races the writer's rotation and compaction: a
/// segment listed may be removed before it is read (its live batches moved by compaction to a
/// segment the listing does not hold), and the newest segment is being written while it is
/// read. So the scan starts again, from a new listing, whenever a listed segment is gone; and a
/// refusal that a race can cause (damage, batches that do not fit) is reported only once it is
/// found twice in a row, or when no writer holds the lock (the directory is then still).
fn open_read_only(
    io: Arc<dyn Io>,
    dir: &Path,
    options: FileOptions,
) -> Result<OpenedStore, OpenError> {
    let mut last: Option<String> = None;
    for attempt in 0..READ_ATTEMPTS {
        super::race::pause(attempt);
        let e = match open_once(Arc::clone(&io), dir, options) {
            Ok(Some(opened)) => return Ok(opened),
            Ok(None) => continue,
            Err(
                e @ (OpenError::Store(StoreError::Corrupt { .. }) | OpenError::NotASegment { .. }),
            ) => e,
            Err(e) => return Err(e),
        };
        let text = e.to_string();
        let writer = io.lock_is_held(&dir.join(LOCK_FILE)).unwrap_or(true);
        if !writer || last.as_deref() == Some(text.as_str()) {
            return Err(e);
        }
        last = Some(text);
    }
    Err(changing(dir, last))
}

/// The journal in `dir` kept changing under every attempt to read it.
fn changing(dir: &Path, last: Option<String>) -> OpenError {
    let found = last.map(|l| format!("; the last attempt found: {l}")).unwrap_or_default();
    let e = io::Error::new(
        io::ErrorKind::Interrupted,
        format!(
            "its segments changed under each of {READ_ATTEMPTS} attempts to read them (a live \
             writer rotating or compacting){found}"
        ),
    );
    io_error(format!("reading the journal directory {}", dir.display()))(e)
}

/// One scan of the directory; in salvage mode, a misfit found at the end of the scan makes the
/// scan run again, stopping before it. `None`: read-only, and a listed segment was gone.
fn open_once(
    io: Arc<dyn Io>,
    dir: &Path,
    options: FileOptions,
) -> Result<Option<OpenedStore>, OpenError> {
    let mut stop = None;
    loop {
        match open_at(Arc::clone(&io), dir, options, stop.as_ref())? {
            Opened::Store(opened) => return Ok(Some(*opened)),
            Opened::Changed => return Ok(None),
            Opened::Misfit(m) => {
                let earlier =
                    stop.as_ref().is_none_or(|s: &Misfit| (m.seg, m.offset) < (s.seg, s.offset));
                if options.on_corruption == OnCorruption::Refuse || !earlier {
                    return Err(OpenError::Store(StoreError::Corrupt {
                        context: format!(
                            "segment {} at byte {} (intact batches that do not fit their \
                             session: refusing to open; OnCorruption::TruncateAtCorruption \
                             keeps what precedes it)",
                            dir.join(m.seg.file_name()).display(),
                            m.offset
                        ),
                        source: DecodeError::Malformed { reason: m.reason() },
                    }));
                }
                stop = Some(m);
            }
        }
    }
}

/// An opened journal: its insides, the writer lock (none when read-only), and the torn tail
/// found at the newest segment's end (cut unless read-only).
pub(crate) struct OpenedStore {
    pub core: Core,
    pub torn: Option<TornTail>,
}

enum Opened {
    Store(Box<OpenedStore>),
    /// Sessions do not fit together; nothing was changed on disk.
    Misfit(Misfit),
    /// Read-only: a segment listed was gone when it was read (the writer removed it; its live
    /// batches may be in a segment the listing does not hold).
    Changed,
}

fn open_at(
    io: Arc<dyn Io>,
    dir: &Path,
    options: FileOptions,
    stop: Option<&Misfit>,
) -> Result<Opened, OpenError> {
    let dir: PathBuf = dir.to_path_buf();
    let read_only = options.read_only;
    let dir_lock = if read_only {
        None
    } else {
        let existed = io.list(&dir).is_ok();
        io.create_dir_all(&dir)
            .map_err(io_error(format!("creating the journal directory {}", dir.display())))?;
        if !existed {
            // The new directory's own entry must be durable before anything in it counts.
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            io.sync_dir(parent)
                .map_err(io_error(format!("syncing directory {}", parent.display())))?;
        }
        let lock_path = dir.join(LOCK_FILE);
        match io
            .try_lock(&lock_path)
            .map_err(io_error(format!("locking {}", lock_path.display())))?
        {
            Some(l) => Some(l),
            None => return Err(OpenError::Locked { dir, lock: lock_path }),
        }
    };
    let listed = io
        .list(&dir)
        .map_err(io_error(format!("listing the journal directory {}", dir.display())))?;
    let mut ids: Vec<SegmentId> =
        listed.iter().filter_map(|n| SegmentId::from_file_name(n)).collect();
    ids.sort_unstable();

    let files = SegmentFiles::new(Arc::clone(&io), &dir, read_only, options.max_open_segments);
    let mut builder = IndexBuilder::default();
    let mut asides: Vec<Aside> = Vec::new();
    let mut torn: Option<TornTail> = None;
    let mut actions = Vec::new();
    let mut stopped = false;
    let mut buf = Vec::new();
    let mut kept: Option<Newest> = None;
    // Sealed segments read from their sidecars.
    let mut from_sidecars = std::collections::BTreeSet::new();
    // Every entry is looked at before any is opened (opening a named pipe would wait for a
    // writer): one that is not a regular file is refused, whatever else is found.
    for &id in &ids {
        let path = dir.join(id.file_name());
        match io
            .entry_kind(&path)
            .map_err(io_error(format!("looking at segment {}", path.display())))?
        {
            Some(EntryKind::File) => {}
            None if read_only => return Ok(Opened::Changed),
            None => {
                let e = io::Error::new(io::ErrorKind::NotFound, "removed since it was listed");
                return Err(io_error(format!("opening segment {}", path.display()))(e));
            }
            Some(kind) => {
                let what = format!("is {kind}, not a regular file");
                return Err(OpenError::NotASegment { path, what });
            }
        }
    }

    for (k, &id) in ids.iter().enumerate() {
        let path = dir.join(id.file_name());
        if stopped {
            actions.push(Repair::Remove { id });
            continue;
        }
        // Opened through the cache, which keeps it open while it has room (a journal of few
        // segments stays open whole) and closes others when the process is at its limit.
        let file = match files.get(id) {
            Ok(f) => f,
            Err(e) if read_only && e.kind() == io::ErrorKind::NotFound => {
                return Ok(Opened::Changed);
            }
            Err(e) => return Err(io_error(format!("opening segment {}", path.display()))(e)),
        };
        builder.add_segment(id);
        let last = k + 1 == ids.len();
        // Salvage scans every byte: it is asked for to find damage and stop before it.
        if !last
            && options.on_corruption == OnCorruption::Refuse
            && let Loaded::Frames(f) = sidecar::load(&*io, &dir, id, &*file, &options.limits)
        {
            kept = Some(Newest { id, file, len: f.len, cut: false });
            f.feed(&mut builder, id);
            from_sidecars.insert(id);
            continue;
        }
        let mut indexer = Indexer { builder: &mut builder, seg: id, stop, limits: &options.limits };
        let walk = walk_segment(&*file, id, last, &options.limits, &mut buf, &mut indexer)
            .map_err(io_error(format!("reading segment {}", path.display())))?;
        let Some(d) = &walk.first else {
            // Zeros the writer put ahead of its data may follow it: they are cut.
            let zeros = walk.end < walk.len;
            if zeros {
                actions.push(Repair::Cut { id, file: Arc::clone(&file), at: walk.end });
            }
            kept = Some(Newest { id, file, len: walk.end, cut: zeros });
            continue;
        };
        if options.on_corruption == OnCorruption::Refuse {
            match d.verdict {
                Verdict::Corruption => return Err(corruption(&path, d, last)),
                Verdict::NotASegment => return Err(not_a_segment(path, d)),
                Verdict::TornTail => {}
            }
        }
        stopped = true;
        // What is cut is kept aside first, unless it can be rebuilt (the header of a segment a
        // crash left half-created) or it is acknowledged data salvage gives up.
        let aside = match (d.verdict, &walk.torn) {
            (Verdict::TornTail, Some(t)) if t.damage.cut > 0 && t.len > 0 => {
                Some(t.damage.cut..t.damage.cut + t.len)
            }
            (Verdict::NotASegment, _) if walk.len > 0 => Some(0..walk.len),
            _ => None,
        };
        if let Some(bytes) = aside {
            asides.push(Aside { id, file: Arc::clone(&file), bytes });
        }
        if let Some(t) = &walk.torn {
            torn = Some(TornTail::new(&path, t));
        }
        if d.cut < SEGMENT_HEADER_LEN as u64 {
            builder.drop_segment(id);
            actions.push(Repair::Remove { id });
        } else {
            actions.push(Repair::Cut { id, file: Arc::clone(&file), at: d.cut });
            kept = Some(Newest { id, file, len: d.cut, cut: true });
        }
    }

    let mut index = match builder.finish().into_index() {
        Ok(index) => index,
        Err(m) => return Ok(Opened::Misfit(m)),
    };

    let mut writer = Writer::default();
    let mut active = None;
    if !read_only {
        for a in &asides {
            let kept = set_aside(&*io, &dir, a.id, &*a.file, a.bytes.clone()).map_err(failure)?;
            if let Some(t) = torn.as_mut().filter(|t| t.offset == a.bytes.start) {
                t.kept_in = Some(kept);
            }
        }
        if !asides.is_empty() {
            // The copies are durable before anything they hold is cut.
            io.sync_dir(&dir).map_err(io_error(format!("syncing directory {}", dir.display())))?;
        }
        for a in &actions {
            if let Repair::Remove { id } = a {
                let path = dir.join(id.file_name());
                io.remove(&path)
                    .map_err(io_error(format!("removing segment {}", path.display())))?;
            }
        }
        // Sidecars kept are those read: the others are damaged, left by a segment since removed
        // or cut, or of the segment appends go on in (the reclaim thread writes them anew).
        if let Some(k) = &kept {
            from_sidecars.remove(&k.id);
        }
        for sid in listed.iter().filter_map(|n| names::sidecar_id(n)) {
            if !from_sidecars.contains(&sid) {
                sidecar::remove(&*io, &dir, sid).map_err(failure)?;
            }
        }
        for sid in &from_sidecars {
            if let Some(s) = index.segments.get_mut(sid) {
                s.sidecar = true;
            }
        }
        // Always: a process that died may have created or removed a segment without syncing
        // the directory, and what it left is about to be counted on.
        io.sync_dir(&dir).map_err(io_error(format!("syncing directory {}", dir.display())))?;
        for a in &actions {
            if let Repair::Cut { id, file, at } = a {
                let path = dir.join(id.file_name());
                let what = format!("cutting segment {} at byte {at}", path.display());
                file.set_len(*at).map_err(io_error(what.clone()))?;
                file.sync_data().map_err(io_error(what))?;
            }
        }
        let a = match kept {
            Some(Newest { id, file, len, cut }) => {
                if !cut {
                    // Bytes a crashed process wrote may not be durable yet: later groups claim
                    // them as durable, so make them so.
                    file.sync_data().map_err(io_error(format!(
                        "fdatasync of segment {}",
                        dir.join(id.file_name()).display()
                    )))?;
                }
                Active::new(id, file, len)
            }
            None => {
                let id = SegmentId(ids.last().map_or(1, |l| l.0 + 1));
                let file = create_segment(&*io, &dir, id).map_err(failure)?;
                index.add_segment(id);
                Active::new(id, file, SEGMENT_HEADER_LEN as u64)
            }
        };
        active = Some(a.id);
        files.put(a.id, Arc::clone(&a.file), true);
        writer.active = Some(a);
    }

    let core = Core {
        io,
        dir,
        options,
        state: Mutex::new(State { index, active, reclaim_wanted: true, ..State::default() }),
        wake: Condvar::new(),
        cohort_back: Condvar::new(),
        reclaim_wake: Condvar::new(),
        reclaim_idle: Condvar::new(),
        answers: Answers::default(),
        files,
        frame_hint: AtomicUsize::new(64),
        dir_lock,
        writer: Mutex::new(writer),
        counters: Counters::default(),
    };
    if !read_only {
        remove_unneeded(&core).map_err(failure)?;
    }
    Ok(Opened::Store(Box::new(OpenedStore { core, torn })))
}
