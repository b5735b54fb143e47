//! The [`JournalStore`] trait: the contract every backend keeps.

use std::ops::Range;
use std::time::Duration;

use stepjournal_codec::{EventKind, Record, RunId, Seq, SessionId, Stamped};

use crate::head::{LeaseTaken, OwnerId, RunHead, SessionHead, StoreMetrics};
use crate::identity::StoreIdentity;
use crate::{AppendAck, AppendError, AppendFuture, Durability, StoreError, StoreFuture};

/// What [`JournalStore::delete_at`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteAt {
    /// The session was deleted (or held no events and `tail` was 0).
    Deleted,
    /// Its tail was not the one given: nothing was deleted.
    Changed {
        /// The session's tail now (0 when it was deleted meanwhile).
        tail: Seq,
    },
}

/// A store of sessions, each an append-only log of events with dense sequence numbers from 0.
///
/// Every method may be called from many threads at once. A store whose write or sync failed is
/// *poisoned*: from then on every method returns an error naming the first failure, until the
/// store is opened again (which re-reads what is really stored).
///
/// A store is shared as `Arc<dyn JournalStore>` (what [`open_url`](crate::open_url) returns) or
/// lent as `&dyn JournalStore`. Pointers do not implement the trait themselves: no wrapper can
/// answer a provided method with its default and so bypass the backend's own.
pub trait JournalStore: Send + Sync + 'static {
    /// Which store this handle is: where it keeps its data, so that a process runs one journal
    /// per store (two handles naming one directory, database file, or PostgreSQL database and
    /// schema are one store). The provided implementation says this handle alone
    /// ([`StoreIdentity::Instance`]): right for a store whose data lives in the handle, and for
    /// a wrapper that stands apart from the store it wraps.
    fn identity(&self) -> StoreIdentity {
        StoreIdentity::Instance(self as *const Self as *const () as usize)
    }

    /// The strongest durability this store gives. An append asking for more gets this.
    fn max_durability(&self) -> Durability;

    /// Appends `events` to `session` as one batch, at sequence numbers `expected`,
    /// `expected + 1`, ...
    ///
    /// - The batch lands whole or not at all, exactly at the tail: when the session's next
    ///   sequence number is not `expected`, nothing is written and the error is
    ///   [`AppendError::Conflict`] with the actual tail. This compare-and-set is the fencing
    ///   primitive. A session that does not exist has tail 0.
    /// - `Ok` is returned only once the batch is stored at `durability` (or the store's
    ///   [`max_durability`](Self::max_durability), whichever is weaker), as [`AppendAck::durability`]
    ///   says.
    /// - When the store cannot learn whether the batch landed (a connection lost during commit and
    ///   not regained, a write or sync that failed after the batch's bytes may have reached the
    ///   disk), the error is [`AppendError::OutcomeUnknown`], never a guess.
    /// - An empty batch, a record over the size limit or an invalid session id is refused before
    ///   anything is written.
    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError>;

    /// The session's events whose sequence numbers fall in `range`, in order. The range is
    /// clipped to what exists; a missing session reads as empty.
    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError>;

    /// The session's next sequence number: its number of events (0 for a missing session).
    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError>;

    /// Every session with at least one event, sorted by id.
    fn sessions(&self) -> Result<Vec<SessionId>, StoreError>;

    /// Deletes the session and all its events; returns whether it existed. Its space is freed
    /// eventually. Afterwards the session reads as empty and its tail is 0.
    fn delete(&self, session: &SessionId) -> Result<bool, StoreError>;

    /// Deletes the session if its tail is still `tail` (as the caller read it, with the
    /// session's head), decided atomically in the store: a session another actor appended to
    /// or deleted meanwhile is left as it is ([`DeleteAt::Changed`], with its tail now). `tail`
    /// 0 deletes nothing. A retention pass and `stepjournal delete --older-than` delete this
    /// way, so a session a runtime resumed after it was judged old is never deleted under it.
    ///
    /// The provided implementation reads the tail, then deletes: a store that more than one
    /// actor writes must override it.
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<DeleteAt, StoreError> {
        let actual = self.tail(session)?;
        if actual != tail {
            return Ok(DeleteAt::Changed { tail: actual });
        }
        if tail.get() > 0 {
            self.delete(session)?;
        }
        Ok(DeleteAt::Deleted)
    }

    /// Every event of the session, in order.
    fn read_all(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.read(session, Seq(0)..Seq(u64::MAX))
    }

    /// [`append`](Self::append) on the completion-based path: the batch is checked and encoded
    /// now (a refusal or a conflict the store can tell at once comes back ready), and the
    /// returned future is completed by the store's committer once the batch is stored at the
    /// durability asked for, with the same result `append` would give. No thread waits for it:
    /// await it from any executor, or [`wait`](StoreFuture::wait) on it.
    ///
    /// Dropping the future does not withdraw the batch: it may still land. (A backend that
    /// bounds its queue, as the file backend does with `max_queued_bytes`, checks and queues a
    /// batch that found no room only once room is made: a future dropped while it waits for
    /// room leaves nothing, and a conflict is then told when it enters.)
    ///
    /// The provided implementation appends synchronously and returns a ready future; the
    /// backends of this crate complete it from their committers instead.
    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        StoreFuture::ready(self.append(session, expected, events, durability))
    }

    /// [`read`](Self::read) as a future, for a caller that must not block its task on a store
    /// across a network. The provided implementation reads synchronously (right for stores on
    /// the local machine, whose reads do not wait on anyone).
    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        StoreFuture::ready(self.read(session, range))
    }

    /// The session's log from its newest `snapshot` on (the snapshot its first record), or the
    /// whole log when it holds none: what a fold needs to plan (a fold from the snapshot, as
    /// `stepjournal-recovery`'s `SessionState::from_snapshot` starts one). A caller that finds
    /// the snapshot damaged reads the whole log instead.
    ///
    /// The provided implementation reads the whole log and keeps what follows its last
    /// snapshot (correct, and as slow as reading everything); the backends of this crate know
    /// where the newest snapshot lies and read from it.
    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        let mut records = self.read_all(session)?;
        from_last_snapshot(&mut records);
        Ok(records)
    }

    /// [`read_from_snapshot`](Self::read_from_snapshot) as a future; see
    /// [`read_async`](Self::read_async). The provided implementation reads the whole log
    /// through `read_async` and keeps what follows its last snapshot.
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let whole = self.read_async(session, Seq(0)..Seq(u64::MAX));
        if whole.is_ready() {
            let mut records = whole.wait();
            if let Ok(records) = &mut records {
                from_last_snapshot(records);
            }
            return StoreFuture::ready(records);
        }
        StoreFuture::deferred(async move {
            let mut records = whole.await?;
            from_last_snapshot(&mut records);
            Ok(records)
        })
    }

    /// [`tail`](Self::tail) as a future; see [`read_async`](Self::read_async).
    fn tail_async(&self, session: &SessionId) -> StoreFuture<Result<Seq, StoreError>> {
        StoreFuture::ready(self.tail(session))
    }

    /// Every session's [`SessionHead`], sorted by id: what a runtime's start-up reads to find
    /// the sessions to recover, without folding them.
    ///
    /// The backends of this crate keep heads as batches land. The provided implementation reads
    /// every session's log (correct, and as slow as folding them all): a store should keep its
    /// own. A store that keeps leases gives each head the time by its own clock at the read
    /// ([`SessionHead::read_at`]; on a database, selected in the statement that reads the
    /// heads), by which callers judge the leases ([`SessionHead::live_lease`]).
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let mut heads = Vec::new();
        for session in self.sessions()? {
            if let Some(head) = self.head(&session)? {
                heads.push(head);
            }
        }
        Ok(heads)
    }

    /// Closes the store: an append racing the close is written or refused, never left
    /// unanswered; the store's threads stop, and what it holds is let go
    /// (the file store's directory lock, so the journal can be opened again at once, in this
    /// process or another; SQLite's committer thread). From then on every call of this handle
    /// (every clone of the `Arc`) fails with [`StoreError::Closed`]. Closing again does
    /// nothing. Dropping the last handle does the same without the refusals.
    ///
    /// The stores of this crate implement it (the memory store only refuses). The provided
    /// implementation does nothing, and the store goes on answering: right for a store that
    /// holds nothing of its own (a wrapper over a store closed elsewhere).
    fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// [`heads`](Self::heads) as a future, for a caller that must not block its task on the
    /// listing (a runtime's async start-up). The provided implementation lists synchronously;
    /// the file and SQLite stores list on a reading thread, PostgreSQL on its driver.
    ///
    /// **Dropped before it finished**: nothing was written; the listing finishes unread.
    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        StoreFuture::ready(self.heads())
    }

    /// [`head`](Self::head) as a future, for a caller that must not block its task on the
    /// read (an async trim's check for a live run). The provided implementation reads
    /// synchronously; SQLite reads on a reading thread, PostgreSQL on its driver; the file and
    /// memory stores answer from memory at once.
    ///
    /// **Dropped before it finished**: nothing was written; the read finishes unread.
    fn head_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Option<SessionHead>, StoreError>> {
        StoreFuture::ready(self.head(session))
    }

    /// The session's [`SessionHead`] (`None` for a session with no events), its lease judged
    /// as for [`heads`](Self::heads). The provided implementation reads the session's log.
    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        let records = self.read_all(session)?;
        let Some(last) = records.last() else { return Ok(None) };
        let run = RunHead::of_log(&records);
        Ok(Some(SessionHead {
            session: session.clone(),
            tail: last.seq.next(),
            last_at: last.at,
            run: run.run,
            answered_while_suspended: run.answered_while_suspended,
            lease: None,
            read_at: None,
        }))
    }

    /// Takes the lease on `session`'s run `run` for `owner`, for `ttl` from now (the store's
    /// clock). It is taken when no lease is held, the held one expired, or it is `owner`'s;
    /// otherwise, unless `force`, nothing changes and the live lease is reported
    /// ([`LeaseTaken::HeldBy`]). With `force` a live lease of another owner is replaced and
    /// reported ([`LeaseTaken::Taken::took_over`]): an explicit entry (a new turn, a stop) may
    /// take a session over from a live run, which its next append then finds fenced.
    ///
    /// The provided implementation keeps no leases ([`LeaseTaken::NotKept`]): right for a store
    /// one process writes at a time.
    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        let _ = (session, owner, run, ttl, force);
        Ok(LeaseTaken::NotKept)
    }

    /// Renews `owner`'s leases on these runs for `ttl` from now, in one round where the store
    /// can. Returns the sessions whose lease `owner` no longer holds (taken over, or the run
    /// ended): their runs are fenced or about to be. The provided implementation keeps none.
    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        let _ = (owner, runs, ttl);
        Ok(Vec::new())
    }

    /// Releases `owner`'s lease on `session`'s run `run`, if it still holds it: a run that ended,
    /// or one left for the next start to recover. The provided implementation keeps none.
    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        let _ = (session, owner, run);
        Ok(())
    }

    /// The store's figures since it was opened. The provided implementation measures nothing.
    fn metrics(&self) -> StoreMetrics {
        StoreMetrics::default()
    }
}

/// Drops the records before the last `snapshot` of `records` (none when it holds no snapshot).
pub fn from_last_snapshot(records: &mut Vec<Record>) {
    if let Some(at) = records.iter().rposition(|r| r.event.kind() == EventKind::Snapshot) {
        records.drain(..at);
    }
}
