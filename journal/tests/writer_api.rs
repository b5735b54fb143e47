//! The API fixes a runtime author asked for: a failed finish gives the body back, a capped
//! finish, `Call::new`, a cheap `Run` clone, and `model_aborted`.

mod writer_support;

use std::sync::Arc;

use stepjournal::recovery::TranscriptItem;
use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal::{Recorded, Refusal, WriteError};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::record::Limits;
use stepjournal_codec::{Call, CallKind, Entry, Event, Replay, RunOutcome, ToolResult};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

#[test]
fn a_finish_the_store_cannot_encode_gives_the_body_back_to_record_an_error_result() {
    let store = Arc::new(MemoryStore::with_limits(Limits {
        max_record: 512,
        max_batch: 4096,
        ..Limits::default()
    }));
    let journal = journal_with(store.clone(), ids());
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let body = step.start_body(&id("c1")).unwrap();
    let huge = json(&format!("\"{}\"", "x".repeat(2_000)));
    let failed = body.finish(huge, false).unwrap_err();
    assert!(matches!(*failed.error, WriteError::Encode { .. }), "{:?}", failed.error);
    assert!(failed.to_string().contains("`c1`"), "{failed}");
    // The same body records an error result; the step commits.
    failed.body.finish(json(r#"{"error":"too large"}"#), true).unwrap();
    step.commit().unwrap();
    let results: Vec<Event> = events(&*store, &session())
        .into_iter()
        .filter(|e| matches!(e, Event::ToolResult(_)))
        .collect();
    assert!(
        matches!(&results[..], [Event::ToolResult(ToolResult { is_error: true, .. })]),
        "{results:?}"
    );
}

#[test]
fn finish_capped_records_an_over_size_output_cut_to_its_head_never_as_an_error() {
    let (journal, store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let reply = Reply::new("").call(call("c1", "search")).call(call("c2", "search"));
    let step = run.commit_reply(reply).unwrap();
    let small = step.start_body(&id("c1")).unwrap().finish_capped(json("[1,2]"), false, 10);
    assert_eq!(small.unwrap(), Recorded::Output);
    let big = step.start_body(&id("c2")).unwrap().finish_capped(json("[1,2,3,4,5,6]"), false, 10);
    assert_eq!(big.unwrap(), Recorded::OverLimit { bytes: 13, max_bytes: 10 });
    let results: Vec<ToolResult> = events(&*store, &session())
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results[0].output.get(), "[1,2]");
    assert!(!results[0].is_error);
    // The tool succeeded: its cut output is no error; the head is the text's first 10 bytes.
    assert!(!results[1].is_error);
    let cut: serde_json::Value = serde_json::from_str(results[1].output.get()).unwrap();
    assert_eq!(cut["bytes"], 13);
    assert_eq!(cut["head"], "[1,2,3,4,5");
    assert!(cut["output_cut"].as_str().unwrap().contains("13 bytes, over the limit of 10 bytes"));
    // An error result over the limit stays an error.
    let reply = Reply::new("").call(call("c3", "search"));
    let run = journal.begin_run(&sid("s2"), new_turn()).unwrap();
    let step = run.commit_reply(reply).unwrap();
    let failed = step.start_body(&id("c3")).unwrap().finish_capped(json("\"é é é\""), true, 4);
    assert_eq!(failed.unwrap(), Recorded::OverLimit { bytes: 10, max_bytes: 4 });
    let result = events(&*store, &sid("s2")).into_iter().find_map(|e| match e {
        Event::ToolResult(r) => Some(r),
        _ => None,
    });
    let result = result.unwrap();
    assert!(result.is_error);
    // Cut at a character boundary: "é" is two bytes.
    let cut: serde_json::Value = serde_json::from_str(result.output.get()).unwrap();
    assert_eq!(cut["head"], "\"é ");
}

#[test]
fn a_call_made_from_id_tool_and_arguments_has_the_format_s_defaults() {
    let c = Call::new("c1", "search", json(r#"{"q":"x"}"#));
    assert_eq!((c.call.as_str(), c.tool.as_str(), c.args.get()), ("c1", "search", r#"{"q":"x"}"#));
    assert_eq!(
        (c.kind, c.replay, c.group.clone(), c.sequential),
        (CallKind::Tool, Replay::Unsafe, None, false)
    );
    let placed = c.in_group("io").in_sequence();
    assert_eq!((placed.group.as_deref(), placed.sequential), (Some("io"), true));
}

#[test]
fn a_cloned_run_is_the_same_run_and_its_appends_follow_the_others() {
    let (journal, _store) = memory_journal();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let other = run.clone();
    let step = other.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    assert_eq!(run.tail(), other.tail(), "one view");
    assert_eq!(run.step().map(|s| s.number()), Some(step.number()));
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert!(matches!(other.end(RunOutcome::Completed), Err(WriteError::Ended { .. })));
}

#[test]
fn a_cut_off_model_request_is_recorded_with_its_partial_answer_between_steps() {
    let store = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(registry()), JournalOptions::new().ids(ids()))
            .unwrap();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    run.model_aborted("I will look that up and").unwrap();
    let shown = run.transcript().unwrap();
    assert!(
        shown.iter().any(|item| matches!(item, TranscriptItem::Aborted { partial, .. } if partial == "I will look that up and")),
        "{shown:?}"
    );
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    let refused = run.model_aborted("again").unwrap_err();
    assert!(matches!(refused, WriteError::Refused(Refusal::StepOpen { .. })), "{refused:?}");
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    assert!(stepjournal::recovery::verify(&events(&*store, &session())).is_empty());
}
