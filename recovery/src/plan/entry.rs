//! Which way an entry goes (recovery, redirect, stop) and the entries that are refused.

use stepjournal_codec::{
    CallId, CheckpointId, Coded, Entry, ErrorCode, ResumeMode, RunOutcome, StepNo,
};

use crate::SessionState;

/// An entry that is refused: the plan's `error` (`kind` `validation_error`); nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// `retry` named a checkpoint but carried no message.
    #[error(
        "`retry` from checkpoint `{checkpoint}` needs a `message`: retrying from a checkpoint \
         redirects the turn; use `resume` `from_checkpoint` to recover that step instead"
    )]
    RetryCheckpointWithoutMessage {
        /// The checkpoint named.
        checkpoint: CheckpointId,
    },
    /// `retry` with nothing, but the session's last run did not end `failed`.
    #[error(
        "`retry` without a message needs the session's last run to have ended `failed`, and {found}; \
         use `resume` or `wake` to recover, or `retry` with a `message` to redirect"
    )]
    RetryWithoutFailedRun {
        /// What the log shows instead.
        found: String,
    },
    /// The entry names a checkpoint no event of the log names.
    #[error(
        "checkpoint `{checkpoint}` is not named by any `reply_committed` or `step_commit` of the log"
    )]
    UnknownCheckpoint {
        /// The checkpoint named.
        checkpoint: CheckpointId,
    },
    /// The entry names a checkpoint that cannot be entered now.
    #[error("checkpoint `{checkpoint}` cannot be entered: {why}")]
    CheckpointNotEnterable {
        /// The checkpoint named.
        checkpoint: CheckpointId,
        /// Which checkpoint could be, and why.
        why: String,
    },
    /// The saved step's reply names one call id twice, so the log cannot say which call an event
    /// belongs to. The writer never writes such a reply.
    #[error(
        "the saved step {step}'s reply names call `{call}` twice: its events cannot be told apart, \
         so recovery refuses to decide it"
    )]
    RepeatedCall {
        /// The saved step.
        step: StepNo,
        /// The repeated id.
        call: CallId,
    },
}

impl ValidationError {
    /// The error's kind in the plan's JSON form: always `validation_error`.
    pub fn kind(&self) -> &'static str {
        self.code().as_str()
    }
}

impl Coded for ValidationError {
    fn code(&self) -> ErrorCode {
        match self {
            ValidationError::RetryCheckpointWithoutMessage { .. }
            | ValidationError::RetryWithoutFailedRun { .. }
            | ValidationError::UnknownCheckpoint { .. }
            | ValidationError::CheckpointNotEnterable { .. }
            | ValidationError::RepeatedCall { .. } => ErrorCode::ValidationError,
        }
    }
}

/// The way an accepted entry goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryMode {
    /// Recovery, after a `rewound` to the saved step's append checkpoint when `rewind`.
    Recover { rewind: bool },
    /// The message redirects the turn: nothing runs again.
    Redirect { message: String },
    /// Stop.
    Stop,
}

pub(crate) fn classify(state: &SessionState, entry: &Entry) -> Result<EntryMode, ValidationError> {
    match entry {
        Entry::Wake | Entry::Resume(ResumeMode::Continue) => {
            Ok(EntryMode::Recover { rewind: false })
        }
        Entry::Resume(ResumeMode::WithMessage { message }) | Entry::NewTurn { message } => {
            Ok(EntryMode::Redirect { message: message.clone() })
        }
        Entry::Resume(ResumeMode::FromCheckpoint { checkpoint }) => {
            let at_saved_append = enterable(state, checkpoint)?;
            // At the saved step's append checkpoint: rewind and recover that step. At the last
            // commit checkpoint (no saved step): there is nothing to recover.
            Ok(EntryMode::Recover { rewind: at_saved_append })
        }
        Entry::Retry { checkpoint: Some(checkpoint), message: None } => {
            Err(ValidationError::RetryCheckpointWithoutMessage { checkpoint: checkpoint.clone() })
        }
        Entry::Retry { checkpoint, message: Some(message) } => {
            if let Some(checkpoint) = checkpoint {
                enterable(state, checkpoint)?;
            }
            Ok(EntryMode::Redirect { message: message.clone() })
        }
        Entry::Retry { checkpoint: None, message: None } => {
            if state.last_run_outcome() == Some(RunOutcome::Failed) {
                Ok(EntryMode::Recover { rewind: state.saved_step().is_some() })
            } else {
                Err(ValidationError::RetryWithoutFailedRun { found: last_run_found(state) })
            }
        }
        Entry::Stop => Ok(EntryMode::Stop),
    }
}

/// Checks a checkpoint an entry names; `Ok(true)` when it is the saved step's append checkpoint,
/// `Ok(false)` when it is the last step commit's checkpoint and there is no saved step.
fn enterable(state: &SessionState, checkpoint: &CheckpointId) -> Result<bool, ValidationError> {
    if !state.names_checkpoint(checkpoint) {
        return Err(ValidationError::UnknownCheckpoint { checkpoint: checkpoint.clone() });
    }
    let refuse = |why: String| ValidationError::CheckpointNotEnterable {
        checkpoint: checkpoint.clone(),
        why,
    };
    match state.saved_step() {
        Some(saved) if &saved.checkpoint == checkpoint => Ok(true),
        Some(saved) => Err(refuse(format!(
            "only the saved step {}'s append checkpoint `{}` can be entered",
            saved.step, saved.checkpoint
        ))),
        None => match state.last_commit() {
            Some(commit) if &commit.checkpoint == checkpoint => Ok(false),
            Some(commit) => Err(refuse(format!(
                "there is no saved step; only the last step commit's checkpoint `{}` (step {}) \
                 can be entered",
                commit.checkpoint, commit.step
            ))),
            None => Err(refuse("there is no saved step and no step commit to enter".to_owned())),
        },
    }
}

fn last_run_found(state: &SessionState) -> String {
    let Some(end) = state.last_counting_run_end() else {
        return "no run has ended (or every `run_ended` was rewound)".to_owned();
    };
    match state.last_run() {
        Some(run) if run.seq > end.seq => format!(
            "run `{}` began (seq {}) after the last run ended and has not ended",
            run.run, run.seq
        ),
        _ => {
            format!("the last run `{}` ended `{}` (seq {})", end.run, end.outcome.as_str(), end.seq)
        }
    }
}
