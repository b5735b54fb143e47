//! Every row of the recovery table.

use stepjournal_codec::{Attempt, CallKind, DispatchId, Event, PairReason, Replay, SessionId};

use crate::testlog::*;
use crate::{Action, Config, MemoryRegistry, rules};

fn run(attempt: u32, dispatch: &str) -> Action {
    Action::Run { dispatch: Some(DispatchId::new(dispatch)), attempt: Attempt(attempt) }
}

fn pair(reason: PairReason) -> Action {
    Action::Pair { reason }
}

#[test]
fn keep_resolved_keeps_results_answers_denials_and_counting_pairings() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool"),
                call("c2", "ask").kind(CallKind::Client),
                call("c3", "unsafe_tool").kind(CallKind::Approval),
                call("c4", "safe_tool").safe(),
            ],
        )
        .bodies("c1", 1)
        .result("c1", 1)
        .answer("c2")
        .approval("c3", false)
        .bodies("c4", 1)
        .paired("c4", PairReason::OutcomeUnknown);
    let plan = log.plan(resume(), &registry());
    for c in ["c1", "c2", "c3", "c4"] {
        assert_eq!(decision(&plan, c), (Action::Keep, rules::KEEP_RESOLVED), "{c}");
    }
    assert_eq!(append_types(&plan), ["run_started"]);
}

#[test]
fn await_client_leaves_a_client_call_to_its_answer_even_with_bodies() {
    let log =
        Log::new().reply(1, "cp-1", vec![call("c1", "ask").kind(CallKind::Client)]).bodies("c1", 1);
    let plan = log.plan(wake(), &registry());
    assert_eq!(decision(&plan, "c1"), (Action::Await, rules::AWAIT_CLIENT));
}

#[test]
fn await_approval_waits_for_an_undecided_approval_even_when_its_tool_was_removed() {
    let log = Log::new().reply(1, "cp-1", vec![call("c1", "gone").kind(CallKind::Approval)]);
    let plan = log.plan(wake(), &registry());
    assert_eq!(decision(&plan, "c1"), (Action::Await, rules::AWAIT_APPROVAL));
}

#[test]
fn remote_reattach_binds_to_the_first_attached_child_with_the_dispatch_id() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool").kind(CallKind::RemoteAgent)])
        .bodies("c1", 1)
        .child("c1", "s-child");
    let plan = log.plan(resume(), &MemoryRegistry::new());
    let expected = Action::Reattach {
        dispatch: Some(DispatchId::new("dc1")),
        child: SessionId::new("s-child").unwrap(),
    };
    assert_eq!(decision(&plan, "c1"), (expected, rules::REMOTE_REATTACH));
}

#[test]
fn remote_start_child_starts_a_child_once_under_the_dispatch_id_even_after_bodies() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool").kind(CallKind::RemoteAgent)])
        .bodies("c1", 2);
    let plan = log.plan(resume(), &registry());
    let expected = Action::StartChild { dispatch: Some(DispatchId::new("dc1")) };
    assert_eq!(decision(&plan, "c1"), (expected, rules::REMOTE_START_CHILD));
}

#[test]
fn remote_unrunnable_pairs_outcome_unknown_with_bodies_and_not_started_without() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "gone").kind(CallKind::RemoteAgent),
                call("c2", "strict").kind(CallKind::RemoteAgent),
            ],
        )
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (pair(PairReason::OutcomeUnknown), rules::REMOTE_UNRUNNABLE));
    assert_eq!(decision(&plan, "c2"), (pair(PairReason::NotStarted), rules::REMOTE_UNRUNNABLE));
}

#[test]
fn companion_reenter_reenters_the_child_phase_even_when_its_tool_was_removed() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "gone").kind(CallKind::Companion)])
        .bodies("c1", 1);
    let plan = log.plan(wake(), &MemoryRegistry::new());
    let expected = Action::ReenterChild { dispatch: Some(DispatchId::new("dc1")) };
    assert_eq!(decision(&plan, "c1"), (expected, rules::COMPANION_REENTER));
}

#[test]
fn no_body_run_runs_any_policy_kind_as_attempt_1() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool"),
                call("c2", "unsafe_tool").kind(CallKind::LocalAgent),
                call("c3", "unsafe_tool").kind(CallKind::Approval),
            ],
        )
        .approval("c3", true);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (run(1, "dc1"), rules::NO_BODY_RUN));
    assert_eq!(decision(&plan, "c2"), (run(1, "dc2"), rules::NO_BODY_RUN));
    assert_eq!(decision(&plan, "c3"), (run(1, "dc3"), rules::NO_BODY_RUN));
    assert_eq!(append_types(&plan), ["run_started"]);
}

#[test]
fn no_body_unrunnable_pairs_not_started_when_the_tool_is_removed_or_the_arguments_fail() {
    let log = Log::new().reply(1, "cp-1", vec![call("c1", "gone"), call("c2", "strict").safe()]);
    let plan = log.plan(resume(), &registry());
    for c in ["c1", "c2"] {
        assert_eq!(
            decision(&plan, c),
            (pair(PairReason::NotStarted), rules::NO_BODY_UNRUNNABLE),
            "{c}"
        );
    }
    assert!(plan.call(&"c2".into()).unwrap().rule.why.contains("`scope` is required"));
}

#[test]
fn local_agent_with_bodies_is_outcome_unknown_even_when_safe() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe().kind(CallKind::LocalAgent)])
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (pair(PairReason::OutcomeUnknown), rules::LOCAL_AGENT));
}

#[test]
fn safe_replay_runs_again_with_the_same_dispatch_id_and_attempt_bodies_plus_one() {
    let log = Log::new().reply(1, "cp-1", vec![call("c1", "safe_tool").safe()]).bodies("c1", 2);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (run(3, "dc1"), rules::SAFE_REPLAY));
}

#[test]
fn safe_replay_runs_an_approved_approval_call_that_started_a_body() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe().kind(CallKind::Approval)])
        .approval("c1", true)
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (run(2, "dc1"), rules::SAFE_REPLAY));
}

#[test]
fn replay_limit_pairs_a_safe_call_that_started_max_bodies() {
    let log = Log::new().reply(1, "cp-1", vec![call("c1", "safe_tool").safe()]).bodies("c1", 3);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (pair(PairReason::ReplayLimitReached), rules::REPLAY_LIMIT));
    let one = Log::new().reply(1, "cp-1", vec![call("c1", "safe_tool").safe()]).bodies("c1", 1);
    let plan = one.plan_with(resume(), &registry(), Config::new(1).unwrap());
    assert_eq!(decision(&plan, "c1"), (pair(PairReason::ReplayLimitReached), rules::REPLAY_LIMIT));
}

#[test]
fn replay_limit_counts_every_body_ever_started_even_rewound_ones() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
        .bodies("c1", 2)
        .paired("c1", PairReason::OutcomeUnknown)
        .ended("r1", stepjournal_codec::RunOutcome::Failed)
        .run("r2", retry())
        .rewound("cp-1")
        .attempt("c1", 3);
    let plan = log.plan(resume(), &registry());
    assert_eq!(decision(&plan, "c1"), (pair(PairReason::ReplayLimitReached), rules::REPLAY_LIMIT));
}

#[test]
fn outcome_unknown_when_saved_unsafe_now_unsafe_removed_or_arguments_fail() {
    let reg = registry().with_tool("now_unsafe", Replay::Unsafe);
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool"),
                call("c2", "now_unsafe").safe(),
                call("c3", "gone").safe(),
                call("c4", "strict").safe(),
            ],
        )
        .bodies("c1", 1)
        .bodies("c2", 1)
        .bodies("c3", 1)
        .bodies("c4", 1);
    let plan = log.plan(resume(), &reg);
    for c in ["c1", "c2", "c3", "c4"] {
        assert_eq!(
            decision(&plan, c),
            (pair(PairReason::OutcomeUnknown), rules::OUTCOME_UNKNOWN),
            "{c}"
        );
    }
}

#[test]
fn pairing_carries_the_last_started_attempts_output_joined_in_log_order() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool")])
        .attempt("c1", 1)
        .chunk("c1", 1, "old")
        .attempt("c1", 2)
        .chunk("c1", 2, "new ")
        .chunk("c1", 1, "late")
        .chunk("c1", 2, "part");
    let plan = log.plan(resume(), &registry());
    let Some(Event::Paired(p)) = plan.appends.get(1) else { panic!("no paired: {plan:#?}") };
    assert_eq!(p.partial, "new part");
    assert_eq!(p.message, PairReason::OutcomeUnknown.model_message());
}

#[test]
fn run_without_a_minted_dispatch_carries_none_for_the_writer_to_mint() {
    let log = Log::new().push(Event::ReplyCommitted(stepjournal_codec::ReplyCommitted {
        step: stepjournal_codec::StepNo(1),
        checkpoint: "cp-1".into(),
        text: String::new(),
        calls: vec![call("c1", "unsafe_tool")],
        metadata: None,
    }));
    let plan = log.plan(resume(), &registry());
    let expected = Action::Run { dispatch: None, attempt: Attempt(1) };
    assert_eq!(decision(&plan, "c1"), (expected, rules::NO_BODY_RUN));
}

#[test]
fn outcome_unknown_when_no_body_started_but_a_child_was_attached() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe().kind(CallKind::LocalAgent),
                call("c2", "safe_tool").safe(),
            ],
        )
        .child("c1", "s-1")
        .child("c2", "s-2");
    let plan = log.plan(resume(), &registry());
    for c in ["c1", "c2"] {
        assert_eq!(
            decision(&plan, c),
            (pair(PairReason::OutcomeUnknown), rules::OUTCOME_UNKNOWN),
            "{c}"
        );
    }
}
