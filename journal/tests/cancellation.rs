//! What a dropped future leaves, and what a shutdown leaves: a run whose future was dropped
//! while its batch may have been landing, or that a shutdown abandoned, writes nothing more; a
//! `wake` goes on from what landed by FORMAT.md's rules. Never a second attempt of an unsafe
//! call in one run, never a step committed over an open one, nothing recorded after a run was
//! reported abandoned.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::{Value, json};
use stepjournal::backends::memory::MemoryStore;
use stepjournal::backends::{
    AppendAck, AppendError, AppendFuture, Completer, Durability, JournalStore, StoreError,
    StoreFuture,
};
use stepjournal::codec::{
    CallId, Entry, Event, EventKind, RawJson, Record, Replay, RunOutcome, Seq, SessionId, Stamped,
};
use stepjournal::recovery::{Action, verify};
use stepjournal::{
    CallCtx, Interruption, Journal, JournalOptions, RunStatus, StepOutcome, ToolError, Tools,
    WriteError,
};

/// A store whose first append of the chosen kind of batch lands at once but is never answered:
/// a future dropped meanwhile has let its batch land unseen, as a `tokio::time::timeout` around
/// a write to the file store's committer does. Later appends are answered as usual.
struct LandsUnanswered {
    inner: MemoryStore,
    kind: EventKind,
    held: Mutex<Vec<Completer<Result<AppendAck, AppendError>>>>,
}

impl LandsUnanswered {
    fn new(kind: EventKind) -> Arc<Self> {
        Arc::new(LandsUnanswered { inner: MemoryStore::new(), kind, held: Mutex::new(Vec::new()) })
    }

    fn count(&self, session: &SessionId, kind: EventKind) -> usize {
        self.inner.read_all(session).unwrap().iter().filter(|r| r.event.kind() == kind).count()
    }
}

impl JournalStore for LandsUnanswered {
    fn max_durability(&self) -> Durability {
        self.inner.max_durability()
    }
    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.inner.append(session, expected, events, durability)
    }
    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        let landed = self.inner.append(session, expected, events, durability);
        let mut held = self.held.lock().unwrap();
        if landed.is_ok()
            && held.is_empty()
            && events.first().is_some_and(|e| e.event.kind() == self.kind)
        {
            let (future, completer) = StoreFuture::pending_or(landed);
            held.push(completer);
            return future;
        }
        StoreFuture::ready(landed)
    }
    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.inner.read(session, range)
    }
    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.inner.tail(session)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.inner.sessions()
    }
    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.inner.delete(session)
    }
}

fn tools() -> Tools {
    Tools::new()
        .tool("send_email", json!({}), Replay::Unsafe, |_: Value, _: CallCtx| async {
            Ok::<_, ToolError>(json!({"sent": true}))
        })
        .tool("search", json!({}), Replay::Safe, |_: Value, _: CallCtx| async {
            Ok::<_, ToolError>(json!({"hits": 1}))
        })
}

fn journal(store: Arc<dyn JournalStore>) -> Journal {
    Journal::new(store, Arc::new(tools()), JournalOptions::new()).unwrap()
}

fn session() -> SessionId {
    SessionId::new("s").unwrap()
}

fn new_turn() -> Entry {
    Entry::NewTurn { message: "go".into() }
}

fn interrupted(e: &WriteError) -> bool {
    matches!(e, WriteError::Interrupted { why: Interruption::FutureDropped { .. }, .. })
}

#[test]
fn a_drive_dropped_while_its_attempt_lands_never_starts_a_second_attempt_of_the_unsafe_call() {
    // Regression: a `drive` future dropped at its first poll (a timeout, a `select!`) let
    // `attempt_started` land unseen; driving the step again wrote `attempt_started` attempt 2
    // for the unsafe tool. One body per unsafe call, ever.
    let store = LandsUnanswered::new(EventKind::AttemptStarted);
    let journal = journal(store.clone());
    let tools = tools();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let call = tools.call("c1", "send_email", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("Sending.", [call]).unwrap()).unwrap();
    assert!(step.drive(&tools).now_or_never().is_none(), "the attempt's answer never comes");
    assert_eq!(store.count(&session(), EventKind::AttemptStarted), 1, "the attempt landed");
    assert!(matches!(run.status(), RunStatus::Interrupted(_)), "{:?}", run.status());

    let again = futures_executor::block_on(step.drive(&tools)).unwrap_err();
    assert!(again.write_error().is_some_and(interrupted), "{again}");
    assert!(interrupted(&run.end(RunOutcome::Completed).unwrap_err()));
    assert_eq!(store.count(&session(), EventKind::AttemptStarted), 1, "no second attempt");

    // A wake goes on from what landed: the unsafe call's body may have run.
    let woken = journal.begin_run(&session(), Entry::Wake).unwrap();
    let plan = woken.plan().calls.first().unwrap().clone();
    assert!(matches!(plan.action, Action::Pair { .. }), "{plan:?}");
    let outcome = futures_executor::block_on(woken.drive(&tools)).unwrap();
    assert!(matches!(outcome, Some(StepOutcome::Committed { .. })), "{outcome:?}");
    assert_eq!(store.count(&session(), EventKind::AttemptStarted), 1, "still one attempt");
}

#[test]
fn a_commit_reply_dropped_while_its_batch_lands_never_commits_a_step_over_the_open_one() {
    // Regression: a `commit_reply_async` future dropped while its batch landed left the run not
    // knowing of step 1; the next `commit_reply_async` committed step 2 over it, and step 1's
    // call was never answered (a transcript with a tool call and no result).
    let store = LandsUnanswered::new(EventKind::ReplyCommitted);
    let journal = journal(store.clone());
    let tools = tools();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let first = tools.reply("one", [tools.call("c1", "search", json!({})).unwrap()]).unwrap();
    assert!(run.commit_reply_async(first).now_or_never().is_none(), "its answer never comes");
    assert_eq!(store.count(&session(), EventKind::ReplyCommitted), 1, "step 1 landed");

    let second = tools.reply("two", [tools.call("c2", "search", json!({})).unwrap()]).unwrap();
    let refused = run.commit_reply(second).unwrap_err();
    assert!(interrupted(&refused), "{refused}");
    assert_eq!(store.count(&session(), EventKind::ReplyCommitted), 1, "no step 2 over step 1");

    // The wake recovers step 1 and answers its call.
    let woken = journal.begin_run(&session(), Entry::Wake).unwrap();
    let outcome = futures_executor::block_on(woken.drive(&tools)).unwrap();
    let Some(StepOutcome::Committed { answers, .. }) = outcome else { panic!("{outcome:?}") };
    assert_eq!(answers.len(), 1);
    let log: Vec<Event> =
        store.inner.read_all(&session()).unwrap().into_iter().map(|r| r.event).collect();
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
}

#[test]
fn a_run_shutdown_abandoned_records_nothing_after_it_was_reported() {
    // Regression: after `shutdown` reported `abandoned: [a]`, run `a` still recorded its body's
    // result and a `step_commit`; a `CallCtx::signal` that fired promises that nothing more of
    // the call will be recorded.
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let journal = journal(store.clone());
    let tools = tools();
    let run = journal.begin_run(&session(), new_turn()).unwrap();
    let call = tools.call("c1", "search", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("Searching.", [call]).unwrap()).unwrap();
    let body = step.start_body(&CallId::from("c1")).unwrap();
    let report = futures_executor::block_on(journal.shutdown(Duration::ZERO));
    assert_eq!(report.abandoned, [session()]);
    let tail = store.tail(&session()).unwrap();

    assert!(body.signal().is_cancelled(), "the body was told");
    let refused = body.finish(RawJson::parse(r#"{"hits": 1}"#).unwrap(), false).unwrap_err();
    assert!(
        matches!(*refused.error, WriteError::Interrupted { why: Interruption::ShutDown, .. }),
        "{refused}"
    );
    let late = tools.reply("late", []).unwrap();
    assert!(run.commit_reply(late).is_err());
    assert!(run.end(RunOutcome::Completed).is_err());
    assert_eq!(store.tail(&session()).unwrap(), tail, "nothing landed after the report");
}
