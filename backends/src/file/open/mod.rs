//! Opening a journal: the writer lock taken (a writable open), then three steps, so that no
//! decision is made inside an I/O loop:
//!
//! 1. `scan` reads: every entry named like a segment looked at, then each segment in order (a
//!    sealed segment with a sidecar index that still describes it from the sidecar), its frames
//!    fed to the index builder, up to the first damage. It gathers facts and writes nothing.
//! 2. `decide` judges, a pure function of those facts: what to keep aside, cut and remove, which
//!    sidecar indexes to keep, where appends go on and the torn tail to report; or a refusal.
//! 3. `apply` carries the decision out (a writable open only), in an order safe to crash in;
//!    then segments left with nothing needed are removed, and appends are accepted.
//!
//! Nothing is written before the whole directory has been read and judged: a refusal leaves the
//! files as they were. Batches that do not fit their session are found when the index is built
//! from the scan, before anything is written; salvage then scans again, stopping before the
//! first of them.
//!
//! The modules, each using only those before it: `lock` (the writer lock), `aside` (keeping
//! bytes aside before a cut), `decide`, `scan`, `apply`.

mod apply;
mod aside;
mod decide;
pub(in crate::file) mod lock;
mod scan;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex};

use stepjournal_codec::DecodeError;

use crate::file::commit::segment::IoFailure;
use crate::file::commit::state::{Core, Counters, State, Writer};
use crate::file::files::SegmentFiles;
use crate::file::format::torn::TornTail;
use crate::file::index::builder::Misfit;
use crate::file::io::Io;
use crate::file::options::{FileOptions, OnCorruption};
use crate::file::space::reclaim::remove_unneeded;
use crate::{OpenError, StoreError};
use apply::apply;
use decide::decide;
use scan::scan;

fn io_error(context: String) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError::Store(StoreError::Io { context, source })
}

fn failure(f: IoFailure) -> OpenError {
    OpenError::Store(StoreError::Io { context: f.context, source: f.source })
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
        let writer = lock::is_held(&*io, dir).unwrap_or(true);
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

/// One scan of the directory, judged and repaired: the store, the first misfit found (nothing
/// changed on disk), or, read-only, a directory that changed under the scan.
fn open_at(
    io: Arc<dyn Io>,
    dir: &Path,
    options: FileOptions,
    stop: Option<&Misfit>,
) -> Result<Opened, OpenError> {
    let dir: PathBuf = dir.to_path_buf();
    let read_only = options.read_only;
    let dir_lock = if read_only { None } else { Some(lock::take(&*io, &dir)?) };
    let files = SegmentFiles::new(Arc::clone(&io), &dir, read_only, options.max_open_segments);
    // Sidecars are trusted only while the sessions they describe fit together: a session whose
    // sequence is not dense across them (a sidecar missing or misdescribing a batch) makes the
    // scan run again reading every segment itself.
    let mut trust_sidecars = true;
    let (recent, repairs, mut index) = loop {
        let Some(found) = scan(&*io, &dir, &options, stop, &files, trust_sidecars)? else {
            return Ok(Opened::Changed);
        };
        let repairs = decide(&dir, options.on_corruption, &found.segments, &found.sidecars)?;
        let used_sidecars =
            found.segments.iter().any(|s| matches!(s.found, decide::Found::Sidecar { .. }));
        let mut builder = found.builder;
        for id in &repairs.removals {
            builder.drop_segment(*id);
        }
        match builder.finish().into_index() {
            Ok(index) => break (found.recent, repairs, index),
            Err(_) if used_sidecars => trust_sidecars = false,
            Err(m) => return Ok(Opened::Misfit(m)),
        }
    };

    let mut writer = Writer::default();
    let (active, torn) = if read_only {
        (None, repairs.torn)
    } else {
        let (a, torn) = apply(&*io, &dir, repairs, &recent, &files, &mut index)?;
        let id = a.id;
        writer.active = Some(a);
        (Some(id), torn)
    };

    let core = Core {
        io,
        dir,
        options,
        state: Mutex::new(State { index, active, reclaim_wanted: true, ..State::default() }),
        wake: Condvar::new(),
        cohort_back: Condvar::new(),
        reclaim_wake: Condvar::new(),
        reclaim_idle: Condvar::new(),
        files,
        frame_hint: AtomicUsize::new(64),
        dir_lock: Mutex::new(dir_lock),
        writer: Mutex::new(writer),
        counters: Counters::default(),
    };
    if !read_only {
        remove_unneeded(&core).map_err(failure)?;
    }
    Ok(Opened::Store(Box::new(OpenedStore { core, torn })))
}
