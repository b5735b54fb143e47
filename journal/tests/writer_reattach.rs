//! Re-attaching to a child already running (`Step::reattach`): a remote sub-agent whose body
//! started and whose child is attached is finished after a lost run, even with no body left
//! under `max_bodies`, and without a new `attempt_started`; and every refusal, each writing
//! nothing.

mod writer_support;

use std::sync::Arc;

use stepjournal::Journal;
use stepjournal::Reply;
use stepjournal::recovery::{Action, TranscriptItem, verify};
use stepjournal::writer::IdSource;
use stepjournal::{Refusal, WriteError};
use stepjournal_backends::JournalStore;
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{
    Attempt, Call, CallKind, Entry, Event, EventKind, PairReason, RunOutcome, SessionId,
};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "research this".into() }
}

fn child() -> SessionId {
    SessionId::new("child-1").unwrap()
}

fn attempts_started(store: &dyn JournalStore) -> usize {
    kinds(store, &session()).iter().filter(|k| **k == EventKind::AttemptStarted).count()
}

/// What the lost run did for its remote sub-agent call before it was dropped.
#[derive(Clone, Copy)]
struct Lost {
    body: bool,
    child: bool,
}

/// A run commits a reply with `calls`, then for `c1` starts a body and/or attaches its child
/// as `lost` says, and is dropped without an end (the process died).
fn lost_run(journal: &Journal, calls: Vec<Call>, lost: Lost) {
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let reply = calls.into_iter().fold(Reply::new("delegating"), |r, c| r.call(c));
    let step = run.commit_reply(reply).unwrap();
    if lost.body {
        let body = step.start_body(&id("c1")).unwrap();
        assert_eq!(body.attempt(), Attempt(1));
        body.output_chunk("child started; ").unwrap();
        drop(body);
    }
    if lost.child {
        step.child_attached(&id("c1"), child()).unwrap();
    }
}

fn journal(store: &Arc<MemoryStore>, ids: &Arc<dyn IdSource>, max_bodies: u32) -> Journal {
    journal_max_bodies(store.clone(), ids.clone(), max_bodies)
}

const BOTH: Lost = Lost { body: true, child: true };

/// A companion call (a persistent child) of the session's tool `researcher`.
fn companion_call(call_id: &str) -> Call {
    let mut companion = call(call_id, "researcher");
    companion.kind = CallKind::Companion;
    companion
}

#[test]
fn a_remote_agent_with_no_body_left_is_finished_through_its_attached_child() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(&journal(&store, &ids, 1), vec![call("c1", "researcher")], BOTH);
    let first_dispatch = events(&*store, &session())
        .iter()
        .find_map(|e| match e {
            Event::DispatchMinted(d) => Some(d.dispatch.clone()),
            _ => None,
        })
        .unwrap();

    let journal = journal(&store, &ids, 1);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    let plan = run.plan().call(&id("c1")).unwrap().clone();
    assert_eq!(
        plan.action,
        Action::Reattach { dispatch: Some(first_dispatch.clone()), child: child() }
    );
    let step = run.step().unwrap();
    // The body limit is reached: a new body is refused, and the refusal says what to do.
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::MaxBodies { call: id("c1"), bodies: 1, max: 1, child: Some(child()) });
    assert!(r.to_string().contains("Step::reattach") && r.to_string().contains("child-1"), "{r}");

    let before = store.tail(&session()).unwrap();
    let body = step.reattach(&id("c1")).unwrap();
    assert_eq!(store.tail(&session()).unwrap(), before, "re-attaching writes nothing");
    assert_eq!((body.dispatch(), body.attempt()), (&first_dispatch, Attempt(1)));
    assert_eq!(body.idempotency_key(), format!("{}:{}", session(), first_dispatch));
    body.output_chunk("child done").unwrap();
    body.finish(json(r#"{"report":"ok"}"#), false).unwrap();
    step.commit().unwrap();
    run.commit_reply(Reply::new("Here is the report.")).unwrap().commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();

    assert_eq!(attempts_started(&*store), 1, "no new attempt_started");
    let log = events(&*store, &session());
    let result = log
        .iter()
        .find_map(|e| match e {
            Event::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!((result.call, result.attempt), (id("c1"), Attempt(1)));
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
    let shown = journal.transcript(&session()).unwrap();
    let results = shown.iter().filter(|t| matches!(t, TranscriptItem::ToolResult { .. })).count();
    let pairings = shown.iter().filter(|t| matches!(t, TranscriptItem::Paired { .. })).count();
    assert_eq!((results, pairings), (1, 0));
}

#[test]
fn below_the_limit_a_reattach_uses_up_no_attempt() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(&journal(&store, &ids, 3), vec![call("c1", "researcher")], BOTH);
    let run = journal(&store, &ids, 3).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    let body = step.reattach(&id("c1")).unwrap();
    assert_eq!(body.attempt(), Attempt(1));
    // One body handle per call per run: neither a second re-attach nor a new body.
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::BodyStarted { call: id("c1"), attempt: Attempt(1) });
    assert!(r.to_string().contains("re-attached"), "{r}");
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::BodyStarted { call: id("c1"), attempt: Attempt(1) });
    body.finish(json("1"), false).unwrap();
    step.commit().unwrap();
    run.with_state(|s| assert_eq!(s.call(&id("c1")).unwrap().bodies(), 1));
    // The step is committed: a later re-attach is refused for that.
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::StepClosed { step: step.number() });
}

#[test]
fn a_body_started_in_this_run_cannot_be_reattached_too() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("go").call(call("c1", "researcher"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    step.child_attached(&id("c1"), child()).unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::BodyStarted { call: id("c1"), attempt: Attempt(1) });
    body.finish(json("1"), false).unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::Resolved { call: id("c1") });
}

#[test]
fn a_reattached_body_counts_as_running_until_it_finishes() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    let calls = vec![call("c1", "researcher"), call("c2", "ask_user")];
    lost_run(&journal(&store, &ids, 1), calls, BOTH);
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    let body = step.reattach(&id("c1")).unwrap();
    let r = refused_without_writing(&*store, || step.suspend(&[id("c2")]));
    assert_eq!(r, Refusal::BodiesRunning { step: step.number(), calls: vec![id("c1")] });
    let r = refused_without_writing(&*store, || step.commit());
    assert_eq!(r, Refusal::OpenCalls { step: step.number(), calls: vec![id("c1"), id("c2")] });
    body.finish(json("1"), false).unwrap();
    step.suspend(&[id("c2")]).unwrap();
}

/// With max_bodies 1, `call`'s body started and the process died before `child_attached`; the
/// wake plans what `planned` accepts, `start_body` is refused past the limit, and `reattach`
/// goes on in the started body, writing nothing, and the call finishes there.
fn goes_on_in_its_started_body(call: Call, planned: fn(&Action) -> bool) {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(&journal(&store, &ids, 1), vec![call], Lost { body: true, child: false });
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    let action = &run.plan().call(&id("c1")).unwrap().action;
    assert!(planned(action), "{action:?}");
    let step = run.step().unwrap();
    assert!(step.start_body(&id("c1")).is_err(), "no body is left under max_bodies 1");
    let before = store.tail(&session()).unwrap();
    let body = step.reattach(&id("c1")).unwrap();
    assert_eq!(store.tail(&session()).unwrap(), before, "going on writes nothing");
    assert_eq!(body.attempt(), Attempt(1));
    step.child_attached(&id("c1"), child()).unwrap();
    body.finish(json("1"), false).unwrap();
    step.commit().unwrap();
    assert_eq!(attempts_started(&*store), 1);
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn a_remote_agent_whose_child_was_never_attached_goes_on_in_its_started_body() {
    // Regression: with max_bodies 1, a body asked the remote side for the child and the process
    // died before `child_attached`; the wake plans `start_child`, and `start_body` is refused
    // past the limit, so the call could never finish. The start is keyed on the dispatch id:
    // `reattach` goes on in the started body, writing nothing, and the call finishes.
    goes_on_in_its_started_body(call("c1", "researcher"), |a| {
        matches!(a, Action::StartChild { .. })
    });
}

#[test]
fn a_companion_whose_child_was_never_attached_goes_on_in_its_started_body() {
    // Regression: with max_bodies 1, a companion's body started and the process died before
    // `child_attached`; the wake plans `reenter_child`, `reattach` was refused (no child) and
    // `start_body` past the limit, so the call could never finish and every `drive` of the
    // step failed. The companion's start is keyed on the dispatch id, as a remote sub-agent's:
    // `reattach` goes on in the started body, writing nothing, and the call finishes.
    goes_on_in_its_started_body(companion_call("c1"), |a| matches!(a, Action::ReenterChild { .. }));
}

#[test]
fn a_call_with_no_child_or_no_body_is_not_reattached() {
    // A companion with no body started and no child attached: nothing to re-attach to.
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(
        &journal(&store, &ids, 3),
        vec![companion_call("c1")],
        Lost { body: false, child: false },
    );
    let run = journal(&store, &ids, 3).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::NoChild { call: id("c1") });
    assert!(r.to_string().contains("Step::start_body"), "{r}");
    drop((step, run));

    // A child attached, but no body ever started: no attempt to record its result under.
    let (store, ids) = (Arc::new(MemoryStore::new()), writer_support::ids());
    lost_run(
        &journal(&store, &ids, 1),
        vec![call("c1", "researcher")],
        Lost { body: false, child: true },
    );
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    assert!(matches!(run.plan().call(&id("c1")).unwrap().action, Action::Reattach { .. }));
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c1")));
    assert_eq!(r, Refusal::NoBodyStarted { call: id("c1"), child: child() });
    assert!(r.to_string().contains("Step::start_body"), "{r}");
    // Its first body starts as attempt 1.
    let body = step.start_body(&id("c1")).unwrap();
    assert_eq!(body.attempt(), Attempt(1));
    body.finish(json("1"), false).unwrap();
    step.commit().unwrap();
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn only_a_remote_agent_or_companion_of_the_step_is_reattached() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(&journal(&store, &ids, 3), vec![call("c1", "researcher"), call("c2", "search")], BOTH);
    let run = journal(&store, &ids, 3).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c2")));
    assert!(matches!(r, Refusal::WrongKind { kind: CallKind::Tool, .. }), "{r:?}");
    assert!(r.to_string().contains("remote_agent"), "{r}");
    let r = refused_without_writing(&*store, || step.reattach(&id("nope")));
    assert_eq!(r, Refusal::UnknownCall { step: step.number(), call: id("nope") });
}

#[test]
fn a_companion_with_its_child_attached_and_a_body_started_is_reentered_through_reattach() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    let mut companion = call("c1", "researcher");
    companion.kind = CallKind::Companion;
    lost_run(&journal(&store, &ids, 1), vec![companion], BOTH);
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    assert!(matches!(run.plan().call(&id("c1")).unwrap().action, Action::ReenterChild { .. }));
    let step = run.step().unwrap();
    let body = step.reattach(&id("c1")).unwrap();
    assert_eq!(body.attempt(), Attempt(1));
    body.finish(json("1"), false).unwrap();
    step.commit().unwrap();
    assert_eq!(attempts_started(&*store), 1);
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn a_call_the_plan_paired_is_not_reattached() {
    // c1 (unsafe, body started) is paired `outcome_unknown`; c2 is behind it in its group, so
    // its child's outcome is in doubt too: paired, not re-attached.
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    let journal1 = journal(&store, &ids, 3);
    let run = journal1.begin_run(&session(), new_turn()).unwrap();
    let reply = Reply::new("go")
        .call(grouped(call("c1", "send_email"), "g"))
        .call(grouped(call("c2", "researcher"), "g"));
    let step = run.commit_reply(reply).unwrap();
    drop(step.start_body(&id("c1")).unwrap());
    step.child_attached(&id("c2"), child()).unwrap();
    drop((step, run));
    let run = journal(&store, &ids, 3).begin_run(&session(), Entry::Wake).unwrap();
    let plan = run.plan().call(&id("c2")).unwrap().clone();
    assert_eq!(plan.action, Action::Pair { reason: PairReason::OutcomeUnknown });
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.reattach(&id("c2")));
    assert_eq!(
        r,
        Refusal::PairedByPlan {
            call: id("c2"),
            reason: PairReason::OutcomeUnknown,
            rule: plan.rule.id
        }
    );
}

#[test]
fn a_run_that_ended_reattaches_nothing() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(&journal(&store, &ids, 1), vec![call("c1", "researcher")], BOTH);
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    run.fail(Some("giving up".into())).unwrap();
    let before = store.tail(&session()).unwrap();
    let err = step.reattach(&id("c1")).unwrap_err();
    assert!(matches!(err, WriteError::Ended { outcome: RunOutcome::Failed, .. }), "{err:?}");
    assert_eq!(store.tail(&session()).unwrap(), before);
}

#[test]
fn a_body_limit_without_a_child_does_not_point_to_reattach() {
    let (store, ids) = (Arc::new(MemoryStore::new()), ids());
    lost_run(
        &journal(&store, &ids, 1),
        vec![call("c1", "researcher")],
        Lost { body: true, child: false },
    );
    let run = journal(&store, &ids, 1).begin_run(&session(), Entry::Wake).unwrap();
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::MaxBodies { call: id("c1"), bodies: 1, max: 1, child: None });
    assert!(!r.to_string().contains("reattach"), "{r}");
}
