//! Group commit: appends queue with the completer of their future; one leader at a time takes
//! what is queued and commits it in one transaction, sharing its sync, then completes each
//! append's future. No thread waits per queued append.
//!
//! Who leads: a sync caller that finds no group committing leads at once (a lone appender is
//! never handed off to another thread); otherwise the store's committer thread does, woken when
//! work is queued and nobody leads. An async caller never leads: it queues and returns.
//!
//! Each append still gets its own compare-and-set: inside the group's transaction, each batch's
//! expected tail is checked against what the table holds at that point (earlier batches of the
//! group included), and a batch that does not match is skipped and answered `Conflict`.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use stepjournal_codec::{Seq, SessionId};

use super::cohort::{Cohort, Waited};
use crate::sql::{EncodedBatch, Place};
use crate::{AppendAck, AppendError, Completer, Durability, StoreError, sql};

/// One append waiting for a group.
#[derive(Debug)]
pub(super) struct Request {
    pub session: SessionId,
    pub place: Place,
    pub batch: EncodedBatch,
    pub durability: Durability,
    /// Completes the caller's future.
    pub done: Completer<Result<AppendAck, AppendError>>,
}

/// What the group's transaction did with one append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The batch is committed.
    Landed,
    /// The session's tail was this, not the expected one: nothing of the batch was written.
    Conflict(i64),
    /// The transaction failed: nothing was written.
    Failed(Failure),
    /// The commit failed in a way that leaves the outcome to what the next open finds.
    Unknown(Unknown),
}

/// A commit whose outcome is left to what the next open finds: why, and the driver's error
/// where there is one (shared by every append of the group).
#[derive(Debug, Clone)]
pub(super) struct Unknown {
    pub reason: String,
    pub source: Option<Arc<rusqlite::Error>>,
}

impl PartialEq for Unknown {
    fn eq(&self, other: &Unknown) -> bool {
        self.reason == other.reason
    }
}

impl Eq for Unknown {}

/// Why a group's transaction failed, kept for every append in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The store was already poisoned.
    Poisoned(String),
    /// The database refused or failed.
    Backend { context: String, source: String },
    /// The store was closed before the group was written.
    Closed { location: String },
}

impl Failure {
    pub(super) fn from_store(e: &StoreError) -> Self {
        match e {
            StoreError::Poisoned { first_failure } => Failure::Poisoned(first_failure.clone()),
            StoreError::Closed { location } => Failure::Closed { location: location.clone() },
            StoreError::Backend { context, source, .. } => {
                Failure::Backend { context: context.clone(), source: source.to_string() }
            }
            other => Failure::Backend { context: String::new(), source: other.to_string() },
        }
    }

    pub(super) fn into_store(self, backend: &'static str) -> StoreError {
        match self {
            Failure::Poisoned(first_failure) => StoreError::Poisoned { first_failure },
            Failure::Closed { location } => StoreError::Closed { location },
            Failure::Backend { context, source } => {
                StoreError::Backend { backend, context, source: source.into() }
            }
        }
    }
}

/// What a future resolves to when its request is dropped unanswered (the committing thread
/// panicked, before or after the commit): the database holds the answer.
pub(super) fn unanswered(
    location: &str,
    session: &SessionId,
    expected: Seq,
) -> Result<AppendAck, AppendError> {
    Err(AppendError::OutcomeUnknown {
        session: session.clone(),
        expected,
        reason: format!(
            "{location}: the group commit ended without answering this append (its committing \
             thread panicked); read the session's tail before writing again"
        ),
        source: None,
    })
}

impl Request {
    /// Completes the caller's future with what `outcome` means for this append.
    pub(super) fn answer(self, outcome: Outcome, location: &str, backend: &'static str) {
        let expected = Seq(u64::try_from(self.place.first).unwrap_or(0));
        let result = match outcome {
            Outcome::Landed => Ok(AppendAck {
                first: expected,
                next: Seq(u64::try_from(self.place.next).unwrap_or(0)),
                durability: self.durability,
            }),
            Outcome::Conflict(tail) => sql::seq_from_column(location, "the session's tail", tail)
                .map_err(AppendError::Store)
                .and_then(|actual| Err(AppendError::Conflict { expected, actual })),
            Outcome::Failed(failure) => Err(AppendError::Store(failure.into_store(backend))),
            Outcome::Unknown(Unknown { reason, source }) => Err(AppendError::OutcomeUnknown {
                session: self.session,
                expected,
                reason,
                source: source.map(std::io::Error::other),
            }),
        };
        self.done.complete(result);
    }
}

#[derive(Debug, Default)]
struct State {
    pending: Vec<Request>,
    leading: bool,
    /// The store is being dropped: the committer commits what is queued, then stops.
    closed: bool,
    groups: u64,
    /// A leader is waiting for the cohort: arrivals signal `arrived`.
    gathering: bool,
    cohort: Cohort,
}

/// The queue of appends waiting for a transaction.
#[derive(Debug, Default)]
pub(super) struct Queue {
    state: Mutex<State>,
    /// Signalled when the committer thread has work: appends queued and nobody leading, or the
    /// store closing.
    work: Condvar,
    /// Signalled when an append queues while a leader gathers the cohort.
    arrived: Condvar,
}

/// A group taken to commit. Leadership goes back when it is dropped (after a panic too, when
/// its requests' completers resolve their futures as unanswered), and the committer is woken
/// if appends queued meanwhile.
#[derive(Debug)]
pub(super) struct Group<'a> {
    queue: &'a Queue,
    /// The appends, in the order they queued.
    pub requests: Vec<Request>,
}

impl Group<'_> {
    /// The group's transaction ended after `took`: the appends that queue from now on are its
    /// cohort coming back. Called before its appends are answered, so none is missed.
    pub(super) fn committed(&self, took: Duration) {
        self.queue.lock().cohort.committed(self.requests.len(), took);
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.leading = false;
        let more = !state.pending.is_empty() || state.closed;
        drop(state);
        if more {
            self.queue.work.notify_one();
        }
    }
}

impl Queue {
    /// Appends waiting for the next group, and groups started so far.
    #[cfg(test)]
    pub(super) fn counts(&self) -> (usize, u64) {
        let state = self.lock();
        (state.pending.len(), state.groups)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements; a panic elsewhere does not break it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `request`. A caller that may lead (a sync caller, whose thread waits anyway) and
    /// finds no group committing gets the group to commit now, its own request in it; otherwise
    /// the committer thread is woken if nobody leads, and the request's future is completed by
    /// whoever commits it.
    pub(super) fn submit(&self, request: Request, may_lead: bool) -> Option<Group<'_>> {
        let mut state = self.lock();
        if state.closed {
            // The store closed after this request was checked: no committer is left to write
            // it. Dropped unwritten; its future resolves as unanswered.
            return None;
        }
        state.pending.push(request);
        state.cohort.arrived();
        if state.leading {
            if state.gathering {
                drop(state);
                self.arrived.notify_one();
            }
            return None;
        }
        if may_lead {
            return Some(self.take(state));
        }
        drop(state);
        self.work.notify_one();
        None
    }

    /// For the committer thread: waits until there is a group to commit and takes it, or
    /// returns `None` once the store is closing and nothing is queued.
    pub(super) fn next_group(&self) -> Option<Group<'_>> {
        let mut state = self.lock();
        loop {
            if !state.leading && !state.pending.is_empty() {
                return Some(self.take(state));
            }
            if state.closed && state.pending.is_empty() {
                return None;
            }
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Tells the committer thread to stop once the queue is empty.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.work.notify_all();
    }

    /// Leads: waits for the cohort of the last group within the budget (see `cohort`), then
    /// takes what is queued.
    fn take<'a>(&'a self, mut state: MutexGuard<'a, State>) -> Group<'a> {
        state.leading = true;
        let budget = state.cohort.budget();
        if !budget.is_zero() {
            let start = Instant::now();
            let deadline = start + budget;
            state.gathering = true;
            let waited = loop {
                if state.cohort.missing() == 0 {
                    break Waited::Complete(start.elapsed());
                }
                let now = Instant::now();
                if now >= deadline || state.closed {
                    break Waited::RanOut;
                }
                state = match self.arrived.wait_timeout(state, deadline - now) {
                    Ok((state, _)) => state,
                    Err(p) => p.into_inner().0,
                };
            };
            state.gathering = false;
            state.cohort.waited(waited);
        }
        state.groups += 1;
        let requests = std::mem::take(&mut state.pending);
        drop(state);
        Group { queue: self, requests }
    }
}
