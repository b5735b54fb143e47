//! Retention: sessions whose last run ended long ago are deleted, each decided by the store
//! ([`JournalStore::delete_at`]) at the tail its head had, so a session resumed after it was
//! judged old is kept. A pass is made by [`Journal::retain`], or every so often by a thread of
//! the journal's when [`JournalOptions::retain_ended_for`](super::JournalOptions::retain_ended_for)
//! is set.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use stepjournal_backends::{DeleteAt, JournalStore, RunState, SessionHead, StoreError};
use stepjournal_codec::{RunOutcome, SessionId, UnixMillis};

use super::clock::Clock;
use super::journal::Journal;
use super::owner::Ownership;

/// What a retention pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retained {
    /// The sessions deleted.
    pub deleted: Vec<SessionId>,
    /// The sessions judged old whose log changed before their delete (a run began, an answer
    /// landed, another actor deleted them): kept as they are.
    pub changed: Vec<SessionId>,
}

impl Journal {
    /// One retention pass: deletes every session whose last run ended `completed`, `failed`
    /// or `stopped` and whose last event is older than `age`. A session whose run is open,
    /// crashed or suspended (waiting for answers) is never deleted, nor one whose head the
    /// store does not know (an older journal's). Age is judged by the store's clock where it
    /// reads the heads with one ([`SessionHead::read_at`]: the server's on PostgreSQL), else by
    /// this journal's [`Clock`], against the time the last event was stamped with.
    ///
    /// Each session is deleted at the tail its head had when listed
    /// ([`JournalStore::delete_at`]): one a runtime resumed meanwhile is reported in
    /// [`Retained::changed`] and kept. A deleted session's space is freed as the store frees a
    /// deletion's (the file store's compaction).
    pub fn retain(&self, age: Duration) -> Result<Retained, StoreError> {
        retain(&*self.store, &*self.options.clock, age)
    }

    /// Starts the retention thread when the options ask for one: it makes a pass every tenth
    /// of the age (at least every second, at most every ten minutes). It holds the journal
    /// and the store weakly: it stops within a second once the journal is gone, and never
    /// keeps a store open.
    pub(crate) fn start_retention(&self) {
        let Some(age) = self.options.retain_ended_for else { return };
        let every = (age / 10).clamp(Duration::from_secs(1), Duration::from_secs(600));
        let store: Weak<dyn JournalStore> = Arc::downgrade(&self.store);
        let own: Weak<Ownership> = Arc::downgrade(&self.own);
        let clock = Arc::clone(&self.options.clock);
        // Without a thread there is no background pass; `retain` still works.
        let _ = std::thread::Builder::new().name("stepjournal-retention".into()).spawn(move || {
            let mut next = Instant::now() + every;
            loop {
                std::thread::sleep(next.saturating_duration_since(Instant::now()).min(TICK));
                match own.upgrade() {
                    Some(own) if !own.is_shutting_down() => {}
                    _ => return,
                }
                if Instant::now() < next {
                    continue;
                }
                let Some(store) = store.upgrade() else { return };
                // A failed pass is tried again at the next.
                let _ = retain(&*store, &*clock, age);
                next = Instant::now() + every;
            }
        });
    }
}

/// How often the retention thread looks whether its journal is gone.
const TICK: Duration = Duration::from_secs(1);

fn retain(
    store: &dyn JournalStore,
    clock: &dyn Clock,
    age: Duration,
) -> Result<Retained, StoreError> {
    let mut done = Retained::default();
    for head in store.heads()? {
        if !expired(&head, clock, age) {
            continue;
        }
        match store.delete_at(&head.session, head.tail)? {
            DeleteAt::Deleted => done.deleted.push(head.session),
            DeleteAt::Changed { .. } => done.changed.push(head.session),
        }
    }
    Ok(done)
}

/// Whether the session of `head` ended more than `age` ago.
fn expired(head: &SessionHead, clock: &dyn Clock, age: Duration) -> bool {
    let ended = matches!(
        head.run,
        RunState::Ended {
            outcome: RunOutcome::Completed | RunOutcome::Failed | RunOutcome::Stopped,
            ..
        }
    );
    let now = head.read_at.unwrap_or_else(|| clock.now());
    let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    ended && head.live_lease().is_none() && head.last_at < UnixMillis(now.0.saturating_sub(age))
}
