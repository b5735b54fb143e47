//! The plan: what an entry writes and what becomes of every call of the saved step.

mod decide;
mod decision;
mod entry;
mod json;
#[cfg(test)]
mod tests;

use stepjournal_codec::{
    CallId, CheckpointId, Entry, Event, Message, Paired, Rewound, Role, RunEnded, RunId,
    RunOutcome, RunStarted, StepCommit, StepNo,
};

use crate::{Config, SessionState, ToolRegistry};
pub use decision::{Action, CallPlan, Rule};
use entry::EntryMode;
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
        EntryMode::Recover { rewind } => decide::recover(&calls, *rewind, registry, config),
        EntryMode::Redirect { .. } => decide::redirect(&calls),
        EntryMode::Stop => decide::stop(&calls),
    };

    let mut appends = Vec::new();
    if !matches!(mode, EntryMode::Stop) {
        appends.push(Event::RunStarted(RunStarted {
            run: new_run.run.clone(),
            entry: new_run.entry.clone(),
            by: None,
        }));
    }
    if let (EntryMode::Recover { rewind: true }, Some(reply)) = (&mode, saved) {
        appends.push(Event::Rewound(Rewound { to: reply.checkpoint.clone() }));
    }
    for (record, decision) in calls.iter().zip(&decisions) {
        if let Action::Pair { reason } = decision.action {
            appends.push(Event::Paired(Paired {
                call: record.id().clone(),
                reason,
                message: reason.model_message().to_owned(),
                partial: record.partial(),
                rule: Some(decision.rule.id.to_owned()),
            }));
        }
    }
    if let (EntryMode::Redirect { .. } | EntryMode::Stop, Some(reply)) = (&mode, saved) {
        appends.push(Event::StepCommit(StepCommit {
            step: reply.step,
            checkpoint: new_run.commit_checkpoint.clone(),
        }));
    }
    match &mode {
        EntryMode::Redirect { message } => {
            appends.push(Event::Message(Message { role: Role::User, text: message.clone() }))
        }
        EntryMode::Stop => appends.push(Event::RunEnded(RunEnded {
            run: state.last_run().map(|r| r.run.clone()).unwrap_or_else(|| new_run.run.clone()),
            outcome: RunOutcome::Stopped,
            error: None,
            by: None,
        })),
        EntryMode::Recover { .. } => {}
    }

    Plan { error: None, step: saved.map(|r| r.step), calls: decisions, appends }
}
