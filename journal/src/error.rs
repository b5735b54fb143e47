//! [`Error`]: one error type that every error of the facade converts into, for a runtime that
//! wants one (`?` on any of the engine's results), with [`Result`] beside it.
//!
//! Each surface keeps its own typed error ([`BeginError`], [`WriteError`], [`DriveError`], ...),
//! which says exactly what can go wrong there; `Error` wraps whichever it was, keeps it as its
//! [`source`](std::error::Error::source)'s owner, and has its stable [`code`](Coded::code).

use stepjournal_backends::{AppendError, OpenError, StoreError};
use stepjournal_codec::{Coded, ErrorCode, IdError, JsonError, RefusalCode};
use stepjournal_recovery::{ConfigError, ValidationError};

use crate::drive::{AnswerError, DriveError, RecoverFailure};
#[cfg(feature = "schema")]
use crate::registry::RegistryError;
#[cfg(feature = "schema")]
use crate::scenario::ScenarioError;
use crate::writer::{BeginError, FinishError, JournalError, Refusal, WriteError};

/// Any error of the engine, as the surface that reported it gave it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A store's append failed or was refused.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// No journal was made over the store.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// An entry began no run.
    #[error(transparent)]
    Begin(#[from] BeginError),
    /// A run's append was not made.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A driven step did not finish.
    #[error(transparent)]
    Drive(#[from] DriveError),
    /// An answer from outside a run was not written.
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// A session was not recovered.
    #[error(transparent)]
    Recover(#[from] RecoverFailure),
    /// An id breaks the rule for ids.
    #[error(transparent)]
    Id(#[from] IdError),
    /// A text is not FORMAT.md's JSON form of an event.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// Recovery's settings are not acceptable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Recovery refused an entry.
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// A `tools` object is not FORMAT.md's shape.
    #[cfg(feature = "schema")]
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A recovery conformance scenario is not FORMAT.md's shape.
    #[cfg(feature = "schema")]
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// A result whose error is [`Error`] unless another is named.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::Write(WriteError::Refused(r))
    }
}

impl From<FinishError> for Error {
    /// The error alone (the body is dropped: its call stays open for recovery to decide).
    fn from(e: FinishError) -> Self {
        Error::Write(*e.error)
    }
}

impl From<Box<BeginError>> for Error {
    fn from(e: Box<BeginError>) -> Self {
        Error::Begin(*e)
    }
}

impl Error {
    /// The error inside, as the trait object every caller can hold.
    fn inner(&self) -> &dyn Coded {
        match self {
            Error::Open(e) => e,
            Error::Store(e) => e,
            Error::Append(e) => e,
            Error::Journal(e) => e,
            Error::Begin(e) => e,
            Error::Write(e) => e,
            Error::Drive(e) => e,
            Error::Answer(e) => e,
            Error::Recover(e) => e,
            Error::Id(e) => e,
            Error::Json(e) => e,
            Error::Config(e) => e,
            Error::Validation(e) => e,
            #[cfg(feature = "schema")]
            Error::Registry(e) => e,
            #[cfg(feature = "schema")]
            Error::Scenario(e) => e,
        }
    }
}

impl Coded for Error {
    fn code(&self) -> ErrorCode {
        self.inner().code()
    }

    fn refusal(&self) -> Option<RefusalCode> {
        self.inner().refusal()
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        reason = "a test fails by panicking, on the inputs it built itself"
    )]

    use stepjournal_codec::{CallId, SessionId};

    use super::*;

    fn code_of(e: impl Into<Error>) -> (ErrorCode, Option<RefusalCode>) {
        let e = e.into();
        (e.code(), e.refusal())
    }

    #[test]
    fn every_surface_s_error_converts_and_keeps_its_code() {
        let refusal = Refusal::Resolved { call: CallId::new("c1") };
        assert_eq!(code_of(refusal.clone()), (ErrorCode::Refused, Some(RefusalCode::Resolved)));
        let session = SessionId::new("s").unwrap();
        let begin = BeginError::ShuttingDown { session };
        assert_eq!(code_of(begin), (ErrorCode::ShuttingDown, None));
        let id = SessionId::new("").err().unwrap();
        assert_eq!(code_of(id), (ErrorCode::InvalidId, None));
        let poisoned = StoreError::Poisoned { first_failure: "EIO".into() };
        assert_eq!(code_of(AppendError::Store(poisoned)), (ErrorCode::Poisoned, None));
    }

    #[test]
    fn the_error_shows_the_message_of_the_error_inside() {
        let refusal = Refusal::Resolved { call: CallId::new("c1") };
        assert_eq!(Error::from(refusal.clone()).to_string(), refusal.to_string());
    }
}
