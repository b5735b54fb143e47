use std::collections::BTreeSet;

use stepjournal_codec::{
    CallId, CallKind, Event, EventKind, ModelAborted, PairReason, RunOutcome, Seq, Suspended,
};

use super::*;
use crate::testlog::*;

fn sample() -> Log {
    Log::new()
        .reply(1, "cp-1", vec![call("c1", "safe_tool").safe(), call("c2", "unsafe_tool")])
        .bodies("c1", 1)
        .chunk("c1", 1, "a")
        .bodies("c2", 1)
        .paired("c1", PairReason::OutcomeUnknown)
        .ended("r1", RunOutcome::Failed)
        .run("r2", retry())
        .rewound("cp-1")
        .paired("c2", PairReason::OutcomeUnknown)
}

#[test]
fn feeding_events_one_by_one_gives_the_same_state_as_all_at_once() {
    let log = sample();
    let mut state = SessionState::default();
    for e in &log.events {
        state.apply(e);
    }
    assert_eq!(state, fold(&log.events));
    assert_eq!(state, fold_owned(log.events.clone()));
    assert_eq!(state.len(), log.events.len() as u64);
}

/// A log holding every kind of event, each naming what it can of the reply's calls: a fork
/// (`forked_from` and the original's state, here an empty one), then a step.
fn every_kind() -> Log {
    let forked = stepjournal_codec::ForkedFrom {
        original: stepjournal_codec::SessionId::from_stored("s-0"),
        commit_seq: Seq(0),
        checkpoint: "cp-0-commit".into(),
    };
    let original = fold(&[]).fork_snapshot().unwrap();
    Log::new()
        .push(Event::ForkedFrom(forked))
        .push(Event::from(original))
        .reply(
            1,
            "cp-1",
            vec![
                call("c1", "safe_tool").safe(),
                call("c2", "approve").kind(CallKind::Approval),
                call("c3", "ask").kind(CallKind::Client),
                call("c4", "agent").kind(CallKind::RemoteAgent),
            ],
        )
        .bodies("c1", 1)
        .chunk("c1", 1, "half")
        .result("c1", 1)
        .approval("c2", true)
        .answer("c3")
        .child("c4", "child-1")
        .paired("c4", PairReason::OutcomeUnknown)
        .push(Event::Suspended(Suspended { calls: vec![CallId::new("c2")] }))
        .ended("r1", RunOutcome::Failed)
        .run("r2", retry())
        .rewound("cp-1")
        .push(Event::ModelAborted(ModelAborted { partial: "Let me".into(), continuation: None }))
        .commit(1, "cp-1-commit")
        .snapshot()
        .push(Event::Trimmed(stepjournal_codec::Trimmed { before: Seq(1), turns: 0 }))
}

#[test]
fn apply_and_apply_owned_fold_every_event_kind_to_the_same_state() {
    let log = every_kind();
    let kinds: BTreeSet<EventKind> = log.events.iter().map(Event::kind).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), EventKind::ALL, "the log has every kind");
    let (mut borrowed, mut owned) = (SessionState::default(), SessionState::default());
    for event in &log.events {
        borrowed.apply(event);
        owned.apply_owned(event.clone());
        assert_eq!(borrowed, owned, "after {}", event.kind());
    }
    assert_eq!(borrowed, fold(&log.events));
    assert_eq!(owned, fold_owned(log.events));
}

#[test]
fn rewound_voids_pairings_and_run_ends_after_the_named_reply_only() {
    let state = fold(&sample().events);
    let c1 = state.call(&CallId::new("c1")).unwrap();
    let c2 = state.call(&CallId::new("c2")).unwrap();
    assert!(!c1.is_resolved(), "c1's pairing was voided");
    assert!(c2.is_resolved(), "c2's pairing came after the rewind");
    assert!(state.run_ends().iter().all(|e| !e.counts()));
    assert_eq!(state.last_run_outcome(), None);
    assert_eq!(state.rewinds()[0].reply, Some(Seq(2)));
}

#[test]
fn rewound_naming_no_reply_voids_nothing() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool")])
        .paired("c1", PairReason::NotStarted)
        .ended("r1", RunOutcome::Failed)
        .rewound("cp-nowhere");
    let state = fold(&log.events);
    assert!(state.call(&CallId::new("c1")).unwrap().is_resolved());
    assert_eq!(state.last_run_outcome(), Some(RunOutcome::Failed));
    assert_eq!(state.rewinds()[0].reply, None);
}

#[test]
fn an_event_belongs_to_the_latest_reply_holding_its_call_id() {
    let log = Log::new()
        .reply(1, "cp-1", vec![call("c1", "unsafe_tool")])
        .bodies("c1", 1)
        .result("c1", 1)
        .commit(1, "cp-1-commit")
        .reply(2, "cp-2", vec![call("c1", "safe_tool").safe()])
        .attempt("c1", 1);
    let state = fold(&log.events);
    let saved = state.saved_step().unwrap();
    let calls = state.calls_of(saved);
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].is_resolved());
    assert_eq!(calls[0].bodies(), 1);
    assert_eq!(state.calls_of(&state.replies()[0])[0].results().count(), 1);
}

#[test]
fn events_naming_no_call_are_kept_aside() {
    let log = Log::new().attempt("ghost", 1);
    let state = fold(&log.events);
    assert_eq!(state.unbound(), &[Seq(2)]);
}

#[test]
fn the_saved_step_is_the_last_reply_without_a_step_commit() {
    let log = Log::new().reply(1, "cp-1", vec![]);
    assert_eq!(fold(&log.events).saved_step().map(|r| r.step.get()), Some(1));
    let log = log.commit(1, "cp-1-commit");
    assert!(fold(&log.events).saved_step().is_none());
}
