//! Per-call deadlines: a body past its deadline is a crash of its run, chosen. `drive` returns
//! the deadline error with the run let go, the late body can record nothing, and the `wake`
//! that follows decides the calls by FORMAT.md's rules; `Journal::drive_within` makes that wake
//! and drives it in the same call.

use std::future::pending;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use stepjournal::backends::JournalStore;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::codec::{Entry, Event, EventKind, PairReason, Replay, SessionId};
use stepjournal::recovery::{TranscriptItem, verify};
use stepjournal::{
    CallCtx, DriveError, DriveOptions, Interruption, Journal, JournalOptions, RunStatus,
    StepOutcome, ToolError, Tools, WriteError,
};

fn session() -> SessionId {
    SessionId::new("s").unwrap()
}

/// A write a tool's own thread makes once its run can no longer write.
type LateWrite = Arc<Mutex<Option<std::thread::JoinHandle<Result<(), WriteError>>>>>;

/// `hang` (unsafe) never finishes, and the thread it hands work to writes output once the run's
/// signal fired (kept in `late`); `flaky` (safe) hangs on its first attempt and answers on the
/// next.
fn tools(late: LateWrite) -> Tools {
    Tools::new()
        .tool("hang", json!({}), Replay::Unsafe, move |_: Value, ctx: CallCtx| {
            let late = late.clone();
            async move {
                let signal = ctx.signal();
                let thread = std::thread::spawn(move || {
                    stepjournal::writer::block_on(signal.cancelled());
                    stepjournal::writer::block_on(ctx.output("late"))
                });
                *late.lock().unwrap() = Some(thread);
                pending::<Result<Value, ToolError>>().await
            }
        })
        .tool("flaky", json!({}), Replay::Safe, |_: Value, ctx: CallCtx| async move {
            if ctx.attempt().get() == 1 {
                pending::<()>().await;
            }
            Ok::<_, ToolError>(json!({"attempt": ctx.attempt().get()}))
        })
}

fn log(store: &dyn JournalStore) -> Vec<Event> {
    store.read_all(&session()).unwrap().into_iter().map(|r| r.event).collect()
}

#[test]
fn a_body_past_its_deadline_lets_go_of_the_run_and_nothing_late_of_it_is_recorded() {
    let late: LateWrite = Arc::default();
    let tools = tools(Arc::clone(&late));
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let call = tools.call("c1", "hang", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
    let options = DriveOptions::new().deadline(Duration::from_millis(50));
    let error = stepjournal::writer::block_on(step.drive_with(&tools, options)).unwrap_err();
    assert!(matches!(error, DriveError::Deadline { .. }), "{error}");
    assert!(matches!(run.status(), RunStatus::Interrupted(Interruption::Deadline { .. })));
    assert!(run.signal().is_cancelled(), "the run's signal fired");
    let tail = store.tail(&session()).unwrap();
    let thread = late.lock().unwrap().take().expect("the tool handed work to its thread");
    let written = thread.join().unwrap();
    assert!(matches!(written, Err(WriteError::Interrupted { .. })), "{written:?}");
    assert_eq!(store.tail(&session()).unwrap(), tail, "nothing late landed");

    // The wake decides the unsafe call whose body started: outcome unknown, never run again.
    let woken = journal.begin_run(&session(), Entry::Wake).unwrap();
    let outcome = stepjournal::writer::block_on(woken.drive(&tools)).unwrap();
    let Some(StepOutcome::Committed { answers, .. }) = outcome else { panic!("{outcome:?}") };
    assert!(
        matches!(&answers[..], [TranscriptItem::Paired { reason: PairReason::OutcomeUnknown, .. }]),
        "{answers:?}"
    );
    assert!(verify(&log(&*store)).is_empty());
}

#[test]
fn drive_within_wakes_after_a_deadline_and_runs_a_safe_call_again_under_its_dispatch_id() {
    let tools = tools(Arc::default()).deadline("flaky", Duration::from_millis(50));
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let call = tools.call("c1", "flaky", json!({})).unwrap();
    run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
    // The tool's own deadline holds with no deadline in the options.
    let (finished, outcome) =
        stepjournal::writer::block_on(journal.drive_within(&run, &tools, DriveOptions::new()))
            .unwrap();
    assert_ne!(finished.id(), run.id(), "a wake finished the step");
    let Some(StepOutcome::Committed { answers, .. }) = outcome else { panic!("{outcome:?}") };
    let [TranscriptItem::ToolResult { output, is_error: false, .. }] = &answers[..] else {
        panic!("{answers:?}")
    };
    assert_eq!(output.to_value().unwrap(), json!({"attempt": 2}));
    let events = log(&*store);
    let attempts = events.iter().filter(|e| e.kind() == EventKind::AttemptStarted).count();
    let dispatches = events.iter().filter(|e| e.kind() == EventKind::DispatchMinted).count();
    assert_eq!((attempts, dispatches), (2, 1), "attempt 2 under the same dispatch id");
    assert!(verify(&events).is_empty(), "{:?}", verify(&events));
}

#[test]
fn drive_within_answers_an_unsafe_call_that_overran_outcome_unknown_and_commits_the_step() {
    let tools = tools(Arc::default());
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let calls = [tools.call("c1", "hang", json!({})).unwrap()];
    run.commit_reply(tools.reply("", calls).unwrap()).unwrap();
    let options = DriveOptions::new().deadline(Duration::from_millis(50));
    let (_, outcome) =
        stepjournal::writer::block_on(journal.drive_within(&run, &tools, options)).unwrap();
    let Some(StepOutcome::Committed { answers, .. }) = outcome else { panic!("{outcome:?}") };
    assert!(
        matches!(&answers[..], [TranscriptItem::Paired { reason: PairReason::OutcomeUnknown, .. }]),
        "{answers:?}"
    );
    let events = log(&*store);
    assert_eq!(events.iter().filter(|e| e.kind() == EventKind::AttemptStarted).count(), 1);
    assert!(verify(&events).is_empty());
}

/// A host that lost its body (its event loop went away with the body pending) lets go of the
/// run: the error the handler returns then is refused, never recorded as the tool's failure, and
/// the wake answers the unsafe call `outcome_unknown`.
#[test]
fn a_body_its_host_lost_records_nothing_and_the_wake_answers_outcome_unknown() {
    let tools =
        Tools::new().tool("send", json!({}), Replay::Unsafe, |_: Value, ctx: CallCtx| async move {
            ctx.let_go_of_run("the event loop went away");
            Err::<Value, _>(ToolError::new("oneshot canceled"))
        });
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let call = tools.call("c1", "send", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
    let error = stepjournal::writer::block_on(step.drive(&tools)).unwrap_err();
    assert!(
        matches!(error.write_error(), Some(WriteError::Interrupted { .. })),
        "the result was refused: {error}"
    );
    let RunStatus::Interrupted(Interruption::BodyLost { call, why }) = run.status() else {
        panic!("{:?}", run.status())
    };
    assert_eq!((call.as_str(), why.as_str()), ("c1", "the event loop went away"));
    let events = log(&*store);
    assert!(!events.iter().any(|e| e.kind() == EventKind::ToolResult), "no result: {events:?}");
    assert!(!events.iter().any(|e| e.kind() == EventKind::StepCommit), "no commit");

    let woken = journal.begin_run(&session(), Entry::Wake).unwrap();
    let outcome = stepjournal::writer::block_on(woken.drive(&tools)).unwrap();
    let Some(StepOutcome::Committed { answers, .. }) = outcome else { panic!("{outcome:?}") };
    assert!(
        matches!(&answers[..], [TranscriptItem::Paired { reason: PairReason::OutcomeUnknown, .. }]),
        "{answers:?}"
    );
    let events = log(&*store);
    assert_eq!(events.iter().filter(|e| e.kind() == EventKind::AttemptStarted).count(), 1);
    assert!(verify(&events).is_empty(), "{:?}", verify(&events));
}
