//! Who and why (`JournalOptions::operator`, `Journal::begin_run_as`: `run_started.by`, a
//! stop's `run_ended.by`) and a cut model stream's continuation (`Run::model_aborted_with`:
//! `model_aborted.continuation`, read back by the transcript after a crash).

mod writer_support;

use std::sync::Arc;

use stepjournal::recovery::TranscriptItem;
use stepjournal::writer::block_on;
use stepjournal::{BeginError, Journal, JournalOptions, Reply, WriteError};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{AppendError, JournalStore};
use stepjournal_codec::record::Limits;
use stepjournal_codec::{
    ContinuationId, EncodeError, Entry, Event, FormatVersion, Operator, RunOutcome,
};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

fn ana() -> Operator {
    Operator::new(Some("ana"), Some("customer asked to stop")).unwrap().unwrap()
}

fn with_operator(store: Arc<dyn JournalStore>, by: Option<Operator>) -> Journal {
    let options = JournalOptions::new().ids(ids()).operator(by);
    Journal::new(separate(store), Arc::new(registry()), options).unwrap()
}

fn by_of(event: &Event) -> Option<&Operator> {
    match event {
        Event::RunStarted(e) => e.by.as_ref(),
        Event::RunEnded(e) => e.by.as_ref(),
        _ => None,
    }
}

#[test]
fn the_journals_operator_signs_each_runs_start_and_a_stops_end_and_nothing_else() {
    let store = Arc::new(MemoryStore::new());
    let runtime = journal_with(store.clone(), ids());
    let run = runtime.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "send_email"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    drop((body, step, run));
    block_on(runtime.shutdown(std::time::Duration::ZERO));
    drop(runtime);
    let operator = with_operator(store.clone(), Some(ana()));
    let plan = operator.stop(&session()).unwrap();
    let events = events(&*store, &session());
    let signed: Vec<(&str, Option<&Operator>)> =
        events.iter().map(|e| (e.kind().name(), by_of(e))).collect();
    let [.., (_, paired_by), (_, commit_by), ("run_ended", Some(by))] = &signed[..] else {
        panic!("{signed:?}")
    };
    assert_eq!((*by, *paired_by, *commit_by), (&ana(), None, None));
    assert_eq!(by_of(&events[0]), None, "the runtime's own run carries no operator");
    // The plan is the plan the rules make: the same events, signed.
    assert_eq!(plan.appends.last().and_then(by_of), Some(&ana()));
    assert!(matches!(events.last(), Some(Event::RunEnded(e)) if e.outcome == RunOutcome::Stopped));
}

#[test]
fn begin_run_as_names_who_for_one_entry_in_place_of_the_journals() {
    let store = Arc::new(MemoryStore::new());
    let journal = with_operator(store.clone(), Some(ana()));
    let bo = Operator::new(Some("bo"), None::<String>).unwrap().unwrap();
    let run = journal.begin_run_as(&session(), new_turn(), bo.clone()).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    let starts: Vec<Option<Operator>> = events(&*store, &session())
        .iter()
        .filter(|e| matches!(e, Event::RunStarted(_)))
        .map(|e| by_of(e).cloned())
        .collect();
    assert_eq!(starts, [Some(bo), Some(ana())]);
}

#[test]
fn an_answer_given_through_an_operators_journal_is_signed_on_its_wake() {
    let store = Arc::new(MemoryStore::new());
    let runtime = journal_with(store.clone(), ids());
    let run = runtime.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "ask_user"))).unwrap();
    step.suspend(&[id("c1")]).unwrap();
    drop((step, run));
    block_on(runtime.shutdown(std::time::Duration::ZERO));
    drop(runtime);
    let operator = with_operator(store.clone(), Some(ana()));
    block_on(operator.answer_client(&session(), &id("c1"), json("\"yes\""))).unwrap();
    let events = events(&*store, &session());
    let wake = events.iter().rev().find(|e| matches!(e, Event::RunStarted(_))).unwrap();
    assert!(matches!(wake, Event::RunStarted(e) if e.entry == Entry::Wake), "{wake:?}");
    assert_eq!(by_of(wake), Some(&ana()));
}

#[test]
fn a_store_writing_version_3_refuses_who_and_a_continuation_and_writes_nothing() {
    let v3 = Limits { write_version: FormatVersion::V3, ..Limits::default() };
    let store = Arc::new(MemoryStore::with_limits(v3));
    let journal = with_operator(store.clone(), None);
    let refused = journal.begin_run_as(&session(), new_turn(), ana()).unwrap_err();
    let BeginError::Append { source: AppendError::Encode { source, .. }, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert!(matches!(**source, EncodeError::NotInVersion { member: "by", version: 3, .. }));
    assert_eq!(store.tail(&session()).unwrap().get(), 0, "nothing written");
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let handle = ContinuationId::new("job-1").unwrap();
    let refused = run.model_aborted_with("half", Some(handle)).unwrap_err();
    assert!(matches!(refused, WriteError::Encode { .. }), "{refused:?}");
    assert!(refused.to_string().contains("continuation"), "{refused}");
    run.model_aborted_with("half", None).unwrap();
}

#[test]
fn a_continuation_survives_a_crash_and_the_next_runs_transcript_carries_it() {
    let store = Arc::new(MemoryStore::new());
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let handle = ContinuationId::new("resp_bg_42").unwrap();
    run.model_aborted_with("I will look", Some(handle.clone())).unwrap();
    // The process dies: no end, no shutdown; another journal recovers the session.
    std::mem::forget(run);
    std::mem::forget(journal);
    let next = journal_with(store.clone(), ids());
    let wake = next.begin_run(&session(), Entry::Wake).unwrap();
    let shown = wake.transcript().unwrap();
    let resumed = shown.iter().find_map(|i| match i {
        TranscriptItem::Aborted { partial, continuation, .. } => Some((partial, continuation)),
        _ => None,
    });
    assert_eq!(resumed, Some((&"I will look".to_owned(), &Some(handle))));
    assert_eq!(next.transcript(&session()).unwrap(), shown);
}
