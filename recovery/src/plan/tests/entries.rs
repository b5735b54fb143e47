//! Entries: recovery, redirect, stop, and every refusal.

use stepjournal_codec::{
    CallKind, CheckpointId, Entry, Event, PairReason, RunId, RunOutcome, StepNo,
};

use crate::testlog::*;
use crate::{Action, ValidationError, rules};

fn refused(plan: &crate::Plan) -> &ValidationError {
    assert!(plan.step.is_none() && plan.calls.is_empty() && plan.appends.is_empty());
    plan.error.as_ref().expect("the entry is refused")
}

fn failed_step() -> Log {
    Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe(), call("c2", "unsafe_tool")])
        .bodies("c1", 1)
        .bodies("c2", 1)
        .paired("c1", PairReason::OutcomeUnknown)
        .paired("c2", PairReason::OutcomeUnknown)
        .ended("r1", RunOutcome::Failed)
}

#[test]
fn no_saved_step_recovers_no_call() {
    let plan = Log::new().plan(wake(), &registry());
    assert_eq!((plan.error.clone(), plan.step), (None, None));
    assert!(plan.calls.is_empty());
    assert_eq!(append_types(&plan), ["run_started"]);
    let committed = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool")])
        .bodies("c1", 1)
        .result("c1", 1)
        .commit(1, "cp-1-commit");
    assert_eq!(committed.plan(resume(), &registry()).step, None);
}

#[test]
fn retry_after_a_failed_run_rewinds_to_the_saved_append_then_recovers_afresh() {
    let plan = failed_step().plan(retry(), &registry());
    assert_eq!(plan.error, None);
    assert_eq!(plan.step, Some(StepNo(1)));
    assert_eq!(decision(&plan, "c1").1, rules::SAFE_REPLAY);
    assert_eq!(decision(&plan, "c2").1, rules::OUTCOME_UNKNOWN);
    assert_eq!(append_types(&plan), ["run_started", "rewound", "paired"]);
    let Some(Event::Rewound(r)) = plan.appends.get(1) else { panic!() };
    assert_eq!(r.to, CheckpointId::new("cp-1"));
}

#[test]
fn retry_with_no_saved_step_writes_no_rewound() {
    let log = Log::new()
        .reply(1, "cp-1", vec![])
        .commit(1, "cp-1-commit")
        .ended("r1", RunOutcome::Failed);
    let plan = log.plan(retry(), &registry());
    assert_eq!(plan.error, None);
    assert_eq!(append_types(&plan), ["run_started"]);
}

#[test]
fn retry_without_a_failed_last_run_is_refused() {
    let completed = Log::new().ended("r1", RunOutcome::Completed);
    let still_running = Log::new();
    let failed_then_resumed = failed_step().run("r2", wake());
    let failed_then_rewound =
        failed_step().run("r2", retry()).rewound("cp-1").paired("c2", PairReason::OutcomeUnknown);
    for log in [completed, still_running, failed_then_resumed, failed_then_rewound] {
        let plan = log.plan(retry(), &registry());
        assert!(
            matches!(refused(&plan), ValidationError::RetryWithoutFailedRun { .. }),
            "{plan:#?}"
        );
    }
}

#[test]
fn retry_from_a_checkpoint_without_a_message_is_refused() {
    let entry = Entry::Retry { checkpoint: Some("cp-1".into()), message: None };
    let plan = failed_step().plan(entry, &registry());
    assert!(matches!(refused(&plan), ValidationError::RetryCheckpointWithoutMessage { .. }));
    assert_eq!(refused(&plan).kind(), "validation_error");
}

#[test]
fn a_checkpoint_no_event_names_is_refused() {
    let plan = failed_step().plan(from_checkpoint("cp-9"), &registry());
    assert!(matches!(refused(&plan), ValidationError::UnknownCheckpoint { .. }));
}

#[test]
fn a_checkpoint_other_than_the_saved_append_is_refused() {
    let log = Log::new()
        .reply(1, "cp-1", vec![])
        .commit(1, "cp-1-commit")
        .reply(2, "cp-2", vec![call("c2", "safe_tool").safe()])
        .bodies("c2", 1);
    for cp in ["cp-1", "cp-1-commit"] {
        let plan = log.plan(from_checkpoint(cp), &registry());
        assert!(matches!(refused(&plan), ValidationError::CheckpointNotEnterable { .. }), "{cp}");
    }
    let redirect = Entry::Retry { checkpoint: Some("cp-1".into()), message: Some("m".into()) };
    refused(&log.plan(redirect, &registry()));
}

#[test]
fn from_checkpoint_at_the_saved_append_rewinds_and_recovers() {
    let plan = failed_step().plan(from_checkpoint("cp-1"), &registry());
    assert_eq!(decision(&plan, "c1").1, rules::SAFE_REPLAY);
    assert_eq!(append_types(&plan), ["run_started", "rewound", "paired"]);
}

#[test]
fn from_checkpoint_at_the_last_commit_recovers_nothing() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
        .bodies("c1", 1)
        .result("c1", 1)
        .commit(1, "cp-1-commit");
    let plan = log.plan(from_checkpoint("cp-1-commit"), &registry());
    assert_eq!((plan.error.clone(), plan.step), (None, None));
    assert_eq!(append_types(&plan), ["run_started"]);
    let plan = log.plan(from_checkpoint("cp-1"), &registry());
    assert!(matches!(refused(&plan), ValidationError::CheckpointNotEnterable { .. }));
}

#[test]
fn redirect_not_started_and_redirect_outcome_unknown_follow_what_could_have_run() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "unsafe_tool"),
                call("c2", "safe_tool").safe(),
                call("c3", "deploy").kind(CallKind::Approval),
                call("c4", "ask").kind(CallKind::Client),
                call("c5", "research").kind(CallKind::RemoteAgent),
                call("c6", "unsafe_tool"),
            ],
        )
        .bodies("c2", 1)
        .child("c5", "s-1")
        .bodies("c6", 1)
        .result("c6", 1);
    for entry in [
        with_message("do X instead"),
        Entry::NewTurn { message: "next".into() },
        Entry::Retry { checkpoint: None, message: Some("m".into()) },
        Entry::Retry { checkpoint: Some("cp-1".into()), message: Some("m".into()) },
    ] {
        let plan = log.plan(entry, &registry());
        let pair = |r| Action::Pair { reason: r };
        assert_eq!(
            decision(&plan, "c1"),
            (pair(PairReason::NotStarted), rules::REDIRECT_NOT_STARTED)
        );
        assert_eq!(
            decision(&plan, "c2"),
            (pair(PairReason::OutcomeUnknown), rules::REDIRECT_OUTCOME_UNKNOWN)
        );
        assert_eq!(
            decision(&plan, "c3"),
            (pair(PairReason::NotStarted), rules::REDIRECT_NOT_STARTED)
        );
        assert_eq!(
            decision(&plan, "c4"),
            (pair(PairReason::OutcomeUnknown), rules::REDIRECT_OUTCOME_UNKNOWN)
        );
        assert_eq!(
            decision(&plan, "c5"),
            (pair(PairReason::OutcomeUnknown), rules::REDIRECT_OUTCOME_UNKNOWN)
        );
        assert_eq!(decision(&plan, "c6"), (Action::Keep, rules::KEEP_RESOLVED));
        assert_eq!(
            append_types(&plan),
            [
                "run_started",
                "paired",
                "paired",
                "paired",
                "paired",
                "paired",
                "step_commit",
                "message"
            ]
        );
    }
}

#[test]
fn redirect_keeps_pairings_of_the_failed_run() {
    let plan = failed_step().plan(with_message("m"), &registry());
    assert_eq!(decision(&plan, "c1").0, Action::Keep);
    assert_eq!(append_types(&plan), ["run_started", "step_commit", "message"]);
}

#[test]
fn stop_run_stopped_pairs_the_rest_and_ends_the_stopped_run() {
    let log = Log::new()
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe(),
                call("c2", "unsafe_tool"),
                call("c3", "ask").kind(CallKind::Client),
            ],
        )
        .bodies("c1", 1)
        .result("c1", 1)
        .bodies("c2", 1);
    let plan = log.plan(Entry::Stop, &registry());
    assert_eq!(decision(&plan, "c1").0, Action::Keep);
    for c in ["c2", "c3"] {
        assert_eq!(
            decision(&plan, c),
            (Action::Pair { reason: PairReason::RunStopped }, rules::STOP_RUN_STOPPED)
        );
    }
    assert_eq!(append_types(&plan), ["paired", "paired", "step_commit", "run_ended"]);
    let Some(Event::RunEnded(end)) = plan.appends.last() else { panic!() };
    assert_eq!((end.run.clone(), end.outcome), (RunId::new("r1"), RunOutcome::Stopped));
}

#[test]
fn stop_with_no_saved_step_only_ends_the_run() {
    let plan = Log::new().plan(Entry::Stop, &registry());
    assert_eq!(append_types(&plan), ["run_ended"]);
}

#[test]
fn a_step_closed_by_a_redirect_or_a_stop_never_runs_again() {
    let base = Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe(), call("c2", "unsafe_tool")])
        .bodies("c1", 1);
    for closing in [with_message("m"), Entry::Stop] {
        let closed = base.clone().with_appends(&base.plan(closing, &registry()));
        let closed = closed.ended("r-new", RunOutcome::Failed);
        for entry in [wake(), resume(), retry(), from_checkpoint("cp-1")] {
            let plan = closed.plan(entry.clone(), &registry());
            assert!(plan.calls.iter().all(|c| !c.action.starts_work()), "{entry:?}: {plan:#?}");
            assert!(!plan.appends.iter().any(|e| matches!(e, Event::Rewound(_))), "{entry:?}");
        }
    }
}

#[test]
fn a_saved_reply_that_repeats_a_call_id_is_refused() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool"), call("c1", "safe_tool")])
        .bodies("c1", 1);
    let plan = log.plan(resume(), &registry());
    assert!(matches!(refused(&plan), ValidationError::RepeatedCall { .. }));
}

#[test]
fn a_second_resume_after_the_appends_pairs_nothing_again() {
    let log = failed_step().run("r2", wake());
    let first = failed_step().plan(retry(), &registry());
    let after = failed_step().with_appends(&first);
    let second = after.plan(resume(), &registry());
    assert_eq!(decision(&second, "c2").0, Action::Keep);
    assert_eq!(decision(&second, "c1").1, rules::SAFE_REPLAY);
    assert_eq!(append_types(&second), ["run_started"]);
    assert_eq!(log.plan(resume(), &registry()).calls.len(), 2);
}

#[test]
fn each_call_s_decision_names_the_tool_it_calls() {
    let plan = failed_step().plan(retry(), &registry());
    let tools: Vec<(&str, &str)> =
        plan.calls.iter().map(|c| (c.call.as_str(), c.tool.as_str())).collect();
    assert_eq!(tools, [("c1", "safe_tool"), ("c2", "unsafe_tool")]);
}
