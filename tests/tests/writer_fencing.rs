//! Fencing on every backend: a body of run 1 that finishes after run 2 began (or after a stop
//! issued elsewhere) is refused with `Fenced`, nothing of it lands, and what the model is shown
//! is run 2's decision. The second writer works through its own store handle wherever the
//! backend allows several (SQLite, PostgreSQL), as another process would.

mod support;

use std::sync::Arc;

use stepjournal::recovery::{Action, MemoryRegistry, TranscriptItem, verify};
use stepjournal::writer::{IdSource, Journal, JournalOptions, SequentialIds};
use stepjournal::{Body, Reply, Run, Step};
use stepjournal::{Fence, WriteError};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{
    Attempt, Call, CallId, CallKind, Entry, Event, EventKind, PairReason, RawJson, Replay,
    RunOutcome, SessionId,
};

fn session() -> SessionId {
    SessionId::new("fenced-session").unwrap()
}

fn id(s: &str) -> CallId {
    CallId::from(s)
}

fn call(id: &str, tool: &str, replay: Replay) -> Call {
    Call {
        call: CallId::from(id),
        tool: tool.into(),
        args: RawJson::parse(r#"{"amount":12}"#).unwrap(),
        kind: CallKind::Tool,
        replay,
        group: None,
        sequential: false,
    }
}

fn journal(store: Arc<dyn JournalStore>, ids: Arc<dyn IdSource>) -> Journal {
    let registry = MemoryRegistry::new()
        .with_tool("set_preference", Replay::Safe)
        .with_tool("charge_card", Replay::Unsafe);
    Journal::new(separate(store), Arc::new(registry), JournalOptions::new().ids(ids)).unwrap()
}

/// Run 1 with a safe body (`c1`) and an unsafe body (`c2`, with committed output) running.
fn run_one(journal: &Journal) -> (Run, Step, Body, Body) {
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "pay".into() }).unwrap();
    let step = run
        .commit_reply(Reply::new("").call(call("c1", "set_preference", Replay::Safe)).call(call(
            "c2",
            "charge_card",
            Replay::Unsafe,
        )))
        .unwrap();
    let b1 = step.start_body(&id("c1")).unwrap();
    let b2 = step.start_body(&id("c2")).unwrap();
    b2.output_chunk("charging").unwrap();
    (run, step, b1, b2)
}

fn assert_fenced(result: Result<(), WriteError>, check: impl Fn(&Fence) -> bool) {
    match result {
        Err(WriteError::Fenced { by, .. }) if check(&by) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
}

/// A body of run 1 finishes after run 2 (a `wake`, through `second`) began.
fn late_body_is_refused_after_a_new_run(
    first: Arc<dyn JournalStore>,
    second: Arc<dyn JournalStore>,
) {
    let ids: Arc<dyn IdSource> = Arc::new(SequentialIds::new());
    let one = journal(first.clone(), ids.clone());
    let (run1, step1, b1, b2) = run_one(&one);
    let dispatch = b1.dispatch().clone();

    let two = journal(second.clone(), ids);
    let run2 = two.begin_run(&session(), Entry::Wake).unwrap();
    assert_eq!(
        run2.plan().call(&id("c1")).unwrap().action,
        Action::Run { dispatch: Some(dispatch.clone()), attempt: Attempt(2) }
    );
    assert_eq!(
        run2.plan().call(&id("c2")).unwrap().action,
        Action::Pair { reason: PairReason::OutcomeUnknown }
    );
    let tail = second.tail(&session()).unwrap();

    let by_run2 = |f: &Fence| matches!(f, Fence::RunStarted { run, .. } if run == run2.id());
    assert_fenced(b1.output_chunk("late output"), by_run2);
    assert_fenced(b2.output_chunk("late output"), by_run2);
    let late = b1.finish(RawJson::parse(r#""run 1""#).unwrap(), false);
    assert_fenced(late.map_err(WriteError::from), by_run2);
    let late = b2.finish(RawJson::parse(r#""charged by run 1""#).unwrap(), false);
    assert_fenced(late.map_err(WriteError::from), by_run2);
    assert_fenced(step1.commit().map(|_| ()), by_run2);
    assert_fenced(run1.end(RunOutcome::Completed), by_run2);
    assert_eq!(first.tail(&session()).unwrap(), tail, "nothing of run 1 landed");
    let err = run1.end(RunOutcome::Completed).unwrap_err();
    assert!(err.to_string().contains("fenced"), "{err}");

    // Run 2 carries on with its own decision.
    let step2 = run2.step().unwrap();
    let again = step2.start_body(&id("c1")).unwrap();
    assert_eq!((again.attempt(), again.dispatch()), (Attempt(2), &dispatch));
    again.finish(RawJson::parse(r#""run 2""#).unwrap(), false).unwrap();
    step2.commit().unwrap();
    run2.end(RunOutcome::Completed).unwrap();

    let log: Vec<Event> =
        second.read_all(&session()).unwrap().into_iter().map(|r| r.event).collect();
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
    assert!(
        !log.iter().any(|e| matches!(e, Event::OutputChunk(c) if c.text == "late output")),
        "no late chunk landed"
    );
    let shown = two.transcript(&session()).unwrap();
    let answers: Vec<String> = shown
        .iter()
        .filter_map(|t| match t {
            TranscriptItem::ToolResult { call, output, .. } => Some(format!("{call}={output}")),
            TranscriptItem::Paired { call, reason, .. } => {
                Some(format!("{call}:{}", reason.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(answers, vec![r#"c1="run 2""#.to_owned(), "c2:outcome_unknown".to_owned()]);
}

/// A body of run 1 finishes after a `stop` issued elsewhere (through `second`).
fn late_body_is_refused_after_a_stop(first: Arc<dyn JournalStore>, second: Arc<dyn JournalStore>) {
    let ids: Arc<dyn IdSource> = Arc::new(SequentialIds::new());
    let one = journal(first.clone(), ids.clone());
    let (run1, _step1, b1, b2) = run_one(&one);
    b1.finish(RawJson::parse("true").unwrap(), false).unwrap();

    let two = journal(second.clone(), ids);
    let plan = two.stop(&session()).unwrap();
    assert_eq!(plan.call(&id("c1")).unwrap().action, Action::Keep);
    assert_eq!(
        plan.call(&id("c2")).unwrap().action,
        Action::Pair { reason: PairReason::RunStopped }
    );
    let tail = second.tail(&session()).unwrap();

    let by_stop = |f: &Fence| matches!(f, Fence::RunEnded { run, outcome: RunOutcome::Stopped, .. } if run == run1.id());
    assert_fenced(b2.output_chunk("late output"), by_stop);
    let late = b2.finish(RawJson::parse(r#""charged""#).unwrap(), false);
    assert_fenced(late.map_err(WriteError::from), by_stop);
    assert_fenced(run1.end(RunOutcome::Completed), by_stop);
    assert_eq!(first.tail(&session()).unwrap(), tail, "nothing of run 1 landed");

    let kinds: Vec<EventKind> =
        second.read_all(&session()).unwrap().iter().map(|r| r.event.kind()).collect();
    assert_eq!(kinds.last(), Some(&EventKind::RunEnded));
    let shown = two.transcript(&session()).unwrap();
    assert!(shown.iter().any(|t| matches!(t,
        TranscriptItem::Paired { call, reason: PairReason::RunStopped, .. } if call == &id("c2"))));
    assert!(!shown.iter().any(|t| matches!(t,
        TranscriptItem::ToolResult { call, .. } if call == &id("c2"))));
    // The session takes a new turn.
    let run3 = two.begin_run(&session(), Entry::NewTurn { message: "again".into() }).unwrap();
    run3.end(RunOutcome::Completed).unwrap();
}

#[test]
fn memory_late_body_is_refused_after_a_new_run() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    late_body_is_refused_after_a_new_run(store.clone(), store);
}

#[test]
fn memory_late_body_is_refused_after_a_stop() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    late_body_is_refused_after_a_stop(store.clone(), store);
}

fn file_store(dir: &tempfile::TempDir) -> Arc<dyn JournalStore> {
    Arc::new(FileStore::open(dir.path(), FileOptions::default()).unwrap())
}

#[test]
fn file_late_body_is_refused_after_a_new_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(&dir);
    late_body_is_refused_after_a_new_run(store.clone(), store);
}

#[test]
fn file_late_body_is_refused_after_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(&dir);
    late_body_is_refused_after_a_stop(store.clone(), store);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};

    /// Two handles on one database file, as two processes would have.
    fn two_handles(dir: &tempfile::TempDir) -> (Arc<dyn JournalStore>, Arc<dyn JournalStore>) {
        let path = dir.path().join("journal.sqlite");
        let first = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        let second = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        (Arc::new(first), Arc::new(second))
    }

    #[test]
    fn sqlite_late_body_is_refused_after_a_new_run() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = two_handles(&dir);
        late_body_is_refused_after_a_new_run(first, second);
    }

    #[test]
    fn sqlite_late_body_is_refused_after_a_stop() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = two_handles(&dir);
        late_body_is_refused_after_a_stop(first, second);
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use std::ops::Range;
    use stepjournal_backends::postgres::PostgresOptions;
    use stepjournal_backends::{AppendAck, AppendError, Durability, StoreError};
    use stepjournal_codec::{Record, Seq, Stamped};
    use support::pg::{PgFixture, fresh_schema, url};

    /// A fixture as a store (the schema is dropped when the owner's last handle goes).
    struct Held(PgFixture);

    impl JournalStore for Held {
        fn max_durability(&self) -> Durability {
            self.0.max_durability()
        }
        fn append(
            &self,
            session: &SessionId,
            expected: Seq,
            events: &[Stamped],
            durability: Durability,
        ) -> Result<AppendAck, AppendError> {
            self.0.append(session, expected, events, durability)
        }
        fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
            self.0.read(session, range)
        }
        fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
            self.0.tail(session)
        }
        fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
            self.0.sessions()
        }
        fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
            self.0.delete(session)
        }
    }

    /// Two stores (separate pools) on one fresh schema.
    fn two_stores() -> (Arc<dyn JournalStore>, Arc<dyn JournalStore>) {
        let (url, schema) = (url(), fresh_schema("wfence"));
        let owner = PgFixture::at(&url, &schema, PostgresOptions::default());
        let guest = PgFixture::guest(&url, &schema, PostgresOptions::default());
        (Arc::new(Held(owner)), Arc::new(Held(guest)))
    }

    #[test]
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    fn postgres_late_body_is_refused_after_a_new_run() {
        let (first, second) = two_stores();
        late_body_is_refused_after_a_new_run(first, second);
    }

    #[test]
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    fn postgres_late_body_is_refused_after_a_stop() {
        let (first, second) = two_stores();
        late_body_is_refused_after_a_stop(first, second);
    }
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
