//! The per-call decisions: the recovery table read top to bottom, the redirect and the stop.

use std::collections::HashMap;

use stepjournal_codec::{Attempt, CallKind, PairReason, Replay};

use super::decision::{Action, CallPlan, Rule};
use crate::order::{Blocking, Lane, blocking};
use crate::state::{ApprovalState, CallRecord, Resolution, reason_blocks};
use crate::{ArgsCheck, Config, ToolRegistry, rules};

fn decided(record: &CallRecord<'_>, action: Action, id: &'static str, why: String) -> CallPlan {
    CallPlan {
        call: record.id().clone(),
        tool: record.call().tool.clone(),
        action,
        rule: Rule { id, why },
    }
}

fn pair(reason: PairReason) -> Action {
    Action::Pair { reason }
}

/// Why a resolved call keeps what it has.
fn keep_why(record: &CallRecord<'_>, pairings_count: bool) -> String {
    let resolution = if pairings_count {
        record.resolution()
    } else {
        // Under a rewind no pairing of the step counts.
        [
            record.results().next().map(Resolution::Result),
            record.answers().next().map(Resolution::ClientAnswer),
            record.approvals().find(|a| !a.approved).map(Resolution::ApprovalDenied),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|r| r.seq())
    };
    match resolution {
        Some(Resolution::Result(r)) => format!("it has a tool_result (seq {})", r.seq),
        Some(Resolution::ClientAnswer(a)) => format!("it has a client_answer (seq {})", a.seq),
        Some(Resolution::ApprovalDenied(a)) => {
            format!("its approval was denied (seq {})", a.seq)
        }
        Some(Resolution::Paired(p)) => format!(
            "it is paired {} (seq {}) and that pairing still counts",
            p.reason.as_str(),
            p.seq
        ),
        None => "it is resolved".to_owned(),
    }
}

fn is_resolved(record: &CallRecord<'_>, pairings_count: bool) -> bool {
    record.is_settled() || (pairings_count && record.has_counting_pairing())
}

/// The calls already known to hold back the ones behind them: the first of each lane.
#[derive(Default)]
struct Blockers<'a> {
    first: HashMap<Lane<'a>, String>,
}

impl<'a> Blockers<'a> {
    fn note(&mut self, record: &'a CallRecord<'a>, what: String) {
        for lane in Lane::of(record.call()) {
            self.first.entry(lane).or_insert_with(|| what.clone());
        }
    }

    /// The rule and sentence of the order rule that holds `record` back, if one does: the first
    /// of its lanes (see [`Lane::of`]) a call ahead of it blocks.
    fn holding(&self, record: &CallRecord<'_>) -> Option<(&'static str, String)> {
        let (lane, what) = Lane::of(record.call())
            .filter(|lane| !forgets(*lane))
            .find_map(|lane| Some((lane, self.first.get(&lane)?)))?;
        Some(match lane {
            Lane::Group(_) => (rules::ORDER_GROUP, format!("it is behind {what} of {lane}")),
            Lane::Sequential => (rules::ORDER_SEQUENTIAL, format!("it is behind {what} in {lane}")),
        })
    }
}

/// Whether the planted order bug forgets `lane` (never, unless the `plant` feature is on and a
/// search switched the bug on).
fn forgets(lane: Lane<'_>) -> bool {
    #[cfg(feature = "plant")]
    if lane == Lane::Sequential
        && crate::plant::active(crate::plant::RulePlant::OrderIgnoresSequential)
    {
        return true;
    }
    let _ = lane;
    false
}

/// Whether the planted policy bug ignores the saved policy (never, unless the `plant` feature
/// is on and a search switched the bug on).
fn reads_current_policy_only() -> bool {
    #[cfg(feature = "plant")]
    if crate::plant::active(crate::plant::RulePlant::UnsafeRerun) {
        return true;
    }
    false
}

/// Whether the current registry lets the call run: the tool is present and the saved arguments
/// pass its current schema. `Err` says why not.
fn runnable(record: &CallRecord<'_>, registry: &dyn ToolRegistry) -> Result<Replay, String> {
    let tool = &record.call().tool;
    let Some(policy) = registry.policy(tool) else {
        return Err(format!("tool `{tool}` has been removed from the registry"));
    };
    match registry.check_args(tool, &record.call().args) {
        ArgsCheck::Pass => Ok(policy),
        ArgsCheck::Fail { reason } => {
            Err(format!("its saved arguments fail tool `{tool}`'s current input schema: {reason}"))
        }
    }
}

fn bodies_said(record: &CallRecord<'_>) -> String {
    match record.bodies() {
        1 => "1 body started".to_owned(),
        n => format!("{n} bodies started"),
    }
}

/// Recovery: every unresolved call through the table, first row that fits.
pub(super) fn recover(
    calls: &[CallRecord<'_>],
    rewind: bool,
    registry: &dyn ToolRegistry,
    config: &Config,
) -> Vec<CallPlan> {
    let pairings_count = !rewind;
    let mut blockers = Blockers::default();
    let mut out = Vec::with_capacity(calls.len());
    for record in calls {
        let plan = if is_resolved(record, pairings_count) {
            match blocking(record, pairings_count) {
                Some(Blocking::ApprovalDenied) => {
                    blockers.note(record, format!("`{}`, whose approval was denied", record.id()));
                }
                Some(Blocking::Paired(reason)) => {
                    blockers.note(record, format!("`{}`, paired {}", record.id(), reason.as_str()));
                }
                None => {}
            }
            decided(record, Action::Keep, rules::KEEP_RESOLVED, keep_why(record, pairings_count))
        } else {
            let plan = recover_one(record, &blockers, registry, config);
            if let Action::Pair { reason } = plan.action
                && reason_blocks(reason)
            {
                blockers.note(record, format!("`{}`, paired {} now", record.id(), reason.as_str()));
            }
            plan
        };
        out.push(plan);
    }
    out
}

fn recover_one(
    record: &CallRecord<'_>,
    blockers: &Blockers<'_>,
    registry: &dyn ToolRegistry,
    config: &Config,
) -> CallPlan {
    let kind = record.kind();
    let bodies = record.bodies();
    let dispatch = record.dispatch().cloned();

    if kind == CallKind::Client {
        return decided(
            record,
            Action::Await,
            rules::AWAIT_CLIENT,
            "a client call is settled by the client's answer".to_owned(),
        );
    }
    if kind == CallKind::Approval && record.approval() == ApprovalState::Undecided {
        return decided(
            record,
            Action::Await,
            rules::AWAIT_APPROVAL,
            "an approval-gated call with no decision yet waits for it".to_owned(),
        );
    }
    if let Some((id, why)) = blockers.holding(record) {
        let outside = bodies > 0 || record.child().is_some();
        let (reason, what) = if outside {
            (PairReason::OutcomeUnknown, bodies_or_child(record))
        } else {
            (PairReason::NotStarted, "no body started".to_owned())
        };
        return decided(
            record,
            pair(reason),
            id,
            format!("{why}, whose effect is in doubt or never happened; {what}"),
        );
    }
    if kind == CallKind::RemoteAgent {
        if let Some(child) = record.child() {
            return decided(
                record,
                Action::Reattach { dispatch, child: child.clone() },
                rules::REMOTE_REATTACH,
                format!("a remote sub-agent with child `{child}` re-attaches to it"),
            );
        }
        return match runnable(record, registry) {
            Ok(_) => decided(
                record,
                Action::StartChild { dispatch },
                rules::REMOTE_START_CHILD,
                "a remote sub-agent with no child is started under its dispatch id, so it \
                 starts once"
                    .to_owned(),
            ),
            Err(why) => {
                let reason =
                    if bodies > 0 { PairReason::OutcomeUnknown } else { PairReason::NotStarted };
                decided(
                    record,
                    pair(reason),
                    rules::REMOTE_UNRUNNABLE,
                    format!("a remote sub-agent with no child cannot start: {why}"),
                )
            }
        };
    }
    if kind == CallKind::Companion {
        return decided(
            record,
            Action::ReenterChild { dispatch },
            rules::COMPANION_REENTER,
            "a persistent companion re-enters its child phase".to_owned(),
        );
    }
    if bodies == 0 {
        // "Nothing can have happened" does not hold once a child was attached for the call.
        if let Some(child) = record.child() {
            return decided(
                record,
                pair(PairReason::OutcomeUnknown),
                rules::OUTCOME_UNKNOWN,
                format!(
                    "no attempt_started, but child `{child}` was attached, so something may have run"
                ),
            );
        }
        return match runnable(record, registry) {
            Ok(_) => decided(
                record,
                Action::Run { dispatch, attempt: Attempt(1) },
                rules::NO_BODY_RUN,
                "no body started, so nothing can have happened: it runs as attempt 1 whatever \
                 its policy"
                    .to_owned(),
            ),
            Err(why) => decided(
                record,
                pair(PairReason::NotStarted),
                rules::NO_BODY_UNRUNNABLE,
                format!("no body started and it cannot run: {why}"),
            ),
        };
    }
    if kind == CallKind::LocalAgent {
        return decided(
            record,
            pair(PairReason::OutcomeUnknown),
            rules::LOCAL_AGENT,
            format!("an in-process sub-agent died with its parent ({})", bodies_said(record)),
        );
    }
    let tool = &record.call().tool;
    let refusal = if record.call().replay != Replay::Safe && !reads_current_policy_only() {
        Some("the call was saved with policy unsafe".to_owned())
    } else {
        match runnable(record, registry) {
            Ok(Replay::Safe) => None,
            Ok(Replay::Unsafe) => Some(format!("tool `{tool}` is now unsafe")),
            Err(why) => Some(why),
        }
    };
    match refusal {
        None if bodies < config.max_bodies() => decided(
            record,
            Action::Run { dispatch, attempt: Attempt(bodies.saturating_add(1)) },
            rules::SAFE_REPLAY,
            format!(
                "safe when called and safe now, arguments pass, {} of {} allowed: it runs again \
                 with the same dispatch id",
                bodies_said(record),
                config.max_bodies()
            ),
        ),
        None => decided(
            record,
            pair(PairReason::ReplayLimitReached),
            rules::REPLAY_LIMIT,
            format!("safe, but {} of {} allowed", bodies_said(record), config.max_bodies()),
        ),
        Some(why) => decided(
            record,
            pair(PairReason::OutcomeUnknown),
            rules::OUTCOME_UNKNOWN,
            format!("{} and it may not run again: {why}", bodies_said(record)),
        ),
    }
}

fn bodies_or_child(record: &CallRecord<'_>) -> String {
    match (record.bodies(), record.child()) {
        (0, Some(child)) => format!("child `{child}` was attached"),
        (_, Some(child)) => format!("{} and child `{child}` was attached", bodies_said(record)),
        _ => bodies_said(record),
    }
}

/// A redirect: nothing runs again; every unresolved call is paired.
pub(super) fn redirect(calls: &[CallRecord<'_>]) -> Vec<CallPlan> {
    calls
        .iter()
        .map(|record| {
            if is_resolved(record, true) {
                return decided(
                    record,
                    Action::Keep,
                    rules::KEEP_RESOLVED,
                    keep_why(record, true),
                );
            }
            let undecided_approval = record.kind() == CallKind::Approval
                && record.approval() == ApprovalState::Undecided;
            let nothing_outside =
                record.kind() != CallKind::Client && record.child().is_none();
            if record.bodies() == 0 && (undecided_approval || nothing_outside) {
                let why = if undecided_approval {
                    "the turn is redirected; the approval-gated call was never decided, so no body ran"
                } else {
                    "the turn is redirected; no body started and no child was attached"
                };
                decided(
                    record,
                    pair(PairReason::NotStarted),
                    rules::REDIRECT_NOT_STARTED,
                    why.to_owned(),
                )
            } else {
                let what = if record.kind() == CallKind::Client {
                    "the client may have run it".to_owned()
                } else {
                    bodies_or_child(record)
                };
                decided(
                    record,
                    pair(PairReason::OutcomeUnknown),
                    rules::REDIRECT_OUTCOME_UNKNOWN,
                    format!("the turn is redirected and it may have run: {what}"),
                )
            }
        })
        .collect()
}

/// A stop: resolved calls keep their results; the rest are paired `run_stopped`.
pub(super) fn stop(calls: &[CallRecord<'_>]) -> Vec<CallPlan> {
    calls
        .iter()
        .map(|record| {
            if is_resolved(record, true) {
                decided(record, Action::Keep, rules::KEEP_RESOLVED, keep_why(record, true))
            } else {
                decided(
                    record,
                    pair(PairReason::RunStopped),
                    rules::STOP_RUN_STOPPED,
                    "the run was stopped before the call was resolved".to_owned(),
                )
            }
        })
        .collect()
}
