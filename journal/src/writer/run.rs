//! [`Run`]: one pass of the runtime over a session, begun through an entry.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use stepjournal_codec::{
    Call, CallId, ContinuationId, DispatchId, DispatchMinted, Entry, Event, ModelAborted, RawJson,
    ReplyCommitted, RunEnded, RunId, RunOutcome, Seq, SessionId, StepNo,
};
use stepjournal_recovery::{Plan, SessionState, TranscriptItem, transcript};

use stepjournal_backends::StoreError;

use super::shared::{OpenStep, Shared};
use super::wait::block_on;
use super::{CancelSignal, Interruption, Refusal, RunStatus, Span, Step, WriteError};

/// A model reply to commit: its text and its calls, in the order the model gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The reply's text (may be empty).
    pub text: String,
    /// The calls; their ids must be unique within the reply.
    pub calls: Vec<Call>,
    /// The provider's metadata for the reply (model, usage, reasoning blocks), opaque JSON kept
    /// with it (format version 2); none by default.
    pub metadata: Option<RawJson>,
}

impl Reply {
    /// A reply with this text and no calls yet.
    pub fn new(text: impl Into<String>) -> Self {
        Reply { text: text.into(), calls: Vec::new(), metadata: None }
    }

    /// The reply with the provider's metadata. JSON `null` is no metadata (the JSON form writes
    /// both as an absent member).
    pub fn metadata(mut self, metadata: RawJson) -> Self {
        self.metadata = (metadata.get() != "null").then_some(metadata);
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
///
/// `Run` is cheap to clone (two `Arc`s): every clone is the same run, its appends serialized
/// with the others'.
#[derive(Debug, Clone)]
pub struct Run {
    shared: Arc<Shared>,
    begun: Arc<Begun>,
}

/// A run held without keeping it alive: the journal's list of its live runs.
#[derive(Debug, Clone)]
pub(crate) struct WeakRun {
    shared: std::sync::Weak<Shared>,
    begun: std::sync::Weak<Begun>,
}

impl WeakRun {
    /// The run, while a handle of it is alive.
    pub(crate) fn upgrade(&self) -> Option<Run> {
        Some(Run { shared: self.shared.upgrade()?, begun: self.begun.upgrade()? })
    }

    /// Whether the run can still write: a handle of it is alive and it is open.
    pub(crate) fn is_open(&self) -> bool {
        self.shared.upgrade().is_some_and(|s| s.view().status == RunStatus::Open)
    }

    /// The run's cancel signal, while a handle of it is alive.
    pub(crate) fn signal(&self) -> Option<CancelSignal> {
        self.shared.upgrade().map(|s| s.cancel.clone())
    }
}

/// How the run began: what never changes once it did.
#[derive(Debug)]
struct Begun {
    entry: Entry,
    plan: Plan,
    at: Seq,
}

impl Run {
    pub(crate) fn new(shared: Arc<Shared>, entry: Entry, plan: Plan, begun_at: Seq) -> Self {
        Run { shared, begun: Arc::new(Begun { entry, plan, at: begun_at }) }
    }

    /// Lets go of the run in this process (see [`Interruption`]).
    pub(crate) fn interrupt(&self, why: Interruption) {
        self.shared.interrupt(why);
    }

    /// Waits until no write of the run is in flight: a write handed to the store before now has
    /// been answered (and, once the run can no longer write, none follows).
    pub(crate) async fn settled(&self) {
        drop(self.shared.write().await);
    }

    /// The run, held without keeping it alive.
    pub(crate) fn downgrade(&self) -> WeakRun {
        WeakRun { shared: Arc::downgrade(&self.shared), begun: Arc::downgrade(&self.begun) }
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
        &self.begun.entry
    }

    /// The entry's plan, as applied: every call of the saved step with its action and rule, and
    /// the events the entry appended.
    pub fn plan(&self) -> &Plan {
        &self.begun.plan
    }

    /// Where the entry's batch begins in the log (`run_started`, or for `stop` its first event).
    pub fn begun_at(&self) -> Seq {
        self.begun.at
    }

    /// Where the run stands: open, ended, fenced, or broken by a store failure.
    pub fn status(&self) -> RunStatus {
        self.shared.view().status.clone()
    }

    /// The run's cancel signal: fires once the run can no longer write (fenced by a newer run
    /// or a stop, ended, broken). Hand it to work the run started.
    pub fn signal(&self) -> CancelSignal {
        self.shared.cancel.clone()
    }

    /// The run's span (`run`, carrying the session, the run and its entry; nothing without the
    /// `tracing` feature).
    pub fn span(&self) -> &Span {
        &self.shared.span
    }

    /// The session's tail as the run last saw it.
    pub fn tail(&self) -> Seq {
        self.shared.view().tail
    }

    /// The step the run has open, if any: the saved step its entry recovered (act on the
    /// plan's actions through it), or the step of the reply it committed last. `None` once the
    /// step is committed, and for a run that redirected or stopped (the entry closed the step).
    pub fn step(&self) -> Option<Step> {
        let inner = self.shared.view();
        inner.step.as_ref().map(|s| Step::new(self.shared.clone(), s.number, s.checkpoint.clone()))
    }

    /// Runs `f` on the session as the run sees it: folded up to [`tail`](Self::tail), from the
    /// newest snapshot the run read or wrote (so its replies, calls and messages are those
    /// after that snapshot; what the recovery rules read of the rest, the snapshot keeps).
    ///
    /// The run's view is locked while `f` runs: `f` must not call the run's handles.
    pub fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(&self.shared.view().state)
    }

    /// What the model is shown now: the session's whole log up to the run's
    /// [`tail`](Self::tail), read from the store and folded (the run keeps no past steps).
    pub fn transcript(&self) -> Result<Vec<TranscriptItem>, StoreError> {
        block_on(self.transcript_async())
    }

    /// [`transcript`](Self::transcript), awaited.
    ///
    /// **Dropped before it finished**: nothing was written; nothing is left.
    pub async fn transcript_async(&self) -> Result<Vec<TranscriptItem>, StoreError> {
        self.transcript_since_async(Seq(0)).await
    }

    /// The items of [`transcript`](Self::transcript) whose events lie at or after `seq`: what
    /// is new since a runtime last showed the model the session (pass the [`tail`](Self::tail)
    /// it saw then). A reply's item is new when its `reply_committed` is; an answer's when the
    /// event that answered is.
    pub fn transcript_since(&self, seq: Seq) -> Result<Vec<TranscriptItem>, StoreError> {
        block_on(self.transcript_since_async(seq))
    }

    /// [`transcript_since`](Self::transcript_since), awaited.
    ///
    /// **Dropped before it finished**: nothing was written; nothing is left.
    pub async fn transcript_since_async(
        &self,
        seq: Seq,
    ) -> Result<Vec<TranscriptItem>, StoreError> {
        let tail = self.tail();
        let records = self.shared.store.read_async(&self.shared.session, Seq(0)..tail).await?;
        let state = super::load::fold_log(&self.shared.session, records)?;
        let mut items = transcript(&state);
        items.retain(|item| item.seq() >= seq);
        Ok(items)
    }

    /// Appends a `snapshot` of the session as the run sees it (the policy writes one every
    /// [`snapshot_every`](crate::JournalOptions::snapshot_every) steps; this writes one now,
    /// before a long pause, say). Returns where it landed. Refused while a step is open
    /// ([`Refusal::StepOpen`]): a snapshot stands at a committed step boundary. `None`, and
    /// nothing written, when the run's view cannot make one (a `rewound` another writer
    /// appended reached before the snapshot it was folded from).
    pub fn snapshot(&self) -> Result<Option<Seq>, WriteError> {
        block_on(self.snapshot_async())
    }

    /// [`snapshot`](Self::snapshot), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)), as for every
    /// append of a run.
    pub async fn snapshot_async(&self) -> Result<Option<Seq>, WriteError> {
        let made = {
            let inner = self.shared.view();
            if let Some(open) = &inner.step {
                return Err(Refusal::StepOpen { step: open.number }.into());
            }
            inner.state.snapshot().is_some()
        };
        if !made {
            return Ok(None);
        }
        let mut writer = self.shared.write().await;
        let at = writer
            .append(|inner| {
                if let Some(open) = &inner.step {
                    return Err(Refusal::StepOpen { step: open.number });
                }
                match inner.state.snapshot() {
                    Some(snapshot) => Ok((vec![Event::from(snapshot)], inner.tail)),
                    None => Err(Refusal::StepOpen {
                        step: inner.state.saved_step().map(|r| r.step).unwrap_or_default(),
                    }),
                }
            })
            .await?;
        Ok(Some(at))
    }

    /// Trims the session through this run, keeping its last `keep_turns` turns whole: what a
    /// long run (an agent that runs thousands of steps in one turn: `keep_turns` 0) calls to
    /// bound what the session keeps while it runs, as [`Journal::trim`](super::Journal::trim)
    /// does between runs (the same choice of the snapshot kept: never the newest alone, never
    /// what an open call needs). The `trimmed` event is one of the run's appends, so it never
    /// fences the run. Returns what was dropped, or why nothing was.
    pub fn trim(&self, keep_turns: usize) -> Result<super::Trim, super::TrimError> {
        block_on(self.trim_async(keep_turns))
    }

    /// [`trim`](Self::trim), awaited: the log read and the `trimmed` appended while the run
    /// holds its turn to write.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)), as for every
    /// append of a run.
    pub async fn trim_async(&self, keep_turns: usize) -> Result<super::Trim, super::TrimError> {
        let mut writer = self.shared.write().await;
        let tail = writer.view().tail;
        let shared = &self.shared;
        let records =
            shared.store.read_async(&shared.session, Seq(0)..tail).await.map_err(|source| {
                super::TrimError::Read { session: shared.session.clone(), source }
            })?;
        let from = records.first().map_or(Seq(0), |r| r.seq);
        let (before, turns) = match stepjournal_recovery::trim_point(&records, keep_turns) {
            Ok(point) => point,
            Err(why) => return Ok(super::Trim::Nothing { why }),
        };
        let event = Event::Trimmed(stepjournal_codec::Trimmed { before, turns });
        let at = writer
            .append(|inner| Ok((vec![event.clone()], inner.tail)))
            .await
            .map_err(|source| super::TrimError::Run { source })?;
        Ok(super::Trim::Trimmed { before, from, at, turns })
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
        block_on(self.commit_reply_async(reply))
    }

    /// [`commit_reply`](Self::commit_reply), awaited: the same append, made on the
    /// completion-based path (no thread waits while the store syncs).
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn commit_reply_async(&self, reply: Reply) -> Result<Step, WriteError> {
        let mut seen = HashSet::with_capacity(reply.calls.len());
        if let Some(call) = reply.calls.iter().find(|c| !seen.insert(&c.call)) {
            let refusal = Refusal::RepeatedCall { call: call.call.clone() };
            super::trace::event::refused(&self.shared.session, &self.shared.run, &refusal);
            return Err(refusal.into());
        }
        let ids = &self.shared.ids;
        let checkpoint = ids.checkpoint_id();
        let dispatches: Vec<DispatchId> = reply.calls.iter().map(|_| ids.dispatch_id()).collect();
        let mut writer = self.shared.write().await;
        let step = writer
            .append(|inner| {
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
                    Event::DispatchMinted(DispatchMinted {
                        call: c.call.clone(),
                        dispatch: d.clone(),
                    })
                }));
                Ok((events, step))
            })
            .await?;
        writer.view().step = Some(OpenStep {
            number: step,
            checkpoint: checkpoint.clone(),
            plan: HashMap::new(),
            started: HashMap::new(),
        });
        drop(writer);
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
        block_on(self.end_async(outcome))
    }

    /// [`end`](Self::end), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn end_async(&self, outcome: RunOutcome) -> Result<(), WriteError> {
        match outcome {
            RunOutcome::Failed => return self.fail_async(None).await,
            RunOutcome::Suspended => return Err(Refusal::UseSuspend.into()),
            _ => {}
        }
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                if let Some(open) = &inner.step {
                    return Err(Refusal::StepOpen { step: open.number });
                }
                let end = RunEnded { run: self.shared.run.clone(), outcome, error: None, by: None };
                Ok((vec![Event::RunEnded(end)], ()))
            })
            .await?;
        let snapshotted = {
            let mut view = writer.view();
            view.status = RunStatus::Ended { outcome, error: None };
            view.state.last_snapshot().is_some()
        };
        drop(writer);
        if let (Some(keep), true) = (self.shared.trim_keep_turns, snapshotted) {
            // The policy's trim: best effort, never the end's failure.
            let shared = &self.shared;
            let _ = super::trim::trim_store(
                &*shared.store,
                &shared.session,
                keep,
                &*shared.clock,
                shared.durability,
            )
            .await;
        }
        Ok(())
    }

    /// Ends the run `failed`, naming `error`. A run that fails after the save never leaves a
    /// call unanswered: each unresolved call of the open step is paired first
    /// (`outcome_unknown` where a body started or the client may have run it, `not_started`
    /// where nothing could have), in the same batch. A later `retry` entry (no message) rewinds
    /// those pairings and recovers the step.
    pub fn fail(&self, error: Option<String>) -> Result<(), WriteError> {
        block_on(self.fail_async(error))
    }

    /// [`fail`](Self::fail), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn fail_async(&self, error: Option<String>) -> Result<(), WriteError> {
        self.shared.write().await.fail(error).await
    }

    /// Records that a model request was cut off (`model_aborted`), with the partial answer it
    /// gave: the transcript keeps it, marked aborted, and the run goes on (ask the model again,
    /// or end the run). Refused while a step is open ([`Refusal::StepOpen`]): a cut-off request
    /// comes between steps, where its reply would have been.
    pub fn model_aborted(&self, partial: impl Into<String>) -> Result<(), WriteError> {
        block_on(self.model_aborted_async(partial))
    }

    /// [`model_aborted`](Self::model_aborted) with the provider's handle to go on with the
    /// answer (`model_aborted.continuation`: a background job id, a response id), so that after
    /// a crash the runtime resumes the answer rather than asks again: the transcript's aborted
    /// item carries it ([`TranscriptItem::AbortedModelAnswer`](stepjournal_recovery::TranscriptItem)).
    /// `None` writes what [`model_aborted`](Self::model_aborted) writes. Format version 4: a
    /// store writing an older version refuses a continuation
    /// ([`EncodeError::NotInVersion`](stepjournal_codec::EncodeError::NotInVersion)).
    pub fn model_aborted_with(
        &self,
        partial: impl Into<String>,
        continuation: Option<ContinuationId>,
    ) -> Result<(), WriteError> {
        block_on(self.model_aborted_with_async(partial, continuation))
    }

    /// [`model_aborted`](Self::model_aborted), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn model_aborted_async(&self, partial: impl Into<String>) -> Result<(), WriteError> {
        self.model_aborted_with_async(partial, None).await
    }

    /// [`model_aborted_with`](Self::model_aborted_with), awaited; dropped before it finished,
    /// as [`model_aborted_async`](Self::model_aborted_async).
    pub async fn model_aborted_with_async(
        &self,
        partial: impl Into<String>,
        continuation: Option<ContinuationId>,
    ) -> Result<(), WriteError> {
        let partial = partial.into();
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                if let Some(open) = &inner.step {
                    return Err(Refusal::StepOpen { step: open.number });
                }
                let event =
                    ModelAborted { partial: partial.clone(), continuation: continuation.clone() };
                Ok((vec![Event::ModelAborted(event)], ()))
            })
            .await
    }

    /// The calls of the open step not yet resolved, in reply order.
    pub fn open_calls(&self) -> Vec<CallId> {
        match self.step() {
            Some(step) => step.open_calls(),
            None => Vec::new(),
        }
    }
}
