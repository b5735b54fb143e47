//! [`FileStore`]: the shared log behind the [`JournalStore`] trait.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use stepjournal_codec::batch;
use stepjournal_codec::{DecodeError, Record, Seq, SessionId, Stamped};

use super::commit::{Active, Op, Request};
use super::index::{Index, Run};
use super::io::{Io, IoFile, IoLock, RealIo};
use super::layout::SegmentId;
use super::options::FileOptions;
use crate::{AppendAck, AppendError, Durability, JournalStore, OpenError, StoreError};

/// Locks a mutex; a panic while it was held does not make the data unusable here (every update
/// under these locks is applied after its checks), so the guard is taken back.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How much the in-memory index holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexSize {
    /// Sessions with at least one event.
    pub sessions: u64,
    /// Batches indexed: one entry per batch, however many events it holds.
    pub batches: u64,
    /// Segment files in use.
    pub segments: u64,
}

/// Counters of what the store did since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Batches appended (acknowledged).
    pub appends: u64,
    /// Groups written (one write each).
    pub groups: u64,
    /// `fdatasync` calls on segments.
    pub syncs: u64,
    /// Bytes written to segments.
    pub bytes: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub appends: AtomicU64,
    pub groups: AtomicU64,
    pub syncs: AtomicU64,
    pub bytes: AtomicU64,
}

/// What every appender and reader shares, under one lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// What is acknowledged: the index of written batches.
    pub index: Index,
    /// The tail of each session that has batches queued or being written, counting them: the
    /// compare-and-set is checked against it. A session with nothing pending has no entry.
    pub pending: HashMap<String, u64>,
    /// Requests waiting for the next group, in arrival order.
    pub queue: VecDeque<Request>,
    /// Whether a leader is writing a group (or has been chosen to write the next).
    pub leading: bool,
    /// The first write or sync failure; once set, every call fails naming it.
    pub poisoned: Option<String>,
    /// The segment being appended to.
    pub active: Option<SegmentId>,
}

impl State {
    pub(crate) fn check_poison(&self) -> Result<(), StoreError> {
        match &self.poisoned {
            Some(first) => Err(StoreError::Poisoned { first_failure: first.clone() }),
            None => Ok(()),
        }
    }

    fn pending_tail(&self, session: &str) -> u64 {
        self.pending.get(session).copied().unwrap_or_else(|| self.index.tail(session))
    }
}

/// The leader's own: the active segment and the group buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub active: Option<Active>,
    pub buf: Vec<u8>,
}

/// The file backend: one shared, segmented, append-only log for every session in a directory,
/// with group commit. See the [module documentation](super).
#[derive(Debug)]
pub struct FileStore {
    pub(crate) io: Arc<dyn Io>,
    pub(crate) dir: PathBuf,
    pub(crate) options: FileOptions,
    pub(crate) state: Mutex<State>,
    /// Locked only by the leader, never while waiting for `state`.
    pub(crate) writer: Mutex<Writer>,
    pub(crate) counters: Counters,
    /// The writer lock on the directory (None when read-only).
    pub(crate) _dir_lock: Option<Box<dyn IoLock>>,
}

impl FileStore {
    /// Opens (creating it if needed) the journal in directory `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileStore, OpenError> {
        Self::open_with(Arc::new(RealIo), dir.as_ref(), options)
    }

    /// Opens the journal in `dir` read-only: no lock is taken and nothing is written; the store
    /// holds what was valid when it was opened.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<FileStore, OpenError> {
        Self::open(dir, FileOptions::new().read_only(true))
    }

    /// Opens the journal in `dir` through `io` (the real file system or a simulated disk).
    pub fn open_with(
        io: Arc<dyn Io>,
        dir: &Path,
        options: FileOptions,
    ) -> Result<FileStore, OpenError> {
        super::open::open(io, dir, options)
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    /// What the store did since it was opened.
    pub fn stats(&self) -> FileStats {
        let c = &self.counters;
        FileStats {
            appends: c.appends.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
        }
    }

    /// How much the in-memory index holds.
    pub fn index_size(&self) -> IndexSize {
        let st = lock(&self.state);
        IndexSize {
            sessions: st.index.sessions.len() as u64,
            batches: st.index.sessions.values().map(|l| l.runs.len() as u64).sum(),
            segments: st.index.segments.len() as u64,
        }
    }

    pub(crate) fn segment_path(&self, id: SegmentId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    fn read_only_error(&self) -> StoreError {
        StoreError::ReadOnly { location: self.dir.display().to_string() }
    }

    /// Queues a request (under the same lock as its compare-and-set, so the queue's order is the
    /// order the checks passed in) and waits for its group; the caller leads when no one is.
    fn submit(&self, mut st: MutexGuard<'_, State>, request: Request) -> Result<(), StoreError> {
        let slot = Arc::clone(&request.slot);
        st.queue.push_back(request);
        if st.leading {
            drop(st);
        } else {
            st.leading = true;
            drop(st);
            self.lead();
        }
        loop {
            match slot.wait() {
                super::commit::Wake::Lead => self.lead(),
                super::commit::Wake::Done(result) => return result,
            }
        }
    }
}

impl JournalStore for FileStore {
    fn max_durability(&self) -> Durability {
        Durability::Synced
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        if events.is_empty() {
            return Err(AppendError::EmptyBatch);
        }
        if self.options.read_only {
            return Err(self.read_only_error().into());
        }
        let mut frame = Vec::with_capacity(64 + events.len() * 64);
        batch::encode_into(&mut frame, session, expected, events, &self.options.limits)
            .map_err(|source| AppendError::Encode { session: session.clone(), source })?;
        let count = events.len() as u32;
        let next = expected.add(u64::from(count));
        let request = Request::new(
            session.as_str(),
            Op::Events { first: expected.get(), count },
            frame,
            durability >= Durability::Synced,
        );
        let mut st = lock(&self.state);
        st.check_poison()?;
        let actual = Seq(st.pending_tail(session.as_str()));
        if actual != expected {
            return Err(AppendError::Conflict { expected, actual });
        }
        match st.pending.get_mut(session.as_str()) {
            Some(tail) => *tail = next.get(),
            None => {
                st.pending.insert(session.as_str().to_owned(), next.get());
            }
        }
        self.submit(st, request)?;
        Ok(AppendAck { first: expected, next, durability })
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let range = range.start.get()..range.end.get();
        let runs: Vec<(Run, Arc<dyn IoFile>)> = {
            let st = lock(&self.state);
            st.check_poison()?;
            let Some(log) = st.index.sessions.get(session.as_str()) else {
                return Ok(Vec::new());
            };
            let mut runs = Vec::new();
            for run in log.overlapping(range.start, range.end) {
                let Some(seg) = st.index.segments.get(&run.seg) else {
                    return Err(StoreError::Corrupt {
                        context: format!("session {session} seq {}", run.first),
                        source: DecodeError::Malformed {
                            reason: format!("segment {} is missing", run.seg),
                        },
                    });
                };
                runs.push((*run, Arc::clone(&seg.file)));
            }
            runs
        };
        let mut out = Vec::new();
        super::read::read_batches(
            &self.dir,
            &self.options.limits,
            session.as_str(),
            &runs,
            |_, r, _| {
                if range.contains(&r.seq.get()) {
                    out.push(r.to_record()?);
                }
                Ok(())
            },
        )?;
        Ok(out)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let st = lock(&self.state);
        st.check_poison()?;
        Ok(Seq(st.index.tail(session.as_str())))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let st = lock(&self.state);
        st.check_poison()?;
        Ok(st.index.sessions.keys().map(|s| SessionId::from(s.as_str())).collect())
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        if self.options.read_only {
            return Err(self.read_only_error());
        }
        let mut frame = Vec::new();
        if batch::encode_delete_into(&mut frame, session, &self.options.limits).is_err() {
            // An id that cannot be written was never stored.
            return Ok(false);
        }
        let request = Request::new(session.as_str(), Op::Delete, frame, true);
        let mut st = lock(&self.state);
        st.check_poison()?;
        if st.pending_tail(session.as_str()) == 0 {
            return Ok(false);
        }
        st.pending.insert(session.as_str().to_owned(), 0);
        self.submit(st, request)?;
        Ok(true)
    }
}
