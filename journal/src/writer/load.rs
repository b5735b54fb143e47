//! A session's log as an entry reads it: from its newest snapshot on, or whole when it holds
//! none, when the snapshot is damaged, or when the entry reads further back than the snapshot
//! keeps ([`SessionState::needs_history`]). A trimmed session's whole log starts at its kept
//! snapshot (or a few events before it), and is folded from there.

use stepjournal_backends::{JournalStore, StoreError};
use stepjournal_codec::{Entry, Record, Seq, SessionId};
use stepjournal_recovery::SessionState;

use super::yielding::{FOLD_SLICE, YIELD_EVERY, yield_now};

/// The records an entry folds: the session's log from `first` on, where `first` is its newest
/// intact snapshot's position (or 0).
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The records read, oldest first.
    pub(crate) records: Vec<Record>,
}

impl Loaded {
    /// Reads `session` for `entry`: from its newest snapshot when that snapshot is intact and
    /// the entry reads nothing before it, else the whole log. Returns the records and the
    /// session folded up to their tail.
    pub(crate) async fn read(
        store: &dyn JournalStore,
        session: &SessionId,
        entry: &Entry,
    ) -> Result<(Loaded, SessionState), StoreError> {
        let loaded = Loaded { records: store.read_from_snapshot_async(session).await? };
        if let Some(state) = loaded.fold_yielding().await
            && !state.needs_history(entry)
        {
            return Ok((loaded, state));
        }
        Loaded::whole(store, session).await
    }

    /// Reads `session` from its newest snapshot when that lies at or before `at` (where a batch
    /// whose outcome was unknown was to land), else whole: the records cover `at`.
    pub(crate) async fn read_covering(
        store: &dyn JournalStore,
        session: &SessionId,
        at: Seq,
    ) -> Result<(Loaded, SessionState), StoreError> {
        let loaded = Loaded { records: store.read_from_snapshot_async(session).await? };
        if loaded.first() <= at
            && let Some(state) = loaded.fold_yielding().await
        {
            return Ok((loaded, state));
        }
        Loaded::whole(store, session).await
    }

    /// Reads `session`'s whole log; returns it and the session folded.
    pub(crate) async fn whole(
        store: &dyn JournalStore,
        session: &SessionId,
    ) -> Result<(Loaded, SessionState), StoreError> {
        let loaded = Loaded { records: store.read_async(session, Seq(0)..Seq(u64::MAX)).await? };
        // A trimmed log starts from its first intact snapshot.
        let (taken, mut state) =
            SessionState::start_of(&loaded.records).map_err(|e| no_start(session, &e))?;
        let rest = loaded.records.get(taken..).unwrap_or_default();
        // The whole log may be long: the fold gives the caller's executor back as it goes.
        for (i, chunk) in rest.chunks(YIELD_EVERY).enumerate() {
            if i > 0 {
                yield_now().await;
            }
            chunk.iter().for_each(|r| state.apply(&r.event));
        }
        Ok((loaded, state))
    }

    /// Where the records start.
    pub(crate) fn first(&self) -> Seq {
        self.records.first().map_or(Seq(0), |r| r.seq)
    }

    /// The session's tail as read.
    pub(crate) fn tail(&self) -> Seq {
        self.first().add(self.records.len() as u64)
    }

    /// The records from `at` on (none when `at` is past the tail or before the first).
    pub(crate) fn from(&self, at: Seq) -> &[Record] {
        let Some(skip) = at.get().checked_sub(self.first().get()) else { return &[] };
        self.records.get(usize::try_from(skip).unwrap_or(usize::MAX)..).unwrap_or_default()
    }

    /// The session folded up to the records' tail: from the snapshot when the records start at
    /// one, else from the first event; `None` when they start at a snapshot that cannot stand
    /// there (damaged). For an async caller: a suffix longer than [`FOLD_SLICE`] events is
    /// folded a slice per poll (the snapshot decoded in a poll of its own), so that wakes
    /// polled back to back hand the executor back between slices.
    async fn fold_yielding(&self) -> Option<SessionState> {
        let (taken, mut state) = SessionState::start_of(&self.records).ok()?;
        let rest = self.records.get(taken..).unwrap_or_default();
        for chunk in rest.chunks(FOLD_SLICE) {
            if rest.len() > FOLD_SLICE {
                yield_now().await;
            }
            chunk.iter().for_each(|r| state.apply(&r.event));
        }
        Some(state)
    }

    /// The state the records start from: empty when they start at seq 0, else folded from
    /// their first intact snapshot (the one a read from the newest snapshot opens with, or
    /// the kept one a trimmed log starts at); `None` when they hold none.
    pub(crate) fn start(&self) -> Option<SessionState> {
        SessionState::start_of(&self.records).ok().map(|(_, state)| state)
    }

    /// The records after those read, once an append of the entry's landed.
    pub(crate) fn extend(&mut self, more: impl IntoIterator<Item = Record>) {
        self.records.extend(more);
    }
}

/// The fold of `session`'s log as the store keeps it (a trimmed one from its first intact
/// snapshot); a trimmed log with none is corrupt.
pub(crate) fn fold_log(
    session: &SessionId,
    records: Vec<Record>,
) -> Result<SessionState, StoreError> {
    SessionState::of_log_owned(records).map_err(|e| no_start(session, &e))
}

/// A trimmed log with no intact snapshot to start a fold from: corrupt.
pub(crate) fn no_start(session: &SessionId, e: &stepjournal_recovery::NoStart) -> StoreError {
    StoreError::Corrupt {
        context: format!("session {session}"),
        source: stepjournal_codec::DecodeError::Malformed { reason: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::expect_used, reason = "tests fail loudly")]

    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use stepjournal_codec::{Event, Message, Role, UnixMillis};

    use super::*;

    fn records(n: u64) -> Vec<Record> {
        (0..n)
            .map(|i| Record {
                session: SessionId::from_stored("s"),
                seq: Seq(i),
                at: UnixMillis(i),
                event: Event::Message(Message { role: Role::User, text: format!("m{i}") }),
            })
            .collect()
    }

    /// How many polls the fold of `n` records takes, and what it folded.
    fn polls(n: u64) -> (usize, SessionState) {
        let loaded = Loaded { records: records(n) };
        let mut fold = pin!(loaded.fold_yielding());
        let mut cx = Context::from_waker(Waker::noop());
        for polls in 1.. {
            if let Poll::Ready(state) = fold.as_mut().poll(&mut cx) {
                return (polls, state.expect("the records start at seq 0"));
            }
        }
        unreachable!("the loop ends only by returning")
    }

    #[test]
    fn a_long_suffix_is_folded_a_slice_per_poll_and_a_short_one_in_one() {
        let (one, short) = polls(FOLD_SLICE as u64);
        assert_eq!(one, 1, "a suffix of a slice or less never yields");
        assert_eq!(short.len(), FOLD_SLICE as u64);
        let n = 5 * FOLD_SLICE as u64 + 3;
        let (many, long) = polls(n);
        assert_eq!(many, 7, "six slices, each after a yield");
        let mut whole = SessionState::default();
        records(n).iter().for_each(|r| whole.apply(&r.event));
        assert_eq!(long.len(), whole.len());
        assert_eq!(
            stepjournal_recovery::transcript(&long),
            stepjournal_recovery::transcript(&whole)
        );
    }
}
