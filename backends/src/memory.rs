//! The in-memory backend: [`Durability::Volatile`], for tests and embedding in tests.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped, batch};

use crate::{AppendAck, AppendError, Durability, JournalStore, StoreError};

/// Sessions kept in memory. Events are checked against the same limits as the durable backends
/// (encoded once on append), so a test on this store refuses what a real store would.
#[derive(Debug, Default)]
pub struct MemoryStore {
    // Invariant: every Vec holds its session's events at seq 0, 1, 2, ... in order, none empty.
    sessions: Mutex<BTreeMap<SessionId, Vec<Record>>>,
    limits: Limits,
}

impl MemoryStore {
    /// An empty store with the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store with these limits.
    pub fn with_limits(limits: Limits) -> Self {
        MemoryStore { sessions: Mutex::default(), limits }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<SessionId, Vec<Record>>> {
        // A panic while holding the lock cannot leave a batch half-applied (it is pushed after
        // every check), so the map is still consistent: take it back.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl JournalStore for MemoryStore {
    fn max_durability(&self) -> Durability {
        Durability::Volatile
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
        let mut sessions = self.lock();
        let log = sessions.entry(session.clone()).or_default();
        let actual = Seq(log.len() as u64);
        if actual != expected {
            if log.is_empty() {
                sessions.remove(session);
            }
            return Err(AppendError::Conflict { expected, actual });
        }
        log.extend(events.iter().enumerate().map(|(i, e)| Record {
            session: session.clone(),
            seq: expected.add(i as u64),
            at: e.at,
            event: e.event.clone(),
        }));
        let next = Seq(log.len() as u64);
        debug_assert!(
            log.last().is_some_and(|r| r.seq.next() == next),
            "a session's events sit at seq 0, 1, 2, ..."
        );
        Ok(AppendAck { first: expected, next, durability: Durability::Volatile })
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let sessions = self.lock();
        let Some(log) = sessions.get(session) else {
            return Ok(Vec::new());
        };
        let len = log.len() as u64;
        let start = range.start.get().min(len) as usize;
        let end = range.end.get().min(len).max(range.start.get().min(len)) as usize;
        Ok(log.get(start..end).map(<[Record]>::to_vec).unwrap_or_default())
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        Ok(Seq(self.lock().get(session).map_or(0, |l| l.len() as u64)))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self.lock().keys().cloned().collect())
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        Ok(self.lock().remove(session).is_some())
    }
}
