//! [`Step`]: the handle a durable reply returns; bodies start only through it.

use std::sync::Arc;

use stepjournal_codec::{
    ApprovalDecided, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, DispatchId, DispatchMinted, Event, PairReason, Paired, RawJson, RunEnded,
    RunOutcome, SessionId, StepCommit, StepNo, Suspended,
};
use stepjournal_recovery::{ApprovalState, CallPlan, SessionState};

use super::refuse::{self, Reattach, Seen};
use super::shared::{Shared, running_bodies};
use super::wait::block_on;
use super::{Body, CancelSignal, Interruption, Refusal, RunStatus, Span, WriteError};

/// The handle of an open step: the reply that opened it is durable (it was committed by
/// [`Run::commit_reply`](super::Run::commit_reply), or it is the saved step a recovered run
/// holds, [`Run::step`](super::Run::step)).
///
/// **A body cannot start before its reply is durable**, and not by a check that could be
/// forgotten: [`start_body`](Self::start_body) is the only way to start a [`Body`] (and
/// [`reattach`](Self::reattach), which starts none, the only other way to get one), a `Step` is
/// only made by the writer once the reply's batch (`reply_committed` and every
/// `dispatch_minted`) has landed, and it has no public constructor:
///
/// ```compile_fail,E0599
/// use stepjournal::writer::{Body, Run};
/// use stepjournal_codec::CallId;
/// // A run has no way to start a body: only a Step, which a durable reply returns, does.
/// fn body_before_its_reply(run: &Run, call: &CallId) -> Body {
///     run.start_body(call).unwrap()
/// }
/// ```
///
/// The async API is the same path, and holds the same way:
///
/// ```compile_fail,E0599
/// use stepjournal::writer::{Body, Run};
/// use stepjournal_codec::CallId;
/// async fn body_before_its_reply(run: &Run, call: &CallId) -> Body {
///     run.start_body_async(call).await.unwrap()
/// }
/// ```
///
/// A `Step` is cheap to clone and may be moved to other threads; its appends are serialized
/// with the run's. Once the step is committed (or the run suspended), its handles refuse
/// everything with [`Refusal::StepClosed`].
#[derive(Debug, Clone)]
pub struct Step {
    shared: Arc<Shared>,
    number: StepNo,
    checkpoint: CheckpointId,
}

impl Step {
    pub(crate) fn new(shared: Arc<Shared>, number: StepNo, checkpoint: CheckpointId) -> Self {
        Step { shared, number, checkpoint }
    }

    /// The step's number.
    pub fn number(&self) -> StepNo {
        self.number
    }

    /// The reply's append checkpoint.
    pub fn checkpoint(&self) -> &CheckpointId {
        &self.checkpoint
    }

    /// The session.
    pub fn session(&self) -> &SessionId {
        &self.shared.session
    }

    /// The run's cancel signal (see [`Run::signal`](super::Run::signal)).
    pub fn signal(&self) -> CancelSignal {
        self.shared.cancel.clone()
    }

    /// Runs `f` on the session as the run sees it.
    ///
    /// The run's view is locked while `f` runs: `f` must not call the run's handles.
    pub fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(&self.shared.view().state)
    }

    /// The run's span (see [`Run::span`](super::Run::span)).
    pub fn run_span(&self) -> &Span {
        &self.shared.span
    }

    /// Lets go of the step's run in this process (see [`Interruption`]).
    pub(crate) fn interrupt(&self, why: Interruption) {
        self.shared.interrupt(why);
    }

    /// Whether the step is still open.
    pub fn is_open(&self) -> bool {
        let inner = self.shared.view();
        inner.status == RunStatus::Open && Seen::of(&inner, self.number).step().is_ok()
    }

    /// The reply's calls, in reply order.
    pub fn calls(&self) -> Vec<Call> {
        let inner = self.shared.view();
        match Seen::of(&inner, self.number).reply() {
            Ok(reply) => inner.state.calls_of(reply).iter().map(|c| c.call().clone()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The call's dispatch id, once minted.
    pub fn dispatch(&self, call: &CallId) -> Option<DispatchId> {
        let inner = self.shared.view();
        inner.state.call(call).filter(|r| r.step() == self.number)?.dispatch().cloned()
    }

    /// The entry's decision for the call, for a recovered step (`None` for a step this run
    /// committed).
    pub fn action(&self, call: &CallId) -> Option<CallPlan> {
        let inner = self.shared.view();
        inner.step.as_ref().filter(|s| s.number == self.number)?.plan.get(call).cloned()
    }

    /// Whether the call is resolved (a result, a client answer, a denied approval, a pairing).
    pub fn is_resolved(&self, call: &CallId) -> bool {
        let inner = self.shared.view();
        inner.state.call(call).filter(|r| r.step() == self.number).is_some_and(|r| r.is_resolved())
    }

    /// The calls not yet resolved, in reply order.
    pub fn open_calls(&self) -> Vec<CallId> {
        let inner = self.shared.view();
        Seen::of(&inner, self.number).open_calls()
    }

    /// Starts a body of `call`: appends `attempt_started` (with the call's `dispatch_minted`
    /// first, if the log has none) durably, then returns the [`Body`], which carries the
    /// dispatch id, the attempt and the idempotency key `session:dispatch`.
    ///
    /// Refused (nothing written) when:
    /// - the step is closed ([`Refusal::StepClosed`]) or the call is not one of its calls
    ///   ([`Refusal::UnknownCall`]);
    /// - the entry's plan paired the call ([`Refusal::PairedByPlan`]), or it is resolved
    ///   ([`Refusal::Resolved`]);
    /// - the client executes it ([`Refusal::ClientCall`]), or it waits for an approval not
    ///   granted yet ([`Refusal::AwaitingApproval`]);
    /// - it already started a body in this run ([`Refusal::BodyStarted`]): a run starts one body
    ///   per call; another attempt is recovery's to decide;
    /// - it has started `max_bodies` bodies in all ([`Refusal::MaxBodies`]; when its child is
    ///   attached, the refusal names it: finish the call through [`reattach`](Self::reattach));
    /// - it is behind a call of its group, or (both `sequential`) of the sequential chain, that
    ///   is not resolved ([`Refusal::Behind`]), or whose effect is in doubt or never happened
    ///   ([`Refusal::BehindBlocked`]; answer it with [`skip`](Self::skip));
    /// - the plan's attempt for it is not the next one ([`Refusal::AttemptMismatch`]).
    ///
    /// In a recovered step, a call the plan runs (`Action::Run { attempt, .. }`) starts exactly
    /// that attempt, with the same dispatch id as every earlier attempt.
    pub fn start_body(&self, call: &CallId) -> Result<Body, WriteError> {
        block_on(self.start_body_async(call))
    }

    /// [`start_body`](Self::start_body), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn start_body_async(&self, call: &CallId) -> Result<Body, WriteError> {
        let number = self.number;
        let max = self.shared.config.max_bodies();
        let ids = self.shared.ids.clone();
        let mut minted: Option<DispatchId> = None;
        let mut writer = self.shared.write().await;
        let (dispatch, attempt) = writer
            .append(|inner| {
                let start = refuse::start_body(Seen::of(inner, number), call, max)?;
                let mut events = Vec::with_capacity(2);
                let dispatch = match start.dispatch {
                    Some(d) => d,
                    None => {
                        let d = minted.get_or_insert_with(|| ids.dispatch_id()).clone();
                        events.push(Event::DispatchMinted(DispatchMinted {
                            call: call.clone(),
                            dispatch: d.clone(),
                        }));
                        d
                    }
                };
                let attempt = start.attempt;
                events.push(Event::AttemptStarted(AttemptStarted { call: call.clone(), attempt }));
                Ok((events, (dispatch, attempt)))
            })
            .await?;
        if let Some(step) = writer.view().step.as_mut() {
            step.started.insert(call.clone(), attempt);
        }
        drop(writer);
        Ok(Body::new(self.shared.clone(), call.clone(), dispatch, attempt))
    }

    /// Re-attaches to the child already running for `call` (a remote sub-agent's, or a
    /// companion's): returns a [`Body`] to record the child's output and result through, and
    /// **writes nothing**. Re-attaching starts no body, so no `attempt_started` is appended and
    /// the call's bodies do not grow: it is not counted against `max_bodies`. The body carries
    /// the call's dispatch id and its last started attempt, so
    /// [`output_chunk`](Body::output_chunk) and [`finish`](Body::finish) are recorded under the
    /// attempt whose body started the child.
    ///
    /// This is how a runtime acts on `Action::Reattach { child, .. }`. It also serves a remote
    /// sub-agent the plan gives `Action::StartChild` after a body of it started but before its
    /// `child_attached` was written: the child's start is keyed on the dispatch id, so the
    /// runtime asks the remote side again under the same id (it gets the child that start made,
    /// or the one it makes now, once), records it with
    /// [`child_attached`](Self::child_attached), and finishes through this body; no attempt is
    /// used up, so even a call at `max_bodies` can finish. A companion's
    /// `Action::ReenterChild` goes through it too once a body of it started (re-entering the
    /// child phase starts nothing new; a companion whose child was never attached is asked for
    /// it again under the same dispatch id, as a remote sub-agent is); a companion with no body
    /// yet starts one with [`start_body`](Self::start_body).
    ///
    /// No order rule is checked: the child was started (behind whatever it was behind) by the
    /// body that attached it, and nothing new starts here.
    ///
    /// Refused (nothing written) when:
    /// - the step is closed ([`Refusal::StepClosed`]) or the call is not one of its calls
    ///   ([`Refusal::UnknownCall`]);
    /// - the entry's plan paired the call ([`Refusal::PairedByPlan`]), or it is resolved
    ///   ([`Refusal::Resolved`]);
    /// - the call is not of kind `remote_agent` or `companion` ([`Refusal::WrongKind`]);
    /// - it has no `child_attached` and the plan neither starts nor re-enters its child
    ///   ([`Refusal::NoChild`]: start it with `start_body`), or no body of it ever started
    ///   ([`Refusal::NoBodyStarted`]: start its first with `start_body`);
    /// - a body of it was already started or re-attached in this run
    ///   ([`Refusal::BodyStarted`]): one body handle per call per run.
    ///
    /// Refused with the run's own error when the run can no longer write
    /// ([`WriteError::Ended`], [`WriteError::Fenced`], [`WriteError::Broken`]).
    pub fn reattach(&self, call: &CallId) -> Result<Body, WriteError> {
        block_on(self.reattach_async(call))
    }

    /// [`reattach`](Self::reattach), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn reattach_async(&self, call: &CallId) -> Result<Body, WriteError> {
        let number = self.number;
        let writer = self.shared.write().await;
        let mut inner = writer.view();
        self.shared.writable(&inner)?;
        let Reattach { dispatch, attempt } = refuse::reattach(Seen::of(&inner, number), call)?;
        if let Some(step) = inner.step.as_mut() {
            step.started.insert(call.clone(), attempt);
        }
        drop(inner);
        drop(writer);
        Ok(Body::new(self.shared.clone(), call.clone(), dispatch, attempt))
    }

    /// Records the decision on an approval-gated call (`approval_decided`). Approved, its body
    /// may start; denied, the call is resolved (and the calls behind it must not run).
    ///
    /// Refused unless the call is of kind `approval` ([`Refusal::WrongKind`]), unresolved and
    /// undecided ([`Refusal::AlreadyDecided`]).
    pub fn approval(&self, call: &CallId, approved: bool) -> Result<(), WriteError> {
        block_on(self.approval_async(call, approved))
    }

    /// [`approval`](Self::approval), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn approval_async(&self, call: &CallId, approved: bool) -> Result<(), WriteError> {
        let number = self.number;
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let record = refuse::unresolved(Seen::of(inner, number), call)?;
                let kind = record.kind();
                if kind != CallKind::Approval {
                    let (what, wanted) = ("an approval decision", "kind `approval`");
                    return Err(Refusal::WrongKind { call: call.clone(), kind, what, wanted });
                }
                if record.approval() != ApprovalState::Undecided {
                    return Err(Refusal::AlreadyDecided { call: call.clone() });
                }
                let event = ApprovalDecided { call: call.clone(), approved };
                Ok((vec![Event::ApprovalDecided(event)], ()))
            })
            .await
    }

    /// Records the client's answer to a client-executed call (`client_answer`); it resolves the
    /// call. Refused unless the call is of kind `client` ([`Refusal::WrongKind`]) and
    /// unresolved.
    pub fn client_answer(&self, call: &CallId, output: RawJson) -> Result<(), WriteError> {
        block_on(self.client_answer_async(call, output))
    }

    /// [`client_answer`](Self::client_answer), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn client_answer_async(
        &self,
        call: &CallId,
        output: RawJson,
    ) -> Result<(), WriteError> {
        let number = self.number;
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let kind = refuse::unresolved(Seen::of(inner, number), call)?.kind();
                if kind != CallKind::Client {
                    let (what, wanted) = ("a client answer", "kind `client`");
                    return Err(Refusal::WrongKind { call: call.clone(), kind, what, wanted });
                }
                let event = ClientAnswer { call: call.clone(), output: output.clone() };
                Ok((vec![Event::ClientAnswer(event)], ()))
            })
            .await
    }

    /// Records that a child was started for a remote sub-agent or companion call, under its
    /// dispatch id (`child_attached`): recovery re-attaches to it instead of starting another.
    /// Refused for other kinds ([`Refusal::WrongKind`]), a resolved call, or a call already
    /// bound to a child ([`Refusal::ChildAttached`]).
    pub fn child_attached(&self, call: &CallId, child: SessionId) -> Result<(), WriteError> {
        block_on(self.child_attached_async(call, child))
    }

    /// [`child_attached`](Self::child_attached), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn child_attached_async(
        &self,
        call: &CallId,
        child: SessionId,
    ) -> Result<(), WriteError> {
        let number = self.number;
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let record = refuse::unresolved(Seen::of(inner, number), call)?;
                let kind = record.kind();
                if !matches!(kind, CallKind::RemoteAgent | CallKind::Companion) {
                    let (what, wanted) = ("a child", "kind `remote_agent` or `companion`");
                    return Err(Refusal::WrongKind { call: call.clone(), kind, what, wanted });
                }
                if let Some(bound) = record.child() {
                    return Err(Refusal::ChildAttached {
                        call: call.clone(),
                        child: bound.clone(),
                    });
                }
                let event = ChildAttached { call: call.clone(), child: child.clone() };
                Ok((vec![Event::ChildAttached(event)], ()))
            })
            .await
    }

    /// Answers a call that will not run, `paired` `not_started` ("The tool did not run."): a
    /// call behind one whose effect is in doubt, a call of a tool the runtime no longer has, a
    /// call the runtime decided against. Refused where something may have run it
    /// ([`Refusal::MayHaveRun`]: a body started, a child was attached, or the client executes
    /// it) and for a resolved call.
    pub fn skip(&self, call: &CallId) -> Result<(), WriteError> {
        block_on(self.skip_async(call))
    }

    /// [`skip`](Self::skip), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn skip_async(&self, call: &CallId) -> Result<(), WriteError> {
        let number = self.number;
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let record = refuse::unresolved(Seen::of(inner, number), call)?;
                let why = if record.kind() == CallKind::Client {
                    Some("the client may have run it")
                } else if record.bodies() > 0 {
                    Some("a body of it started")
                } else if record.child().is_some() {
                    Some("a child was attached for it")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(Refusal::MayHaveRun { call: call.clone(), why });
                }
                let reason = PairReason::NotStarted;
                let event = Paired {
                    call: call.clone(),
                    reason,
                    message: reason.model_message().to_owned(),
                    partial: String::new(),
                    rule: Some(stepjournal_recovery::rules::SKIPPED.to_owned()),
                };
                Ok((vec![Event::Paired(event)], ()))
            })
            .await
    }

    /// Suspends the run to wait for the client's answers or approvals: appends `suspended`
    /// naming `calls` and `run_ended suspended` in one batch. The step stays open in the log; a
    /// later entry (`wake`) recovers it, its plan awaiting these calls.
    ///
    /// Refused when `calls` is empty ([`Refusal::NothingToAwait`]); when one of them is not a
    /// client call nor an approval call with no decision ([`Refusal::NotAwaitable`]), or is
    /// resolved; and while a body this run started has no result ([`Refusal::BodiesRunning`]).
    pub fn suspend(&self, calls: &[CallId]) -> Result<(), WriteError> {
        block_on(self.suspend_async(calls))
    }

    /// [`suspend`](Self::suspend), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn suspend_async(&self, calls: &[CallId]) -> Result<(), WriteError> {
        let number = self.number;
        let run = self.shared.run.clone();
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let seen = Seen::of(inner, number);
                seen.step()?;
                if calls.is_empty() {
                    return Err(Refusal::NothingToAwait);
                }
                for call in calls {
                    let record = refuse::unresolved(seen, call)?;
                    let awaitable = match record.kind() {
                        CallKind::Client => true,
                        CallKind::Approval => record.approval() == ApprovalState::Undecided,
                        _ => false,
                    };
                    if !awaitable {
                        let why =
                            "it is neither a client call nor an approval call with no decision";
                        return Err(Refusal::NotAwaitable { call: call.clone(), why });
                    }
                }
                let running = running_bodies(inner);
                if !running.is_empty() {
                    return Err(Refusal::BodiesRunning { step: number, calls: running });
                }
                let events = vec![
                    Event::Suspended(Suspended { calls: calls.to_vec() }),
                    Event::RunEnded(RunEnded {
                        run: run.clone(),
                        outcome: RunOutcome::Suspended,
                        error: None,
                        by: None,
                    }),
                ];
                Ok((events, ()))
            })
            .await?;
        writer.view().status = RunStatus::Ended { outcome: RunOutcome::Suspended, error: None };
        Ok(())
    }

    /// Commits the step (`step_commit`, a new commit checkpoint, returned): every call of the
    /// step has its answer. Every [`snapshot_every`](crate::JournalOptions::snapshot_every)
    /// steps, or once [`snapshot_after_bytes`](crate::JournalOptions::snapshot_after_bytes) of
    /// text lie after the last snapshot, the same batch carries a `snapshot` of the session
    /// after the commit. Refused while a call is unresolved ([`Refusal::OpenCalls`]). After
    /// it, the step's handles refuse everything ([`Refusal::StepClosed`]) and the run may commit
    /// its next reply.
    pub fn commit(&self) -> Result<CheckpointId, WriteError> {
        block_on(self.commit_async())
    }

    /// [`commit`](Self::commit), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn commit_async(&self) -> Result<CheckpointId, WriteError> {
        let number = self.number;
        let checkpoint = self.shared.ids.checkpoint_id();
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                let seen = Seen::of(inner, number);
                seen.step()?;
                let calls = seen.open_calls();
                if !calls.is_empty() {
                    return Err(Refusal::OpenCalls { step: number, calls });
                }
                let commit = StepCommit { step: number, checkpoint: checkpoint.clone() };
                // The policy's snapshot goes in the same batch, right after the commit.
                let every = self.shared.snapshot_every as usize;
                let bytes = self.shared.snapshot_after_bytes;
                let due = (every > 0
                    && inner.state.commits_since_snapshot().saturating_add(1) >= every)
                    || (bytes > 0 && inner.state.text_since_snapshot() >= bytes);
                let snapshot = due.then(|| inner.state.snapshot_after_commit(&commit)).flatten();
                let mut events = vec![Event::StepCommit(commit)];
                events.extend(snapshot.map(Event::from));
                Ok((events, ()))
            })
            .await?;
        writer.view().step = None;
        Ok(checkpoint)
    }
}
