//! The plan: what an entry writes and what becomes of every call of the saved step.

mod decide;
mod entry;
#[cfg(test)]
mod tests;

use stepjournal_codec::{
    Attempt, CallId, CheckpointId, DispatchId, Entry, Event, Message, PairReason, Paired, Rewound,
    Role, RunEnded, RunId, RunOutcome, RunStarted, SessionId, StepCommit, StepNo,
};

use crate::{Config, SessionState, ToolRegistry};
use entry::Mode;
pub use entry::ValidationError;

/// The run an entry begins, with the ids the writer mints outside the fold (so it stays pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// The new run's id (`run_started`; for `stop`, the `run_ended` names the stopped run).
    pub run: RunId,
    /// How it enters.
    pub entry: Entry,
    /// The checkpoint of the `step_commit` a redirect or a stop writes to close the saved step.
    pub commit_checkpoint: CheckpointId,
}

/// What becomes of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Resolved: it keeps its result, answer, denial or pairing.
    Keep,
    /// Start a body: same dispatch id on every attempt. `dispatch` is `None` only when the log
    /// holds no `dispatch_minted` for the call; the writer mints one before the body starts.
    Run {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
        /// The attempt the body starts as: bodies started so far + 1.
        attempt: Attempt,
    },
    /// Answered without a result: a `paired` is among the appends.
    Pair {
        /// Why.
        reason: PairReason,
    },
    /// Left to the client's answer or the approval.
    Await,
    /// Re-attach to the remote child.
    Reattach {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
        /// The child's session.
        child: SessionId,
    },
    /// Start the remote child, keyed on the dispatch id (so it happens once).
    StartChild {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
    },
    /// Re-enter the persistent companion's child phase.
    ReenterChild {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
    },
}

impl Action {
    /// The action's name in the plan's JSON form.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Run { .. } => "run",
            Action::Pair { .. } => "pair",
            Action::Await => "await",
            Action::Reattach { .. } => "reattach",
            Action::StartChild { .. } => "start_child",
            Action::ReenterChild { .. } => "reenter_child",
        }
    }

    /// Whether the action starts or resumes work outside the log (a body or a child).
    pub fn starts_work(&self) -> bool {
        matches!(
            self,
            Action::Run { .. }
                | Action::Reattach { .. }
                | Action::StartChild { .. }
                | Action::ReenterChild { .. }
        )
    }
}

/// The rule that decided a call: a stable id from [`crate::rules`] and a sentence for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule's stable id, such as `order.group`.
    pub id: &'static str,
    /// Why it applied to this call.
    pub why: String,
}

/// One call's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    /// The call.
    pub call: CallId,
    /// What becomes of it.
    pub action: Action,
    /// The rule that decided.
    pub rule: Rule,
}

/// What an entry does: computed by [`plan`], applied by the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Set when the entry is refused: then `step` is `None` and `calls` and `appends` are empty.
    pub error: Option<ValidationError>,
    /// The saved step's number, if there is one.
    pub step: Option<StepNo>,
    /// Every call of the saved step, in reply order.
    pub calls: Vec<CallPlan>,
    /// The events the entry writes, in order, before anything runs.
    pub appends: Vec<Event>,
}

impl Plan {
    fn refused(error: ValidationError) -> Self {
        Plan { error: Some(error), step: None, calls: Vec::new(), appends: Vec::new() }
    }

    /// The decision for one call.
    pub fn call(&self, id: &CallId) -> Option<&CallPlan> {
        self.calls.iter().find(|c| &c.call == id)
    }
}

/// Decides what `new_run.entry` does over the session folded in `state`, with the tool registry
/// as it is now. Pure: the same inputs give the same plan.
///
/// The rules are FORMAT.md's, exactly; `docs/recovery.md` states them with their rule ids.
pub fn plan(
    state: &SessionState,
    new_run: &NewRun,
    registry: &dyn ToolRegistry,
    config: &Config,
) -> Plan {
    let mode = match entry::classify(state, &new_run.entry) {
        Ok(mode) => mode,
        Err(error) => return Plan::refused(error),
    };
    let saved = state.saved_step();
    if let Some(reply) = saved
        && let Some(call) = &reply.repeated_call
    {
        return Plan::refused(ValidationError::RepeatedCall {
            step: reply.step,
            call: call.clone(),
        });
    }
    let calls = saved.map(|r| state.calls_of(r)).unwrap_or_default();
    let decisions = match &mode {
        Mode::Recover { rewind } => decide::recover(&calls, *rewind, registry, config),
        Mode::Redirect { .. } => decide::redirect(&calls),
        Mode::Stop => decide::stop(&calls),
    };

    let mut appends = Vec::new();
    if !matches!(mode, Mode::Stop) {
        appends.push(Event::RunStarted(RunStarted {
            run: new_run.run.clone(),
            entry: new_run.entry.clone(),
        }));
    }
    if let (Mode::Recover { rewind: true }, Some(reply)) = (&mode, saved) {
        appends.push(Event::Rewound(Rewound { to: reply.checkpoint.clone() }));
    }
    for (record, decision) in calls.iter().zip(&decisions) {
        if let Action::Pair { reason } = decision.action {
            appends.push(Event::Paired(Paired {
                call: record.id().clone(),
                reason,
                message: reason.model_message().to_owned(),
                partial: record.partial(),
            }));
        }
    }
    if let (Mode::Redirect { .. } | Mode::Stop, Some(reply)) = (&mode, saved) {
        appends.push(Event::StepCommit(StepCommit {
            step: reply.step,
            checkpoint: new_run.commit_checkpoint.clone(),
        }));
    }
    match &mode {
        Mode::Redirect { message } => {
            appends.push(Event::Message(Message { role: Role::User, text: message.clone() }))
        }
        Mode::Stop => appends.push(Event::RunEnded(RunEnded {
            run: state.last_run().map(|r| r.run.clone()).unwrap_or_else(|| new_run.run.clone()),
            outcome: RunOutcome::Stopped,
            error: None,
        })),
        Mode::Recover { .. } => {}
    }

    Plan { error: None, step: saved.map(|r| r.step), calls: decisions, appends }
}
