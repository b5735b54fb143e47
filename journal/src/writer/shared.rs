//! What a run's handles share: the run's view of its session (the tail it last saw and the state
//! folded up to it) behind one lock, and the compare-and-set append that fences late writers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use stepjournal_backends::{AppendError, Durability, JournalStore, StoreError};
use stepjournal_codec::{
    Attempt, CallId, CallKind, CheckpointId, Event, PairReason, Paired, Record, RunEnded, RunId,
    RunOutcome, Seq, SessionId, Stamped, StepNo,
};
use stepjournal_recovery::{ApprovalState, CallPlan, Config, SessionState};

use super::clock::Clock;
use super::{AfterFailure, Fence, IdSource, Refusal, RunStatus, WriteError};

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

/// The run's view of its session. Guarded by [`Shared::inner`]: every append of the run is made
/// with it held, so the run's appends are serialized and each is a compare-and-set at `tail`.
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
    pub(crate) inner: Mutex<Inner>,
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

/// How an append loop failed.
enum AppendFailure {
    /// The run may not write, or the protocol forbids it: report as is.
    Write(WriteError),
    /// The store failed: the run's failure path decides what becomes of it.
    Store(AppendError),
}

impl From<WriteError> for AppendFailure {
    fn from(e: WriteError) -> Self {
        AppendFailure::Write(e)
    }
}

/// A batch whose append's outcome was unknown: it may still be found at `at`.
struct Pending<T> {
    at: Seq,
    batch: Vec<Stamped>,
    out: T,
}

/// What reading the events appended since the run's tail found.
enum CaughtUp<T> {
    /// The pending batch is there: it landed.
    Landed(T),
    /// Other writers' events, none of which fences the run, are folded and the tail moved on;
    /// or nothing was there. A pending batch is handed back while it can still land (nothing
    /// was at its place).
    Moved(Option<Pending<T>>),
}

impl Inner {
    /// Checks the invariants written on the fields (in debug builds): they hold whenever the
    /// lock is free.
    fn debug_check(&self) {
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

impl Shared {
    /// The run's view, locked. A panic elsewhere while it was held leaves it as consistent as
    /// any append left it (the state only changes after an append landed), so it is taken back.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.debug_check();
        inner
    }

    /// Appends the events `build` makes from the run's view as one compare-and-set batch at the
    /// tail the run last saw, and returns what `build` returned with them.
    ///
    /// `build` runs again after every conflict with the state caught up, so its checks see what
    /// other writers added; it must mint nothing itself (ids are minted before, so a batch whose
    /// outcome was unknown can be recognised when it turns up). On a store failure the run's
    /// failure path runs (see [`Shared::fail_after_store_error`]).
    pub(crate) fn append<T>(
        &self,
        inner: &mut Inner,
        build: impl FnMut(&Inner) -> Result<(Vec<Event>, T), Refusal>,
    ) -> Result<T, WriteError> {
        match self.append_loop(inner, build) {
            Ok(out) => Ok(out),
            Err(AppendFailure::Write(e)) => Err(e),
            Err(AppendFailure::Store(source)) => Err(self.fail_after_store_error(inner, source)),
        }
    }

    fn status_allows_write(&self, inner: &Inner) -> Result<(), WriteError> {
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
        }
    }

    fn fenced(&self, by: Fence) -> WriteError {
        WriteError::Fenced { session: self.session.clone(), run: self.run.clone(), by }
    }

    fn append_loop<T>(
        &self,
        inner: &mut Inner,
        mut build: impl FnMut(&Inner) -> Result<(Vec<Event>, T), Refusal>,
    ) -> Result<T, AppendFailure> {
        let mut pending: Option<Pending<T>> = None;
        for _ in 0..self.append_attempts {
            self.status_allows_write(inner)?;
            let (events, out) = build(inner).map_err(|r| AppendFailure::Write(r.into()))?;
            debug_assert!(!events.is_empty(), "every operation appends at least one event");
            let at = self.clock.now();
            let batch: Vec<Stamped> = events.into_iter().map(|e| Stamped::at(at, e)).collect();
            match self.store.append(&self.session, inner.tail, &batch, self.durability) {
                Ok(ack) => {
                    apply(inner, &batch);
                    debug_assert_eq!(inner.tail, ack.next, "the store's tail follows the batch");
                    return Ok(out);
                }
                Err(AppendError::Conflict { .. }) => match self.catch_up(inner, pending.take())? {
                    CaughtUp::Landed(out) => return Ok(out),
                    CaughtUp::Moved(still) => pending = still,
                },
                Err(e @ AppendError::OutcomeUnknown { .. }) => {
                    // Not found now, it may still land at its place: the next attempt, made at
                    // the same tail with the same events (the build is deterministic), then
                    // conflicts on it and recognises it.
                    let unknown = Pending { at: inner.tail, batch, out };
                    match self.catch_up(inner, Some(unknown)) {
                        Ok(CaughtUp::Landed(out)) => return Ok(out),
                        Ok(CaughtUp::Moved(still)) => pending = still,
                        // The store cannot be read either (a poisoned store): the outcome stays
                        // unknown, and that is what is reported.
                        Err(AppendFailure::Store(_)) => return Err(AppendFailure::Store(e)),
                        Err(f) => return Err(f),
                    }
                }
                Err(e @ (AppendError::Encode { .. } | AppendError::EmptyBatch)) => {
                    return Err(AppendFailure::Write(WriteError::Encode {
                        run: self.run.clone(),
                        source: e,
                    }));
                }
                Err(e) => return Err(AppendFailure::Store(e)),
            }
        }
        Err(AppendFailure::Write(WriteError::Contended {
            session: self.session.clone(),
            run: self.run.clone(),
            attempts: self.append_attempts,
        }))
    }

    /// Reads what was appended since the run's tail. A `pending` batch found at its place
    /// landed; any `run_started` or `run_ended` among the rest fences the run; the rest is
    /// folded and the tail moves past it.
    fn catch_up<T>(
        &self,
        inner: &mut Inner,
        mut pending: Option<Pending<T>>,
    ) -> Result<CaughtUp<T>, AppendFailure> {
        let records = self
            .store
            .read(&self.session, inner.tail..Seq(u64::MAX))
            .map_err(|e| AppendFailure::Store(AppendError::Store(e)))?;
        if let Some(p) = &pending
            && p.at == inner.tail
            && records.len() >= p.batch.len()
            && records.iter().zip(&p.batch).all(|(r, s)| r.event == s.event)
            && let Some(p) = pending.take()
        {
            apply(inner, &p.batch);
            return Ok(CaughtUp::Landed(p.out));
        }
        if records.is_empty() {
            let actual =
                self.store.tail(&self.session).map_err(|e| AppendFailure::Store(e.into()))?;
            if actual < inner.tail {
                let by = Fence::LogShrank { expected: inner.tail, actual };
                inner.status = RunStatus::Fenced(by.clone());
                return Err(AppendFailure::Write(self.fenced(by)));
            }
        }
        for record in records {
            if record.seq != inner.tail {
                return Err(AppendFailure::Store(AppendError::Store(StoreError::Backend {
                    backend: "journal",
                    context: format!(
                        "reading session `{}` from seq {} returned seq {}",
                        self.session, inner.tail, record.seq
                    ),
                    source: "the store broke its contract: sequence numbers are not dense".into(),
                })));
            }
            let fence = fence_of(&record);
            if let Some(by) = fence {
                inner.status = RunStatus::Fenced(by.clone());
                return Err(AppendFailure::Write(self.fenced(by)));
            }
            inner.state.apply(&record.event);
            inner.tail = record.seq.next();
        }
        inner.debug_check();
        // A pending batch can land only at its place, and only while nothing else is there.
        Ok(CaughtUp::Moved(pending.filter(|p| p.at == inner.tail)))
    }

    /// The failure path after the store failed on an append: if the store still accepts
    /// writes, pair each open call of the step and end the run `failed` naming the error;
    /// otherwise (poisoned, or that write fails too) the run is broken. Returns the error to
    /// report.
    fn fail_after_store_error(&self, inner: &mut Inner, source: AppendError) -> WriteError {
        let error = source.to_string();
        let then = if source.is_poisoned() {
            AfterFailure::Unwritable
        } else {
            match self
                .append_loop(inner, |inner| Ok((failure_events(self, inner, Some(&error)), ())))
            {
                Ok(()) => AfterFailure::EndedFailed,
                Err(_) => AfterFailure::Unwritable,
            }
        };
        match then {
            AfterFailure::EndedFailed => {
                inner.status = RunStatus::Ended { outcome: RunOutcome::Failed, error: Some(error) };
            }
            _ => {
                if inner.status == RunStatus::Open {
                    inner.status = RunStatus::Broken { error };
                }
            }
        }
        WriteError::Store { session: self.session.clone(), run: self.run.clone(), source, then }
    }

    /// Ends the run `failed` naming `error`, pairing each open call of its step first.
    pub(crate) fn fail(&self, inner: &mut Inner, error: Option<String>) -> Result<(), WriteError> {
        self.append(inner, |inner| Ok((failure_events(self, inner, error.as_deref()), ())))?;
        inner.status = RunStatus::Ended { outcome: RunOutcome::Failed, error };
        Ok(())
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

/// Folds a batch that landed at the run's tail.
fn apply(inner: &mut Inner, batch: &[Stamped]) {
    for stamped in batch {
        inner.state.apply(&stamped.event);
    }
    inner.tail = inner.tail.add(batch.len() as u64);
    inner.debug_check();
}

/// The batch that ends a run `failed`: a pairing for each open call, then `run_ended`.
fn failure_events(shared: &Shared, inner: &Inner, error: Option<&str>) -> Vec<Event> {
    let mut events = pairings_of_open_calls(inner);
    events.push(Event::RunEnded(RunEnded {
        run: shared.run.clone(),
        outcome: RunOutcome::Failed,
        error: error.map(str::to_owned),
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
