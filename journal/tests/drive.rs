//! The tool executor: `drive` runs a step by the rules, from a new reply or a recovered plan.

mod drive_support;

use std::sync::Arc;

use drive_support::*;
use serde_json::json;
use stepjournal::backends::JournalStore;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::codec::{CallId, Entry, Event, EventKind, PairReason, RunOutcome, SessionId};
use stepjournal::recovery::{TranscriptItem, verify};
use stepjournal::{AnswerError, StepOutcome, Tools};
use stepjournal::{Fence, RunStatus, WriteError};

fn s() -> SessionId {
    SessionId::new("s-1").unwrap()
}

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

fn kinds(store: &dyn JournalStore) -> Vec<EventKind> {
    store.read_all(&s()).unwrap().iter().map(|r| r.event.kind()).collect()
}

fn answer_of<'a>(answers: &'a [TranscriptItem], call: &str) -> &'a TranscriptItem {
    answers
        .iter()
        .find(|item| match item {
            TranscriptItem::ToolResult { call: c, .. }
            | TranscriptItem::ClientAnswer { call: c, .. }
            | TranscriptItem::ApprovalDenied { call: c, .. }
            | TranscriptItem::Paired { call: c, .. } => c.as_str() == call,
            _ => false,
        })
        .unwrap_or_else(|| panic!("no answer for {call} in {answers:?}"))
}

fn calls_of(answers: &[TranscriptItem]) -> Vec<String> {
    answers
        .iter()
        .map(|item| match item {
            TranscriptItem::ToolResult { call, .. }
            | TranscriptItem::ClientAnswer { call, .. }
            | TranscriptItem::ApprovalDenied { call, .. }
            | TranscriptItem::Paired { call, .. } => call.to_string(),
            other => panic!("not an answer: {other:?}"),
        })
        .collect()
}

#[test]
fn drive_runs_a_new_step_s_calls_commits_it_and_answers_in_transcript_order() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let journal = journal(store.clone(), &tools, ids());
    let outcome = run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let reply = tools
            .reply(
                "working",
                [
                    tools.call("c1", "search", json!({"q": "rust"})).unwrap(),
                    tools.call("c2", "send_email", json!({"to": "ann"})).unwrap(),
                ],
            )
            .unwrap();
        let step = run.commit_reply_async(reply).await.unwrap();
        let outcome = step.drive(&tools).await.unwrap();
        run.end_async(RunOutcome::Completed).await.unwrap();
        outcome
    });
    let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(calls_of(&answers), ["c1", "c2"]);
    let TranscriptItem::ToolResult { output, is_error: false, .. } = answer_of(&answers, "c1")
    else {
        panic!("{answers:?}")
    };
    assert_eq!(output.get(), r#"{"attempt":1,"hits":4}"#);
    assert!(ledger.has("effect s-1:d-2"), "{:?}", ledger.entries());
    assert_eq!(kinds(&*store).last(), Some(&EventKind::RunEnded));
    assert!(
        verify(&store.read_all(&s()).unwrap().into_iter().map(|r| r.event).collect::<Vec<_>>())
            .is_empty()
    );
}

#[test]
fn a_group_and_the_sequential_chain_run_one_call_at_a_time_and_the_rest_concurrently() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let journal = journal(store.clone(), &tools, ids());
    let q = || json!({"q": "x"});
    run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let calls = [
            tools.call("g1", "search", q()).unwrap().in_group("io"),
            tools.call("g2", "search", q()).unwrap().in_group("io"),
            tools.call("s1", "lookup", q()).unwrap().in_sequence(),
            tools.call("s2", "lookup", q()).unwrap().in_sequence(),
            tools.call("free", "search", q()).unwrap(),
        ];
        let step = run.commit_reply_async(tools.reply("", calls).unwrap()).await.unwrap();
        step.drive(&tools).await.unwrap();
    });
    // Behind: g2 after g1 ended; s2 after s1 ended.
    assert!(ledger.at("start g2") > ledger.at("end g1"), "{:?}", ledger.entries());
    assert!(ledger.at("start s2") > ledger.at("end s1"), "{:?}", ledger.entries());
    // Free of each other: g1, s1 and free all started before any of them ended.
    let first_end = ["end g1", "end s1", "end free"].iter().map(|e| ledger.at(e)).min().unwrap();
    for start in ["start g1", "start s1", "start free"] {
        assert!(ledger.at(start) < first_end, "{start}: {:?}", ledger.entries());
    }
}

#[test]
fn a_concurrency_limit_of_one_runs_the_calls_one_after_another() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let journal = journal(Arc::new(MemoryStore::new()), &tools, ids());
    run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let calls = ["a", "b", "c"].map(|c| tools.call(c, "search", json!({"q": "x"})).unwrap());
        let step = run.commit_reply_async(tools.reply("", calls).unwrap()).await.unwrap();
        let options = stepjournal::DriveOptions::new().concurrency(1);
        step.drive_with(&tools, options).await.unwrap();
    });
    assert_eq!(ledger.entries(), ["start a", "end a", "start b", "end b", "start c", "end c"]);
}

#[test]
fn a_tool_that_errors_or_panics_is_recorded_as_an_error_result_never_as_a_lost_call() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let journal = journal(store.clone(), &tools, ids());
    let outcome = run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let calls = [
            tools.call("c1", "fail", json!({})).unwrap(),
            tools.call("c2", "explode", json!({})).unwrap(),
        ];
        let step = run.commit_reply_async(tools.reply("", calls).unwrap()).await.unwrap();
        step.drive(&tools).await.unwrap()
    });
    let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
    let TranscriptItem::ToolResult { output, is_error: true, .. } = answer_of(&answers, "c1")
    else {
        panic!("{answers:?}")
    };
    assert_eq!(output.get(), r#"{"error":"the disk is full"}"#);
    let TranscriptItem::ToolResult { output, is_error: true, .. } = answer_of(&answers, "c2")
    else {
        panic!("{answers:?}")
    };
    assert_eq!(output.get(), r#"{"error":"the tool panicked: the parser blew up"}"#);
}

#[test]
fn a_recovered_step_runs_the_plan_s_attempt_under_the_same_dispatch_id() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let ids = ids();
    // The first process commits a reply and starts c1's body, then dies.
    {
        let journal = journal(store.clone(), &tools, ids.clone());
        let run = journal.begin_run(&s(), new_turn()).unwrap();
        let calls = [
            tools.call("c1", "search", json!({"q": "rust"})).unwrap(),
            tools.call("c2", "send_email", json!({})).unwrap(),
            tools.call("c3", "search", json!({"q": "go"})).unwrap().in_sequence(),
        ];
        let step = run.commit_reply(tools.reply("", calls).unwrap()).unwrap();
        drop(step.start_body(&CallId::from("c1")).unwrap());
        drop(step.start_body(&CallId::from("c2")).unwrap());
    }
    let journal = journal(store.clone(), &tools, ids);
    let outcome = run(async {
        let run = journal.begin_run_async(&s(), Entry::Wake).await.unwrap();
        run.drive(&tools).await.unwrap().unwrap()
    });
    let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(calls_of(&answers), ["c1", "c2", "c3"]);
    let TranscriptItem::ToolResult { output, .. } = answer_of(&answers, "c1") else { panic!() };
    assert_eq!(output.get(), r#"{"attempt":2,"hits":4}"#, "the safe call ran its second attempt");
    assert!(
        matches!(
            answer_of(&answers, "c2"),
            TranscriptItem::Paired { reason: PairReason::OutcomeUnknown, .. }
        ),
        "the unsafe call is not run again"
    );
    assert!(!ledger.has("effect s-1:d-2"), "{:?}", ledger.entries());
    let TranscriptItem::ToolResult { output, .. } = answer_of(&answers, "c3") else { panic!() };
    assert_eq!(output.get(), r#"{"attempt":1,"hits":2}"#);
}

#[test]
fn client_and_approval_calls_suspend_the_run_and_their_answers_resume_it() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let journal = journal(store.clone(), &tools, ids());
    run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let calls = [
            tools.call("seat", "ask_user", json!({})).unwrap().in_sequence(),
            tools.call("after", "search", json!({"q": "x"})).unwrap().in_sequence(),
            tools.call("del", "delete_account", json!({})).unwrap(),
            tools.call("free", "search", json!({"q": "y"})).unwrap(),
        ];
        let step = run.commit_reply_async(tools.reply("", calls).unwrap()).await.unwrap();
        let outcome = step.drive(&tools).await.unwrap();
        assert_eq!(
            outcome,
            StepOutcome::Suspended { awaiting: vec![CallId::from("seat"), CallId::from("del")] }
        );
        assert!(ledger.has("end free") && !ledger.has("start after"), "{:?}", ledger.entries());
        assert!(matches!(run.status(), RunStatus::Ended { outcome: RunOutcome::Suspended, .. }));

        let refused = journal.answer_client(&s(), &CallId::from("free"), json_raw("1")).await;
        assert!(matches!(refused, Err(AnswerError::NotWaiting { .. })), "{refused:?}");
        let woken =
            journal.answer_client(&s(), &CallId::from("seat"), json_raw(r#""12A""#)).await.unwrap();
        let outcome = woken.drive(&tools).await.unwrap().unwrap();
        assert_eq!(outcome, StepOutcome::Suspended { awaiting: vec![CallId::from("del")] });
        assert!(ledger.has("end after"), "the call behind the answered one ran");

        let woken = journal.decide_approval(&s(), &CallId::from("del"), true).await.unwrap();
        let outcome = woken.drive(&tools).await.unwrap().unwrap();
        let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
        assert_eq!(calls_of(&answers), ["seat", "after", "del", "free"]);
        assert!(ledger.has("deleted for del"));
        woken.end_async(RunOutcome::Completed).await.unwrap();
    });
    let log: Vec<Event> = store.read_all(&s()).unwrap().into_iter().map(|r| r.event).collect();
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

fn json_raw(text: &str) -> stepjournal::codec::RawJson {
    stepjournal::codec::RawJson::parse(text).unwrap()
}

#[test]
fn a_remote_agent_starts_its_child_once_and_a_recovered_run_re_attaches_to_it() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    let ids = ids();
    {
        // The first process starts the child, records it, and dies before the result.
        let journal = journal(store.clone(), &tools, ids.clone());
        let run = journal.begin_run(&s(), new_turn()).unwrap();
        let call = tools.call("r1", "research", json!({})).unwrap();
        let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
        let body = step.start_body(&CallId::from("r1")).unwrap();
        step.child_attached(&CallId::from("r1"), SessionId::new("child-of-d-1").unwrap()).unwrap();
        drop(body);
    }
    let journal = journal(store.clone(), &tools, ids);
    let outcome = run(async {
        let run = journal.begin_run_async(&s(), Entry::Wake).await.unwrap();
        run.drive(&tools).await.unwrap().unwrap()
    });
    let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
    let TranscriptItem::ToolResult { output, .. } = answer_of(&answers, "r1") else { panic!() };
    assert_eq!(output.get(), r#"{"report":"child-of-d-1"}"#);
    assert_eq!(ledger.entries(), ["attached to child-of-d-1"], "no second child was started");
    let attempts = kinds(&*store).iter().filter(|k| **k == EventKind::AttemptStarted).count();
    assert_eq!(attempts, 1, "re-attaching starts no body");
}

#[test]
fn a_new_remote_agent_and_companion_start_their_children_and_are_answered() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let journal = journal(Arc::new(MemoryStore::new()), &tools, ids());
    let outcome = run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let calls = [
            tools.call("r1", "research", json!({})).unwrap(),
            tools.call("k1", "coach", json!({})).unwrap(),
        ];
        let step = run.commit_reply_async(tools.reply("", calls).unwrap()).await.unwrap();
        step.drive(&tools).await.unwrap()
    });
    let StepOutcome::Committed { answers, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(calls_of(&answers), ["r1", "k1"]);
    for noted in [
        "child started for d-1",
        "attached to child-of-d-1",
        "companion started for d-2",
        "entered coach-d-2",
    ] {
        assert!(ledger.has(noted), "{noted}: {:?}", ledger.entries());
    }
}

#[test]
fn a_run_fenced_while_a_tool_runs_refuses_its_writes_fires_its_signal_and_drive_says_so() {
    let ledger = Ledger::default();
    let store = Arc::new(MemoryStore::new());
    let ids = ids();
    let other = journal(store.clone(), &Tools::new(), ids.clone());
    let seen = Ledger::default();
    let tools = {
        let (other, seen) = (other.clone(), seen.clone());
        tools(&ledger).tool(
            "slow",
            json!({}),
            stepjournal::codec::Replay::Safe,
            move |_: serde_json::Value, ctx: stepjournal::CallCtx| {
                let (other, seen) = (other.clone(), seen.clone());
                async move {
                    // Another process stops the session while this tool runs.
                    other.stop_async(ctx.session()).await.unwrap();
                    seen.note(format!("cancelled before: {}", ctx.is_cancelled()));
                    let late = ctx.output("late").await;
                    seen.note(format!("cancelled after: {}", ctx.is_cancelled()));
                    late.map_err(stepjournal::ToolError::new)?;
                    Ok::<_, stepjournal::ToolError>(json!("done"))
                }
            },
        )
    };
    let journal = journal(store.clone(), &tools, ids);
    let options = stepjournal::DriveOptions::new().output_interval(std::time::Duration::ZERO);
    let error = run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let call = tools.call("c1", "slow", json!({})).unwrap();
        let step = run.commit_reply_async(tools.reply("", [call]).unwrap()).await.unwrap();
        step.drive_with(&tools, options).await.unwrap_err()
    });
    assert_eq!(seen.entries(), ["cancelled before: false", "cancelled after: true"]);
    assert!(
        matches!(
            error.write_error(),
            Some(WriteError::Fenced {
                by: Fence::RunEnded { outcome: RunOutcome::Stopped, .. },
                ..
            })
        ),
        "{error}"
    );
    let log = kinds(&*store);
    assert!(
        !log.contains(&EventKind::OutputChunk) && !log.contains(&EventKind::ToolResult),
        "{log:?}"
    );
}

/// Drives one step whose safe tool writes `outputs` outputs (`0;`, `1;`, ...) with the journal
/// reading `clock`; the texts of the output chunks it committed.
fn chunks_of_a_chatty_tool(
    outputs: u32,
    clock: Arc<dyn stepjournal::writer::Clock>,
) -> Vec<String> {
    let store = Arc::new(MemoryStore::new());
    let chatty = Tools::new().tool(
        "chatty",
        json!({}),
        stepjournal::codec::Replay::Safe,
        move |_: serde_json::Value, ctx: stepjournal::CallCtx| async move {
            for i in 0..outputs {
                ctx.output(format!("{i};")).await.map_err(stepjournal::ToolError::new)?;
            }
            Ok::<_, stepjournal::ToolError>(json!("ok"))
        },
    );
    let options = stepjournal::JournalOptions::new().ids(ids()).clock(clock);
    let journal =
        stepjournal::Journal::new(separate(store.clone()), Arc::new(chatty.clone()), options)
            .unwrap();
    run(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let call = chatty.call("c1", "chatty", json!({})).unwrap();
        let step = run.commit_reply_async(chatty.reply("", [call]).unwrap()).await.unwrap();
        step.drive(&chatty).await.unwrap();
    });
    store
        .read_all(&s())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::OutputChunk(c) => Some(c.text),
            _ => None,
        })
        .collect()
}

#[test]
fn many_outputs_within_one_interval_make_one_chunk_that_keeps_the_last_text() {
    // The clock never moves: every output falls in the interval the body started.
    let clock =
        Arc::new(stepjournal::writer::FixedClock::new(stepjournal::codec::UnixMillis(1_000)));
    let chunks = chunks_of_a_chatty_tool(10, clock);
    assert_eq!(chunks, ["0;1;2;3;4;5;6;7;8;9;"], "one append, flushed before the result");
}

#[test]
fn outputs_an_interval_apart_are_committed_as_they_come() {
    // Every read of the clock moves it on by the interval.
    let clock = Arc::new(stepjournal::writer::SteppingClock::new(
        stepjournal::codec::UnixMillis(1_000),
        std::time::Duration::from_millis(100),
    ));
    assert_eq!(chunks_of_a_chatty_tool(3, clock), ["0;", "1;", "2;"]);
}

#[test]
fn output_left_pending_is_committed_once_its_interval_passed_without_another_output() {
    // A body gave one output, then worked on for longer than the interval: its text was held
    // until the result, and a crash meanwhile lost it. Now drive commits it once the interval
    // (100 ms) has passed, while the body is still running.
    let store = Arc::new(MemoryStore::new());
    let seen = store.clone();
    let quiet = Tools::new().tool(
        "quiet",
        json!({}),
        stepjournal::codec::Replay::Safe,
        move |_: serde_json::Value, ctx: stepjournal::CallCtx| {
            let seen = seen.clone();
            async move {
                ctx.output("working").await.map_err(stepjournal::ToolError::new)?;
                let began = std::time::Instant::now();
                while began.elapsed() < std::time::Duration::from_secs(5) {
                    let chunks = seen.read_all(&s()).unwrap().into_iter().filter(|r| {
                        matches!(&r.event, Event::OutputChunk(c) if c.text == "working")
                    });
                    if chunks.count() == 1 {
                        return Ok(json!({"committed_while_running_after_ms": began.elapsed().as_millis() as u64}));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Ok::<_, stepjournal::ToolError>(json!("the output was still pending after 5 s"))
            }
        },
    );
    let journal = stepjournal::Journal::new(separate(store.clone()), Arc::new(quiet.clone()), {
        stepjournal::JournalOptions::new().ids(ids())
    })
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let answers = runtime.block_on(async {
        let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
        let call = quiet.call("c1", "quiet", json!({})).unwrap();
        let step = run.commit_reply_async(quiet.reply("", [call]).unwrap()).await.unwrap();
        match step.drive(&quiet).await.unwrap() {
            StepOutcome::Committed { answers, .. } => answers,
            other => panic!("not committed: {other:?}"),
        }
    });
    let TranscriptItem::ToolResult { output, .. } = answer_of(&answers, "c1") else {
        panic!("no tool result: {answers:?}");
    };
    let output: serde_json::Value = serde_json::from_str(output.get()).unwrap();
    let waited = output["committed_while_running_after_ms"].as_u64();
    assert!(waited.is_some_and(|ms| ms < 1_000), "{output}");
    let chunks: Vec<_> = store
        .read_all(&s())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::OutputChunk(c) => Some(c.text),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, ["working"], "committed once, not again before the result");
}

#[test]
fn drive_futures_are_send_and_run_on_tokio() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let journal = journal(Arc::new(MemoryStore::new()), &tools, ids());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let outcome = runtime.block_on(async move {
        tokio::spawn(async move {
            let run = journal.begin_run_async(&s(), new_turn()).await.unwrap();
            let call = tools.call("c1", "search", json!({"q": "x"})).unwrap();
            let step = run.commit_reply_async(tools.reply("", [call]).unwrap()).await.unwrap();
            step.drive(&tools).await.unwrap()
        })
        .await
        .unwrap()
    });
    assert!(matches!(outcome, StepOutcome::Committed { .. }));
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
