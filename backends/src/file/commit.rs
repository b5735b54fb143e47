//! Group commit: appenders queue their batches; one of them, the leader, writes every queued
//! batch with one write and (if any asked for it) one `fdatasync`, then wakes each appender of
//! the group through its own slot and hands the leadership to the first appender still queued.
//!
//! Invariants:
//! - One leader at a time (`State::leading`), so groups are written one after the other and a
//!   group is written only after the previous group's sync returned.
//! - A group is published to the index (acknowledged) only after its write, and its sync when
//!   one was asked, succeeded; groups are published in the order they were written, so the order
//!   of acknowledgements is the order on disk.
//! - A failed write or sync fails that group's callers with the I/O error, poisons the store and
//!   fails every queued request; nothing is retried.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use super::index::{Reclaim, Run};
use super::io::{Io, IoFile};
use super::layout::{
    GROUP_HEADER_LEN, GroupHeader, SEGMENT_HEADER_LEN, SegmentId, encode_segment_header,
};
use super::store::{FileStore, Writer, lock};
use stepjournal_codec::batch::Frame;

use crate::StoreError;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Append `count` events from `first`.
    Events { first: u64, count: u32 },
    /// Delete the session.
    Delete,
}

/// One caller's batch, waiting for a group.
#[derive(Debug)]
pub(crate) struct Request {
    pub session: String,
    pub op: Op,
    /// The encoded frame.
    pub frame: Vec<u8>,
    /// Whether the caller asked for `fdatasync` before its acknowledgement.
    pub sync: bool,
    pub slot: Arc<Slot>,
}

impl Request {
    pub(crate) fn new(session: &str, op: Op, frame: Vec<u8>, sync: bool) -> Request {
        Request { session: session.to_owned(), op, frame, sync, slot: Arc::new(Slot::default()) }
    }
}

/// Why a waiting caller woke.
#[derive(Debug)]
pub(crate) enum Wake {
    /// It leads the next group.
    Lead,
    /// Its group is done.
    Done(Result<(), StoreError>),
}

const WAITING: u8 = 0;
const LEAD: u8 = 1;
const DONE: u8 = 2;

/// Where one caller waits: its own state, and its own thread to unpark, so waking it wakes no one
/// else.
#[derive(Debug)]
pub(crate) struct Slot {
    /// WAITING, LEAD (lead the next group) or DONE (`result` is set).
    state: AtomicU8,
    result: Mutex<Option<Result<(), StoreError>>>,
    /// The caller's thread.
    thread: Thread,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            state: AtomicU8::new(WAITING),
            result: Mutex::new(None),
            thread: std::thread::current(),
        }
    }
}

impl Slot {
    /// Blocks until the slot is told to lead or is done. Called only by the slot's own thread.
    pub(crate) fn wait(&self) -> Wake {
        loop {
            match self.state.load(Ordering::Acquire) {
                DONE => {
                    let result = lock(&self.result).take();
                    return Wake::Done(result.unwrap_or(Ok(())));
                }
                LEAD => {
                    if self
                        .state
                        .compare_exchange(LEAD, WAITING, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return Wake::Lead;
                    }
                }
                // Parking may wake spuriously: the loop looks again.
                _ => std::thread::park(),
            }
        }
    }

    fn lead(&self) {
        self.state.store(LEAD, Ordering::Release);
        self.thread.unpark();
    }

    fn finish(&self, result: Result<(), StoreError>) {
        *lock(&self.result) = Some(result);
        self.state.store(DONE, Ordering::Release);
        self.thread.unpark();
    }
}

/// The segment being appended to.
#[derive(Debug)]
pub(crate) struct Active {
    pub id: SegmentId,
    pub file: Arc<dyn IoFile>,
    /// Bytes written: where the next group goes.
    // Invariant: synced <= len <= allocated; every byte before `synced` is durable.
    pub len: u64,
    /// Bytes known durable.
    pub synced: u64,
    /// The file's length: past `len` it holds zeros, written and synced ahead of the data so
    /// that a synced append changes no file metadata.
    pub allocated: u64,
}

impl Active {
    pub(crate) fn new(id: SegmentId, file: Arc<dyn IoFile>, len: u64) -> Active {
        Active { id, file, len, synced: len, allocated: len }
    }
}

/// A failed write or sync: what was being done, and the OS error.
#[derive(Debug)]
pub(crate) struct Failure {
    pub context: String,
    pub source: io::Error,
}

impl Failure {
    pub(crate) fn new(context: String, source: io::Error) -> Failure {
        Failure { context, source }
    }

    /// The error a caller of the failed group gets.
    pub(crate) fn to_store_error(&self) -> StoreError {
        StoreError::Io {
            context: self.context.clone(),
            source: io::Error::new(self.source.kind(), self.source.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

/// Creates segment `id` in `dir`: the file, its header, synced, and the directory synced.
pub(crate) fn create_segment(
    io: &dyn Io,
    dir: &std::path::Path,
    id: SegmentId,
) -> Result<Arc<dyn IoFile>, Failure> {
    let path = dir.join(id.file_name());
    let at = |what: &str| format!("{what} segment {}", path.display());
    let file = io.create_new(&path).map_err(|e| Failure::new(at("creating"), e))?;
    file.write_all_at(&encode_segment_header(id), 0)
        .map_err(|e| Failure::new(at("writing the header of"), e))?;
    file.sync_data().map_err(|e| Failure::new(at("fdatasync of the new"), e))?;
    io.sync_dir(dir).map_err(|e| {
        Failure::new(format!("syncing directory {} after creating {}", dir.display(), id), e)
    })?;
    Ok(file)
}

/// Where a group went.
struct Written {
    seg: SegmentId,
    /// Each request's frame offset in `seg`.
    offsets: Vec<u64>,
    /// A segment the group started.
    new_segment: Option<Arc<dyn IoFile>>,
}

impl FileStore {
    /// Writes one group: the requests queued now (up to the group size). Called by the one
    /// leader; hands the leadership on before waking the group's callers.
    pub(crate) fn lead(&self) {
        let group: Vec<crate::file::commit::Request> = {
            let mut st = lock(&self.state);
            let mut group = Vec::new();
            let mut bytes = 0u64;
            while let Some(r) = st.queue.front() {
                let len = r.frame.len() as u64;
                if !group.is_empty() && bytes + len > self.options.max_group_bytes {
                    break;
                }
                bytes += len;
                if let Some(r) = st.queue.pop_front() {
                    group.push(r);
                }
            }
            group
        };
        let outcome = if group.is_empty() {
            None
        } else {
            let frames: Vec<&[u8]> = group.iter().map(|r| r.frame.as_slice()).collect();
            Some(self.write_frames(&frames, group.iter().any(|r| r.sync)))
        };

        let mut st = lock(&self.state);
        let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(group.len());
        let mut purge = false;
        match outcome {
            None => {}
            Some(Ok(w)) => {
                if let Some(file) = w.new_segment {
                    st.index.add_segment(w.seg, file);
                    st.active = Some(w.seg);
                    purge = true;
                }
                let mut appends = 0;
                for (req, offset) in group.iter().zip(&w.offsets) {
                    match req.op {
                        Op::Events { first, count } => {
                            let len = req.frame.len() as u32;
                            let run = Run { first, count, len, seg: w.seg, offset: *offset };
                            let pushed = st.index.push(&req.session, run);
                            debug_assert!(pushed.is_ok(), "the compare-and-set admitted {run:?}");
                            if st.pending.get(&req.session) == Some(&run.end()) {
                                st.pending.remove(&req.session);
                            }
                            appends += 1;
                        }
                        Op::Delete => {
                            st.index.delete(&req.session, w.seg);
                            if st.pending.get(&req.session) == Some(&0) {
                                st.pending.remove(&req.session);
                            }
                            purge = true;
                        }
                    }
                    results.push(Ok(()));
                }
                self.counters.appends.fetch_add(appends, Ordering::Relaxed);
            }
            Some(Err(f)) => {
                st.poisoned.get_or_insert_with(|| f.to_string());
                st.pending.clear();
                results.extend(group.iter().map(|_| Err(f.to_store_error())));
            }
        }
        if purge && st.poisoned.is_none() {
            drop(st);
            let purged = self.reclaim();
            st = lock(&self.state);
            if let Err(f) = purged {
                st.poisoned.get_or_insert_with(|| f.to_string());
                st.pending.clear();
            }
        }
        let mut refused = Vec::new();
        let next = if st.poisoned.is_some() {
            refused.extend(st.queue.drain(..));
            st.leading = false;
            None
        } else if let Some(r) = st.queue.front() {
            Some(Arc::clone(&r.slot))
        } else {
            st.leading = false;
            None
        };
        let poison = st.check_poison().err();
        drop(st);
        if let Some(next) = next {
            next.lead();
        }
        for (req, result) in group.iter().zip(results) {
            req.slot.finish(result);
        }
        for req in refused {
            let first_failure = match &poison {
                Some(StoreError::Poisoned { first_failure }) => first_failure.clone(),
                _ => String::new(),
            };
            req.slot.finish(Err(StoreError::Poisoned { first_failure }));
        }
    }

    /// Writes `frames` as one group at the end of the active segment (starting a new segment
    /// first if this one is full), then syncs it if `sync`. Called only by the leader.
    fn write_frames(&self, frames: &[&[u8]], sync: bool) -> Result<Written, Failure> {
        let mut w = lock(&self.writer);
        let Writer { active, buf } = &mut *w;
        let Some(a) = active.as_mut() else {
            let e =
                io::Error::new(io::ErrorKind::PermissionDenied, "no segment is open for writing");
            return Err(Failure::new(format!("appending to {}", self.dir.display()), e));
        };
        let body: usize = frames.iter().map(|f| f.len()).sum();
        let total = (GROUP_HEADER_LEN + body) as u64;
        let mut new_segment = None;
        if a.len > SEGMENT_HEADER_LEN as u64 && a.len + total > self.options.segment_size {
            new_segment = Some(self.rotate(a)?);
        }
        self.preallocate(a, a.len + total)?;
        buf.clear();
        buf.resize(GROUP_HEADER_LEN, 0);
        let mut offsets = Vec::with_capacity(frames.len());
        for f in frames {
            offsets.push(a.len + buf.len() as u64);
            buf.extend_from_slice(f);
        }
        let header =
            GroupHeader { len: body as u32, frames: frames.len() as u32, synced: a.synced };
        header.encode_into(buf);
        let path = self.segment_path(a.id);
        a.file.write_all_at(buf, a.len).map_err(|e| {
            let what = format!(
                "writing {} bytes at byte {} of segment {}",
                buf.len(),
                a.len,
                path.display()
            );
            Failure::new(what, e)
        })?;
        a.len += buf.len() as u64;
        self.counters.groups.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        if sync {
            a.file
                .sync_data()
                .map_err(|e| Failure::new(format!("fdatasync of segment {}", path.display()), e))?;
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            a.synced = a.len;
        }
        if buf.capacity() > 2 * self.options.max_group_bytes as usize {
            *buf = Vec::new();
        }
        Ok(Written { seg: a.id, offsets, new_segment })
    }

    /// Makes sure the file holds at least `need` bytes: when the data would pass the zeros
    /// already there, writes `preallocate` more bytes of zeros (never past the segment size
    /// unless one group needs it) and syncs them.
    fn preallocate(&self, a: &mut Active, need: u64) -> Result<(), Failure> {
        let step = self.options.preallocate;
        if step == 0 || need <= a.allocated {
            return Ok(());
        }
        let target =
            need.max(a.allocated.max(a.len).saturating_add(step).min(self.options.segment_size));
        let path = self.segment_path(a.id);
        let zeros = vec![0u8; (target - a.allocated) as usize];
        a.file.write_all_at(&zeros, a.allocated).map_err(|e| {
            let what = format!(
                "writing {} bytes of zeros at byte {} of segment {}",
                zeros.len(),
                a.allocated,
                path.display()
            );
            Failure::new(what, e)
        })?;
        a.file
            .sync_data()
            .map_err(|e| Failure::new(format!("fdatasync of segment {}", path.display()), e))?;
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        a.allocated = target;
        a.synced = a.len;
        Ok(())
    }

    /// Seals the active segment (its zeros cut off, synced whole, so only the newest segment
    /// ever holds bytes that were not durable) and starts the next.
    fn rotate(&self, a: &mut Active) -> Result<Arc<dyn IoFile>, Failure> {
        let path = self.segment_path(a.id);
        let trimmed = a.allocated > a.len;
        if trimmed {
            a.file.set_len(a.len).map_err(|e| {
                Failure::new(format!("cutting segment {} at byte {}", path.display(), a.len), e)
            })?;
            a.allocated = a.len;
        }
        // The cut is made durable with the data.
        if trimmed || a.synced < a.len {
            a.file
                .sync_data()
                .map_err(|e| Failure::new(format!("fdatasync of segment {}", path.display()), e))?;
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            a.synced = a.len;
        }
        let id = SegmentId(a.id.0 + 1);
        let file = create_segment(&*self.io, &self.dir, id)?;
        *a = Active::new(id, Arc::clone(&file), SEGMENT_HEADER_LEN as u64);
        Ok(file)
    }

    /// Frees space: removes every segment that holds nothing needed, and compacts sealed
    /// segments that are mostly dead (their live batches copied to the active segment and synced,
    /// then the segment removed). Each removal is made durable before the index forgets the
    /// segment, so a deletion frame is never removed before the frames it hides. Called only by
    /// the leader (or while opening).
    pub(crate) fn reclaim(&self) -> Result<(), Failure> {
        loop {
            let next = {
                let st = lock(&self.state);
                st.index.reclaim(st.active, self.options.segment_size)
            };
            match next {
                None => return Ok(()),
                Some(Reclaim::Remove(id)) => self.remove_segment(id)?,
                Some(Reclaim::Compact(id, live)) => self.compact(id, &live)?,
            }
        }
    }

    fn remove_segment(&self, id: SegmentId) -> Result<(), Failure> {
        let path = self.segment_path(id);
        self.io
            .remove(&path)
            .map_err(|e| Failure::new(format!("removing segment {}", path.display()), e))?;
        self.io.sync_dir(&self.dir).map_err(|e| {
            Failure::new(format!("syncing directory {} after removing {id}", self.dir.display()), e)
        })?;
        lock(&self.state).index.forget(id);
        Ok(())
    }

    /// Copies the live batches of segment `id` to the active segment, synced; afterwards the
    /// segment holds nothing live and the next round removes it.
    fn compact(&self, id: SegmentId, live: &[(String, Run)]) -> Result<(), Failure> {
        let path = self.segment_path(id);
        let file = lock(&self.state).index.segments.get(&id).map(|s| Arc::clone(&s.file));
        let Some(file) = file else { return Ok(()) };
        let mut frames = Vec::with_capacity(live.len());
        for (session, run) in live {
            let at = format!("segment {} at byte {}", path.display(), run.offset);
            let mut frame = vec![0u8; run.len as usize];
            file.read_exact_at(&mut frame, run.offset)
                .map_err(|e| Failure::new(format!("reading {at} to compact it"), e))?;
            match Frame::parse(&frame, &self.options.limits) {
                Ok((f, len)) if f.count == run.count && len == frame.len() => {}
                other => {
                    let why = match other {
                        Err(e) => e.to_string(),
                        Ok(_) => format!("not the batch of {session} the index expects"),
                    };
                    let e = io::Error::new(io::ErrorKind::InvalidData, why);
                    return Err(Failure::new(format!("compacting {at}: corrupt data"), e));
                }
            }
            frames.push(frame);
        }
        // Groups of at most `max_group_bytes`, the last one synced.
        let mut chunks: Vec<&[Vec<u8>]> = Vec::new();
        let mut start = 0;
        let mut bytes = 0u64;
        for (i, f) in frames.iter().enumerate() {
            if i > start && bytes + f.len() as u64 > self.options.max_group_bytes {
                chunks.push(frames.get(start..i).unwrap_or_default());
                start = i;
                bytes = 0;
            }
            bytes += f.len() as u64;
        }
        chunks.push(frames.get(start..).unwrap_or_default());
        let mut placed = Vec::with_capacity(frames.len());
        let mut new_segments = Vec::new();
        let last = chunks.len().saturating_sub(1);
        for (k, chunk) in chunks.iter().enumerate() {
            if chunk.is_empty() {
                continue;
            }
            let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            let w = self.write_frames(&refs, k == last)?;
            if let Some(f) = w.new_segment {
                new_segments.push((w.seg, f));
            }
            placed.extend(w.offsets.iter().map(|o| (w.seg, *o)));
        }
        let mut st = lock(&self.state);
        for (seg, file) in new_segments {
            st.index.add_segment(seg, file);
            st.active = Some(seg);
        }
        for ((session, run), (seg, offset)) in live.iter().zip(placed) {
            st.index.moved(session, run.first, seg, offset);
        }
        debug_assert!(
            st.index.segments.get(&id).is_none_or(|s| s.live == 0),
            "a compacted segment holds nothing live"
        );
        Ok(())
    }
}
