//! The requests appenders queue for the group commit, and how each is answered: through the
//! [`Completer`] of the future its caller awaits or waits on, so no thread is parked per
//! waiting request and waking one caller wakes no one else.

use std::io;
use std::sync::Arc;

use stepjournal_codec::SessionId;

use crate::{AppendAck, AppendError, Completer, Durability, RunHead, StoreError};

/// Why a request's group failed.
#[derive(Debug)]
pub(crate) enum GroupError {
    /// Nothing of the group reached the segment (or the store was poisoned before it).
    Store(StoreError),
    /// The group's write or sync failed after its bytes may have reached the segment.
    Unknown { context: String, source: io::Error },
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// Append `count` events from `first`, the last stamped `last_at` (unix milliseconds);
    /// `snapshot` is the seq of the batch's last `snapshot` event, when it holds one; `trim`
    /// where it trims its session, when it holds a `trimmed` event.
    Events { first: u64, count: u32, last_at: u64, snapshot: Option<u64>, trim: Option<u64> },
    /// Delete the session.
    Delete,
}

/// How a request is completed: the completer of its caller's future, and what it is told on
/// success.
#[derive(Debug)]
pub(crate) enum Completion {
    /// An append's caller: the acknowledgement.
    Append { completer: Completer<Result<AppendAck, AppendError>>, ack: AppendAck },
    /// A caller of the sync API that writes the group holding its request itself: answered by
    /// what the group commit returns to it, with no future between them.
    Inline { ack: AppendAck },
    /// A deletion's caller: whether the session existed (it did: a deletion of a session with
    /// no events is answered before it is queued).
    Delete { completer: Completer<Result<bool, StoreError>> },
}

/// One caller's batch, waiting for a group.
#[derive(Debug)]
pub(crate) struct Request {
    /// The session, its name shared with its pending tail's entry.
    pub session: Arc<str>,
    pub kind: RequestKind,
    /// The encoded frame.
    pub frame: Vec<u8>,
    /// Whether the caller asked for `fdatasync` before its acknowledgement.
    pub sync: bool,
    /// The session's head once the batch lands, when the batch changes it.
    pub head: Option<RunHead>,
    /// Whom to answer (taken when answered; a request dropped unanswered answers on drop).
    completion: Option<Completion>,
}

impl Request {
    /// An append of the frame, answered with `ack` once its group is written (and synced, when
    /// `ack` asks for it): through `completer`, or, with none, by the value
    /// [`finish`](Self::finish) returns to the caller of the sync API that writes the group
    /// itself (it found no leader).
    pub(crate) fn append(
        session: Arc<str>,
        kind: RequestKind,
        frame: Vec<u8>,
        head: Option<RunHead>,
        ack: AppendAck,
        completer: Option<Completer<Result<AppendAck, AppendError>>>,
    ) -> Request {
        debug_assert!(
            matches!(kind, RequestKind::Events { first, count, .. }
                if first == ack.first.get() && ack.next == ack.first.add(u64::from(count))),
            "an append's acknowledgement names the seqs its batch takes: {kind:?}, {ack:?}"
        );
        Request {
            session,
            kind,
            frame,
            sync: ack.durability >= Durability::Synced,
            head,
            completion: Some(match completer {
                Some(completer) => Completion::Append { completer, ack },
                None => Completion::Inline { ack },
            }),
        }
    }

    /// A deletion (always synced), answered through `completer`.
    pub(crate) fn delete(
        session: Arc<str>,
        frame: Vec<u8>,
        completer: Completer<Result<bool, StoreError>>,
    ) -> Request {
        Request {
            session,
            kind: RequestKind::Delete,
            frame,
            sync: true,
            head: None,
            completion: Some(Completion::Delete { completer }),
        }
    }

    /// Answers the caller: its group was written (`Ok`), or how it failed. An inline request's
    /// answer is returned, for its caller, who is the leader; every other caller is woken.
    pub(crate) fn finish(
        mut self,
        result: Result<(), GroupError>,
    ) -> Option<Result<AppendAck, AppendError>> {
        self.answer(result)
    }

    fn answer(&mut self, result: Result<(), GroupError>) -> Option<Result<AppendAck, AppendError>> {
        let completion = self.completion.take()?;
        match completion {
            Completion::Append { completer, ack } => {
                completer.complete(self.append_answer(ack, result));
            }
            Completion::Inline { ack } => return Some(self.append_answer(ack, result)),
            Completion::Delete { completer } => {
                let answer = match result {
                    Ok(()) => Ok(true),
                    Err(GroupError::Store(e)) => Err(e),
                    Err(GroupError::Unknown { context, source }) => {
                        Err(StoreError::Io { context, source })
                    }
                };
                completer.complete(answer);
            }
        }
        None
    }

    /// What an append's caller is told.
    fn append_answer(
        &self,
        ack: AppendAck,
        result: Result<(), GroupError>,
    ) -> Result<AppendAck, AppendError> {
        match result {
            Ok(()) => Ok(ack),
            Err(GroupError::Store(e)) => Err(AppendError::Store(e)),
            Err(GroupError::Unknown { context, source }) => Err(AppendError::OutcomeUnknown {
                session: SessionId::from_stored(&*self.session),
                expected: ack.first,
                reason: format!(
                    "{context} failed after the batch's bytes may have reached the segment; the \
                     store is poisoned: reopen it, which reads what landed"
                ),
                source: Some(source),
            }),
        }
    }
}

impl Drop for Request {
    /// A request dropped unanswered (a bug: every path answers, a leader that panics included)
    /// still answers: never a hang. Its message is made only here.
    fn drop(&mut self) {
        if self.completion.is_some() {
            let first_failure =
                "the file store's group committer went away without answering".to_owned();
            // An inline request's caller is the leader, unwinding: there is no one to return to.
            let _ = self.answer(Err(GroupError::Store(StoreError::Poisoned { first_failure })));
        }
    }
}

/// What a future resolves to if its completer is dropped without completing: never, since the
/// request holding it answers even when dropped; so nothing is made for it (a message would be
/// made for every append).
pub(crate) fn never_unanswered() -> StoreError {
    StoreError::Poisoned { first_failure: String::new() }
}
