//! [`Run`]: one pass of the runtime over a session, begun through an entry.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use stepjournal_codec::{
    Call, CallId, DispatchId, DispatchMinted, Entry, Event, RawJson, ReplyCommitted, RunEnded,
    RunId, RunOutcome, Seq, SessionId, StepNo,
};
use stepjournal_recovery::{Plan, SessionState, TranscriptItem, transcript};

use super::shared::{OpenStep, Shared};
use super::{Refusal, RunStatus, Step, WriteError};

/// A model reply to commit: its text and its calls, in the order the model gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The reply's text (may be empty).
    pub text: String,
    /// The calls; their ids must be unique within the reply.
    pub calls: Vec<Call>,
    /// The provider's metadata for the reply (model, usage, reasoning blocks), opaque JSON kept
    /// with it; none by default.
    pub metadata: Option<RawJson>,
}

impl Reply {
    /// A reply with this text and no calls yet.
    pub fn new(text: impl Into<String>) -> Self {
        Reply { text: text.into(), calls: Vec::new(), metadata: None }
    }

    /// The reply with the provider's metadata.
    pub fn metadata(mut self, metadata: RawJson) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// The reply with one more call.
    pub fn call(mut self, call: Call) -> Self {
        self.calls.push(call);
        self
    }
}

/// One pass of the runtime over a session, begun by [`Journal::begin_run`](super::Journal::begin_run).
///
/// The run carries its entry's [`Plan`]: for a recovered step, each call's
/// [`Action`](stepjournal_recovery::Action) and the rule that decided it; act on them through
/// [`Run::step`]. Then the protocol goes on: [`commit_reply`](Self::commit_reply) (the reply and
/// its dispatch ids, durable) returns the [`Step`] through which bodies start;
/// [`Step::commit`] closes the step; [`end`](Self::end) ends the run.
///
/// Every append is a compare-and-set at the tail the run last saw; a run whose session another
/// run has entered since (or that was stopped elsewhere) is fenced: its appends fail with
/// [`WriteError::Fenced`] and write nothing. Dropping a run writes nothing (a crash looks the
/// same): the next entry's recovery covers what it left.
///
/// `Run` is `Send + Sync`; its handles ([`Step`], [`Body`](super::Body)) may be moved to other
/// threads, and their appends are serialized with the run's.
#[derive(Debug)]
pub struct Run {
    shared: Arc<Shared>,
    entry: Entry,
    plan: Plan,
    begun_at: Seq,
}

impl Run {
    pub(crate) fn new(shared: Arc<Shared>, entry: Entry, plan: Plan, begun_at: Seq) -> Self {
        Run { shared, entry, plan, begun_at }
    }

    /// The run's id. For a `stop`, the id of the run it stopped (a stop begins no run).
    pub fn id(&self) -> &RunId {
        &self.shared.run
    }

    /// The session.
    pub fn session(&self) -> &SessionId {
        &self.shared.session
    }

    /// The entry the run began through.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// The entry's plan, as applied: every call of the saved step with its action and rule, and
    /// the events the entry appended.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Where the entry's batch begins in the log (`run_started`, or for `stop` its first event).
    pub fn begun_at(&self) -> Seq {
        self.begun_at
    }

    /// Where the run stands: open, ended, fenced, or broken by a store failure.
    pub fn status(&self) -> RunStatus {
        self.shared.lock().status.clone()
    }

    /// The session's tail as the run last saw it.
    pub fn tail(&self) -> Seq {
        self.shared.lock().tail
    }

    /// The step the run has open, if any: the saved step its entry recovered (act on the
    /// plan's actions through it), or the step of the reply it committed last. `None` once the
    /// step is committed, and for a run that redirected or stopped (the entry closed the step).
    pub fn step(&self) -> Option<Step> {
        let inner = self.shared.lock();
        inner.step.as_ref().map(|s| Step::new(self.shared.clone(), s.number, s.checkpoint.clone()))
    }

    /// Runs `f` on the session as the run sees it (folded up to [`tail`](Self::tail)).
    pub fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(&self.shared.lock().state)
    }

    /// What the model is shown now, as the run sees the session.
    pub fn transcript(&self) -> Vec<TranscriptItem> {
        transcript(&self.shared.lock().state)
    }

    /// Commits the model's reply: appends `reply_committed` (the step's append checkpoint) and
    /// every call's `dispatch_minted` as one durable batch, then returns the [`Step`] through
    /// which its bodies start. This is the save-first protocol: since a body can only be started
    /// through a `Step`, and a `Step` exists only once its reply is durable, no body can start
    /// before the store holds what the model asked for.
    ///
    /// Refused ([`WriteError::Refused`], nothing written) when the reply names a call id twice
    /// ([`Refusal::RepeatedCall`]) or a step is still open ([`Refusal::StepOpen`]).
    pub fn commit_reply(&self, reply: Reply) -> Result<Step, WriteError> {
        let mut seen = HashSet::with_capacity(reply.calls.len());
        if let Some(call) = reply.calls.iter().find(|c| !seen.insert(&c.call)) {
            return Err(Refusal::RepeatedCall { call: call.call.clone() }.into());
        }
        let ids = &self.shared.ids;
        let checkpoint = ids.checkpoint_id();
        let dispatches: Vec<DispatchId> = reply.calls.iter().map(|_| ids.dispatch_id()).collect();
        let mut inner = self.shared.lock();
        let step = self.shared.append(&mut inner, |inner| {
            if let Some(open) = &inner.step {
                return Err(Refusal::StepOpen { step: open.number });
            }
            let step = inner
                .state
                .last_reply()
                .map_or(StepNo(1), |r| StepNo(r.step.get().saturating_add(1)));
            let mut events = Vec::with_capacity(reply.calls.len() + 1);
            events.push(Event::ReplyCommitted(ReplyCommitted {
                step,
                checkpoint: checkpoint.clone(),
                text: reply.text.clone(),
                calls: reply.calls.clone(),
                metadata: reply.metadata.clone(),
            }));
            events.extend(reply.calls.iter().zip(&dispatches).map(|(c, d)| {
                Event::DispatchMinted(DispatchMinted { call: c.call.clone(), dispatch: d.clone() })
            }));
            Ok((events, step))
        })?;
        inner.step = Some(OpenStep {
            number: step,
            checkpoint: checkpoint.clone(),
            plan: HashMap::new(),
            started: HashMap::new(),
        });
        drop(inner);
        Ok(Step::new(self.shared.clone(), step, checkpoint))
    }

    /// Ends the run with `outcome` (`run_ended`).
    ///
    /// - `completed`, `stopped`: refused while a step is open ([`Refusal::StepOpen`]): commit it
    ///   first. (To stop a session's work from outside the run, use
    ///   [`Journal::stop`](super::Journal::stop).)
    /// - `failed`: the same as [`fail`](Self::fail) with no error text.
    /// - `suspended`: refused ([`Refusal::UseSuspend`]); a run suspends through
    ///   [`Step::suspend`], which names the calls it waits for.
    pub fn end(&self, outcome: RunOutcome) -> Result<(), WriteError> {
        match outcome {
            RunOutcome::Failed => return self.fail(None),
            RunOutcome::Suspended => return Err(Refusal::UseSuspend.into()),
            _ => {}
        }
        let mut inner = self.shared.lock();
        self.shared.append(&mut inner, |inner| {
            if let Some(open) = &inner.step {
                return Err(Refusal::StepOpen { step: open.number });
            }
            let end = RunEnded { run: self.shared.run.clone(), outcome, error: None };
            Ok((vec![Event::RunEnded(end)], ()))
        })?;
        inner.status = RunStatus::Ended { outcome, error: None };
        Ok(())
    }

    /// Ends the run `failed`, naming `error`. A run that fails after the save never leaves a
    /// call unanswered: each unresolved call of the open step is paired first
    /// (`outcome_unknown` where a body started or the client may have run it, `not_started`
    /// where nothing could have), in the same batch. A later `retry` entry (no message) rewinds
    /// those pairings and recovers the step.
    pub fn fail(&self, error: Option<String>) -> Result<(), WriteError> {
        let mut inner = self.shared.lock();
        self.shared.fail(&mut inner, error)
    }

    /// The calls of the open step not yet resolved, in reply order.
    pub fn open_calls(&self) -> Vec<CallId> {
        match self.step() {
            Some(step) => step.open_calls(),
            None => Vec::new(),
        }
    }
}
