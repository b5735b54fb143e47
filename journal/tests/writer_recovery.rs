//! Whole steps through the writer and recovery after a dropped run, on the memory and file
//! stores; appends whose outcome is unknown; other writers' events that do not fence.

mod writer_support;

use std::sync::Arc;

use stepjournal::Reply;
use stepjournal::RunStatus;
use stepjournal::recovery::{Action, TranscriptItem, rules, verify};
use stepjournal::writer::IdSource;
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{
    Attempt, ClientAnswer, Entry, Event, EventKind, PairReason, RunOutcome, Stamped, StepNo,
};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "plan my trip".into() }
}

/// A full step: a reply with three calls, their bodies (one with output chunks), the commit,
/// the end; then the log, its invariants and what the model is shown.
fn full_step_round_trip(store: Arc<dyn JournalStore>) {
    use EventKind::*;
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    assert!(run.plan().calls.is_empty() && run.step().is_none());
    let step = run
        .commit_reply(
            Reply::new("looking")
                .call(call("c1", "search"))
                .call(call("c2", "set_preference"))
                .call(call("c3", "send_email")),
        )
        .unwrap();
    let b1 = step.start_body(&id("c1")).unwrap();
    let b2 = step.start_body(&id("c2")).unwrap();
    let b3 = step.start_body(&id("c3")).unwrap();
    b1.output_chunk("found 2, ").unwrap();
    b1.output_chunk("found 3").unwrap();
    b1.finish(json(r#"{"hits":3}"#), false).unwrap();
    b2.finish(json(r#"{"ok":true}"#), false).unwrap();
    b3.finish(json(r#""smtp down""#), true).unwrap();
    step.commit().unwrap();
    let done = run.commit_reply(Reply::new("All set.")).unwrap();
    done.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();

    assert_eq!(
        kinds(&*store, &session()),
        vec![
            RunStarted,
            Message,
            ReplyCommitted,
            DispatchMinted,
            DispatchMinted,
            DispatchMinted,
            AttemptStarted,
            AttemptStarted,
            AttemptStarted,
            OutputChunk,
            OutputChunk,
            ToolResult,
            ToolResult,
            ToolResult,
            StepCommit,
            ReplyCommitted,
            StepCommit,
            RunEnded,
        ]
    );
    let log = events(&*store, &session());
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
    let shown = journal.transcript(&session()).unwrap();
    let results: Vec<_> = shown
        .iter()
        .filter_map(|t| match t {
            TranscriptItem::ToolResult { call, is_error, .. } => Some((call.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![(id("c1"), false), (id("c2"), false), (id("c3"), true)]);
    assert_eq!(shown, run.transcript().unwrap(), "the run reads the store");

    // The session is at rest: a wake has nothing to recover.
    let next = journal.begin_run(&session(), Entry::Wake).unwrap();
    assert!(next.plan().calls.is_empty() && next.step().is_none());
}

#[test]
fn a_full_step_round_trips_on_the_memory_store() {
    full_step_round_trip(Arc::new(MemoryStore::new()));
}

#[test]
fn a_full_step_round_trips_on_the_file_store() {
    let dir = tempfile::tempdir().unwrap();
    full_step_round_trip(Arc::new(FileStore::open(dir.path(), FileOptions::default()).unwrap()));
}

/// Run 1 starts a safe and an unsafe body and is lost (dropped, the store closed and reopened
/// by `reopen`); a `wake` runs the safe call again as attempt 2 under the same dispatch id and
/// pairs the unsafe one `outcome_unknown` with its partial output.
fn dropped_run_recovers(mut reopen: impl FnMut() -> Arc<dyn JournalStore>) {
    let ids: Arc<dyn IdSource> = ids();
    let (safe_dispatch, unsafe_dispatch) = {
        let store = reopen();
        let journal = journal_with(store, ids.clone());
        let run = journal.begin_run(&session(), new_turn()).unwrap();
        let step = run
            .commit_reply(
                Reply::new("")
                    .call(call("c1", "set_preference"))
                    .call(call("c2", "charge_card"))
                    .call(call("c3", "search")),
            )
            .unwrap();
        let safe = step.start_body(&id("c1")).unwrap();
        let unsafe_ = step.start_body(&id("c2")).unwrap();
        unsafe_.output_chunk("charging 12.00").unwrap();
        (safe.dispatch().clone(), unsafe_.dispatch().clone())
        // Everything dropped: the process is gone.
    };

    let store = reopen();
    let journal = journal_with(store.clone(), ids);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    let plan = run.plan();
    assert_eq!(plan.step, Some(StepNo(1)));
    let c1 = plan.call(&id("c1")).unwrap();
    assert_eq!(
        c1.action,
        Action::Run { dispatch: Some(safe_dispatch.clone()), attempt: Attempt(2) }
    );
    assert_eq!(c1.rule.id, rules::SAFE_REPLAY);
    let c2 = plan.call(&id("c2")).unwrap();
    assert_eq!(c2.action, Action::Pair { reason: PairReason::OutcomeUnknown });
    assert_eq!(c2.rule.id, rules::OUTCOME_UNKNOWN);
    let c3 = plan.call(&id("c3")).unwrap();
    assert!(matches!(c3.action, Action::Run { attempt: Attempt(1), .. }), "{c3:?}");
    let paired = plan
        .appends
        .iter()
        .find_map(|e| match e {
            Event::Paired(p) => Some(p.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!((paired.call.clone(), paired.partial.as_str()), (id("c2"), "charging 12.00"));

    let step = run.step().expect("the recovered step is open");
    let again = step.start_body(&id("c1")).unwrap();
    assert_eq!(again.attempt(), Attempt(2));
    assert_eq!(again.dispatch(), &safe_dispatch);
    assert_eq!(again.idempotency_key(), format!("s-1:{safe_dispatch}"));
    again.finish(json(r#"{"ok":true}"#), false).unwrap();
    let first = step.start_body(&id("c3")).unwrap();
    assert_eq!(first.attempt(), Attempt(1));
    first.finish(json("[]"), false).unwrap();
    assert_ne!(safe_dispatch, unsafe_dispatch);
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let log = events(&*store, &session());
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn a_dropped_run_recovers_on_the_memory_store() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    dropped_run_recovers(|| store.clone());
}

#[test]
fn a_dropped_run_recovers_on_the_file_store_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    dropped_run_recovers(move || Arc::new(FileStore::open(&path, FileOptions::default()).unwrap()));
}

#[test]
fn a_redirect_closes_the_saved_step_and_the_run_goes_on_with_the_next_step() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "search")).call(call("c2", "send_email")))
        .unwrap();
    let body = step.start_body(&id("c2")).unwrap();
    drop((body, step, run));

    let run =
        journal.begin_run(&session(), Entry::NewTurn { message: "never mind".into() }).unwrap();
    let plan = run.plan();
    assert_eq!(
        plan.call(&id("c1")).unwrap().action,
        Action::Pair { reason: PairReason::NotStarted }
    );
    assert_eq!(
        plan.call(&id("c2")).unwrap().action,
        Action::Pair { reason: PairReason::OutcomeUnknown }
    );
    assert!(run.step().is_none(), "a redirect closes the saved step");
    let step = run.commit_reply(Reply::new("ok")).unwrap();
    assert_eq!(step.number(), StepNo(2));
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn a_stop_pairs_open_calls_run_stopped_and_returns_a_run_that_has_ended() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "search")).call(call("c2", "send_email")))
        .unwrap();
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    let run_id = run.id().clone();

    let stopped = journal.begin_run(&session(), Entry::Stop).unwrap();
    assert_eq!(stopped.id(), &run_id, "a stop names the run it stopped");
    assert_eq!(stopped.status(), RunStatus::Ended { outcome: RunOutcome::Stopped, error: None });
    assert_eq!(stopped.plan().call(&id("c1")).unwrap().action, Action::Keep);
    assert_eq!(
        stopped.plan().call(&id("c2")).unwrap().action,
        Action::Pair { reason: PairReason::RunStopped }
    );
    assert!(stopped.step().is_none());
    let log = kinds(&*store, &session());
    assert_eq!(
        &log[log.len() - 3..],
        &[EventKind::Paired, EventKind::StepCommit, EventKind::RunEnded]
    );
}

#[test]
fn an_append_whose_outcome_is_unknown_but_landed_is_taken_as_landed() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    store.fault_in(1, Fault::LandUnknown);
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let n = store.tail(&session()).unwrap();
    store.fault_in(1, Fault::LandUnknown);
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.tail(&session()).unwrap(), n.add(2), "landed once, not twice");
    step.commit().unwrap();
    let log = events(&*store, &session());
    assert_eq!(log.iter().filter(|e| e.kind() == EventKind::ReplyCommitted).count(), 1);
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn an_append_whose_outcome_is_unknown_and_did_not_land_is_made_again() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    store.fault_in(1, Fault::LoseUnknown);
    let body = step.start_body(&id("c1")).unwrap();
    assert_eq!(body.attempt(), Attempt(1));
    body.finish(json("1"), false).unwrap();
    let log = events(&*store, &session());
    assert_eq!(log.iter().filter(|e| e.kind() == EventKind::AttemptStarted).count(), 1);
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn an_append_whose_outcome_is_unknown_and_that_lands_after_the_writer_looked_lands_once() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    store.fault_in(1, Fault::LandLate);
    body.finish(json("1"), false).unwrap();
    step.commit().unwrap();
    let log = events(&*store, &session());
    assert_eq!(log.iter().filter(|e| e.kind() == EventKind::ToolResult).count(), 1);
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn an_entry_whose_outcome_is_unknown_but_landed_begins_the_run_once() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    store.fault_in(1, Fault::LandUnknown);
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    assert_eq!(kinds(&*store, &session()), vec![EventKind::RunStarted, EventKind::Message]);
    run.commit_reply(Reply::new("")).unwrap().commit().unwrap();
}

#[test]
fn an_entry_whose_outcome_is_unknown_and_did_not_land_is_made_again() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    store.fault_in(1, Fault::LoseUnknown);
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    assert_eq!(kinds(&*store, &session()), vec![EventKind::RunStarted, EventKind::Message]);
    assert_eq!(run.begun_at(), stepjournal_codec::Seq(0));
    run.end(RunOutcome::Completed).unwrap();
}

#[test]
fn an_event_another_writer_appends_is_folded_and_the_append_made_at_the_new_tail() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "ask_user")).call(call("c2", "search")))
        .unwrap();
    // The client's answer arrives through another writer (no run_started, no run_ended).
    let tail = store.tail(&session()).unwrap();
    let answer = ClientAnswer { call: id("c1"), output: json(r#""yes""#) };
    store
        .append(
            &session(),
            tail,
            &[Stamped::at(T0, answer)],
            stepjournal_backends::Durability::Synced,
        )
        .unwrap();
    let body = step.start_body(&id("c2")).unwrap();
    body.finish(json("1"), false).unwrap();
    assert!(step.is_resolved(&id("c1")), "the run folded the answer it did not write");
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn a_recovered_call_with_no_dispatch_id_gets_one_minted_before_its_body() {
    use stepjournal_codec::{ReplyCommitted, RunStarted};
    let (journal, store) = memory_journal();
    // A log from a writer that saved the reply but no dispatch id.
    let log: Vec<Stamped> = vec![
        Stamped::at(T0, RunStarted { run: "r-old".into(), entry: Entry::Wake, by: None }),
        Stamped::at(
            T0,
            ReplyCommitted {
                step: StepNo(1),
                checkpoint: "cp-old".into(),
                text: String::new(),
                calls: vec![call("c1", "search")],
                metadata: None,
            },
        ),
    ];
    store
        .append(
            &session(),
            stepjournal_codec::Seq(0),
            &log,
            stepjournal_backends::Durability::Synced,
        )
        .unwrap();
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    assert_eq!(
        run.plan().call(&id("c1")).unwrap().action,
        Action::Run { dispatch: None, attempt: Attempt(1) }
    );
    let body = run.step().unwrap().start_body(&id("c1")).unwrap();
    let dispatch = body.dispatch().clone();
    let tail: Vec<Event> = events(&*store, &session()).into_iter().rev().take(2).collect();
    assert_eq!(
        tail,
        vec![
            Event::AttemptStarted(stepjournal_codec::AttemptStarted {
                call: id("c1"),
                attempt: Attempt(1)
            }),
            Event::DispatchMinted(stepjournal_codec::DispatchMinted { call: id("c1"), dispatch }),
        ]
    );
    body.finish(json("1"), false).unwrap();
    assert!(verify(&events(&*store, &session())).is_empty());
}
