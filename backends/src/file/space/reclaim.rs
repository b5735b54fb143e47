//! The reclaim thread the store owns, off the append path: writing the sidecar index of each
//! sealed segment (`sidecar`), removing segments that hold nothing needed, and compacting sealed
//! segments that are dead enough
//! ([`FileOptions::compact_when_dead`](crate::file::FileOptions::compact_when_dead)): their live
//! batches copied to the active segment and synced, then the segment removed. Each removal is
//! made durable before the index forgets the segment, so a deletion frame is never removed
//! before the frames it hides.
//!
//! A compaction never holds up an append for long: it reads what it copies with no lock held,
//! then writes it in chunks of at most [`CHUNK`] bytes, each under the writer's lock for one
//! `pwrite`, with a pause of [`PAUSE_FACTOR`] times as long as the chunk took, its wait for the
//! lock included (at least [`MIN_PAUSE`]), before the next. The wait is what adapts the pace to
//! the disk: the lock is held through each group's `fdatasync`, and every byte a chunk writes
//! is one more for the next group's `fdatasync` to flush, so chunks come no faster than about
//! one per four of the appenders' syncs. Its own `fdatasync` comes at the end, without the
//! writer's lock.
//!
//! What a chunk copies is checked, written and published with the writer's lock held, so no
//! group lands in between: a batch is copied only if it is still where the index found it and
//! no deletion of its session is queued or being written (a copy written after a deletion frame
//! would bring the session back on the next open).
//!
//! Only a failure of the append path poisons the store: writing or syncing copies to the active
//! segment, or finding the lock file is no longer the one this writer locked (looked at before
//! anything is removed or written). Every other failure of the thread's work (measuring,
//! reading or opening a segment, writing or syncing a sidecar, removing a file, syncing the
//! directory) is reported ([`FileStats::reclaim_failures`](crate::file::FileStats),
//! [`StoreMetrics::reclaim_failures`](crate::StoreMetrics), `FileStore::reclaim_problem`, and a
//! `tracing` warning with feature `tracing`) and the work tried again after [`RETRY_FAILED`],
//! or sooner when more space is wanted. Damage compaction finds in a batch it copies leaves
//! that segment alone: never compacted again, reported the same way, its other batches read as
//! before; the segment is removed once nothing in it is needed.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use stepjournal_codec::batch::Frame;

use super::sidecar;
use crate::file::commit::segment::IoFailure;
use crate::file::commit::state::{Core, State, lock};
use crate::file::commit::write::{LockLost, lock_lost, sync_active, write_frames_in};
use crate::file::format::layout::SegmentId;
use crate::file::index::{BatchLoc, Compaction, Reclaim};
use crate::file::io::IoFile;

/// The most bytes one chunk of a compaction writes.
const CHUNK: u64 = 64 << 10;
/// A compaction pauses this many times as long as it held the writer's lock for a chunk.
const PAUSE_FACTOR: u32 = 4;
/// The shortest pause between two chunks.
const MIN_PAUSE: Duration = Duration::from_micros(500);
/// How long the thread waits before looking again at a segment it could not finish (a batch
/// whose session's deletion was queued).
const RETRY: Duration = Duration::from_millis(2);

/// How long the thread waits before trying again work that failed off the append path (less
/// when more space is wanted).
const RETRY_FAILED: Duration = Duration::from_secs(1);

/// The reclaim thread's life: it sleeps until space is wanted, frees what it can, and ends
/// once the store stops. A failure of the append path poisons the store, as a failed group
/// does; any other is reported and tried again later.
pub(crate) fn run_reclaimer(core: &Core) {
    // Whether the last pass failed off the append path, so the next is due after a while.
    let mut retry = false;
    loop {
        let mut st = lock(&core.state);
        while !st.reclaim_wanted && !st.stopping {
            if retry {
                let (guard, waited) = core
                    .reclaim_wake
                    .wait_timeout(st, RETRY_FAILED)
                    .unwrap_or_else(PoisonError::into_inner);
                st = guard;
                if waited.timed_out() {
                    st.reclaim_wanted = true;
                }
            } else {
                st = core.reclaim_wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
        }
        if st.stopping {
            st.reclaim_wanted = false;
            core.reclaim_idle.notify_all();
            return;
        }
        st.reclaim_wanted = false;
        st.reclaiming = true;
        drop(st);
        let done = reclaim(core);
        let mut st = lock(&core.state);
        st.reclaiming = false;
        retry = false;
        match done {
            Ok(Pass::Done) => {}
            Ok(Pass::Again) => {
                st.reclaim_wanted = true;
                st = pause(core, st, RETRY);
            }
            Err(Failed::Append(f)) => poison(&mut st, &f),
            Err(Failed::Off(f)) => {
                report(core, &mut st, f.to_string());
                retry = true;
            }
        }
        if !st.reclaim_wanted || st.poisoned.is_some() {
            st.reclaim_wanted = false;
            core.reclaim_idle.notify_all();
        }
    }
}

/// A failure of the reclaim thread's work.
#[derive(Debug)]
enum Failed {
    /// Of the append path (copies written to or synced in the active segment), or the lock
    /// lost: it poisons the store.
    Append(IoFailure),
    /// Of work off the append path: reported, and tried again later.
    Off(IoFailure),
}

impl Failed {
    fn into_inner(self) -> IoFailure {
        match self {
            Failed::Append(f) | Failed::Off(f) => f,
        }
    }
}

/// Reports a failure off the append path, or damage found, kept as the last such problem.
fn report(core: &Core, st: &mut State, problem: String) {
    core.counters.reclaim_failures.fetch_add(1, Ordering::Relaxed);
    #[cfg(feature = "tracing")]
    tracing::warn!(journal = %core.dir.display(), problem = %problem, "stepjournal reclaim failed; tried again later");
    st.reclaim_problem = Some(problem);
}

/// Refuses to remove or write anything once the lock file is no longer the file this writer
/// locked, as the append path does: the store stops.
fn check_lock(core: &Core) -> Result<(), Failed> {
    match lock_lost(core, "reclaiming space") {
        None => Ok(()),
        Some(LockLost::Replaced(f)) => Err(Failed::Append(f)),
        Some(LockLost::Unknown(f)) => Err(Failed::Off(f)),
    }
}

/// Waits `how_long`, or less if the store stops.
fn pause<'a>(
    core: &'a Core,
    st: MutexGuard<'a, State>,
    how_long: Duration,
) -> MutexGuard<'a, State> {
    if st.stopping {
        return st;
    }
    core.reclaim_wake.wait_timeout(st, how_long).unwrap_or_else(PoisonError::into_inner).0
}

fn poison(st: &mut State, f: &IoFailure) {
    st.poisoned.get_or_insert_with(|| f.to_string());
    // With no leader, nothing is queued; a leader clears them when it sees the poison.
    if !st.leading {
        st.pending.clear();
    }
}

/// Waits until the reclaim thread has nothing left to do now (or the store is poisoned or
/// stopping).
pub(crate) fn wait_reclaimed(core: &Core) {
    let mut st = lock(&core.state);
    while (st.reclaim_wanted || st.reclaiming) && st.poisoned.is_none() && !st.stopping {
        st = core.reclaim_idle.wait(st).unwrap_or_else(PoisonError::into_inner);
    }
}

/// How a pass ended.
enum Pass {
    /// Nothing is left to free.
    Done,
    /// A segment could not be finished now: look again shortly.
    Again,
}

/// Removes every segment that holds nothing needed (while opening, before any append).
pub(crate) fn remove_unneeded(core: &Core) -> Result<(), IoFailure> {
    loop {
        let next = {
            let st = lock(&core.state);
            st.index.unneeded(st.active)
        };
        match next {
            None => return Ok(()),
            Some(id) => remove_segment(core, id).map_err(Failed::into_inner)?,
        }
    }
}

/// Frees space until nothing more qualifies, or the store stops.
fn reclaim(core: &Core) -> Result<Pass, Failed> {
    let policy = Compaction {
        dead_at_least: core.options.compact_dead_at_least(),
        chunk: CHUNK.min(core.options.max_group_bytes),
    };
    loop {
        let next = {
            let st = lock(&core.state);
            if st.stopping || st.poisoned.is_some() {
                return Ok(Pass::Done);
            }
            match st.index.unmeasured(st.active) {
                Some(id) => Some(Next::Measure(id)),
                None => st.index.reclaim(st.active, &policy).map(Next::Reclaim),
            }
        };
        match next {
            None => return write_sidecars(core),
            Some(Next::Measure(id)) => measure(core, id)?,
            Some(Next::Reclaim(Reclaim::Remove(id))) => remove_segment(core, id)?,
            Some(Next::Reclaim(Reclaim::Compact(id, live))) => {
                if !compact(core, id, &live)? {
                    return Ok(Pass::Again);
                }
            }
        }
    }
}

/// What a pass does next.
enum Next {
    /// Learn a sealed segment's length.
    Measure(SegmentId),
    /// Remove or compact a segment.
    Reclaim(Reclaim),
}

/// Notes the length of sealed segment `id` in the index.
fn measure(core: &Core, id: SegmentId) -> Result<(), Failed> {
    let at = || format!("the length of segment {}", core.segment_path(id).display());
    let file = core.files.get(id).map_err(|e| Failed::Off(IoFailure::new(at(), e)))?;
    let len = file.len().map_err(|e| Failed::Off(IoFailure::new(at(), e)))?;
    if let Some(s) = lock(&core.state).index.segments.get_mut(&id) {
        s.len = Some(len);
    }
    Ok(())
}

/// Writes the sidecar index of every sealed segment that has none yet.
fn write_sidecars(core: &Core) -> Result<Pass, Failed> {
    loop {
        let next = {
            let st = lock(&core.state);
            if st.stopping || st.poisoned.is_some() {
                return Ok(Pass::Done);
            }
            st.index.without_sidecar(st.active)
        };
        let Some(id) = next else { return Ok(Pass::Done) };
        let file = core.files.get(id).map_err(|e| {
            let what = format!("opening segment {} to index it", core.segment_path(id).display());
            Failed::Off(IoFailure::new(what, e))
        })?;
        check_lock(core)?;
        // A segment with damage in it gets none: it is scanned, and the damage reported, on open.
        sidecar::write(&*core.io, &core.dir, id, &file, &core.options.limits)
            .map_err(Failed::Off)?;
        if let Some(s) = lock(&core.state).index.segments.get_mut(&id) {
            s.sidecar = true;
        }
    }
}

/// Removes segment `id` and its sidecar, and syncs the directory; only then does the index
/// forget it. Tried again after a failure, a removal already made is no failure.
fn remove_segment(core: &Core, id: SegmentId) -> Result<(), Failed> {
    let path = core.segment_path(id);
    check_lock(core)?;
    // The sidecar first: one left without its segment would be no harm (a writable open
    // removes it), but neither would a segment left without its sidecar.
    sidecar::remove(&*core.io, &core.dir, id).map_err(Failed::Off)?;
    match core.io.remove(&path) {
        Ok(()) => {}
        // Removed by an earlier try whose directory sync failed.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            let what = format!("removing segment {}", path.display());
            return Err(Failed::Off(IoFailure::new(what, e)));
        }
    }
    core.io.sync_dir(&core.dir).map_err(|e| {
        let what = format!("syncing directory {} after removing {id}", core.dir.display());
        Failed::Off(IoFailure::new(what, e))
    })?;
    lock(&core.state).index.forget(id);
    core.files.forget(id);
    Ok(())
}

/// Copies the live batches of segment `id` to the active segment, in throttled chunks, then
/// makes the copies durable; afterwards the segment holds nothing live and the next round
/// removes it. Returns whether every batch was copied (false: one was skipped, or the store
/// stops). A batch found damaged leaves the segment alone from then on (reported; the batches
/// already copied stay copied).
fn compact(core: &Core, id: SegmentId, live: &[(String, BatchLoc)]) -> Result<bool, Failed> {
    let path = core.segment_path(id);
    if !lock(&core.state).index.segments.contains_key(&id) {
        return Ok(true);
    }
    let file = core.files.get(id).map_err(|e| {
        Failed::Off(IoFailure::new(format!("opening segment {} to compact it", path.display()), e))
    })?;
    let mut all = true;
    let mut rest = live;
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 0u64;
        while let Some((_, run)) = rest.get(n) {
            if n > 0 && bytes + u64::from(run.len) > CHUNK.min(core.options.max_group_bytes) {
                break;
            }
            bytes += u64::from(run.len);
            n += 1;
        }
        let (chunk, later) = rest.split_at(n);
        rest = later;
        let frames = match read_live(core, id, &file, chunk)? {
            Live::Frames(frames) => frames,
            Live::Damaged(problem) => {
                let mut st = lock(&core.state);
                if let Some(s) = st.index.segments.get_mut(&id) {
                    s.damaged = true;
                }
                core.counters.damaged_segments.fetch_add(1, Ordering::Relaxed);
                report(core, &mut st, problem);
                drop(st);
                sync_active(core).map_err(Failed::Append)?;
                return Ok(true);
            }
        };
        let (copied, held) = copy_chunk(core, chunk, &frames).map_err(Failed::Append)?;
        all &= copied;
        let st = lock(&core.state);
        if st.stopping {
            return Ok(false);
        }
        let st = pause(core, st, (held * PAUSE_FACTOR).max(MIN_PAUSE));
        if st.stopping {
            return Ok(false);
        }
    }
    sync_active(core).map_err(Failed::Append)?;
    Ok(all)
}

/// What reading a chunk's batches found.
enum Live {
    /// Each frame, checked to be the batch the index says.
    Frames(Vec<Vec<u8>>),
    /// A frame that is not: what is wrong, and where.
    Damaged(String),
}

/// Reads the frames of `chunk` from segment `id`, each checked to be the batch the index says.
fn read_live(
    core: &Core,
    id: SegmentId,
    file: &Arc<dyn IoFile>,
    chunk: &[(String, BatchLoc)],
) -> Result<Live, Failed> {
    let mut frames = Vec::with_capacity(chunk.len());
    for (session, run) in chunk {
        let at = || format!("segment {} at byte {}", core.segment_path(id).display(), run.offset);
        let mut frame = vec![0u8; run.len as usize];
        file.read_exact_at(&mut frame, run.offset).map_err(|e| {
            Failed::Off(IoFailure::new(format!("reading {} to compact it", at()), e))
        })?;
        match Frame::parse(&frame, &core.options.limits) {
            Ok((f, len)) if f.count == run.count && len == frame.len() => {}
            other => {
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok(_) => format!("not the batch of {session} the index expects"),
                };
                return Ok(Live::Damaged(format!(
                    "compacting {}: the batch of {session} from seq {} is damaged ({why}); the \
                     segment is left as it is and its other batches read as before",
                    at(),
                    run.first
                )));
            }
        }
        frames.push(frame);
    }
    Ok(Live::Frames(frames))
}

/// Writes the batches of `chunk` that may still be copied as one group (not synced) and
/// publishes their new homes, all under the writer's lock. Returns false if a batch was left
/// for later because a deletion of its session is queued (one deleted or moved since it was
/// looked up is dead here: nothing to copy), and how long it took, the wait for the lock
/// included.
fn copy_chunk(
    core: &Core,
    chunk: &[(String, BatchLoc)],
    frames: &[Vec<u8>],
) -> Result<(bool, Duration), IoFailure> {
    let held = Instant::now();
    let mut w = lock(&core.writer);
    let mut later = false;
    let keep: Vec<bool> = {
        let st = lock(&core.state);
        chunk
            .iter()
            .map(|(session, run)| {
                let deleting = st.pending.get(session.as_str()).is_some_and(|p| p.deleting);
                later |= deleting;
                !deleting && st.index.is_home(session, run)
            })
            .collect()
    };
    let refs: Vec<&[u8]> =
        frames.iter().zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f.as_slice()).collect();
    if refs.is_empty() {
        return Ok((!later, held.elapsed()));
    }
    let written = write_frames_in(core, &mut w, &refs, false)?;
    let mut st = lock(&core.state);
    let kept = chunk.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c);
    for ((session, run), offset) in kept.zip(written.offsets(refs.iter().map(|f| f.len()))) {
        st.index.moved(session, run.first, written.seg, offset);
    }
    drop(st);
    let held = held.elapsed();
    drop(w);
    Ok((!later, held))
}
