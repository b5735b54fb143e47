//! Every Rust error the package can meet, mapped in one place to the code the JavaScript
//! `StepjournalError` carries. The native module throws plain errors whose message is
//! `SJ:<code>:<message>`; `lib/errors.js` turns them into `StepjournalError`s.

use std::fmt::Display;

use stepjournal::AnswerError;
use stepjournal::DriveError;
use stepjournal::backends::{AppendError, OpenError, StoreError};
use stepjournal::scenario::ScenarioError;
use stepjournal::writer::{BeginError, Refusal, WriteError};

/// An error with a code and the Rust message, as the native module throws it.
pub(crate) fn coded(code: &str, message: impl Display) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, format!("SJ:{code}:{message}"))
}

/// A Rust error the package reports with a code.
pub(crate) trait Coded: Display {
    /// The code: `fenced`, `conflict`, `outcome_unknown`, ...
    fn code(&self) -> String;

    /// The error as the native module throws it.
    fn thrown(&self) -> napi::Error {
        coded(&self.code(), self)
    }
}

/// `Err(e)` as the native module throws it.
pub(crate) fn thrown<E: Coded>(e: E) -> napi::Error {
    e.thrown()
}

impl Coded for StoreError {
    fn code(&self) -> String {
        match self {
            StoreError::Poisoned { .. } => "poisoned",
            StoreError::Corrupt { .. } => "corrupt",
            StoreError::ReadOnly { .. } => "read_only",
            _ => "store",
        }
        .to_owned()
    }
}

impl Coded for AppendError {
    fn code(&self) -> String {
        match self {
            AppendError::Conflict { .. } => "conflict".to_owned(),
            AppendError::OutcomeUnknown { .. } => "outcome_unknown".to_owned(),
            AppendError::Encode { .. } | AppendError::EmptyBatch => "encode".to_owned(),
            AppendError::Store(e) => e.code(),
            _ => "store".to_owned(),
        }
    }
}

impl Coded for OpenError {
    fn code(&self) -> String {
        match self {
            OpenError::Url { .. } | OpenError::FeatureDisabled { .. } => "invalid_url".to_owned(),
            OpenError::Locked { .. } => "locked".to_owned(),
            OpenError::NotAJournal { .. } | OpenError::NotASegment { .. } => {
                "not_a_journal".to_owned()
            }
            OpenError::Options { .. } => "invalid_options".to_owned(),
            OpenError::Store(e) => e.code(),
            _ => "store".to_owned(),
        }
    }
}

impl Coded for Refusal {
    /// `refused/<which>`: the refusal's kind after the slash.
    fn code(&self) -> String {
        let which = match self {
            Refusal::RepeatedCall { .. } => "repeated_call",
            Refusal::UnknownTool { .. } => "unknown_tool",
            Refusal::InvalidArguments { .. } => "invalid_arguments",
            Refusal::StepOpen { .. } => "step_open",
            Refusal::StepClosed { .. } => "step_closed",
            Refusal::UnknownCall { .. } => "unknown_call",
            Refusal::Resolved { .. } => "resolved",
            Refusal::PairedByPlan { .. } => "paired_by_plan",
            Refusal::ClientCall { .. } => "client_call",
            Refusal::AwaitingApproval { .. } => "awaiting_approval",
            Refusal::BodyStarted { .. } => "body_started",
            Refusal::MaxBodies { .. } => "max_bodies",
            Refusal::Behind { .. } => "behind",
            Refusal::BehindBlocked { .. } => "behind_blocked",
            Refusal::OpenCalls { .. } => "open_calls",
            Refusal::UseSuspend => "use_suspend",
            _ => "other",
        };
        format!("refused/{which}")
    }
}

impl Coded for WriteError {
    fn code(&self) -> String {
        match self {
            WriteError::Refused(r) => r.code(),
            WriteError::Fenced { .. } => "fenced".to_owned(),
            WriteError::Ended { .. } => "ended".to_owned(),
            WriteError::Broken { .. } => "broken".to_owned(),
            WriteError::Store { source, .. } => source.code(),
            WriteError::Encode { .. } => "encode".to_owned(),
            WriteError::Contended { .. } => "conflict".to_owned(),
            _ => "write".to_owned(),
        }
    }
}

impl Coded for BeginError {
    fn code(&self) -> String {
        match self {
            BeginError::Refused(_) => "validation_error".to_owned(),
            BeginError::Read { source, .. } | BeginError::Lease { source, .. } => source.code(),
            BeginError::Append { source, .. } => source.code(),
            BeginError::Contended { .. } => "conflict".to_owned(),
            BeginError::ShuttingDown { .. } => "shutting_down".to_owned(),
            BeginError::LeaseHeld { .. } => "lease_held".to_owned(),
            _ => "begin".to_owned(),
        }
    }
}

impl Coded for DriveError {
    fn code(&self) -> String {
        self.write_error().code()
    }
}

impl Coded for AnswerError {
    fn code(&self) -> String {
        match self {
            AnswerError::NotWaiting { .. } => "refused/not_waiting".to_owned(),
            AnswerError::Read { source, .. } => source.code(),
            AnswerError::Begin(e) => e.code(),
            AnswerError::Write { source, .. } => source.code(),
            _ => "answer".to_owned(),
        }
    }
}

impl Coded for ScenarioError {
    fn code(&self) -> String {
        "malformed_scenario".to_owned()
    }
}
