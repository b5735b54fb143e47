//! The [`JournalStore`] trait: the contract every backend keeps.

use std::ops::Range;

use stepjournal_codec::{Record, Seq, SessionId, Stamped};

use crate::{AppendError, StoreError};

/// What an `Ok` from [`JournalStore::append`] promises about the appended events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Durability {
    /// Gone with the process (the memory backend).
    Volatile,
    /// Survives a crash of the process, not a loss of power or of the machine.
    Buffered,
    /// On stable storage: survives a loss of power.
    Synced,
}

impl Durability {
    /// The level's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Volatile => "volatile",
            Durability::Buffered => "buffered",
            Durability::Synced => "synced",
        }
    }
}

/// What an append that landed reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendAck {
    /// The sequence number of the batch's first event (the `expected` the caller gave).
    pub first: Seq,
    /// The session's next sequence number after the batch: the new tail.
    pub next: Seq,
    /// What the store promises for the batch.
    pub durability: Durability,
}

/// A store of sessions, each an append-only log of events with dense sequence numbers from 0.
///
/// Every method may be called from many threads at once. A store whose write or sync failed is
/// *poisoned*: from then on every method returns an error naming the first failure, until the
/// store is opened again (which re-reads what is really stored).
pub trait JournalStore: Send + Sync + 'static {
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

    /// Every event of the session, in order.
    fn read_all(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.read(session, Seq(0)..Seq(u64::MAX))
    }
}

/// A shared or boxed store is a store: every method forwards to the one inside.
macro_rules! forward_store {
    ($($pointer:ident)::+) => {
        impl<S: JournalStore + ?Sized> JournalStore for $($pointer)::+<S> {
            fn max_durability(&self) -> Durability {
                (**self).max_durability()
            }
            fn append(
                &self,
                session: &SessionId,
                expected: Seq,
                events: &[Stamped],
                durability: Durability,
            ) -> Result<AppendAck, AppendError> {
                (**self).append(session, expected, events, durability)
            }
            fn read(
                &self,
                session: &SessionId,
                range: Range<Seq>,
            ) -> Result<Vec<Record>, StoreError> {
                (**self).read(session, range)
            }
            fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
                (**self).tail(session)
            }
            fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
                (**self).sessions()
            }
            fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
                (**self).delete(session)
            }
        }
    };
}

forward_store!(std::sync::Arc);
forward_store!(Box);
