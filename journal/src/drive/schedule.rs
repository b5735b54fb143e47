//! Which calls of a step may start now: a pure function of the step as the run sees it, the
//! entry's plan and what the executor has running. The order rule is recovery's
//! [`order`](stepjournal_recovery::order), the one the writer's `start_body` refuses by.

use std::collections::HashSet;

use stepjournal_codec::{CallId, CallKind, StepNo};
use stepjournal_recovery::order::{behind, blocking};
use stepjournal_recovery::{Action, ApprovalState, CallPlan, CallRecord, SessionState};

/// How a call that may start is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// A new body (`start_body`): a new call, or the plan's `run` with its attempt.
    Run,
    /// The plan's `reattach`: the child attached is still running; the last body goes on.
    Reattach,
    /// The plan's `start_child`: a body started the remote child but did not record it; the
    /// child is asked for again under the same dispatch id.
    StartChild,
    /// The plan's `reenter_child`: a companion's child phase is entered again.
    Reenter,
}

/// What the executor does next with the step's calls.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Round {
    /// Calls that may start now, in reply order, with how.
    pub(crate) start: Vec<(CallId, How)>,
    /// Calls behind one whose effect is in doubt or never happened: answered `not_started`.
    pub(crate) skip: Vec<CallId>,
    /// Calls that wait for the client's answer or an approval, in reply order.
    pub(crate) awaiting: Vec<CallId>,
}

/// The next round over step `number`'s calls in `state`: `plan` is the entry's decision for a
/// call of a recovered step (`None` for a step this run committed); `busy` are the calls the
/// executor has running or has carried out already.
pub(crate) fn round(
    state: &SessionState,
    number: StepNo,
    plan: impl Fn(&CallId) -> Option<CallPlan>,
    busy: &HashSet<CallId>,
) -> Round {
    let mut out = Round::default();
    let Some(reply) = state.last_reply().filter(|r| r.step == number) else {
        return out;
    };
    let calls = state.calls_of(reply);
    for (index, record) in calls.iter().enumerate() {
        let id = record.id();
        if record.is_resolved() || busy.contains(id) {
            continue;
        }
        if awaits(record) {
            out.awaiting.push(id.clone());
            continue;
        }
        let how = match plan(id).map(|p| p.action) {
            // Resolved by the log, or paired by the entry's batch: nothing to do.
            Some(Action::Keep | Action::Pair { .. }) => continue,
            Some(Action::Reattach { .. }) => {
                // The child was started, behind whatever it was behind, by the body that
                // attached it: nothing new starts, no order applies.
                out.start.push((id.clone(), How::Reattach));
                continue;
            }
            Some(Action::StartChild { .. }) => How::StartChild,
            Some(Action::ReenterChild { .. }) => How::Reenter,
            Some(Action::Run { .. } | Action::Await) | None => How::Run,
        };
        let mut ready = true;
        let mut blocked = false;
        for (ahead, _lane) in behind(&calls, index) {
            if blocking(ahead, true).is_some() {
                blocked = true;
                break;
            }
            if !ahead.is_resolved() {
                ready = false;
            }
        }
        if blocked && may_skip(record) {
            out.skip.push(id.clone());
        } else if ready && !blocked {
            out.start.push((id.clone(), how));
        }
    }
    out
}

/// Whether the call waits for an answer from outside: a client call, or an approval-gated
/// call with no decision.
fn awaits(record: &CallRecord<'_>) -> bool {
    match record.kind() {
        CallKind::Client => true,
        CallKind::Approval => record.approval() == ApprovalState::Undecided,
        _ => false,
    }
}

/// Whether nothing can have run the call, so it may be answered `not_started`.
pub(crate) fn may_skip(record: &CallRecord<'_>) -> bool {
    record.kind() != CallKind::Client && record.bodies() == 0 && record.child().is_none()
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{
        ApprovalDecided, Call, CallKind, CheckpointId, Event, PairReason, Paired, RawJson,
        ReplyCommitted, ToolResult,
    };

    use super::*;

    fn call(id: &str, kind: CallKind, group: Option<&str>, sequential: bool) -> Call {
        let mut call = Call::new(id, "t", RawJson::empty_object());
        call.kind = kind;
        call.group = group.map(str::to_owned);
        call.sequential = sequential;
        call
    }

    fn state(calls: Vec<Call>, more: Vec<Event>) -> SessionState {
        let mut state = SessionState::default();
        let reply = ReplyCommitted {
            step: StepNo(1),
            checkpoint: CheckpointId::new("cp-1"),
            text: String::new(),
            calls,
            metadata: None,
        };
        state.apply(&Event::ReplyCommitted(reply));
        for event in more {
            state.apply(&event);
        }
        state
    }

    fn ids(calls: &[CallId]) -> Vec<&str> {
        calls.iter().map(CallId::as_str).collect()
    }

    fn started(round: &Round) -> Vec<&str> {
        round.start.iter().map(|(c, _)| c.as_str()).collect()
    }

    fn result(id: &str) -> Event {
        Event::ToolResult(ToolResult {
            call: id.into(),
            attempt: stepjournal_codec::Attempt(1),
            output: RawJson::null(),
            is_error: false,
            metadata: None,
        })
    }

    #[test]
    fn a_group_and_the_sequential_chain_start_one_call_at_a_time_the_rest_at_once() {
        let calls = vec![
            call("g1", CallKind::Tool, Some("g"), false),
            call("g2", CallKind::Tool, Some("g"), false),
            call("s1", CallKind::Tool, None, true),
            call("s2", CallKind::Tool, None, true),
            call("free", CallKind::Tool, None, false),
        ];
        let none = |_: &CallId| None;
        let first = round(&state(calls.clone(), vec![]), StepNo(1), none, &HashSet::new());
        assert_eq!(started(&first), ["g1", "s1", "free"]);
        let busy: HashSet<CallId> = ["g1", "s1", "free"].into_iter().map(CallId::from).collect();
        let waiting = round(&state(calls.clone(), vec![]), StepNo(1), none, &busy);
        assert_eq!(waiting, Round::default(), "g2 and s2 wait for the calls ahead of them");
        let later = state(calls, vec![result("g1"), result("s1"), result("free")]);
        assert_eq!(started(&round(&later, StepNo(1), none, &busy)), ["g2", "s2"]);
    }

    #[test]
    fn a_call_behind_one_in_doubt_or_denied_is_skipped_and_outside_answers_are_awaited() {
        let calls = vec![
            call("a", CallKind::Approval, Some("g"), false),
            call("b", CallKind::Tool, Some("g"), false),
            call("c", CallKind::Client, None, true),
            call("d", CallKind::Tool, None, true),
            call("e", CallKind::Tool, Some("h"), false),
            call("f", CallKind::Tool, Some("h"), false),
        ];
        let none = |_: &CallId| None;
        let fresh = round(&state(calls.clone(), vec![]), StepNo(1), none, &HashSet::new());
        assert_eq!(ids(&fresh.awaiting), ["a", "c"]);
        assert_eq!(started(&fresh), ["e"]);
        let denied = Event::ApprovalDecided(ApprovalDecided { call: "a".into(), approved: false });
        let doubt = Event::Paired(Paired {
            call: "e".into(),
            reason: PairReason::OutcomeUnknown,
            message: String::new(),
            partial: String::new(),
            rule: None,
        });
        let later = round(&state(calls, vec![denied, doubt]), StepNo(1), none, &HashSet::new());
        assert_eq!(ids(&later.skip), ["b", "f"]);
        assert_eq!(ids(&later.awaiting), ["c"]);
        assert!(later.start.is_empty(), "d is behind c, which the client has not answered");
    }
}
