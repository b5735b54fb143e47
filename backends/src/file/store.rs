//! [`FileStore`]: the shared log behind the [`JournalStore`] trait.

use std::future::Future;
use std::ops::Range;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use stepjournal_codec::batch;
use stepjournal_codec::{EventKind, Record, Seq, SessionId, Stamped, UnixMillis};

use super::commit::group::{run_committer, submit};
use super::commit::queue::{Request, RequestKind, never_unanswered};
use super::commit::room::{self, Ticket};
use super::commit::state::{Core, Pending, State, lock};
use super::format::torn::TornTail;
use super::index::SessionLog;
use super::io::{Io, RealIo};
use super::open::{OpenedStore, lock, open};
use super::options::FileOptions;
use super::read_session::read_where;
use super::space::reclaim::{run_reclaimer, wait_reclaimed};
use crate::readers::Readers;
use crate::{
    AppendAck, AppendError, AppendFuture, Durability, JournalStore, OpenError, RunHead,
    SessionHead, StoreError, StoreFuture, StoreMetrics,
};

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
    /// Failures of the reclaim thread's work off the append path (measuring, reading or opening
    /// a segment, writing a sidecar, removing a file, syncing the directory), each tried again
    /// later, and damage compaction found: reported, never poisoning the store.
    pub reclaim_failures: u64,
    /// Sealed segments compaction found a damaged batch in and left alone (their other batches
    /// read as before; `stepjournal verify` names the damage, `stepjournal salvage` reads
    /// around it).
    pub segments_left_damaged: u64,
    /// Appends that found the committer's queue full and waited in line for room
    /// ([`FileOptions::max_queued_bytes`]).
    pub waited_for_room: u64,
    /// The most bytes of batches the committer's queue held at once (besides the group being
    /// written).
    pub most_queued_bytes: u64,
}

/// The file backend: one shared, segmented, append-only log for every session in a directory,
/// with group commit. See the [module documentation](super).
#[derive(Debug)]
pub struct FileStore {
    core: Arc<Core>,
    /// The group committer and reclaim threads (None when read-only, or closed): joined on
    /// close or drop,
    /// before the lock goes.
    threads: Mutex<Option<Threads>>,
    /// The torn tail opening found.
    torn: Option<TornTail>,
    /// The threads an async caller's reads run on.
    readers: Readers,
}

impl FileStore {
    /// Opens (creating it if needed) the journal in directory `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileStore, OpenError> {
        Self::open_through(Arc::new(RealIo), dir.as_ref(), options)
    }

    /// [`open`](Self::open) on a thread of its own, for a caller on an async executor: opening
    /// reads and checks every segment's index, which an executor thread must not wait for.
    /// Dropped before it finished, the open goes on and the store it opened is dropped (its
    /// lock released).
    pub fn open_async(
        dir: impl AsRef<Path>,
        options: FileOptions,
    ) -> StoreFuture<Result<FileStore, OpenError>> {
        let dir = dir.as_ref().to_path_buf();
        let lost = OpenError::Store(StoreError::Io {
            context: format!("opening the file journal in {}", dir.display()),
            source: std::io::Error::other("the thread opening it stopped before it answered"),
        });
        StoreFuture::on_thread("stepjournal-open", Err(lost), move || Self::open(&dir, options))
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
        let OpenedStore { core, torn } = open(io, dir, options)?;
        let core = Arc::new(core);
        let threads = if options.read_only {
            None
        } else {
            let start = |name: &str, run: fn(&Core)| {
                let shared = Arc::clone(&core);
                std::thread::Builder::new()
                    .name(format!("stepjournal-file-{name}"))
                    .spawn(move || run(&shared))
                    .map_err(|source| {
                        OpenError::Store(StoreError::Io {
                            context: format!(
                                "starting the {name} thread of the journal in {}",
                                dir.display()
                            ),
                            source,
                        })
                    })
            };
            let commit = start("commit", run_committer)?;
            let reclaim = match start("reclaim", run_reclaimer) {
                Ok(reclaim) => reclaim,
                Err(e) => {
                    stop(&core, commit, None);
                    return Err(e);
                }
            };
            Some(Threads { commit, reclaim })
        };
        let threads = Mutex::new(threads);
        Ok(FileStore { core, threads, torn, readers: Readers::new("stepjournal-file-read") })
    }

    /// How many reading threads run now, for the crate's tests.
    #[cfg(test)]
    pub(crate) fn reading_threads(&self) -> usize {
        self.readers.threads()
    }

    /// The shared state, for the crate's tests that drive the append path's parts directly.
    #[cfg(test)]
    pub(crate) fn core(&self) -> &Core {
        &self.core
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

    /// Whether a writer holds the journal's directory lock now: for a read-only store, whether
    /// another process (or store) writes the journal, so that a run open in the log may be
    /// running rather than crashed. Asked of the lock each time, without taking it for longer
    /// than the question (and without creating the lock file). A writable store is that writer:
    /// `true`. [`writer_is_live`](super::writer_is_live) asks the same with no store open.
    pub fn writer_is_live(&self) -> Result<bool, StoreError> {
        if !self.core.options.read_only {
            return Ok(true);
        }
        lock::is_held(&*self.core.io, &self.core.dir)
    }

    /// What the store did since it was opened.
    pub fn stats(&self) -> FileStats {
        let c = &self.core.counters;
        FileStats {
            appends: c.appends.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            reclaim_failures: c.reclaim_failures.load(Ordering::Relaxed),
            segments_left_damaged: c.damaged_segments.load(Ordering::Relaxed),
            waited_for_room: c.waited_for_room.load(Ordering::Relaxed),
            most_queued_bytes: lock(&self.core.state).line.most(),
        }
    }

    /// The last problem the reclaim thread met off the append path since the store was opened
    /// (a failure it tries again later, or damage compaction found and left alone), naming the
    /// file and what failed; counted in [`FileStats::reclaim_failures`]. Such problems never
    /// poison the store.
    pub fn reclaim_problem(&self) -> Option<String> {
        lock(&self.core.state).reclaim_problem.clone()
    }

    /// Waits until the store's reclaim thread has done what there is to do now: every sealed
    /// segment that holds nothing needed removed, every one dead enough
    /// ([`FileOptions::compact_when_dead`]) compacted and removed. Returns at once on a
    /// read-only or poisoned store. Deletions and sealed segments only ask the thread to look;
    /// this is for callers (tests, tools) that want the space back before going on.
    pub fn wait_reclaimed(&self) {
        if lock(&self.threads).is_some() {
            wait_reclaimed(&self.core);
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

    /// Deletes the session, if its tail (queued appends counted) is `tail` when one is given:
    /// whether it had events, or its tail when that is not `tail`.
    fn delete_if(
        &self,
        session: &SessionId,
        tail: Option<Seq>,
    ) -> Result<Result<bool, Seq>, StoreError> {
        if self.core.options.read_only {
            return Err(self.read_only_error());
        }
        let mut frame = Vec::new();
        let encoded = batch::encode_delete_into(&mut frame, session, &self.core.options.limits);
        let mut st = lock(&self.core.state);
        st.check_open()?;
        let actual = if encoded.is_ok() { st.pending_tail(session.as_str()) } else { 0 };
        if tail.is_some_and(|t| t.get() != actual) {
            return Ok(Err(Seq(actual)));
        }
        // An id that cannot be written was never stored.
        if actual == 0 {
            return Ok(Ok(false));
        }
        let p = Pending { tail: 0, head: Some(RunHead::default()), deleting: true };
        let name: Arc<str> = Arc::from(session.as_str());
        st.pending.insert(Arc::clone(&name), p);
        let (future, completer) = StoreFuture::pending_or(Err(never_unanswered()));
        let answer = submit(&self.core, st, Request::delete(name, frame, completer), true);
        debug_assert!(answer.is_none(), "a deletion is answered through its future");
        future.wait().map(Ok)
    }

    /// Checks and encodes an append, and queues it unless it is refused at once. With
    /// `may_lead` (the sync API) the caller writes the group itself when no one leads. When the
    /// queue has no room, the future waits in line first ([`WaitForRoom`]).
    fn submit_append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
        may_lead: bool,
    ) -> AppendFuture {
        if events.is_empty() {
            return StoreFuture::ready(Err(AppendError::EmptyBatch));
        }
        if self.core.options.read_only {
            return StoreFuture::ready(Err(self.read_only_error().into()));
        }
        let hint = self.core.frame_hint.load(Ordering::Relaxed);
        let mut frame = Vec::with_capacity(64 + events.len().saturating_mul(hint));
        if let Err(e) =
            batch::encode_into(&mut frame, session, expected, events, &self.core.options.limits)
        {
            let session = session.clone();
            return StoreFuture::ready(Err(AppendError::Encode { session, source: Box::new(e) }));
        }
        let trim = match crate::trim_point(session, expected, events) {
            Ok(trim) => trim.map(Seq::get),
            Err(e) => return StoreFuture::ready(Err(e)),
        };
        self.core.frame_hint.store(frame.len().div_ceil(events.len()), Ordering::Relaxed);
        let snapshot = events.iter().rposition(|e| e.event.kind() == EventKind::Snapshot);
        let batch = Encoded {
            expected,
            frame,
            count: events.len() as u32,
            last_at: events.last().map_or(0, |e| e.at.get()),
            snapshot: snapshot.map(|k| expected.get().saturating_add(k as u64)),
            trim,
            durability,
            may_lead,
        };
        let st = lock(&self.core.state);
        if let Err(e) = st.check_open() {
            return StoreFuture::ready(Err(e.into()));
        }
        let cap = self.core.options.max_queued_bytes;
        if st.line.admits(session.as_str(), batch.frame.len() as u64, cap) {
            let touching = RunHead::touches(events).then_some(events);
            return enqueue(&self.core, st, session, batch, touching);
        }
        // No room: a place in line (taken now, so the line's order is the order of the calls),
        // holding what the head needs and nothing queued.
        let touching: Vec<Stamped> =
            events.iter().filter(|e| RunHead::moves(&e.event)).cloned().collect();
        let touching = (!touching.is_empty()).then_some(touching);
        let mut st = st;
        let ticket =
            st.line.join(session.as_str(), batch.frame.len() as u64, Waker::noop().clone());
        drop(st);
        self.core.counters.waited_for_room.fetch_add(1, Ordering::Relaxed);
        let waiting = WaitForRoom {
            core: Arc::clone(&self.core),
            session: session.clone(),
            ticket: Some(ticket),
            batch: Some(batch),
            touching,
            then: None,
        };
        StoreFuture::deferred(waiting)
    }
}

/// An append encoded and checked, not yet queued.
#[derive(Debug)]
struct Encoded {
    expected: Seq,
    frame: Vec<u8>,
    count: u32,
    /// When its last event was stamped (unix milliseconds).
    last_at: u64,
    /// The seq of its last `snapshot` event, if it holds one.
    snapshot: Option<u64>,
    /// Where it trims its session, if it holds a `trimmed` event ([`crate::trim_point`]).
    trim: Option<u64>,
    durability: Durability,
    may_lead: bool,
}

/// Queues an append the queue has room for: its compare-and-set against the session's pending
/// tail, the head it leaves (from `touching`, the batch's events that move a head, when it has
/// any), and the request. Returns the caller's future.
fn enqueue(
    core: &Core,
    mut st: MutexGuard<'_, State>,
    session: &SessionId,
    batch: Encoded,
    touching: Option<&[Stamped]>,
) -> AppendFuture {
    let Encoded { expected, frame, count, last_at, snapshot, trim, durability, may_lead } = batch;
    let next = expected.add(u64::from(count));
    let actual = Seq(st.pending_tail(session.as_str()));
    if actual != expected {
        // A waiter that entered and queued nothing: the room it was promised, and its place
        // ahead of its session's later appends, go to those in line.
        let called = st.line.call(core.options.max_queued_bytes);
        drop(st);
        room::wake(called);
        return StoreFuture::ready(Err(AppendError::Conflict { expected, actual }));
    }
    // A batch that moves the head carries the head it leaves, computed by the one rule from
    // the head the batches before it leave.
    let head = touching.map(|events| {
        let mut head = st.pending_head(session.as_str());
        head.advance_all(events);
        head
    });
    // The name is made once, shared by the pending tail's entry and the request.
    let queued = st.pending.get_key_value(session.as_str()).map(|(name, _)| Arc::clone(name));
    let name: Arc<str> = match queued {
        Some(name) => {
            if let Some(p) = st.pending.get_mut(&name) {
                p.tail = next.get();
                if head.is_some() {
                    p.head.clone_from(&head);
                }
            }
            name
        }
        None => {
            let name: Arc<str> = Arc::from(session.as_str());
            let p = Pending { tail: next.get(), head: head.clone(), deleting: false };
            st.pending.insert(Arc::clone(&name), p);
            name
        }
    };
    let ack = AppendAck { first: expected, next, durability };
    let kind = RequestKind::Events { first: expected.get(), count, last_at, snapshot, trim };
    // A caller that writes its own group gets its answer back from it, no future between.
    let (future, completer) = if may_lead && !st.leading {
        (None, None)
    } else {
        let (future, completer) = StoreFuture::pending_or(Err(never_unanswered().into()));
        (Some(future), Some(completer))
    };
    let request = Request::append(name, kind, frame, head, ack, completer);
    let answer = submit(core, st, request, may_lead);
    match future {
        Some(future) => {
            debug_assert!(answer.is_none(), "only an inline request is answered by its submit");
            future
        }
        None => StoreFuture::ready(answer.unwrap_or_else(|| Err(never_unanswered().into()))),
    }
}

/// An append waiting in line for room in the queue ([`room`](super::commit::room)), then for its
/// group. Dropped while it waits, it leaves nothing: its batch was never queued nor counted in
/// its session's tail (its place in line goes to those behind it). Once queued it is the
/// completion's future, and dropping it leaves what dropping that leaves.
struct WaitForRoom {
    core: Arc<Core>,
    session: SessionId,
    /// Its place in line, until it enters the queue.
    ticket: Option<Ticket>,
    /// The batch, until it is queued.
    batch: Option<Encoded>,
    /// The batch's events that move a head, when it has any.
    touching: Option<Vec<Stamped>>,
    /// The completion, once queued.
    then: Option<AppendFuture>,
}

impl Future for WaitForRoom {
    type Output = Result<AppendAck, AppendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // No field is pinned: `WaitForRoom` is `Unpin`.
        let this = Pin::into_inner(self);
        if let Some(then) = this.then.as_mut() {
            return Pin::new(then).poll(cx);
        }
        let Some(batch) = this.batch.as_ref() else { return Poll::Pending };
        let core = Arc::clone(&this.core);
        let cap = core.options.max_queued_bytes;
        let len = batch.frame.len() as u64;
        let mut st = lock(&core.state);
        let refused = match st.check_open() {
            Err(e) => Some(e),
            Ok(()) if st.stopping => Some(StoreError::Io {
                context: format!("appending to session {} in {}", this.session, core.dir.display()),
                source: std::io::Error::other(
                    "the store was closed while the batch waited for room in its queue; \
                     nothing was written",
                ),
            }),
            Ok(()) => None,
        };
        if let Some(e) = refused {
            let called = this.ticket.take().map(|t| st.line.leave(t, cap)).unwrap_or_default();
            drop(st);
            room::wake(called);
            this.batch = None;
            return Poll::Ready(Err(e.into()));
        }
        let enters = match this.ticket {
            Some(ticket) => st.line.enter(ticket, len, cap, cx.waker()),
            None => st.line.admits(this.session.as_str(), len, cap),
        };
        if !enters {
            return Poll::Pending;
        }
        this.ticket = None;
        let Some(batch) = this.batch.take() else { return Poll::Pending };
        let mut then = enqueue(&core, st, &this.session, batch, this.touching.as_deref());
        let first = Pin::new(&mut then).poll(cx);
        this.then = Some(then);
        first
    }
}

impl Drop for WaitForRoom {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else { return };
        let mut st = lock(&self.core.state);
        let called = st.line.leave(ticket, self.core.options.max_queued_bytes);
        drop(st);
        room::wake(called);
    }
}

/// A session's head as the index keeps it.
fn session_head(name: &str, log: &SessionLog) -> SessionHead {
    SessionHead {
        session: SessionId::from_stored(name),
        tail: Seq(log.tail()),
        last_at: UnixMillis(log.last_at),
        run: log.head.run.clone(),
        answered_while_suspended: log.head.answered_while_suspended,
        lease: None,
        read_at: None,
    }
}

/// The threads a writable store owns.
#[derive(Debug)]
struct Threads {
    commit: JoinHandle<()>,
    reclaim: JoinHandle<()>,
}

/// Stops a store's threads: the reclaim thread stops between two chunks (what it copied stays,
/// and the segment it compacted with it), the committer writes and answers what async callers
/// queued, then ends. A thread that panicked failed what it held.
fn stop(core: &Core, commit: JoinHandle<()>, reclaim: Option<JoinHandle<()>>) {
    let called = {
        let mut st = lock(&core.state);
        st.stopping = true;
        // Appenders waiting for room are told the store closed.
        st.line.call_all()
    };
    room::wake(called);
    core.reclaim_wake.notify_all();
    core.reclaim_idle.notify_all();
    core.wake.notify_one();
    core.cohort_back.notify_one();
    if let Some(reclaim) = reclaim {
        let _ = reclaim.join();
    }
    let _ = commit.join();
}

impl FileStore {
    /// Stops the committer and reclaim threads (the committer writes what is queued first).
    fn stop_threads(&self) {
        let Some(Threads { commit, reclaim }) = lock(&self.threads).take() else { return };
        stop(&self.core, commit, Some(reclaim));
    }

    /// `work` on one of the store's reading threads, refused at once by a closed or poisoned
    /// store; `what` names it should its thread be lost.
    fn on_reader<T: Send + 'static>(
        &self,
        what: &str,
        work: impl FnOnce(&Core) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<Result<T, StoreError>> {
        let open = lock(&self.core.state).check_open();
        let context = format!("{what} in the journal {}", self.core.dir.display());
        self.readers.read_with(&self.core, open, context, work)
    }

    /// Waits until every request queued is written and answered and no one leads a group: for
    /// a closed store, which admits none, the end of its writing.
    fn wait_written(&self) {
        let mut st = lock(&self.core.state);
        while st.leading && st.poisoned.is_none() {
            st = self
                .core
                .reclaim_idle
                .wait_timeout(st, Duration::from_millis(1))
                .map_or_else(|p| p.into_inner().0, |(st, _)| st);
        }
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

impl JournalStore for FileStore {
    /// The journal's directory, resolved (`file:` and its canonical path).
    fn identity(&self) -> crate::StoreIdentity {
        let dir = std::fs::canonicalize(&self.core.dir).unwrap_or_else(|_| self.core.dir.clone());
        crate::StoreIdentity::Location(format!("file:{}", dir.display()))
    }
    fn max_durability(&self) -> Durability {
        Durability::Synced
    }

    /// Refuses every call from now on, writes what was queued, stops the committer, reclaim
    /// and reading threads, then lets go of the directory lock: another open (here or in
    /// another process) may take it at once. Segment files stay open until the last handle is
    /// dropped; nothing is written to them.
    fn close(&self) -> Result<(), StoreError> {
        if self.core.options.read_only {
            lock(&self.core.state)
                .closed
                .get_or_insert_with(|| self.core.dir.display().to_string());
            self.readers.close();
            return Ok(());
        }
        {
            let mut st = lock(&self.core.state);
            if st.closed.is_some() {
                return Ok(());
            }
            st.closed = Some(self.core.dir.display().to_string());
        }
        // The committer and the callers leading groups write what was admitted before.
        self.wait_written();
        self.stop_threads();
        self.readers.close();
        lock(&self.core.dir_lock).take();
        Ok(())
    }

    /// The sync API on the completion path: a caller that finds no leader writes its group
    /// itself (no hand-off for a lone appender), then waits for its completion.
    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.submit_append(session, expected, events, durability, true).wait()
    }

    /// Checked and encoded now; the committer thread writes it and completes the future once
    /// the batch is written (and synced, for `Synced`). The caller's task never writes or syncs.
    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        self.submit_append(session, expected, events, durability, false)
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let range = range.start.get()..range.end.get();
        read_where(&self.core, session, |_| range.clone())
    }

    /// Reads `snapshot..`, the seq of the session's newest snapshot as the index keeps it (the
    /// whole log when it holds none): the batches before it are not read.
    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        read_where(&self.core, session, |log| log.snapshot.unwrap_or(0)..u64::MAX)
    }

    /// Read on one of the store's reading threads: the caller's executor thread never reads
    /// the disk. **Dropped before it finished**: the read finishes unread.
    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let (session, range) = (session.clone(), range.start.get()..range.end.get());
        self.on_reader("reading", move |core| read_where(core, &session, |_| range.clone()))
    }

    /// As [`read_async`](Self::read_async), from the newest snapshot.
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let session = session.clone();
        self.on_reader("reading from the newest snapshot", move |core| {
            read_where(core, &session, |log| log.snapshot.unwrap_or(0)..u64::MAX)
        })
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let st = lock(&self.core.state);
        st.check_open()?;
        Ok(Seq(st.index.tail(session.as_str())))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let st = lock(&self.core.state);
        st.check_open()?;
        Ok(st.index.sessions.keys().map(|s| SessionId::from_stored(s.as_str())).collect())
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        // With no tail to match, nothing is refused.
        Ok(self.delete_if(session, None)?.unwrap_or(false))
    }

    /// Checked against the tail with queued appends counted, under the lock the appends are
    /// queued under: an append queued before is seen, one queued after finds the session gone.
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<crate::DeleteAt, StoreError> {
        Ok(match self.delete_if(session, Some(tail))? {
            Ok(_) => crate::DeleteAt::Deleted,
            Err(tail) => crate::DeleteAt::Changed { tail },
        })
    }

    /// Kept in the index as batches land and rebuilt on open from the records: nothing is read
    /// or folded here. The file store keeps no leases (its directory lock makes it the only
    /// writer): `lease` is always `None`.
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        all_heads(&self.core)
    }

    /// [`heads`](Self::heads) on one of the store's reading threads (a journal of many
    /// sessions copies many heads).
    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        self.on_reader("reading the session heads", all_heads)
    }

    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        let st = lock(&self.core.state);
        st.check_open()?;
        Ok(st.index.sessions.get(session.as_str()).map(|log| session_head(session.as_str(), log)))
    }

    fn metrics(&self) -> StoreMetrics {
        let c = &self.core.counters;
        StoreMetrics {
            appends: c.appends.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            max_group: c.max_group.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            sync_micros: c.sync_micros.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            poisoned: u64::from(lock(&self.core.state).poisoned.is_some()),
            leases_taken_over: 0,
            reclaim_failures: c.reclaim_failures.load(Ordering::Relaxed),
        }
    }
}

/// Every session's head, from the index.
fn all_heads(core: &Core) -> Result<Vec<SessionHead>, StoreError> {
    let st = lock(&core.state);
    st.check_open()?;
    Ok(st.index.sessions.iter().map(|(name, log)| session_head(name, log)).collect())
}
