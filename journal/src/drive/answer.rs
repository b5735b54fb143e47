//! Answers from outside the run: a client's answer to a client call, a decision on an
//! approval-gated call, written through a run of their own (a `wake` that resumes the step).

use stepjournal_codec::{
    CallId, CallKind, Coded, Entry, ErrorCode, RawJson, RefusalCode, SessionId,
};
use stepjournal_recovery::ApprovalState;

use crate::writer::{BeginError, Journal, Run, WriteError};

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
    /// through a run of its own, a `wake` that recovers the step, the answer written in it.
    /// Returns that run, whose step is open: go on with [`Run::drive`](crate::Run::drive).
    ///
    /// Refused, nothing written, when the saved step has no unresolved client call `call`
    /// ([`AnswerError::NotWaiting`]).
    pub async fn answer_client(
        &self,
        session: &SessionId,
        call: &CallId,
        output: RawJson,
    ) -> Result<Run, AnswerError> {
        self.waiting(session, call, "a client answer", |kind, _| kind == CallKind::Client)?;
        let run = self.woken(session).await?;
        let written = match run.step() {
            Some(step) => step.client_answer_async(call, output).await,
            None => return Err(not_waiting(session, call, "a client answer")),
        };
        written.map_err(|source| write_error(session, call, source))?;
        Ok(run)
    }

    /// Records the decision on approval-gated call `call` of `session`'s saved step
    /// (`approval_decided`), through a run of its own as
    /// [`answer_client`](Self::answer_client) does; returns that run.
    ///
    /// Refused, nothing written, when the saved step has no approval-gated call `call` with no
    /// decision ([`AnswerError::NotWaiting`]).
    pub async fn decide_approval(
        &self,
        session: &SessionId,
        call: &CallId,
        approved: bool,
    ) -> Result<Run, AnswerError> {
        let what = "an approval decision";
        self.waiting(session, call, what, |kind, approval| {
            kind == CallKind::Approval && approval == ApprovalState::Undecided
        })?;
        let run = self.woken(session).await?;
        let written = match run.step() {
            Some(step) => step.approval_async(call, approved).await,
            None => return Err(not_waiting(session, call, what)),
        };
        written.map_err(|source| write_error(session, call, source))?;
        Ok(run)
    }

    /// Checks, writing nothing, that `call` is an unresolved call of the saved step that
    /// `fits`.
    fn waiting(
        &self,
        session: &SessionId,
        call: &CallId,
        what: &'static str,
        fits: impl Fn(CallKind, ApprovalState) -> bool,
    ) -> Result<(), AnswerError> {
        let state = self
            .state(session)
            .map_err(|source| AnswerError::Read { session: session.clone(), source })?;
        let waits = state.saved_step().is_some_and(|reply| {
            state
                .calls_of(reply)
                .iter()
                .any(|r| r.id() == call && !r.is_resolved() && fits(r.kind(), r.approval()))
        });
        if waits { Ok(()) } else { Err(not_waiting(session, call, what)) }
    }

    /// The run of `session` open here, or else a `wake` run of it.
    async fn woken(&self, session: &SessionId) -> Result<Run, AnswerError> {
        if let Some(run) = self.open_run(session) {
            return Ok(run);
        }
        self.begin_run_async(session, Entry::Wake)
            .await
            .map_err(|e| AnswerError::Begin(Box::new(e)))
    }
}

fn not_waiting(session: &SessionId, call: &CallId, what: &'static str) -> AnswerError {
    AnswerError::NotWaiting { session: session.clone(), call: call.clone(), what }
}

fn write_error(session: &SessionId, call: &CallId, source: WriteError) -> AnswerError {
    AnswerError::Write { session: session.clone(), call: call.clone(), source: Box::new(source) }
}
