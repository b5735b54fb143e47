//! The two order rules: a call's group, and the sequential chain.

use stepjournal_codec::{Attempt, CallKind, DispatchId, PairReason};

use crate::testlog::*;
use crate::{Action, rules};

fn pair(reason: PairReason) -> Action {
    Action::Pair { reason }
}

#[test]
fn order_group_pairs_a_safe_call_behind_an_outcome_unknown_call_of_its_group() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool").group("g"),
                call("c2", "safe_tool").safe().group("g"),
                call("c3", "safe_tool").safe().group("h"),
                call("c4", "safe_tool").safe(),
            ],
        )
        .bodies("c1", 1)
        .bodies("c2", 1)
        .bodies("c3", 1)
        .bodies("c4", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::OutcomeUnknown), rules::ORDER_GROUP));
    assert_eq!(decision(&plan, "c3").1, rules::SAFE_REPLAY);
    assert_eq!(decision(&plan, "c4").1, rules::SAFE_REPLAY);
}

#[test]
fn order_group_pairs_not_started_when_the_blocked_call_started_no_body() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![call("c1", "unsafe_tool").group("g"), call("c2", "unsafe_tool").group("g")],
        )
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::NotStarted), rules::ORDER_GROUP));
    assert_eq!(append_types(&plan), ["run_started", "paired", "paired"]);
}

#[test]
fn order_group_pairs_outcome_unknown_when_the_blocked_call_has_a_child_but_no_body() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool").group("g"),
                call("c2", "unsafe_tool").group("g").kind(CallKind::RemoteAgent),
            ],
        )
        .bodies("c1", 1)
        .child("c2", "s-1");
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::OutcomeUnknown), rules::ORDER_GROUP));
}

#[test]
fn order_group_counts_earlier_pairings_that_still_count_and_denied_approvals() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool").group("g"),
                call("c2", "safe_tool").safe().group("g"),
                call("c3", "unsafe_tool").kind(CallKind::Approval).group("h"),
                call("c4", "safe_tool").safe().group("h"),
            ],
        )
        .paired("c1", PairReason::NotStarted)
        .approval("c3", false);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::KEEP_RESOLVED);
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::NotStarted), rules::ORDER_GROUP));
    assert_eq!(decision(&plan, "c3").1, rules::KEEP_RESOLVED);
    assert_eq!(decision(&plan, "c4"), (pair(PairReason::NotStarted), rules::ORDER_GROUP));
}

#[test]
fn order_sequential_pairs_the_chain_behind_a_replay_limit_call_and_spreads_down_it() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe().sequential(),
                call("c2", "safe_tool").safe(),
                call("c3", "safe_tool").safe().sequential(),
                call("c4", "safe_tool").safe().sequential(),
            ],
        )
        .bodies("c1", 3)
        .bodies("c2", 1)
        .bodies("c3", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::REPLAY_LIMIT);
    assert_eq!(decision(&plan, "c2").1, rules::SAFE_REPLAY);
    assert_eq!(decision(&plan, "c3"), (pair(PairReason::OutcomeUnknown), rules::ORDER_SEQUENTIAL));
    assert_eq!(decision(&plan, "c4"), (pair(PairReason::NotStarted), rules::ORDER_SEQUENTIAL));
}

#[test]
fn order_sequential_counts_a_predecessor_paired_not_started_now() {
    let log = Log::new().reply(
        1,
        "cp-1",
        vec![call("c1", "gone").sequential(), call("c2", "safe_tool").sequential()],
    );
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::NO_BODY_UNRUNNABLE);
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::NotStarted), rules::ORDER_SEQUENTIAL));
}

#[test]
fn order_rule_does_not_hold_back_a_call_behind_one_that_runs_awaits_or_has_a_result() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe().sequential(),
                call("c2", "ask").kind(CallKind::Client).sequential(),
                call("c3", "unsafe_tool").sequential(),
                call("c4", "unsafe_tool").sequential(),
            ],
        )
        .bodies("c1", 1)
        .bodies("c3", 1)
        .result("c3", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::SAFE_REPLAY);
    assert_eq!(decision(&plan, "c2").1, rules::AWAIT_CLIENT);
    let expected = Action::Run { dispatch: Some(DispatchId::new("dc4")), attempt: Attempt(1) };
    assert_eq!(decision(&plan, "c4"), (expected, rules::NO_BODY_RUN));
}

#[test]
fn order_rule_comes_after_await_so_a_blocked_client_call_still_awaits() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool").group("g"),
                call("c2", "ask").kind(CallKind::Client).group("g"),
            ],
        )
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c2").1, rules::AWAIT_CLIENT);
}

#[test]
fn order_rule_ignores_pairings_a_rewind_voids() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe().group("g"),
                call("c2", "safe_tool").safe().group("g"),
            ],
        )
        .bodies("c1", 1)
        .paired("c1", PairReason::OutcomeUnknown)
        .paired("c2", PairReason::NotStarted)
        .ended("r1", stepjournal_codec::RunOutcome::Failed);
    let plan = log.plan(retry(), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::SAFE_REPLAY);
    assert_eq!(decision(&plan, "c2").1, rules::NO_BODY_RUN);
    assert_eq!(append_types(&plan), ["run_started", "rewound"]);
}
