//! Why a step handle may not act on a call now: its refusals, as pure functions of what the run
//! sees (the session folded up to its tail, the step it has open with the entry's plan and the
//! bodies it started) and the call. Nothing here writes or locks; the step handle appends what
//! these allow.
//!
//! The order rule (a call behind an unresolved or blocking call of its group or of the
//! sequential chain) is recovery's [`order`](stepjournal_recovery::order), the same the planner
//! decides by.

use stepjournal_codec::{Attempt, CallId, CallKind, DispatchId, StepNo};
use stepjournal_recovery::order::{Blocking, behind, blocking};
use stepjournal_recovery::{Action, ApprovalState, CallRecord, ReplyRecord, SessionState};

use super::error::Refusal;
use super::shared::{Inner, OpenStep};
use super::status::Order;

/// What a step handle's operation is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The session as the run sees it.
    pub(crate) state: &'a SessionState,
    /// The step the run has open, if any.
    pub(crate) open: Option<&'a OpenStep>,
    /// The step the handle is for.
    pub(crate) number: StepNo,
}

impl<'a> Seen<'a> {
    /// What `inner` shows the handle of step `number`.
    pub(crate) fn of(inner: &'a Inner, number: StepNo) -> Self {
        Seen { state: &inner.state, open: inner.step.as_ref(), number }
    }

    /// The open step, if it is the handle's.
    pub(crate) fn step(&self) -> Result<&'a OpenStep, Refusal> {
        let number = self.number;
        self.open.filter(|s| s.number == number).ok_or(Refusal::StepClosed { step: number })
    }

    /// The reply that opened the handle's step (only the last reply's step is open).
    pub(crate) fn reply(&self) -> Result<&'a ReplyRecord, Refusal> {
        let number = self.number;
        self.state
            .last_reply()
            .filter(|r| r.step == number)
            .ok_or(Refusal::StepClosed { step: number })
    }

    /// The call of the handle's step an event naming `call` would belong to.
    pub(crate) fn call(&self, call: &CallId) -> Result<CallRecord<'a>, Refusal> {
        let number = self.number;
        self.state
            .call(call)
            .filter(|r| r.step() == number)
            .ok_or_else(|| Refusal::UnknownCall { step: number, call: call.clone() })
    }

    /// The calls of the handle's step not yet resolved, in reply order.
    pub(crate) fn open_calls(&self) -> Vec<CallId> {
        match self.reply() {
            Ok(reply) => self
                .state
                .calls_of(reply)
                .iter()
                .filter(|c| !c.is_resolved())
                .map(|c| c.id().clone())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Checks that `call` is a call of the handle's step, which is open, and not resolved.
pub(crate) fn unresolved<'a>(seen: Seen<'a>, call: &CallId) -> Result<CallRecord<'a>, Refusal> {
    seen.step()?;
    let record = seen.call(call)?;
    not_resolved(&record)?;
    Ok(record)
}

fn not_resolved(record: &CallRecord<'_>) -> Result<(), Refusal> {
    if record.is_resolved() {
        return Err(Refusal::Resolved { call: record.id().clone() });
    }
    Ok(())
}

/// Refused when the entry's plan paired the call: recovery decided it must not run.
fn not_paired_by_plan(step: &OpenStep, call: &CallId) -> Result<(), Refusal> {
    match step.plan.get(call) {
        Some(plan) => match plan.action {
            Action::Pair { reason } => {
                Err(Refusal::PairedByPlan { call: call.clone(), reason, rule: plan.rule.id })
            }
            _ => Ok(()),
        },
        None => Ok(()),
    }
}

/// Refused when the call started (or re-attached to) a body in this run already.
fn no_body_in_this_run(step: &OpenStep, call: &CallId) -> Result<(), Refusal> {
    match step.started.get(call) {
        Some(&attempt) => Err(Refusal::BodyStarted { call: call.clone(), attempt }),
        None => Ok(()),
    }
}

/// A body `start_body` may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Start {
    /// The call's dispatch id; `None` when the log holds none yet (one is minted first).
    pub(crate) dispatch: Option<DispatchId>,
    /// The attempt the body starts as: bodies started so far + 1.
    pub(crate) attempt: Attempt,
}

/// Whether a body of `call` may start now, and as which attempt. The checks, in the order
/// their refusals are reported: the step is open and holds the call; the plan did not pair
/// it; the client does not execute it; it is unresolved; it started no body in this run; its
/// approval, if it needs one, is granted; it is under `max_bodies`; no call it is behind
/// blocks it or is unresolved; the plan's attempt, if any, is the next.
pub(crate) fn start_body(seen: Seen<'_>, call: &CallId, max_bodies: u32) -> Result<Start, Refusal> {
    let number = seen.number;
    let step = seen.step()?;
    let calls = seen.state.calls_of(seen.reply()?);
    let unknown = || Refusal::UnknownCall { step: number, call: call.clone() };
    let index = calls.iter().position(|c| c.id() == call).ok_or_else(unknown)?;
    let record = calls.get(index).ok_or_else(unknown)?;
    not_paired_by_plan(step, call)?;
    if record.kind() == CallKind::Client {
        return Err(Refusal::ClientCall { call: call.clone() });
    }
    not_resolved(record)?;
    no_body_in_this_run(step, call)?;
    if record.kind() == CallKind::Approval && record.approval() != ApprovalState::Approved {
        return Err(Refusal::AwaitingApproval { call: call.clone() });
    }
    let bodies = record.bodies();
    if bodies >= max_bodies {
        let child = record.child().cloned();
        return Err(Refusal::MaxBodies { call: call.clone(), bodies, max: max_bodies, child });
    }
    for (ahead, lane) in behind(&calls, index) {
        #[cfg(feature = "plant")]
        if lane == stepjournal_recovery::order::Lane::Sequential
            && stepjournal_recovery::plant::active(
                stepjournal_recovery::plant::RulePlant::OrderIgnoresSequential,
            )
        {
            continue;
        }
        let why = match blocking(ahead, true) {
            Some(Blocking::ApprovalDenied) => Some("had its approval denied".to_owned()),
            Some(Blocking::Paired(reason)) => Some(format!("is paired `{}`", reason.as_str())),
            None if ahead.is_resolved() => continue,
            None => None,
        };
        let (call, ahead, order) = (call.clone(), ahead.id().clone(), Order::from(lane));
        return Err(match why {
            Some(why) => Refusal::BehindBlocked { call, ahead, order, why },
            None => Refusal::Behind { call, ahead, order },
        });
    }
    let next = Attempt(bodies.saturating_add(1));
    if let Some(Action::Run { attempt: planned, .. }) = step.plan.get(call).map(|p| &p.action)
        && *planned != next
    {
        return Err(Refusal::AttemptMismatch { call: call.clone(), planned: *planned, next });
    }
    Ok(Start { dispatch: record.dispatch().cloned(), attempt: next })
}

/// A body `reattach` hands back, writing nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reattach {
    /// The call's dispatch id.
    pub(crate) dispatch: DispatchId,
    /// Its last started attempt, the one whose body started the child.
    pub(crate) attempt: Attempt,
}

/// Whether `call`'s running child may be re-attached to now. The checks, in the order their
/// refusals are reported: the step is open and holds the call; the plan did not pair it; it is
/// unresolved; it is a remote sub-agent or a companion; it has a child, or the plan starts one
/// keyed on its dispatch id; it has no body handle in this run; a body of it started. No order
/// rule: nothing new starts.
pub(crate) fn reattach(seen: Seen<'_>, call: &CallId) -> Result<Reattach, Refusal> {
    let step = seen.step()?;
    let record = seen.call(call)?;
    not_paired_by_plan(step, call)?;
    not_resolved(&record)?;
    let kind = record.kind();
    if !matches!(kind, CallKind::RemoteAgent | CallKind::Companion) {
        let (what, wanted) = ("re-attaching", "kind `remote_agent` or `companion`");
        return Err(Refusal::WrongKind { call: call.clone(), kind, what, wanted });
    }
    // A remote sub-agent or a companion whose body started but attached no child before the
    // crash: the plan's `start_child` (`reenter_child`) is keyed on the dispatch id, so asking
    // the remote side again under the same id starts nothing new; the earlier body goes on.
    // (Starting a new body instead would use up an attempt, and past `max_bodies` the call could
    // never finish.)
    let starts_keyed_child = matches!(
        (kind, step.plan.get(call).map(|p| &p.action)),
        (CallKind::RemoteAgent, Some(Action::StartChild { .. }))
            | (CallKind::Companion, Some(Action::ReenterChild { .. }))
    );
    let child = record.child();
    if child.is_none() && !starts_keyed_child {
        return Err(Refusal::NoChild { call: call.clone() });
    }
    no_body_in_this_run(step, call)?;
    match (record.last_attempt(), record.dispatch(), child) {
        (Some(attempt), Some(dispatch), _) => Ok(Reattach { dispatch: dispatch.clone(), attempt }),
        (_, _, Some(child)) => {
            Err(Refusal::NoBodyStarted { call: call.clone(), child: child.clone() })
        }
        (_, _, None) => Err(Refusal::NoChild { call: call.clone() }),
    }
}
