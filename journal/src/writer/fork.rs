//! [`Journal::fork`]: a new session that goes on from a committed step of another.
//!
//! The new session's log opens with `forked_from` (the original, the seq and checkpoint of the
//! `step_commit` forked at) and the `snapshot` of the original's state there
//! ([`SessionState::fork_snapshot`]), appended as one batch at seq 0 by the store's
//! compare-and-set: of two forks racing to the same new session, one lands and the other finds
//! it taken. The original is only read. A fold of the fork (whole, or from its snapshot) starts
//! from the original's state at that commit, so every entry plans on the fork as it would have
//! on the original right after the commit.

use stepjournal_backends::{AppendError, StoreError};
use stepjournal_codec::{
    CallId, CheckpointId, Coded, ErrorCode, Event, EventKind, ForkedFrom, Record, Seq, SessionId,
    Stamped, StepNo,
};
use stepjournal_recovery::SessionState;

use super::Journal;
use super::wait::block_on;

/// Why [`Journal::fork`] made no fork. Nothing was written, except where
/// [`ForkError::Append`] says the store cannot tell.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The original session has no events.
    #[error("cannot fork session `{session}`: it has no events (no such session)")]
    NoSession {
        /// The session to fork.
        session: SessionId,
    },
    /// No `reply_committed` or `step_commit` of the original names the checkpoint.
    #[error(
        "cannot fork session `{session}` at checkpoint `{checkpoint}`: no step of the session \
         names it"
    )]
    UnknownCheckpoint {
        /// The session to fork.
        session: SessionId,
        /// The checkpoint asked for.
        checkpoint: CheckpointId,
    },
    /// The checkpoint is the append checkpoint of a saved step whose calls are still open:
    /// forking there would leave its calls in flight in two sessions. Fork at an earlier step's
    /// commit, or once the step is committed, at its commit checkpoint.
    #[error(
        "cannot fork session `{session}` at checkpoint `{checkpoint}`: it is the reply of step \
         {step} (seq {seq}), saved with calls still open ({}); its calls would be in flight in \
         two sessions. Fork at a step commit's checkpoint",
        .open.iter().map(CallId::as_str).collect::<Vec<_>>().join(", ")
    )]
    OpenCalls {
        /// The session to fork.
        session: SessionId,
        /// The checkpoint asked for.
        checkpoint: CheckpointId,
        /// The saved step.
        step: StepNo,
        /// Where its `reply_committed` is.
        seq: Seq,
        /// Its unresolved calls, in reply order.
        open: Vec<CallId>,
    },
    /// The checkpoint names an event that is not a `step_commit` (a reply's append
    /// checkpoint): a fork starts only at a committed step. `commit` names the step's commit
    /// checkpoint when it has one.
    #[error(
        "cannot fork session `{session}` at checkpoint `{checkpoint}`: it names a `{kind}` \
         (seq {seq}), not a step commit{}",
        .commit.as_ref().map(|c| format!("; fork at its step's commit `{c}`")).unwrap_or_default()
    )]
    NotAStepCommit {
        /// The session to fork.
        session: SessionId,
        /// The checkpoint asked for.
        checkpoint: CheckpointId,
        /// The type of the event it names.
        kind: EventKind,
        /// Where that event is.
        seq: Seq,
        /// The commit checkpoint of the same step, if it was committed.
        commit: Option<CheckpointId>,
    },
    /// The `step_commit` does not close the last reply's step there (a log not written by this
    /// writer): the state there is not at a committed step boundary.
    #[error(
        "cannot fork session `{session}` at checkpoint `{checkpoint}` (seq {seq}): the log is \
         not at a committed step boundary there"
    )]
    NotABoundary {
        /// The session to fork.
        session: SessionId,
        /// The checkpoint asked for.
        checkpoint: CheckpointId,
        /// Where the `step_commit` is.
        seq: Seq,
    },
    /// The new session's id breaks the rule every session id keeps (see
    /// [`SessionId`]). Nothing was written.
    #[error("cannot fork into session `{session}`: {source}")]
    InvalidSession {
        /// The id given.
        session: SessionId,
        /// What is wrong with it.
        #[source]
        source: stepjournal_codec::IdError,
    },
    /// The new session already has events (or is the original): a fork never writes into an
    /// existing session. Nothing was written.
    #[error(
        "cannot fork into session `{session}`: it already exists ({events} events); nothing \
         was written"
    )]
    SessionExists {
        /// The new session.
        session: SessionId,
        /// Its events.
        events: u64,
    },
    /// A session could not be read.
    #[error("cannot read session `{session}` to fork it: {source}")]
    Read {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The fork's batch could not be appended. Nothing was written, unless the source is
    /// [`AppendError::OutcomeUnknown`] and the new session could not be read back: read it
    /// before forking again.
    #[error("cannot write the fork into session `{session}`: {source}")]
    Append {
        /// The new session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: AppendError,
    },
}

impl Coded for ForkError {
    fn code(&self) -> ErrorCode {
        match self {
            ForkError::NoSession { .. }
            | ForkError::UnknownCheckpoint { .. }
            | ForkError::OpenCalls { .. }
            | ForkError::NotAStepCommit { .. }
            | ForkError::NotABoundary { .. } => ErrorCode::ValidationError,
            ForkError::SessionExists { .. } => ErrorCode::Conflict,
            ForkError::InvalidSession { .. } => ErrorCode::InvalidId,
            ForkError::Read { source, .. } => source.code(),
            ForkError::Append { source, .. } => source.code(),
        }
    }
}

impl Journal {
    /// Forks `session` at `checkpoint`, a `step_commit` checkpoint of it, into `new_session`:
    /// appends `forked_from` and the snapshot of `session`'s state at that commit as the new
    /// session's first batch (seq 0, compare-and-set on an empty session). `session` is only
    /// read. Returns the new session's events, as written.
    ///
    /// Refused, with nothing written: a checkpoint no step names, one that is not a step
    /// commit (a saved step's reply with calls still open: [`ForkError::OpenCalls`]), a
    /// `new_session` that has events ([`ForkError::SessionExists`], also when another fork
    /// lands there first).
    ///
    /// The fork has no run: its first entry (a `new_turn`, a `wake`, ...) plans as the same
    /// entry would have on `session` right after the commit. Its
    /// [`transcript`](Self::transcript) shows `session`'s turns up to the fork first.
    pub fn fork(
        &self,
        session: &SessionId,
        checkpoint: &CheckpointId,
        new_session: &SessionId,
    ) -> Result<Vec<Record>, ForkError> {
        block_on(self.fork_async(session, checkpoint, new_session))
    }

    /// [`fork`](Self::fork), awaited: the reads and the append made on the completion-based
    /// path.
    ///
    /// **Dropped before it finished**: the fork's batch may have landed whole (the new session
    /// then exists, a complete fork) or not at all (nothing was written); never half of it.
    pub async fn fork_async(
        &self,
        session: &SessionId,
        checkpoint: &CheckpointId,
        new_session: &SessionId,
    ) -> Result<Vec<Record>, ForkError> {
        let read = |session: &SessionId| {
            let session = session.clone();
            move |source| ForkError::Read { session, source }
        };
        let exists =
            |events: u64| ForkError::SessionExists { session: new_session.clone(), events };
        if let Err(source) = new_session.validate() {
            return Err(ForkError::InvalidSession { session: new_session.clone(), source });
        }
        if new_session == session {
            let tail = self.store.tail_async(session).await.map_err(read(session))?;
            return Err(exists(tail.get()));
        }
        let taken = self.store.tail_async(new_session).await.map_err(read(new_session))?;
        if taken != Seq(0) {
            return Err(exists(taken.get()));
        }
        let records = self.store.read_async(session, Seq(0)..Seq(u64::MAX)).await;
        let records = records.map_err(read(session))?;
        let batch = fork_batch(session, checkpoint, &records)?;
        let at = self.options.clock.now();
        let stamped: Vec<Stamped> = batch.into_iter().map(|e| Stamped::at(at, e)).collect();
        let appended =
            self.store.append_async(new_session, Seq(0), &stamped, self.options.durability).await;
        let written = || -> Vec<Record> {
            stamped
                .iter()
                .enumerate()
                .map(|(i, s)| Record {
                    session: new_session.clone(),
                    seq: Seq(i as u64),
                    at: s.at,
                    event: s.event.clone(),
                })
                .collect()
        };
        match appended {
            Ok(_) => Ok(written()),
            Err(AppendError::Conflict { actual, .. }) => Err(exists(actual.get())),
            Err(source @ AppendError::OutcomeUnknown { .. }) => {
                // Read back where the batch was to land: it landed whole or not at all.
                let range = Seq(0)..Seq(stamped.len() as u64);
                match self.store.read_async(new_session, range).await {
                    Ok(found)
                        if found.len() == stamped.len()
                            && found.iter().zip(&stamped).all(|(r, s)| r.event == s.event) =>
                    {
                        Ok(written())
                    }
                    _ => Err(ForkError::Append { session: new_session.clone(), source }),
                }
            }
            Err(source) => Err(ForkError::Append { session: new_session.clone(), source }),
        }
    }
}

/// The batch a fork of `session` (its whole log: `records`) at `checkpoint` opens with:
/// `forked_from`, then the snapshot of the state folded up to and including that step commit.
fn fork_batch(
    session: &SessionId,
    checkpoint: &CheckpointId,
    records: &[Record],
) -> Result<Vec<Event>, ForkError> {
    if records.is_empty() {
        return Err(ForkError::NoSession { session: session.clone() });
    }
    let named = |r: &&Record| match &r.event {
        Event::StepCommit(c) => &c.checkpoint == checkpoint,
        Event::ReplyCommitted(c) => &c.checkpoint == checkpoint,
        _ => false,
    };
    // The latest event naming it: a step commit wins over a reply that shares its checkpoint.
    let commit = records
        .iter()
        .rev()
        .find(|r| matches!(&r.event, Event::StepCommit(c) if &c.checkpoint == checkpoint));
    let Some(commit) = commit else {
        // A fork forked again at the commit it opens with: the same fork of its original.
        if let [first, second, ..] = records
            && let Event::ForkedFrom(forked) = &first.event
            && &forked.checkpoint == checkpoint
            && let Event::Snapshot(snapshot) = &second.event
            && first.seq == Seq(0)
        {
            let opening = [first.event.clone(), second.event.clone()];
            if crate::recovery::fold(&opening).snapshot_seq() == Some(Seq(1)) {
                return Ok(vec![
                    Event::ForkedFrom(forked.clone()),
                    Event::from((**snapshot).clone()),
                ]);
            }
        }
        let Some(reply) = records.iter().rev().find(named) else {
            return Err(ForkError::UnknownCheckpoint {
                session: session.clone(),
                checkpoint: checkpoint.clone(),
            });
        };
        return Err(not_a_commit(session, checkpoint, reply, records));
    };
    let mut state = SessionState::default();
    for r in records.iter().take_while(|r| r.seq <= commit.seq) {
        state.apply(&r.event);
    }
    let Some(snapshot) = state.fork_snapshot() else {
        return Err(ForkError::NotABoundary {
            session: session.clone(),
            checkpoint: checkpoint.clone(),
            seq: commit.seq,
        });
    };
    let forked = ForkedFrom {
        original: session.clone(),
        commit_seq: commit.seq,
        checkpoint: checkpoint.clone(),
    };
    Ok(vec![Event::ForkedFrom(forked), Event::from(snapshot)])
}

/// Why a `reply_committed` checkpoint is no fork point: its step is saved with calls open, or
/// it is not a commit (the step's commit checkpoint named when there is one).
fn not_a_commit(
    session: &SessionId,
    checkpoint: &CheckpointId,
    reply: &Record,
    records: &[Record],
) -> ForkError {
    let Event::ReplyCommitted(r) = &reply.event else {
        return ForkError::UnknownCheckpoint {
            session: session.clone(),
            checkpoint: checkpoint.clone(),
        };
    };
    let commit = records.iter().skip_while(|c| c.seq <= reply.seq).find_map(|c| match &c.event {
        Event::StepCommit(c) if c.step == r.step => Some(c.checkpoint.clone()),
        _ => None,
    });
    if commit.is_none() {
        let mut state = SessionState::default();
        records.iter().for_each(|r| state.apply(&r.event));
        let open: Vec<CallId> = match state.saved_step().filter(|s| s.seq == reply.seq) {
            Some(saved) => state
                .calls_of(saved)
                .iter()
                .filter(|c| !c.is_resolved())
                .map(|c| c.id().clone())
                .collect(),
            None => Vec::new(),
        };
        if !open.is_empty() {
            return ForkError::OpenCalls {
                session: session.clone(),
                checkpoint: checkpoint.clone(),
                step: r.step,
                seq: reply.seq,
                open,
            };
        }
    }
    ForkError::NotAStepCommit {
        session: session.clone(),
        checkpoint: checkpoint.clone(),
        kind: EventKind::ReplyCommitted,
        seq: reply.seq,
        commit,
    }
}

/// How many forks deep [`Journal::transcript`] follows `forked_from` (a session deleted and
/// written again could otherwise lead it round in a circle).
const FOLLOW_FORKS: usize = 64;

impl Journal {
    /// The transcript items of the original of a fork up to the fork point, following the
    /// original's own `forked_from`; none when the original no longer holds that step commit.
    pub(super) async fn before_fork(
        &self,
        fork: &ForkedFrom,
    ) -> Result<Vec<stepjournal_recovery::TranscriptItem>, StoreError> {
        let mut parts = Vec::new();
        let mut next = Some(fork.clone());
        for _ in 0..FOLLOW_FORKS {
            let Some(fork) = next.take() else { break };
            let end = fork.commit_seq.next();
            let records = self.store.read_async(&fork.original, Seq(0)..end).await?;
            let holds = records.last().is_some_and(|r| {
                r.seq == fork.commit_seq
                    && matches!(&r.event, Event::StepCommit(c) if c.checkpoint == fork.checkpoint)
            });
            if !holds {
                break;
            }
            let mut state = SessionState::default();
            records.iter().for_each(|r| state.apply(&r.event));
            parts.push(stepjournal_recovery::transcript(&state));
            next = state.forked_from().cloned();
        }
        Ok(parts.into_iter().rev().flatten().collect())
    }
}
