//! Group commit: appends that arrive while a transaction is committing wait, then commit
//! together in the next one, sharing its sync.
//!
//! Each append still gets its own compare-and-set: inside the group's transaction, each batch's
//! expected tail is checked against what the table holds at that point (earlier batches of the
//! group included), and a batch that does not match is skipped and answered `Conflict`.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use stepjournal_codec::SessionId;

use crate::sql::{EncodedBatch, Place};
use crate::{Durability, StoreError};

/// One append waiting for a group.
#[derive(Debug)]
pub(super) struct Request {
    pub session: SessionId,
    pub place: Place,
    pub batch: EncodedBatch,
    pub durability: Durability,
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
/// (shared by every append of the group).
#[derive(Debug, Clone)]
pub(super) struct Unknown {
    pub reason: String,
    pub source: Arc<rusqlite::Error>,
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
}

impl Failure {
    pub(super) fn from_store(e: &StoreError) -> Self {
        match e {
            StoreError::Poisoned { first_failure } => Failure::Poisoned(first_failure.clone()),
            StoreError::Backend { context, source, .. } => {
                Failure::Backend { context: context.clone(), source: source.to_string() }
            }
            other => Failure::Backend { context: String::new(), source: other.to_string() },
        }
    }

    pub(super) fn into_store(self, backend: &'static str) -> StoreError {
        match self {
            Failure::Poisoned(first_failure) => StoreError::Poisoned { first_failure },
            Failure::Backend { context, source } => {
                StoreError::Backend { backend, context, source: source.into() }
            }
        }
    }

    fn internal(reason: &str) -> Outcome {
        Outcome::Failed(Failure::Backend { context: String::new(), source: reason.to_owned() })
    }
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    pending: Vec<(u64, Request)>,
    results: HashMap<u64, Outcome>,
    leading: bool,
    groups: u64,
}

/// The queue of appends waiting for a transaction.
#[derive(Debug, Default)]
pub(super) struct Queue {
    state: Mutex<State>,
    done: Condvar,
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

    /// Queues `request` and returns its outcome. The first caller to find no transaction
    /// running commits everything queued, with `commit`, and answers every caller in it.
    pub(super) fn submit(
        &self,
        request: Request,
        commit: impl Fn(&[Request]) -> Vec<Outcome>,
    ) -> Outcome {
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.pending.push((id, request));
        loop {
            if let Some(outcome) = state.results.remove(&id) {
                return outcome;
            }
            if !state.leading {
                state.leading = true;
                state.groups += 1;
                let group = std::mem::take(&mut state.pending);
                drop(state);
                let mut leader = Leader { queue: self, ids: Vec::new() };
                let (ids, requests): (Vec<u64>, Vec<Request>) = group.into_iter().unzip();
                leader.ids = ids;
                let outcomes = commit(&requests);
                state = self.lock();
                let ids = std::mem::take(&mut leader.ids);
                let mut outcomes = outcomes.into_iter();
                for id in ids {
                    let o = outcomes.next().unwrap_or_else(|| {
                        Failure::internal("the group commit gave no answer for this append")
                    });
                    state.results.insert(id, o);
                }
                state.leading = false;
                drop(leader);
                self.done.notify_all();
                continue;
            }
            state = self.done.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Hands leadership back if the commit panics, answering the group's appends with a failure.
struct Leader<'a> {
    queue: &'a Queue,
    ids: Vec<u64>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let mut state = self.queue.lock();
        for id in self.ids.drain(..) {
            state.results.insert(id, Failure::internal("the committing thread panicked"));
        }
        state.leading = false;
        drop(state);
        self.queue.done.notify_all();
    }
}
