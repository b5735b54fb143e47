//! [`DriveError`]: why `drive` did not finish a step.

use std::time::Duration;

use stepjournal_codec::{CallId, Coded, ErrorCode, RefusalCode, SessionId, StepNo};

use crate::writer::{BeginError, WriteError};

/// Why [`Step::drive`](crate::Step::drive) did not finish the step: a write the run could not
/// make, or a body past its deadline. What was written stays; the run's status says what
/// became of it (fenced, ended, broken, let go), and a later entry recovers the step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriveError {
    /// A write for one call failed.
    #[error(
        "driving step {step} of session `{session}`: {doing} for call `{call}` failed: {source}"
    )]
    Call {
        /// The session.
        session: SessionId,
        /// The step.
        step: StepNo,
        /// The call.
        call: CallId,
        /// What was being written.
        doing: &'static str,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// The step's own write (its commit, the suspension) failed.
    #[error("driving step {step} of session `{session}`: {doing} failed: {source}")]
    Step {
        /// The session.
        session: SessionId,
        /// The step.
        step: StepNo,
        /// What was being written.
        doing: &'static str,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// A call's body overran its deadline ([`DriveOptions::deadline`](crate::DriveOptions),
    /// [`Tools::deadline`](crate::Tools::deadline)): the run was let go as if it had crashed
    /// (its signal fired, its bodies were dropped, the late body's result is refused). Begin a
    /// `wake` to go on ([`Journal::drive_within`](crate::Journal::drive_within) does).
    #[error(
        "driving step {step} of session `{session}`: the body of call `{call}` overran its \
         deadline of {after:?}; the run was let go: a `wake` goes on"
    )]
    Deadline {
        /// The session.
        session: SessionId,
        /// The step.
        step: StepNo,
        /// The call.
        call: CallId,
        /// Its deadline.
        after: Duration,
    },
    /// The `wake` that was to go on after a deadline did not begin
    /// ([`Journal::drive_within`](crate::Journal::drive_within)).
    #[error("the wake of session `{session}` after a deadline did not begin: {source}")]
    Wake {
        /// The session.
        session: SessionId,
        /// Why.
        #[source]
        source: Box<BeginError>,
    },
}

impl DriveError {
    /// The write error inside, when a write failed.
    pub fn write_error(&self) -> Option<&WriteError> {
        match self {
            DriveError::Call { source, .. } | DriveError::Step { source, .. } => Some(source),
            DriveError::Deadline { .. } | DriveError::Wake { .. } => None,
        }
    }
}

impl Coded for DriveError {
    fn code(&self) -> ErrorCode {
        match self {
            DriveError::Call { source, .. } | DriveError::Step { source, .. } => source.code(),
            DriveError::Deadline { .. } => ErrorCode::Deadline,
            DriveError::Wake { source, .. } => source.code(),
        }
    }

    fn refusal(&self) -> Option<RefusalCode> {
        self.write_error().and_then(Coded::refusal)
    }
}
