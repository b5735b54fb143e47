//! The protocol as the writer enforces it: every refusal, each leaving the log untouched.

mod writer_support;

use std::sync::Arc;
use std::time::Duration;

use stepjournal::recovery::{Action, verify};
use stepjournal::writer::SteppingClock;
use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal::{Order, Refusal, RunStatus, WriteError};
use stepjournal_backends::JournalStore;
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{
    Attempt, AttemptStarted, CallId, ChildAttached, DispatchMinted, Entry, Event, EventKind,
    PairReason, ReplyCommitted, RunOutcome, RunStarted, Seq, SessionId, Stamped, StepNo,
    UnixMillis,
};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

#[test]
fn every_append_is_stamped_with_one_reading_of_the_options_clock() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(SteppingClock::new(UnixMillis(1_000), Duration::from_millis(10)));
    let options = JournalOptions::new().ids(ids()).clock(clock);
    let journal = Journal::new(separate(store.clone()), Arc::new(registry()), options).unwrap();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let at: Vec<u64> = store.read_all(&session()).unwrap().iter().map(|r| r.at.get()).collect();
    // run_started + message; reply_committed + dispatch_minted; attempt_started; tool_result;
    // step_commit; run_ended: one reading per batch.
    assert_eq!(at, [1_000, 1_000, 1_010, 1_010, 1_020, 1_030, 1_040, 1_050]);
}

#[test]
fn commit_reply_makes_the_reply_and_every_dispatch_durable_in_one_batch() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(
            Reply::new("calling").call(call("c1", "search")).call(call("c2", "send_email")),
        )
        .unwrap();
    assert_eq!(step.number(), StepNo(1));
    let log = events(&*store, &session());
    assert_eq!(log.len(), 5, "run_started, message, reply, two dispatches: {log:?}");
    assert!(
        matches!(&log[2], Event::ReplyCommitted(r) if r.calls.len() == 2 && r.text == "calling")
    );
    assert_eq!(
        log[3],
        Event::DispatchMinted(DispatchMinted { call: id("c1"), dispatch: "d-1".into() })
    );
    assert_eq!(
        log[4],
        Event::DispatchMinted(DispatchMinted { call: id("c2"), dispatch: "d-2".into() })
    );
    let body = step.start_body(&id("c2")).unwrap();
    assert_eq!(body.dispatch().as_str(), "d-2");
    assert_eq!(body.attempt(), Attempt(1));
    assert_eq!(body.idempotency_key(), "s-1:d-2");
}

#[test]
fn a_reply_that_repeats_a_call_id_is_refused_and_writes_nothing() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let r = refused_without_writing(&*store, || {
        run.commit_reply(Reply::new("").call(call("c1", "search")).call(call("c1", "send_email")))
    });
    assert_eq!(r, Refusal::RepeatedCall { call: id("c1") });
    assert!(r.to_string().contains("`c1` twice"), "{r}");
    // The run goes on: a correct reply is accepted.
    run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
}

#[test]
fn a_second_reply_is_refused_while_a_step_is_open_and_so_is_ending_the_run() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let r = refused_without_writing(&*store, || run.commit_reply(Reply::new("again")));
    assert_eq!(r, Refusal::StepOpen { step: StepNo(1) });
    let r = refused_without_writing(&*store, || run.end(RunOutcome::Completed));
    assert_eq!(r, Refusal::StepOpen { step: StepNo(1) });
    let r = refused_without_writing(&*store, || run.end(RunOutcome::Suspended));
    assert_eq!(r, Refusal::UseSuspend);
    step.start_body(&id("c1")).unwrap().finish(json("[]"), false).unwrap();
    step.commit().unwrap();
    let next = run.commit_reply(Reply::new("done")).unwrap();
    assert_eq!(next.number(), StepNo(2));
    next.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert_eq!(run.status(), RunStatus::Ended { outcome: RunOutcome::Completed, error: None });
}

#[test]
fn commit_is_refused_while_a_call_is_open_and_a_committed_step_refuses_everything() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "search")).call(call("c2", "set_preference")))
        .unwrap();
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    let r = refused_without_writing(&*store, || step.commit());
    assert_eq!(r, Refusal::OpenCalls { step: StepNo(1), calls: vec![id("c2")] });
    assert!(r.to_string().contains("`c2`"), "{r}");
    let body = step.start_body(&id("c2")).unwrap();
    let r = refused_without_writing(&*store, || step.commit());
    assert_eq!(r, Refusal::OpenCalls { step: StepNo(1), calls: vec![id("c2")] });
    body.finish(json("2"), false).unwrap();
    step.commit().unwrap();
    assert!(!step.is_open());
    let r = refused_without_writing(&*store, || step.start_body(&id("c2")));
    assert_eq!(r, Refusal::StepClosed { step: StepNo(1) });
    let r = refused_without_writing(&*store, || step.commit());
    assert_eq!(r, Refusal::StepClosed { step: StepNo(1) });
}

#[test]
fn a_call_that_is_resolved_or_unknown_starts_no_body() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("nope")));
    assert_eq!(r, Refusal::UnknownCall { step: StepNo(1), call: id("nope") });
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::Resolved { call: id("c1") });
}

#[test]
fn a_run_starts_one_body_per_call() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::BodyStarted { call: id("c1"), attempt: Attempt(1) });
    body.finish(json("1"), false).unwrap();
}

#[test]
fn a_call_behind_an_unresolved_call_of_its_group_waits_for_it() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(
            Reply::new("")
                .call(grouped(call("c1", "send_email"), "mail"))
                .call(call("c2", "search"))
                .call(grouped(call("c3", "send_email"), "mail")),
        )
        .unwrap();
    let first = step.start_body(&id("c1")).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c3")));
    assert_eq!(
        r,
        Refusal::Behind { call: id("c3"), ahead: id("c1"), order: Order::Group("mail".into()) }
    );
    assert!(r.to_string().contains("group `mail`"), "{r}");
    // A call of no group is behind nothing.
    step.start_body(&id("c2")).unwrap().finish(json("1"), false).unwrap();
    first.finish(json(r#""sent""#), false).unwrap();
    step.start_body(&id("c3")).unwrap().finish(json(r#""sent""#), false).unwrap();
    step.commit().unwrap();
}

#[test]
fn a_sequential_call_waits_for_the_chain_ahead_of_it() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(
            Reply::new("")
                .call(sequential(call("c1", "search")))
                .call(grouped(call("c2", "search"), "other"))
                .call(sequential(call("c3", "set_preference"))),
        )
        .unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c3")));
    assert_eq!(r, Refusal::Behind { call: id("c3"), ahead: id("c1"), order: Order::Sequential });
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    step.start_body(&id("c3")).unwrap().finish(json("3"), false).unwrap();
}

#[test]
fn a_call_behind_a_denied_approval_must_not_run_and_is_skipped_not_started() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(
            Reply::new("")
                .call(grouped(call("c1", "delete_account"), "acct"))
                .call(grouped(call("c2", "send_email"), "acct")),
        )
        .unwrap();
    step.approval(&id("c1"), false).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c2")));
    assert!(
        matches!(&r, Refusal::BehindBlocked { call, ahead, .. } if call == &id("c2") && ahead == &id("c1")),
        "{r:?}"
    );
    assert!(r.to_string().contains("approval denied"), "{r}");
    step.skip(&id("c2")).unwrap();
    step.commit().unwrap();
    let log = events(&*store, &session());
    assert!(log.iter().any(|e| matches!(e, Event::Paired(p)
        if p.call == id("c2") && p.reason == PairReason::NotStarted && p.message == "The tool did not run.")));
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn skip_refuses_a_call_that_may_have_run() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "send_email")).call(call("c2", "ask_user")))
        .unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    let r = refused_without_writing(&*store, || step.skip(&id("c1")));
    assert!(matches!(r, Refusal::MayHaveRun { ref call, .. } if call == &id("c1")), "{r:?}");
    let r = refused_without_writing(&*store, || step.skip(&id("c2")));
    assert!(matches!(r, Refusal::MayHaveRun { ref call, .. } if call == &id("c2")), "{r:?}");
    drop(body);
}

#[test]
fn a_client_call_takes_an_answer_and_never_a_body() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "ask_user")).call(call("c2", "search")))
        .unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::ClientCall { call: id("c1") });
    let r = refused_without_writing(&*store, || step.client_answer(&id("c2"), json("1")));
    assert!(matches!(r, Refusal::WrongKind { ref call, .. } if call == &id("c2")), "{r:?}");
    step.client_answer(&id("c1"), json(r#""yes""#)).unwrap();
    let r = refused_without_writing(&*store, || step.client_answer(&id("c1"), json("2")));
    assert_eq!(r, Refusal::Resolved { call: id("c1") });
}

#[test]
fn an_approval_call_starts_its_body_only_once_approved() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "delete_account"))).unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(r, Refusal::AwaitingApproval { call: id("c1") });
    step.approval(&id("c1"), true).unwrap();
    let r = refused_without_writing(&*store, || step.approval(&id("c1"), false));
    assert_eq!(r, Refusal::AlreadyDecided { call: id("c1") });
    step.start_body(&id("c1")).unwrap().finish(json("{}"), false).unwrap();
    step.commit().unwrap();
}

#[test]
fn a_child_is_attached_once_and_only_to_a_sub_agent_call() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "researcher")).call(call("c2", "search")))
        .unwrap();
    let r = refused_without_writing(&*store, || step.child_attached(&id("c2"), sid("child")));
    assert!(matches!(r, Refusal::WrongKind { .. }), "{r:?}");
    step.child_attached(&id("c1"), sid("child-1")).unwrap();
    let r = refused_without_writing(&*store, || step.child_attached(&id("c1"), sid("child-2")));
    assert_eq!(r, Refusal::ChildAttached { call: id("c1"), child: sid("child-1") });
}

#[test]
fn suspend_waits_for_a_client_call_and_wake_awaits_its_answer() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "search")).call(call("c2", "ask_user")))
        .unwrap();
    let r = refused_without_writing(&*store, || step.suspend(&[]));
    assert_eq!(r, Refusal::NothingToAwait);
    let r = refused_without_writing(&*store, || step.suspend(&[id("c1")]));
    assert!(matches!(r, Refusal::NotAwaitable { ref call, .. } if call == &id("c1")), "{r:?}");
    let body = step.start_body(&id("c1")).unwrap();
    let r = refused_without_writing(&*store, || step.suspend(&[id("c2")]));
    assert_eq!(r, Refusal::BodiesRunning { step: StepNo(1), calls: vec![id("c1")] });
    body.finish(json("1"), false).unwrap();
    step.suspend(&[id("c2")]).unwrap();
    assert_eq!(
        kinds(&*store, &session()).last().copied(),
        Some(EventKind::RunEnded),
        "suspended + run_ended suspended"
    );
    let err = step.client_answer(&id("c2"), json("1")).unwrap_err();
    assert!(matches!(err, WriteError::Ended { outcome: RunOutcome::Suspended, .. }), "{err:?}");

    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    assert_eq!(run.plan().call(&id("c2")).unwrap().action, Action::Await);
    assert_eq!(run.plan().call(&id("c1")).unwrap().action, Action::Keep);
    let step = run.step().expect("the saved step stays open for the runtime");
    step.client_answer(&id("c2"), json(r#""yes""#)).unwrap();
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn start_body_refuses_a_call_the_plan_paired() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "send_email"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    drop((body, step, run)); // lost mid-body

    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    let plan = run.plan().call(&id("c1")).unwrap().clone();
    assert_eq!(plan.action, Action::Pair { reason: PairReason::OutcomeUnknown });
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(
        r,
        Refusal::PairedByPlan {
            call: id("c1"),
            reason: PairReason::OutcomeUnknown,
            rule: plan.rule.id
        }
    );
    assert!(r.to_string().contains("outcome_unknown"), "{r}");
    step.commit().unwrap();
}

/// A log written by another writer: a remote sub-agent call whose child is attached and whose
/// one body started, then lost.
fn remote_agent_log(store: &MemoryStore, session: &SessionId) {
    let events: Vec<Event> = vec![
        RunStarted { run: "r-old".into(), entry: Entry::Wake, by: None }.into(),
        ReplyCommitted {
            step: StepNo(1),
            checkpoint: "cp-old".into(),
            text: String::new(),
            calls: vec![call("c1", "researcher")],
            metadata: None,
        }
        .into(),
        DispatchMinted { call: id("c1"), dispatch: "d-old".into() }.into(),
        AttemptStarted { call: id("c1"), attempt: Attempt(1) }.into(),
        ChildAttached { call: id("c1"), child: sid("child-1") }.into(),
    ];
    let stamped: Vec<Stamped> = events.into_iter().map(|e| Stamped::at(T0, e)).collect();
    store.append(session, Seq(0), &stamped, stepjournal_backends::Durability::Synced).unwrap();
}

#[test]
fn a_body_is_refused_past_max_bodies() {
    let store = Arc::new(MemoryStore::new());
    remote_agent_log(&store, &session());
    let journal: Journal = journal_max_bodies(store.clone(), ids(), 1);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    assert!(matches!(run.plan().call(&id("c1")).unwrap().action, Action::Reattach { .. }));
    let step = run.step().unwrap();
    let r = refused_without_writing(&*store, || step.start_body(&id("c1")));
    assert_eq!(
        r,
        Refusal::MaxBodies { call: id("c1"), bodies: 1, max: 1, child: Some(sid("child-1")) }
    );
    assert!(r.to_string().contains("at most 1"), "{r}");
    assert!(r.to_string().contains("Step::reattach"), "{r}");
    // With room for one more, the re-attached child's body starts as attempt 2.
    let journal = journal_max_bodies(store.clone(), ids(), 2);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    let body = run.step().unwrap().start_body(&id("c1")).unwrap();
    assert_eq!((body.attempt(), body.dispatch().as_str()), (Attempt(2), "d-old"));
}

#[test]
fn a_refused_entry_writes_nothing() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let before = store.tail(&session()).unwrap();
    let err = journal
        .begin_run(&session(), Entry::Retry { checkpoint: None, message: None })
        .unwrap_err();
    assert!(matches!(err, stepjournal::BeginError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("retry"), "{err}");
    assert_eq!(store.tail(&session()).unwrap(), before);
}

#[test]
fn bodies_on_other_threads_append_concurrently_and_every_event_lands() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let calls = ["c1", "c2", "c3", "c4"];
    let mut reply = Reply::new("four at once");
    for c in calls {
        reply = reply.call(call(c, "search"));
    }
    let step = run.commit_reply(reply).unwrap();
    let handles: Vec<_> = calls
        .iter()
        .map(|c| {
            let body = step.start_body(&CallId::from(*c)).unwrap();
            std::thread::spawn(move || {
                for i in 0..10 {
                    body.output_chunk(format!("{i},")).unwrap();
                }
                body.finish(json("true"), false).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let log = events(&*store, &session());
    assert_eq!(log.iter().filter(|e| e.kind() == EventKind::OutputChunk).count(), 40);
    assert_eq!(log.iter().filter(|e| e.kind() == EventKind::ToolResult).count(), 4);
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
    assert_eq!(run.tail(), Seq(log.len() as u64));
}

#[test]
fn the_handles_can_move_to_other_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<stepjournal::Journal>();
    send_sync::<stepjournal::Run>();
    send_sync::<stepjournal::Step>();
    send_sync::<stepjournal::Body>();
    send_sync::<WriteError>();
}

#[test]
fn a_run_under_a_session_id_that_breaks_the_rule_is_refused_and_writes_nothing() {
    // Defect pinned: a session id holding NUL or another control character was written by some
    // backends and refused by others. The writer's appends go through the one rule: a run under
    // such an id (read from an older journal, say) is refused before anything is written.
    let (journal, store) = memory_journal();
    let hostile = SessionId::from_stored("user\u{0}42");
    let err = journal.begin_run(&hostile, new_turn()).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("U+0000"), "{message}");
    assert!(store.sessions().unwrap().is_empty());
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
