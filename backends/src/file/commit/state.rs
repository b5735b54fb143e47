//! What a file store's callers share: the index, the pending tails and the queue under one
//! lock (with the condition variable the committer thread sleeps on); the active segment under
//! the leader's own lock; the counters.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::cohort::Cohort;
use super::queue::Request;
use super::room::Line;
use super::segment::IoFailure;
use crate::file::files::SegmentFiles;
use crate::file::format::layout::SegmentId;
use crate::file::index::Index;
use crate::file::io::{Io, IoFile, IoLock};
use crate::file::options::FileOptions;
use crate::{RunHead, StoreError};

/// Locks a mutex; a panic while it was held does not make the data unusable here (every update
/// under these locks is applied after its checks), so the guard is taken back.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub appends: AtomicU64,
    pub groups: AtomicU64,
    /// The most requests one group held.
    pub max_group: AtomicU64,
    pub syncs: AtomicU64,
    /// Appends that waited for room in the queue.
    pub waited_for_room: AtomicU64,
    /// Time spent in `fdatasync` of segments, in microseconds.
    pub sync_micros: AtomicU64,
    pub bytes: AtomicU64,
    /// Failures of the reclaim thread's work off the append path, and damage it found.
    pub reclaim_failures: AtomicU64,
    /// Segments compaction found damage in and left alone.
    pub damaged_segments: AtomicU64,
}

impl Counters {
    /// Counts one `fdatasync` of a segment that took `took`.
    pub(crate) fn synced(&self, took: std::time::Duration) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.sync_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// The pending map's hash: FxHash's rotate, xor and multiply, eight bytes at a time, where the
/// standard SipHash took 8% of a buffered append. It does not resist chosen collisions: the map
/// holds only sessions with batches in flight, so ids made to collide cost a scan of those.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.add(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            if let Some(head) = word.get_mut(..rest.len()) {
                head.copy_from_slice(rest);
            }
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A session with batches queued or being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Its tail once they land (0 after a queued deletion).
    pub tail: u64,
    /// Its head once they land, when one of them changes it (the default after a queued
    /// deletion); `None`: the index's.
    pub head: Option<RunHead>,
    /// Whether a deletion of the session is among them: compaction copies none of its batches
    /// until it landed (a copy written after the deletion frame would bring them back).
    pub deleting: bool,
}

/// What every appender and reader shares, under one lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// What is acknowledged: the index of written batches.
    pub index: Index,
    /// The tail of each session that has batches queued or being written, counting them: the
    /// compare-and-set is checked against it (0 after a queued deletion).
    // Invariant: an entry exists only while a request of its session is queued or being written
    // (so none while no leader is chosen), and none once the store is poisoned.
    pub pending: HashMap<Arc<str>, Pending, BuildHasherDefault<FastHasher>>,
    /// Requests waiting for the next group, in arrival order.
    pub queue: VecDeque<Request>,
    /// The queue's room (its bytes), and the appenders waiting for room in it.
    pub line: Line,
    /// Whether a leader is writing a group (or has been chosen to write the next): a caller of
    /// the sync API writing the group that holds its own request, or the committer thread.
    // Invariant: true while `queue` is not empty (a request is never queued without a leader to
    // write it), unless the store is poisoned and the queue is being failed.
    pub leading: bool,
    /// Whether the leadership is the committer thread's: it leads until nothing is left.
    // Invariant: implies `leading`.
    pub committer: bool,
    /// The store is being dropped: the committer writes what is queued, then ends.
    pub stopping: bool,
    /// The last group answered, and whether the next should wait for its appenders.
    pub cohort: Cohort,
    /// The first write or sync failure; once set, every call fails naming it.
    pub poisoned: Option<String>,
    /// The store was closed (`JournalStore::close`): where it is. Every call that enters
    /// from then on is refused; what was queued before is still written.
    pub closed: Option<String>,
    /// The segment being appended to.
    pub active: Option<SegmentId>,
    /// Whether the reclaim thread has space to look for (a segment was sealed or a session
    /// deleted since it last looked).
    pub reclaim_wanted: bool,
    /// Whether the reclaim thread is removing or compacting segments now.
    pub reclaiming: bool,
    /// The last failure of the reclaim thread's work off the append path, or damage it found:
    /// reported, never poisoning.
    pub reclaim_problem: Option<String>,
}

impl State {
    /// Checks the invariants on `leading` and `committer` (debug builds); called wherever the
    /// queue or the leadership changes, before the lock is let go.
    pub(crate) fn check_leading(&self) {
        debug_assert!(!self.committer || self.leading, "the committer leads only as the leader");
        debug_assert!(
            self.queue.is_empty() || self.leading,
            "a request is queued only with a leader to write it ({} queued)",
            self.queue.len()
        );
    }

    /// What a caller's entry into the store checks: closed, or poisoned.
    pub(crate) fn check_open(&self) -> Result<(), StoreError> {
        if let Some(location) = &self.closed {
            return Err(StoreError::Closed { location: location.clone() });
        }
        self.check_poison()
    }

    pub(crate) fn check_poison(&self) -> Result<(), StoreError> {
        match &self.poisoned {
            Some(first) => Err(StoreError::Poisoned { first_failure: first.clone() }),
            None => Ok(()),
        }
    }

    pub(crate) fn pending_tail(&self, session: &str) -> u64 {
        self.pending.get(session).map_or_else(|| self.index.tail(session), |p| p.tail)
    }

    /// The session's head once the batches queued or being written land.
    pub(crate) fn pending_head(&self, session: &str) -> RunHead {
        match self.pending.get(session).and_then(|p| p.head.as_ref()) {
            Some(head) => head.clone(),
            None => self.index.head(session),
        }
    }
}

/// The leader's own: the active segment, the group buffer, and when the lock was last found
/// current.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub active: Option<Active>,
    pub buf: Vec<u8>,
    /// Zeros, as many as the largest extension of the active segment needed.
    pub zeros: Vec<u8>,
    pub lock_checked: Option<std::time::Instant>,
    /// The first write or sync that failed (set before the lock is let go): nothing is written
    /// or synced again, and a sync that returned since proves nothing (the kernel reports a
    /// failed writeback once, perhaps to the other caller, and may have dropped the pages). Every
    /// later write or sync fails repeating it, so the store's poison names the real cause
    /// whichever thread reaches the state lock first.
    pub failed: Option<IoFailure>,
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
    /// that a synced append changes no file metadata (with preallocation off, `len`).
    pub allocated: u64,
}

impl Active {
    pub(crate) fn new(id: SegmentId, file: Arc<dyn IoFile>, len: u64) -> Active {
        Active { id, file, len, synced: len, allocated: len }
    }

    /// Checks the invariant on `len` (debug builds); called wherever it changes.
    pub(crate) fn check(&self) {
        debug_assert!(
            self.synced <= self.len && self.len <= self.allocated,
            "the active segment keeps synced <= len <= allocated: {} <= {} <= {}",
            self.synced,
            self.len,
            self.allocated
        );
    }
}

/// The store's insides, shared by the group commit, reclaiming space, reads and opening.
#[derive(Debug)]
pub(crate) struct Core {
    pub io: Arc<dyn Io>,
    pub dir: PathBuf,
    pub options: FileOptions,
    pub state: Mutex<State>,
    /// What the committer thread sleeps on (with `state`): the leadership handed to it, or the
    /// store stopping. It is the only thread that waits on it.
    pub wake: Condvar,
    /// What the committer sleeps on while it waits for a cohort (with `state`): the request
    /// that completes the cohort.
    pub cohort_back: Condvar,
    /// What the reclaim thread sleeps on (with `state`): space to look for, or the store
    /// stopping; also its pauses between the chunks of a compaction.
    pub reclaim_wake: Condvar,
    /// What waits for the reclaim thread to be done sleep on (with `state`).
    pub reclaim_idle: Condvar,
    /// The open segment files (the active one pinned).
    pub files: SegmentFiles,
    /// The bytes per event of the last batch encoded: how much room the next frame is given, so
    /// that encoding it rarely grows its buffer.
    pub frame_hint: AtomicUsize,
    /// The writer lock on the directory (None when read-only): held until the store is closed
    /// or dropped, and looked at before groups are written (`write`).
    pub dir_lock: Mutex<Option<Box<dyn IoLock>>>,
    /// Locked only by the leader, never while waiting for `state`.
    pub writer: Mutex<Writer>,
    pub counters: Counters,
}

impl Core {
    pub(crate) fn segment_path(&self, id: SegmentId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// Asks the reclaim thread to look for space to free (called with `state` held).
    pub(crate) fn want_reclaim(&self, st: &mut State) {
        st.reclaim_wanted = true;
        self.reclaim_wake.notify_one();
    }
}
