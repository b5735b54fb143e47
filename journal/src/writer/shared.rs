//! What a run's handles share: the run's view of its session (the tail it last saw and the state
//! folded up to it) and the turn that serializes the run's writes. The compare-and-set append
//! that fences late writers is in [`append`](super::append).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{
    Attempt, CallId, CallKind, CheckpointId, Event, PairReason, Paired, Record, RunEnded, RunId,
    RunOutcome, Seq, SessionId, Stamped, StepNo,
};
use stepjournal_recovery::{ApprovalState, CallPlan, Config, SessionState};

use super::cancel::CancelSignal;
use super::clock::Clock;
use super::hub::{Counters, Hub};
use super::trace::Span;
use super::{Fence, IdSource, Interruption, RunStatus, WriteError};

/// The step a run has open: the reply it committed, or the saved step its entry recovered.
#[derive(Debug)]
pub(crate) struct OpenStep {
    pub(crate) number: StepNo,
    /// The reply's append checkpoint.
    pub(crate) checkpoint: CheckpointId,
    /// The entry's decisions, for a recovered step (empty for a step this run committed).
    pub(crate) plan: HashMap<CallId, CallPlan>,
    /// The calls that started a body in this run, with its attempt.
    pub(crate) started: HashMap<CallId, Attempt>,
}

/// The run's view of its session, in [`Shared::view`]. Changed only by the holder of the run's
/// turn ([`Shared::turn`]): the run's appends are serialized and each is a compare-and-set at
/// `tail`.
#[derive(Debug)]
pub(crate) struct Inner {
    /// The session's tail as the run last saw it. Invariant: `state.len() == tail`.
    pub(crate) tail: Seq,
    /// The session folded up to `tail`.
    pub(crate) state: SessionState,
    pub(crate) status: RunStatus,
    /// Invariant: `Some` only while `status` is `Open`, or after the run ended without closing
    /// it (suspended, failed, fenced, broken), where nothing reads it: never once it completed
    /// or was stopped.
    pub(crate) step: Option<OpenStep>,
}

/// Everything a run's handles ([`Run`](super::Run), [`Step`](super::Step), [`Body`](super::Body))
/// share.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn JournalStore>,
    pub(crate) session: SessionId,
    pub(crate) run: RunId,
    pub(crate) durability: Durability,
    pub(crate) config: Config,
    pub(crate) ids: Arc<dyn IdSource>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) append_attempts: u32,
    /// Committed steps between two snapshots (0: none by policy).
    pub(crate) snapshot_every: u32,
    /// Bytes of text after the last snapshot that make a commit carry one (0: not weighed).
    pub(crate) snapshot_after_bytes: u64,
    /// The trim policy: the turns a trim after the run's end keeps whole (`None`: no trim).
    pub(crate) trim_keep_turns: Option<usize>,
    /// The run's turn to write: held by the handle that appends, from the build of its batch
    /// through the store's answer to the change of the view that follows, so the run's writes
    /// are serialized. An async lock: it is held across the store's `.await`, and a task waiting
    /// for it parks no thread.
    pub(crate) turn: futures_util::lock::Mutex<()>,
    /// The run's view. Invariant: changed only by the holder of `turn`; locked only briefly,
    /// never across an `.await`, so reading it (a run's status, its state) never waits for an
    /// append.
    pub(crate) view: Mutex<Inner>,
    /// Fired once the run can no longer write (see [`CancelSignal`]): by the writer when its
    /// turn ends with the run no longer open, by the journal when a stop or a lost lease
    /// fences it from outside.
    pub(crate) cancel: CancelSignal,
    /// The journal's notices and counters: told when the run can no longer write.
    pub(crate) hub: Arc<Hub>,
    /// The run's span (`run`; nothing without the `tracing` feature): every append of the run
    /// is made in it.
    pub(crate) span: Span,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("session", &self.session)
            .field("run", &self.run)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Checks the invariants written on the fields (in debug builds): they hold whenever the
    /// view is unlocked.
    pub(crate) fn debug_check(&self) {
        debug_assert_eq!(self.state.len(), self.tail.get(), "the state is folded up to the tail");
        debug_assert!(
            self.step.is_none()
                || !matches!(
                    self.status,
                    RunStatus::Ended { outcome: RunOutcome::Completed | RunOutcome::Stopped, .. }
                ),
            "a run that completed or was stopped has no open step"
        );
    }
}

impl Drop for Shared {
    /// The run's last handle is gone: the journal learns it (its lease is released).
    fn drop(&mut self) {
        self.hub.notify();
    }
}

impl Shared {
    /// The run's view, locked, to read it (or, for the holder of the run's turn, to change it
    /// after an append). Never held across an `.await`. A panic elsewhere while it was held
    /// leaves it as consistent as any append left it (the state only changes after an append
    /// landed), so it is taken back.
    pub(crate) fn view(&self) -> MutexGuard<'_, Inner> {
        let inner = self.view.lock().unwrap_or_else(|p| p.into_inner());
        inner.debug_check();
        inner
    }

    /// Whether the run may still write: its error if it ended, was fenced or broke.
    pub(crate) fn writable(&self, inner: &Inner) -> Result<(), WriteError> {
        match &inner.status {
            RunStatus::Open => Ok(()),
            RunStatus::Ended { outcome, error } => Err(WriteError::Ended {
                run: self.run.clone(),
                outcome: *outcome,
                error: error.clone(),
            }),
            RunStatus::Fenced(by) => Err(self.fenced(by.clone())),
            RunStatus::Broken { error } => {
                Err(WriteError::Broken { run: self.run.clone(), error: error.clone() })
            }
            RunStatus::Interrupted(why) => Err(WriteError::Interrupted {
                session: self.session.clone(),
                run: self.run.clone(),
                why: why.clone(),
            }),
        }
    }

    /// Lets go of the run in this process (see [`Interruption`]): from now on it writes nothing
    /// and its signal fires. A run that already ended, was fenced or broke keeps its status.
    /// Takes no turn: a write already handed to the store may still land, none begun after.
    pub(crate) fn interrupt(&self, why: Interruption) {
        let mut inner = self.view();
        if inner.status != RunStatus::Open {
            return;
        }
        super::trace::event::interrupted(&self.session, &self.run, &why);
        inner.status = RunStatus::Interrupted(why);
        drop(inner);
        self.cancel.fire();
        self.hub.notify();
    }

    /// The error of a write this fence refused (counted).
    pub(crate) fn fenced(&self, by: Fence) -> WriteError {
        Counters::count(&self.hub.counters.fenced_writes_refused);
        super::trace::event::fenced(&self.session, &self.run, &by);
        WriteError::Fenced { session: self.session.clone(), run: self.run.clone(), by }
    }
}

/// What fences a run when another writer appended `record`: a `run_started` or a `run_ended`.
pub(crate) fn fence_of(record: &Record) -> Option<Fence> {
    match &record.event {
        Event::RunStarted(e) => Some(Fence::RunStarted {
            seq: record.seq,
            run: e.run.clone(),
            entry: e.entry.kind_str(),
        }),
        Event::RunEnded(e) => {
            Some(Fence::RunEnded { seq: record.seq, run: e.run.clone(), outcome: e.outcome })
        }
        _ => None,
    }
}

/// Folds a batch that landed at the run's tail. A batch that ends with a snapshot leaves the
/// run's state folded from it: what the rules read, not every past step (the run's memory stays
/// bounded however long the session grows).
pub(crate) fn apply(inner: &mut Inner, batch: &[Stamped]) {
    for stamped in batch {
        inner.state.apply(&stamped.event);
    }
    inner.tail = inner.tail.add(batch.len() as u64);
    if let Some(Stamped { event: Event::Snapshot(snapshot), .. }) = batch.last()
        && let Some(seq) = inner.tail.get().checked_sub(1)
        && let Ok(state) = SessionState::from_snapshot(Seq(seq), snapshot)
    {
        inner.state = state;
    }
    inner.debug_check();
}

/// The batch that ends a run `failed`: a pairing for each open call, then `run_ended`.
pub(crate) fn failure_events(shared: &Shared, inner: &Inner, error: Option<&str>) -> Vec<Event> {
    let mut events = pairings_of_open_calls(inner);
    events.push(Event::RunEnded(RunEnded {
        run: shared.run.clone(),
        outcome: RunOutcome::Failed,
        error: error.map(str::to_owned),
        by: None,
    }));
    events
}

/// A `paired` for each unresolved call of the open step, in reply order: `not_started` where no
/// body started and nothing outside could have run it, `outcome_unknown` otherwise (the redirect
/// rule of FORMAT.md, so a later `retry` can rewind them and decide afresh).
pub(crate) fn pairings_of_open_calls(inner: &Inner) -> Vec<Event> {
    let mut events = Vec::new();
    let Some(step) = &inner.step else {
        return events;
    };
    let Some(reply) = inner.state.last_reply().filter(|r| r.step == step.number) else {
        return events;
    };
    for record in inner.state.calls_of(reply).iter() {
        if record.is_resolved() {
            continue;
        }
        let nothing_ran = match record.kind() {
            CallKind::Approval if record.approval() == ApprovalState::Undecided => true,
            CallKind::Client => false,
            _ => record.bodies() == 0 && record.child().is_none(),
        };
        let reason = if nothing_ran { PairReason::NotStarted } else { PairReason::OutcomeUnknown };
        events.push(Event::Paired(Paired {
            call: record.id().clone(),
            reason,
            message: reason.model_message().to_owned(),
            partial: record.partial(),
            rule: Some(stepjournal_recovery::rules::FAILED_AFTER_SAVE.to_owned()),
        }));
    }
    events
}

/// The calls of the open step that started a body in this run and are not resolved, in reply
/// order.
pub(crate) fn running_bodies(inner: &Inner) -> Vec<CallId> {
    let Some(step) = &inner.step else {
        return Vec::new();
    };
    let Some(reply) = inner.state.last_reply().filter(|r| r.step == step.number) else {
        return Vec::new();
    };
    inner
        .state
        .calls_of(reply)
        .iter()
        .filter(|c| step.started.contains_key(c.id()) && !c.is_resolved())
        .map(|c| c.id().clone())
        .collect()
}
