//! [`FileStore`]: the shared log behind the [`JournalStore`] trait.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use stepjournal_codec::batch;
use stepjournal_codec::{DecodeError, Record, Seq, SessionId, Stamped};

use super::commit::submit;
use super::index::BatchLoc;
use super::io::{Io, IoFile, IoLock, RealIo};
use super::open::{OpenedStore, open};
use super::options::FileOptions;
use super::queue::{GroupError, Request, RequestKind};
use super::read::read_batches;
use super::state::{Core, lock};
use super::torn::TornTail;
use crate::{AppendAck, AppendError, Durability, JournalStore, OpenError, StoreError};

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

/// The file backend: one shared, segmented, append-only log for every session in a directory,
/// with group commit. See the [module documentation](super).
#[derive(Debug)]
pub struct FileStore {
    core: Core,
    /// The torn tail opening found.
    torn: Option<TornTail>,
    /// The writer lock on the directory (None when read-only).
    _dir_lock: Option<Box<dyn IoLock>>,
}

impl FileStore {
    /// Opens (creating it if needed) the journal in directory `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileStore, OpenError> {
        Self::open_through(Arc::new(RealIo), dir.as_ref(), options)
    }

    /// Opens the journal in `dir` read-only: no lock is taken and nothing is written; the store
    /// holds what was valid when it was opened.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<FileStore, OpenError> {
        Self::open(dir, FileOptions::new().read_only(true))
    }

    /// Opens the journal in `dir` through `io` (the real file system or a simulated disk).
    /// Feature `testing`.
    #[cfg(feature = "testing")]
    pub fn open_with(
        io: Arc<dyn Io>,
        dir: &Path,
        options: FileOptions,
    ) -> Result<FileStore, OpenError> {
        Self::open_through(io, dir, options)
    }

    fn open_through(
        io: Arc<dyn Io>,
        dir: &Path,
        options: FileOptions,
    ) -> Result<FileStore, OpenError> {
        let OpenedStore { core, dir_lock, torn } = open(io, dir, options)?;
        Ok(FileStore { core, torn, _dir_lock: dir_lock })
    }

    /// The torn tail opening found at the newest segment's end, if there was one: how many bytes
    /// it held, the intact frames (sessions and sequence numbers) it held, and where a writable
    /// open kept a copy of it before cutting it. The zeros the writer puts ahead of its data are
    /// no torn tail. A crash leaves one; so do some kinds of damage that cannot be told from a
    /// crash (`docs/backends.md`), which is why it is reported.
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn.as_ref()
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.core.dir
    }

    /// Whether the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.core.options.read_only
    }

    /// What the store did since it was opened.
    pub fn stats(&self) -> FileStats {
        let c = &self.core.counters;
        FileStats {
            appends: c.appends.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
        }
    }

    /// How many appends and deletions wait for the next group (not the one being written).
    /// Feature `testing`: for tests that line appenders up behind a held sync
    /// (`SimDisk::hold_syncs`).
    #[cfg(feature = "testing")]
    pub fn queued(&self) -> usize {
        lock(&self.core.state).queue.len()
    }

    /// How much the in-memory index holds.
    pub fn index_size(&self) -> IndexSize {
        let st = lock(&self.core.state);
        IndexSize {
            sessions: st.index.sessions.len() as u64,
            batches: st.index.sessions.values().map(|l| l.runs.len() as u64).sum(),
            segments: st.index.segments.len() as u64,
        }
    }

    fn read_only_error(&self) -> StoreError {
        StoreError::ReadOnly { location: self.core.dir.display().to_string() }
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
        if self.core.options.read_only {
            return Err(self.read_only_error().into());
        }
        let mut frame = Vec::with_capacity(64 + events.len() * 64);
        batch::encode_into(&mut frame, session, expected, events, &self.core.options.limits)
            .map_err(|e| AppendError::Encode { session: session.clone(), source: Box::new(e) })?;
        let count = events.len() as u32;
        let next = expected.add(u64::from(count));
        let request = Request::new(
            session.as_str(),
            RequestKind::Events { first: expected.get(), count },
            frame,
            durability >= Durability::Synced,
        );
        let mut st = lock(&self.core.state);
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
        match submit(&self.core, st, request) {
            Ok(()) => Ok(AppendAck { first: expected, next, durability }),
            Err(GroupError::Store(e)) => Err(e.into()),
            Err(GroupError::Unknown { context, source }) => Err(AppendError::OutcomeUnknown {
                session: session.clone(),
                expected,
                reason: format!(
                    "{context} failed after the batch's bytes may have reached the segment; the \
                     store is poisoned: reopen it, which reads what landed"
                ),
                source: Some(source),
            }),
        }
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let range = range.start.get()..range.end.get();
        let runs: Vec<(BatchLoc, Arc<dyn IoFile>)> = {
            let st = lock(&self.core.state);
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
        read_batches(
            &self.core.dir,
            &self.core.options.limits,
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
        let st = lock(&self.core.state);
        st.check_poison()?;
        Ok(Seq(st.index.tail(session.as_str())))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let st = lock(&self.core.state);
        st.check_poison()?;
        Ok(st.index.sessions.keys().map(|s| SessionId::from_stored(s.as_str())).collect())
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        if self.core.options.read_only {
            return Err(self.read_only_error());
        }
        let mut frame = Vec::new();
        if batch::encode_delete_into(&mut frame, session, &self.core.options.limits).is_err() {
            // An id that cannot be written was never stored.
            return Ok(false);
        }
        let request = Request::new(session.as_str(), RequestKind::Delete, frame, true);
        let mut st = lock(&self.core.state);
        st.check_poison()?;
        if st.pending_tail(session.as_str()) == 0 {
            return Ok(false);
        }
        st.pending.insert(session.as_str().to_owned(), 0);
        match submit(&self.core, st, request) {
            Ok(()) => Ok(true),
            Err(GroupError::Store(e)) => Err(e),
            Err(GroupError::Unknown { context, source }) => Err(StoreError::Io { context, source }),
        }
    }
}
