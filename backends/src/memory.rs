//! The in-memory backend: [`Durability::Volatile`], for tests and embedding in tests.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use stepjournal_codec::{EventKind, Limits, Record, Seq, SessionId, Stamped, batch};

use crate::{
    AppendAck, AppendError, DeleteAt, Durability, JournalStore, RunHead, SessionHead, StoreError,
    StoreFuture,
};

/// One session's events and its head, kept as batches land.
#[derive(Debug, Default)]
struct Log {
    // Invariant: the session's events at seq `start`, `start + 1`, ... in order (`start` 0
    // unless the session was trimmed).
    records: Vec<Record>,
    /// The seq of `records[0]`: where a trim left the log's start.
    start: u64,
    /// `RunHead::advance` over `records`.
    head: RunHead,
}

impl Log {
    /// The session's next seq.
    fn tail(&self) -> u64 {
        self.start + self.records.len() as u64
    }
}

/// Sessions kept in memory. Events are checked against the same limits as the durable backends
/// (encoded once on append), so a test on this store refuses what a real store would. An append
/// is done before it returns, so the provided `append_async` (a ready future) is native here;
/// heads are kept as batches land.
#[derive(Debug, Default)]
pub struct MemoryStore {
    // Invariant: no log is empty.
    sessions: Mutex<BTreeMap<SessionId, Log>>,
    limits: Limits,
    /// Set once the store is closed: every call is refused.
    closed: std::sync::atomic::AtomicBool,
}

impl MemoryStore {
    /// An empty store with the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store with these limits.
    pub fn with_limits(limits: Limits) -> Self {
        MemoryStore { sessions: Mutex::default(), limits, closed: Default::default() }
    }

    /// The sessions, locked; refused once the store is closed.
    fn lock(&self) -> Result<MutexGuard<'_, BTreeMap<SessionId, Log>>, StoreError> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Closed { location: "memory".to_owned() });
        }
        // A panic while holding the lock cannot leave a batch half-applied (it is pushed after
        // every check), so the map is still consistent: take it back.
        Ok(self.sessions.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl JournalStore for MemoryStore {
    fn max_durability(&self) -> Durability {
        Durability::Volatile
    }

    /// Refuses every call from now on; the sessions are kept until the store is dropped.
    fn close(&self) -> Result<(), StoreError> {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        _durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        if events.is_empty() {
            return Err(AppendError::EmptyBatch);
        }
        let mut scratch = Vec::new();
        batch::encode_into(&mut scratch, session, expected, events, &self.limits)
            .map_err(|e| AppendError::Encode { session: session.clone(), source: Box::new(e) })?;
        let trim = crate::trim_point(session, expected, events)?;
        let mut sessions = self.lock()?;
        let actual = Seq(sessions.get(session).map_or(0, Log::tail));
        if actual != expected {
            return Err(AppendError::Conflict { expected, actual });
        }
        let log = sessions.entry(session.clone()).or_default();
        log.records.extend(events.iter().enumerate().map(|(i, e)| Record {
            session: session.clone(),
            seq: expected.add(i as u64),
            at: e.at,
            event: e.event.clone(),
        }));
        log.head.advance_all(events);
        if let Some(before) = trim.filter(|b| b.get() > log.start) {
            let drop = usize::try_from(before.get() - log.start).unwrap_or(usize::MAX);
            log.records.drain(..drop.min(log.records.len()));
            log.start = before.get();
        }
        let next = Seq(log.tail());
        debug_assert!(
            log.records.last().is_some_and(|r| r.seq.next() == next),
            "a session's events sit at seq start, start + 1, ..."
        );
        Ok(AppendAck { first: expected, next, durability: Durability::Volatile })
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let sessions = self.lock()?;
        let Some(log) = sessions.get(session) else {
            return Ok(Vec::new());
        };
        // Positions in `records`, the range clipped to the seqs it holds.
        let at = |seq: Seq| seq.get().clamp(log.start, log.tail()) - log.start;
        let start = usize::try_from(at(range.start)).unwrap_or(usize::MAX);
        let end = usize::try_from(at(range.end)).unwrap_or(usize::MAX).max(start);
        Ok(log.records.get(start..end).map(<[Record]>::to_vec).unwrap_or_default())
    }

    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        let sessions = self.lock()?;
        let Some(log) = sessions.get(session).map(|l| &l.records) else {
            return Ok(Vec::new());
        };
        let start =
            log.iter().rposition(|r| r.event.kind() == EventKind::Snapshot).unwrap_or_default();
        Ok(log.get(start..).map(<[Record]>::to_vec).unwrap_or_default())
    }

    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        StoreFuture::ready(self.read_from_snapshot(session))
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        Ok(Seq(self.lock()?.get(session).map_or(0, Log::tail)))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self.lock()?.keys().cloned().collect())
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        Ok(self.lock()?.remove(session).is_some())
    }

    /// Checked and deleted under the store's lock.
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<DeleteAt, StoreError> {
        let mut sessions = self.lock()?;
        let actual = Seq(sessions.get(session).map_or(0, Log::tail));
        if actual != tail {
            return Ok(DeleteAt::Changed { tail: actual });
        }
        sessions.remove(session);
        Ok(DeleteAt::Deleted)
    }

    /// Kept as batches land: nothing is folded here. The memory store keeps no leases.
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        Ok(self.lock()?.iter().filter_map(|(s, log)| head_of(s, log)).collect())
    }

    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        Ok(self.lock()?.get(session).and_then(|log| head_of(session, log)))
    }
}

fn head_of(session: &SessionId, log: &Log) -> Option<SessionHead> {
    let last = log.records.last()?;
    Some(SessionHead {
        session: session.clone(),
        tail: last.seq.next(),
        last_at: last.at,
        run: log.head.run.clone(),
        answered_while_suspended: log.head.answered_while_suspended,
        lease: None,
        read_at: None,
    })
}
