//! Writing one group at the end of the active segment: starting the next segment when this one
//! is full (the old one sealed first), extending the file with zeros ahead of the data, and the
//! `fdatasync` when asked. Only the leader writes.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::segment::{IoFailure, create_segment};
use super::state::{Active, Core, Writer, lock};
use crate::file::format::layout::{
    GROUP_HEADER_LEN, GroupHeader, LOCK_FILE, SEGMENT_HEADER_LEN, SegmentId,
};
use crate::file::io::IoFile;

/// Where a group went.
pub(crate) struct Written {
    pub seg: SegmentId,
    /// The first frame's offset in `seg`; the others follow it back to back.
    pub body_at: u64,
    /// Whether the group started a new segment (sealing the one before it).
    pub sealed: bool,
    /// How long the write (and the sync) took.
    pub took: Duration,
}

impl Written {
    /// Each frame's offset in `seg`, given the frames' lengths in order.
    pub(crate) fn offsets(&self, lens: impl Iterator<Item = usize>) -> impl Iterator<Item = u64> {
        lens.scan(self.body_at, |at, len| {
            let offset = *at;
            *at += len as u64;
            Some(offset)
        })
    }
}

/// Writes `frames` as one group at the end of the active segment (starting a new segment
/// first if this one is full), then syncs it if `sync`. Called by the leader (and by a
/// compaction, through [`write_frames_in`]).
pub(crate) fn write_frames(
    core: &Core,
    frames: &[&[u8]],
    sync: bool,
) -> Result<Written, IoFailure> {
    write_frames_in(core, &mut lock(&core.writer), frames, sync)
}

/// [`write_frames`] with the writer's lock already held, so that a compaction can check what
/// it copies, write it and publish it with no group written in between.
///
/// A segment the group starts is in the index (and the active one) before the lock is let go:
/// whoever writes next may publish batches in it.
pub(crate) fn write_frames_in(
    core: &Core,
    w: &mut Writer,
    frames: &[&[u8]],
    sync: bool,
) -> Result<Written, IoFailure> {
    if let Some(first) = &w.failed {
        return Err(first.repeated());
    }
    let written = write_group_in(core, w, frames, sync);
    if let Err(f) = &written {
        w.failed.get_or_insert_with(|| f.repeated());
    }
    written
}

fn write_group_in(
    core: &Core,
    w: &mut Writer,
    frames: &[&[u8]],
    sync: bool,
) -> Result<Written, IoFailure> {
    let started = Instant::now();
    let Writer { active, buf, zeros, lock_checked, .. } = w;
    let Some(a) = active.as_mut() else {
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "no segment is open for writing");
        return Err(IoFailure::new(format!("appending to {}", core.dir.display()), e));
    };
    check_lock(core, lock_checked, sync, started)?;
    let body: usize = frames.iter().map(|f| f.len()).sum();
    let total = (GROUP_HEADER_LEN + body) as u64;
    let mut sealed = false;
    if a.len > SEGMENT_HEADER_LEN as u64 && a.len + total > core.options.segment_size {
        let file = rotate(core, a)?;
        let mut st = lock(&core.state);
        st.index.add_segment(a.id);
        core.files.put(a.id, Arc::clone(&file), true);
        st.active = Some(a.id);
        drop(st);
        sealed = true;
    }
    preallocate(core, a, zeros, a.len + total)?;
    buf.clear();
    buf.reserve(GROUP_HEADER_LEN + body);
    buf.resize(GROUP_HEADER_LEN, 0);
    for f in frames {
        buf.extend_from_slice(f);
    }
    let header = GroupHeader { len: body as u32, frames: frames.len() as u32, synced: a.synced };
    header.encode_into(buf);
    let body_at = a.len + GROUP_HEADER_LEN as u64;
    // The segment's path is built only for a message: formatting it cost a third of a buffered
    // append's instructions.
    let id = a.id;
    let path = || core.segment_path(id);
    a.file.write_all_at(buf, a.len).map_err(|e| {
        let what = format!(
            "writing {} bytes at byte {} of segment {}",
            buf.len(),
            a.len,
            path().display()
        );
        IoFailure::after_write(what, e)
    })?;
    a.len += buf.len() as u64;
    // With preallocation off the write extends the file.
    a.allocated = a.allocated.max(a.len);
    a.check();
    core.counters.groups.fetch_add(1, Ordering::Relaxed);
    core.counters.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
    if sync {
        let syncing = Instant::now();
        a.file.sync_data().map_err(|e| {
            IoFailure::after_write(format!("fdatasync of segment {}", path().display()), e)
        })?;
        core.counters.synced(syncing.elapsed());
        a.synced = a.len;
        a.check();
    }
    if buf.capacity() > 2 * core.options.max_group_bytes as usize {
        *buf = Vec::new();
    }
    // Only a synced group's time is learnt from (`cohort`): a group without a sync is not timed.
    let took = if sync { started.elapsed() } else { std::time::Duration::ZERO };
    Ok(Written { seg: a.id, body_at, sealed, took })
}

/// Makes every byte written to the active segment so far durable (one `fdatasync`, none when
/// it all is). The sync runs without the writer's lock, so groups go on being written beside
/// it; only what was written before it began is then known durable, and only if no write or
/// sync failed meanwhile (a group's sync that ran beside this one may have been the one told of
/// a failed writeback).
pub(crate) fn sync_active(core: &Core) -> Result<(), IoFailure> {
    let (id, file, upto) = {
        let w = lock(&core.writer);
        if let Some(first) = &w.failed {
            return Err(first.repeated());
        }
        match &w.active {
            Some(a) if a.synced < a.len => (a.id, Arc::clone(&a.file), a.len),
            _ => return Ok(()),
        }
    };
    let started = Instant::now();
    if let Err(e) = file.sync_data() {
        let what = format!("fdatasync of segment {}", core.segment_path(id).display());
        let f = IoFailure::after_write(what, e);
        lock(&core.writer).failed.get_or_insert_with(|| f.repeated());
        return Err(f);
    }
    core.counters.synced(started.elapsed());
    let mut w = lock(&core.writer);
    if let Some(first) = &w.failed {
        return Err(first.repeated());
    }
    // A segment sealed meanwhile was synced whole by its sealing.
    if let Some(a) = w.active.as_mut().filter(|a| a.id == id) {
        debug_assert!(upto <= a.len, "the active segment's data only grows: {upto} > {}", a.len);
        a.synced = a.synced.max(upto);
        a.check();
    }
    Ok(())
}

/// How long groups without a sync go on without looking at the lock file again.
pub(crate) const LOCK_CHECK_EVERY: Duration = Duration::from_millis(1);

/// Refuses to write once the lock file is no longer the file this writer locked (removed, or
/// replaced: another writer may have locked a new one and be writing): the store stops rather
/// than interleave its groups with another writer's. Looked at before every group that syncs (a
/// `stat`, next to an `fdatasync`), and at least every [`LOCK_CHECK_EVERY`] otherwise.
fn check_lock(
    core: &Core,
    checked: &mut Option<Instant>,
    sync: bool,
    now: Instant,
) -> Result<(), IoFailure> {
    if !sync && checked.is_some_and(|at| now.saturating_duration_since(at) < LOCK_CHECK_EVERY) {
        return Ok(());
    }
    match lock_lost(core, "writing") {
        None => {
            *checked = Some(now);
            Ok(())
        }
        Some(LockLost::Replaced(f) | LockLost::Unknown(f)) => Err(f),
    }
}

/// Why the lock file can no longer be trusted to keep other writers out.
pub(crate) enum LockLost {
    /// It is no longer the file this writer locked (removed, or replaced).
    Replaced(IoFailure),
    /// It could not be looked at.
    Unknown(IoFailure),
}

/// Whether the lock file is still the file this writer locked (`None`: it is, or the store
/// locks none); `stopped` names what stops if it is not ("writing").
pub(crate) fn lock_lost(core: &Core, stopped: &str) -> Option<LockLost> {
    let held = lock(&core.dir_lock);
    let dir_lock = held.as_ref()?;
    let path = || core.dir.join(LOCK_FILE);
    match dir_lock.is_current() {
        Ok(true) => None,
        Ok(false) => {
            let e = io::Error::other(
                "it was removed or replaced: another writer may have opened the journal",
            );
            let what = format!(
                "the lock file {} is no longer the file this writer locked, so {stopped} stopped",
                path().display()
            );
            Some(LockLost::Replaced(IoFailure::new(what, e)))
        }
        Err(e) => Some(LockLost::Unknown(IoFailure::new(
            format!("looking at the lock file {}", path().display()),
            e,
        ))),
    }
}

/// Makes sure the file holds at least `need` bytes: when the data would pass the zeros
/// already there, writes `preallocate` more bytes of zeros (never past the segment size
/// unless one group needs it) and syncs them.
fn preallocate(
    core: &Core,
    a: &mut Active,
    zeros: &mut Vec<u8>,
    need: u64,
) -> Result<(), IoFailure> {
    let step = core.options.preallocate;
    if step == 0 || need <= a.allocated {
        return Ok(());
    }
    let target =
        need.max(a.allocated.max(a.len).saturating_add(step).min(core.options.segment_size));
    let path = core.segment_path(a.id);
    // Zeroed once and kept: filling a megabyte of zeros again for every extension showed in a
    // buffered append's instructions.
    let n = (target - a.allocated) as usize;
    if zeros.len() < n {
        zeros.resize(n, 0);
    }
    let zeros = zeros.get(..n).unwrap_or_default();
    a.file.write_all_at(zeros, a.allocated).map_err(|e| {
        let what = format!(
            "writing {} bytes of zeros at byte {} of segment {}",
            zeros.len(),
            a.allocated,
            path.display()
        );
        IoFailure::new(what, e)
    })?;
    let started = Instant::now();
    a.file
        .sync_data()
        .map_err(|e| IoFailure::new(format!("fdatasync of segment {}", path.display()), e))?;
    core.counters.synced(started.elapsed());
    a.allocated = target;
    a.synced = a.len;
    a.check();
    Ok(())
}

/// Seals the active segment (its zeros cut off, synced whole, so only the newest segment
/// ever holds bytes that were not durable) and starts the next.
fn rotate(core: &Core, a: &mut Active) -> Result<Arc<dyn IoFile>, IoFailure> {
    let path = core.segment_path(a.id);
    let trimmed = a.allocated > a.len;
    if trimmed {
        a.file.set_len(a.len).map_err(|e| {
            IoFailure::new(format!("cutting segment {} at byte {}", path.display(), a.len), e)
        })?;
        a.allocated = a.len;
    }
    // The cut is made durable with the data.
    if trimmed || a.synced < a.len {
        let started = Instant::now();
        a.file
            .sync_data()
            .map_err(|e| IoFailure::new(format!("fdatasync of segment {}", path.display()), e))?;
        core.counters.synced(started.elapsed());
        a.synced = a.len;
    }
    debug_assert!(
        a.synced == a.len && a.len == a.allocated,
        "a sealed segment is synced whole and holds nothing past its data"
    );
    let id = SegmentId(a.id.0 + 1);
    let file = create_segment(&*core.io, &core.dir, id)?;
    *a = Active::new(id, Arc::clone(&file), SEGMENT_HEADER_LEN as u64);
    Ok(file)
}
