//! The run's turn to write ([`Writer`]) and the compare-and-set append loop that fences late
//! writers: one async implementation, which the sync API waits on.

use stepjournal_backends::{AppendError, StoreError};
use stepjournal_codec::{Event, RunOutcome, Seq, Stamped};

use super::shared::{Inner, Shared, apply, failure_events, fence_of};
use super::trace::in_span;
use super::{AfterFailure, Fence, Interruption, Refusal, RunStatus, WriteError};

/// The run's turn to write, held: the holder alone appends and changes the run's view.
pub(crate) struct Writer<'a> {
    shared: &'a Shared,
    _turn: futures_util::lock::MutexGuard<'a, ()>,
    /// While a batch handed to the store may land before the run's view learns of it: the
    /// batch's first event kind. Invariant: `Some` only across the `.await`s between handing a
    /// batch to the store and folding (or ruling out) it, so a writer dropped with it set is
    /// a future dropped there.
    landing: Option<&'static str>,
}

impl Drop for Writer<'_> {
    /// The turn ends: a run that can no longer write (it ended, was fenced, broke) fires its
    /// cancel signal, so its bodies learn it without writing. A writer dropped while its batch
    /// may be landing is a future dropped mid-append: the run no longer knows its session's
    /// tail, so it is let go ([`Interruption::FutureDropped`]) rather than write on a view that
    /// may lack its own last batch (and start a second attempt, or commit a step over an open
    /// one).
    fn drop(&mut self) {
        let mut inner = self.shared.view();
        if let Some(during) = self.landing
            && inner.status == RunStatus::Open
            && !crate::plant::active(crate::plant::WriterPlant::DroppedAppendUnseen)
        {
            inner.status = RunStatus::Interrupted(Interruption::FutureDropped { during });
        }
        let open = inner.status == RunStatus::Open;
        drop(inner);
        if !open {
            self.shared.cancel.fire();
            self.shared.hub.notify();
        }
    }
}

impl Shared {
    /// Waits for the run's turn to write (no thread is parked while waiting).
    pub(crate) async fn write(&self) -> Writer<'_> {
        Writer { shared: self, _turn: self.turn.lock().await, landing: None }
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

impl Writer<'_> {
    /// The run's view, locked briefly: to read it, or to change it after an append.
    pub(crate) fn view(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.view()
    }

    /// Appends the events `build` makes from the run's view as one compare-and-set batch at the
    /// tail the run last saw, and returns what `build` returned with them.
    ///
    /// `build` runs again after every conflict with the state caught up, so its checks see what
    /// other writers added; it must mint nothing itself (ids are minted before, so a batch whose
    /// outcome was unknown can be recognised when it turns up). On a store failure the run's
    /// failure path runs (see [`Writer::fail_after_store_error`]).
    pub(crate) async fn append<T>(
        &mut self,
        build: impl FnMut(&Inner) -> Result<(Vec<Event>, T), Refusal>,
    ) -> Result<T, WriteError> {
        let span = self.shared.span.clone();
        let appended = async move {
            let result = match self.append_loop(build).await {
                Ok(out) => Ok(out),
                Err(AppendFailure::Write(e)) => Err(e),
                Err(AppendFailure::Store(source)) => Err(self.fail_after_store_error(source).await),
            };
            // Finished, not dropped: what became of the batch is in the run's view and status.
            self.landing = None;
            result
        };
        in_span(appended, &span).await
    }

    async fn append_loop<T>(
        &mut self,
        mut build: impl FnMut(&Inner) -> Result<(Vec<Event>, T), Refusal>,
    ) -> Result<T, AppendFailure> {
        let shared = self.shared;
        let mut pending: Option<Pending<T>> = None;
        for _ in 0..shared.append_attempts {
            let (tail, batch, out) = {
                let inner = self.view();
                shared.writable(&inner)?;
                let (events, out) = build(&inner).map_err(|r| {
                    super::trace::event::refused(&shared.session, &shared.run, &r);
                    AppendFailure::Write(r.into())
                })?;
                debug_assert!(!events.is_empty(), "every operation appends at least one event");
                let at = shared.clock.now();
                let batch: Vec<Stamped> = events.into_iter().map(|e| Stamped::at(at, e)).collect();
                (inner.tail, batch, out)
            };
            self.landing = batch.first().map(|s| s.event.kind().name());
            let answer =
                shared.store.append_async(&shared.session, tail, &batch, shared.durability).await;
            match answer {
                Ok(ack) => {
                    let mut inner = self.view();
                    apply(&mut inner, &batch);
                    debug_assert_eq!(inner.tail, ack.next, "the store's tail follows the batch");
                    drop(inner);
                    self.landing = None;
                    return Ok(out);
                }
                Err(AppendError::Conflict { .. }) => {
                    // Nothing of this batch landed; one still pending from an unknown outcome
                    // may have.
                    if pending.is_none() {
                        self.landing = None;
                    }
                    match self.catch_up(pending.take()).await? {
                        CaughtUp::Landed(out) => {
                            self.landing = None;
                            return Ok(out);
                        }
                        CaughtUp::Moved(still) => pending = still,
                    }
                }
                Err(e @ AppendError::OutcomeUnknown { .. }) => {
                    // Not found now, it may still land at its place: the next attempt, made at
                    // the same tail with the same events (the build is deterministic), then
                    // conflicts on it and recognises it. A store that cannot be read now
                    // cannot tell either: the outcome stays unknown, and is reported so.
                    let unknown = Pending { at: tail, batch, out };
                    match self.catch_up(Some(unknown)).await {
                        Ok(CaughtUp::Landed(out)) => {
                            self.landing = None;
                            return Ok(out);
                        }
                        Ok(CaughtUp::Moved(still)) => pending = still,
                        Err(AppendFailure::Store(_)) => return Err(AppendFailure::Store(e)),
                        Err(other) => return Err(other),
                    }
                }
                Err(e @ (AppendError::Encode { .. } | AppendError::EmptyBatch)) => {
                    return Err(AppendFailure::Write(WriteError::Encode {
                        run: shared.run.clone(),
                        source: e,
                    }));
                }
                Err(e) => return Err(AppendFailure::Store(e)),
            }
        }
        Err(AppendFailure::Write(WriteError::Contended {
            session: shared.session.clone(),
            run: shared.run.clone(),
            attempts: shared.append_attempts,
        }))
    }

    /// Reads what was appended since the run's tail. A `pending` batch found at its place
    /// landed; any `run_started` or `run_ended` among the rest fences the run; the rest is
    /// folded and the tail moves past it.
    async fn catch_up<T>(
        &mut self,
        mut pending: Option<Pending<T>>,
    ) -> Result<CaughtUp<T>, AppendFailure> {
        let shared = self.shared;
        let tail = self.view().tail;
        let records = shared
            .store
            .read_async(&shared.session, tail..Seq(u64::MAX))
            .await
            .map_err(|e| AppendFailure::Store(AppendError::Store(e)))?;
        if let Some(p) = &pending
            && p.at == tail
            && records.len() >= p.batch.len()
            && records.iter().zip(&p.batch).all(|(r, s)| r.event == s.event)
            && let Some(p) = pending.take()
        {
            apply(&mut self.view(), &p.batch);
            return Ok(CaughtUp::Landed(p.out));
        }
        if records.is_empty() {
            let actual = shared
                .store
                .tail_async(&shared.session)
                .await
                .map_err(|e| AppendFailure::Store(e.into()))?;
            if actual < tail {
                let by = Fence::LogShrank { expected: tail, actual };
                self.view().status = RunStatus::Fenced(by.clone());
                return Err(AppendFailure::Write(shared.fenced(by)));
            }
        }
        let mut inner = self.view();
        for record in records {
            if record.seq != inner.tail {
                return Err(AppendFailure::Store(AppendError::Store(StoreError::Contract {
                    context: format!(
                        "reading session `{}` from seq {} returned seq {}",
                        shared.session, inner.tail, record.seq
                    ),
                    what: "sequence numbers are dense",
                })));
            }
            if let Some(by) = fence_of(&record) {
                inner.status = RunStatus::Fenced(by.clone());
                return Err(AppendFailure::Write(shared.fenced(by)));
            }
            inner.state.apply(&record.event);
            inner.tail = record.seq.next();
        }
        inner.debug_check();
        // A pending batch can land only at its place, and only while nothing else is there.
        let tail = inner.tail;
        Ok(CaughtUp::Moved(pending.filter(|p| p.at == tail)))
    }

    /// The failure path after the store failed on an append: if the store still accepts
    /// writes, pair each open call of the step and end the run `failed` naming the error;
    /// otherwise (poisoned, or that write fails too) the run is broken. Returns the error to
    /// report.
    async fn fail_after_store_error(&mut self, source: AppendError) -> WriteError {
        let shared = self.shared;
        let error = source.to_string();
        super::trace::event::store_failed(
            &shared.session,
            &shared.run,
            &error,
            source.is_poisoned(),
        );
        let then = if source.is_poisoned() {
            AfterFailure::Unwritable
        } else {
            let ended = self
                .append_loop(|inner| Ok((failure_events(shared, inner, Some(&error)), ())))
                .await;
            match ended {
                Ok(()) => AfterFailure::EndedFailed,
                Err(_) => AfterFailure::Unwritable,
            }
        };
        let mut inner = self.view();
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
        WriteError::Store { session: shared.session.clone(), run: shared.run.clone(), source, then }
    }

    /// Ends the run `failed` naming `error`, pairing each open call of its step first.
    pub(crate) async fn fail(&mut self, error: Option<String>) -> Result<(), WriteError> {
        let shared = self.shared;
        self.append(|inner| Ok((failure_events(shared, inner, error.as_deref()), ()))).await?;
        self.view().status = RunStatus::Ended { outcome: RunOutcome::Failed, error };
        Ok(())
    }
}
