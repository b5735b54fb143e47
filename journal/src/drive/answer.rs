//! Answers from outside the run: a client's answer to a client call, a decision on an
//! approval-gated call, written through a run of their own (a `wake` that resumes the step).

use stepjournal_codec::{
    ApprovalDecided, CallId, CallKind, ClientAnswer, Coded, Entry, ErrorCode, Event, RawJson,
    RefusalCode, Seq, SessionId,
};
use stepjournal_recovery::ApprovalState;

use crate::writer::{Begin, BeginError, Journal, Run, WriteError};

/// Why an answer was not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The session's saved step has no such call waiting for this answer; nothing was written.
    #[error("session `{session}` has no call `{call}` waiting for {what}; nothing was written")]
    NotWaiting {
        /// The session.
        session: SessionId,
        /// The call named.
        call: CallId,
        /// The answer given.
        what: &'static str,
    },
    /// The session's log could not be read.
    #[error("cannot read session `{session}`: {source}")]
    Read {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: stepjournal_backends::StoreError,
    },
    /// The run that writes the answer did not begin.
    #[error(transparent)]
    Begin(#[from] Box<BeginError>),
    /// The answer's append failed.
    #[error("writing the answer to call `{call}` of session `{session}`: {source}")]
    Write {
        /// The session.
        session: SessionId,
        /// The call.
        call: CallId,
        /// Why.
        #[source]
        source: Box<WriteError>,
    },
}

impl Coded for AnswerError {
    fn code(&self) -> ErrorCode {
        match self {
            AnswerError::NotWaiting { .. } => ErrorCode::Refused,
            AnswerError::Read { source, .. } => source.code(),
            AnswerError::Begin(e) => e.code(),
            AnswerError::Write { source, .. } => source.code(),
        }
    }

    fn refusal(&self) -> Option<RefusalCode> {
        match self {
            AnswerError::NotWaiting { .. } => Some(RefusalCode::NotWaiting),
            AnswerError::Read { .. } | AnswerError::Begin(_) => None,
            AnswerError::Write { source, .. } => source.refusal(),
        }
    }
}

impl Journal {
    /// Writes the client's answer to client call `call` of `session`'s saved step
    /// (`client_answer`): through the session's run open in this journal if there is one, else
    /// in the batch of a run of its own, a `wake` that recovers the step. Returns that run,
    /// whose step is open: go on with [`Run::drive`](crate::Run::drive).
    ///
    /// The answer applies to the call as this journal read it: the wake is appended, with the
    /// answer, at the tail read, or not at all. When another actor wrote meanwhile, the session
    /// is read again: if the call was answered, or planned again by a run begun since, the
    /// answer is refused and nothing is written ([`AnswerError::NotWaiting`]); never does it
    /// land on a newer attempt, nor fence a run that another answer woke. A run another owner
    /// holds by a live lease is not fenced either ([`BeginError::LeaseHeld`]).
    ///
    /// Refused, nothing written, when the saved step has no unresolved client call `call`
    /// ([`AnswerError::NotWaiting`]).
    ///
    /// **Dropped before it finished**: the wake's batch, carrying the answer, may have landed;
    /// the session then holds a run no handle reaches, a crashed one that the next
    /// [`sessions_to_recover`](Journal::sessions_to_recover) lists (its lease, if taken, is
    /// released by the keeper).
    pub async fn answer_client(
        &self,
        session: &SessionId,
        call: &CallId,
        output: RawJson,
    ) -> Result<Run, AnswerError> {
        let what = "a client answer";
        if let Some(run) = self.open_run(session) {
            let written = match run.step() {
                Some(step) => step.client_answer_async(call, output).await,
                None => return Err(not_waiting(session, call, what)),
            };
            written.map_err(|source| write_error(session, call, source))?;
            return Ok(run);
        }
        let answer = Event::ClientAnswer(ClientAnswer { call: call.clone(), output });
        self.decide(session, call, what, answer, |kind, _| kind == CallKind::Client).await
    }

    /// Records the decision on approval-gated call `call` of `session`'s saved step
    /// (`approval_decided`), as [`answer_client`](Self::answer_client) records an answer: at the
    /// tail read, or not at all; returns the run it went through.
    ///
    /// Refused, nothing written, when the saved step has no approval-gated call `call` with no
    /// decision ([`AnswerError::NotWaiting`]).
    ///
    /// **Dropped before it finished**: the wake's batch, carrying the answer, may have landed;
    /// the session then holds a run no handle reaches, a crashed one that the next
    /// [`sessions_to_recover`](Journal::sessions_to_recover) lists (its lease, if taken, is
    /// released by the keeper).
    pub async fn decide_approval(
        &self,
        session: &SessionId,
        call: &CallId,
        approved: bool,
    ) -> Result<Run, AnswerError> {
        let what = "an approval decision";
        if let Some(run) = self.open_run(session) {
            let written = match run.step() {
                Some(step) => step.approval_async(call, approved).await,
                None => return Err(not_waiting(session, call, what)),
            };
            written.map_err(|source| write_error(session, call, source))?;
            return Ok(run);
        }
        let decision = Event::ApprovalDecided(ApprovalDecided { call: call.clone(), approved });
        self.decide(session, call, what, decision, |kind, approval| {
            kind == CallKind::Approval && approval == ApprovalState::Undecided
        })
        .await
    }

    /// Appends a `wake` and `event` (the answer to `call`) in one batch at the tail where
    /// `call` was read waiting; after another actor's append, reads again and goes on only
    /// while the call still waits and no run began or ended since.
    async fn decide(
        &self,
        session: &SessionId,
        call: &CallId,
        what: &'static str,
        event: Event,
        fits: impl Fn(CallKind, ApprovalState) -> bool,
    ) -> Result<Run, AnswerError> {
        let mut read = self.waiting(session, call, what, &fits)?;
        for _ in 0..self.options.begin_attempts.max(1) {
            let mut wake = Begin { at: Some(read), with: vec![event.clone()], ..Begin::default() };
            if crate::plant::active(crate::plant::WriterPlant::DecisionIgnoresTail) {
                wake.at = None;
            }
            match self.begin(session, Entry::Wake, wake).await {
                Ok(run) => return Ok(run),
                Err(BeginError::Changed { .. }) => {}
                Err(e) => return Err(AnswerError::Begin(Box::new(e))),
            }
            let now = self.waiting(session, call, what, &fits)?;
            let records = self
                .store
                .read_async(session, read..now)
                .await
                .map_err(|source| AnswerError::Read { session: session.clone(), source })?;
            if records.iter().any(|r| matches!(r.event, Event::RunStarted(_) | Event::RunEnded(_)))
            {
                // A run began or ended since the call was read: what it waits for now is that
                // run's to decide, not this answer's.
                return Err(not_waiting(session, call, what));
            }
            read = now;
        }
        Err(AnswerError::Begin(Box::new(BeginError::Contended {
            session: session.clone(),
            attempts: self.options.begin_attempts,
        })))
    }

    /// Checks, writing nothing, that `call` is an unresolved call of the saved step that
    /// `fits`; returns the tail read.
    fn waiting(
        &self,
        session: &SessionId,
        call: &CallId,
        what: &'static str,
        fits: impl Fn(CallKind, ApprovalState) -> bool,
    ) -> Result<Seq, AnswerError> {
        let state = self
            .state(session)
            .map_err(|source| AnswerError::Read { session: session.clone(), source })?;
        let waits = state.saved_step().is_some_and(|reply| {
            state
                .calls_of(reply)
                .iter()
                .any(|r| r.id() == call && !r.is_resolved() && fits(r.kind(), r.approval()))
        });
        if waits { Ok(Seq(state.len())) } else { Err(not_waiting(session, call, what)) }
    }
}

fn not_waiting(session: &SessionId, call: &CallId, what: &'static str) -> AnswerError {
    AnswerError::NotWaiting { session: session.clone(), call: call.clone(), what }
}

fn write_error(session: &SessionId, call: &CallId, source: WriteError) -> AnswerError {
    AnswerError::Write { session: session.clone(), call: call.clone(), source: Box::new(source) }
}
