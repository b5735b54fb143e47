//! `Journal::fork` on every backend: a fork at a step commit opens with `forked_from` and the
//! original's state there, recovers by the same rules (a wake plans as on the original right
//! after the commit), shows the original's turns in its transcript; the original is untouched;
//! a saved step with open calls, a reply checkpoint, an unknown checkpoint, an existing or
//! invalid new session are refused with nothing written; two forks racing to one new session
//! never both land.

use std::sync::Arc;

use serde_json::{Value, json};
use stepjournal::backends::JournalStore;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::codec::{CallId, CheckpointId, Entry, Event, Replay, Seq, SessionId};
use stepjournal::recovery::{NewRun, TranscriptItem, fold, plan, verify};
use stepjournal::writer::SequentialIds;
use stepjournal::{CallCtx, ForkError, Journal, JournalOptions, ToolError, Tools};

fn tools() -> Tools {
    Tools::new().tool("search", json!({}), Replay::Safe, |_: Value, _: CallCtx| async {
        Ok::<_, ToolError>(json!({"hits": 1}))
    })
}

fn events(store: &dyn JournalStore, session: &SessionId) -> Vec<Event> {
    store.read_all(session).unwrap().into_iter().map(|r| r.event).collect()
}

fn fork_on(store: Arc<dyn JournalStore>, tag: &str) {
    let s = |name: &str| SessionId::new(format!("{tag}-{name}")).unwrap();
    let tools = tools();
    let options = JournalOptions::new().ids(Arc::new(SequentialIds::with_prefix(tag)));
    let journal = Journal::new(store.clone(), Arc::new(tools.clone()), options).unwrap();
    let original = s("original");

    // Two committed steps, then a third saved with its call's body started: the run dies there.
    let run = journal.begin_run(&original, Entry::NewTurn { message: "go".into() }).unwrap();
    let mut commits = Vec::new();
    let mut replies = Vec::new();
    for i in 1..=3 {
        let c = format!("c{i}");
        let call = tools.call(c.as_str(), "search", json!({ "q": i })).unwrap();
        let step = run.commit_reply(tools.reply(format!("step {i}"), [call]).unwrap()).unwrap();
        replies.push(step.checkpoint().clone());
        let body = step.start_body(&CallId::from(c.as_str())).unwrap();
        if i == 3 {
            drop(body);
            break;
        }
        body.finish(stepjournal::codec::RawJson::parse("{\"hits\":1}").unwrap(), false).unwrap();
        commits.push(step.commit().unwrap());
    }
    drop(run);
    let before = store.read_all(&original).unwrap();

    // Forked at step 1's commit.
    let fork = s("fork");
    let written = journal.fork(&original, &commits[0], &fork).unwrap();
    assert_eq!(written.len(), 2);
    let log = events(&*store, &fork);
    assert_eq!(log, written.iter().map(|r| r.event.clone()).collect::<Vec<_>>());
    let Event::ForkedFrom(f) = &log[0] else { panic!("{log:?}") };
    assert_eq!((&f.original, &f.checkpoint), (&original, &commits[0]));
    let commit_seq = before
        .iter()
        .find(|r| matches!(&r.event, Event::StepCommit(c) if c.checkpoint == commits[0]))
        .unwrap()
        .seq;
    assert_eq!(f.commit_seq, commit_seq);
    assert!(matches!(&log[1], Event::Snapshot(_)), "{log:?}");
    assert_eq!(verify(&log), vec![], "a fork's log keeps the protocol");
    assert_eq!(store.read_all(&original).unwrap(), before, "the original is untouched");

    // The fork plans every entry as the original did right after that commit.
    let at_commit: Vec<Event> =
        before.iter().take_while(|r| r.seq <= commit_seq).map(|r| r.event.clone()).collect();
    let (ours, theirs) = (fold(&log), fold(&at_commit));
    for entry in [Entry::Wake, Entry::NewTurn { message: "m".into() }, Entry::Stop] {
        let new_run = NewRun {
            run: "r-x".into(),
            entry: entry.clone(),
            commit_checkpoint: CheckpointId::new("cp-x"),
        };
        let registry = stepjournal::recovery::MemoryRegistry::new();
        let (a, b) = (
            plan(&ours, &new_run, &registry, &Default::default()),
            plan(&theirs, &new_run, &registry, &Default::default()),
        );
        assert_eq!(
            (a.error, a.step, a.calls, a.appends),
            (b.error, b.step, b.calls, b.appends),
            "{entry:?}"
        );
    }

    // The fork goes on as a session of its own; its transcript shows the original's turns up
    // to the fork first.
    let run = journal.begin_run(&fork, Entry::NewTurn { message: "another way".into() }).unwrap();
    assert_eq!(run.plan().appends.len(), 2, "run_started and the message: no step is saved");
    let call = tools.call("c9", "search", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("forked step", [call]).unwrap()).unwrap();
    assert_eq!(step.number().get(), 2, "the fork's steps go on from the original's");
    let body = step.start_body(&CallId::from("c9")).unwrap();
    body.finish(stepjournal::codec::RawJson::parse("{}").unwrap(), false).unwrap();
    step.commit().unwrap();
    drop(run);
    assert_eq!(verify(&events(&*store, &fork)), vec![]);
    let shown: Vec<String> = journal
        .transcript(&fork)
        .unwrap()
        .iter()
        .filter_map(|t| match t {
            TranscriptItem::Message { text, .. } | TranscriptItem::Reply { text, .. } => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["go", "step 1", "another way", "forked step"]);
    let shown_async = futures_executor::block_on(journal.transcript_async(&fork)).unwrap();
    assert_eq!(shown_async, journal.transcript(&fork).unwrap());
    assert_eq!(store.read_all(&original).unwrap(), before, "the original is still untouched");

    // Refusals: nothing is written.
    let target = s("refused");
    let err = journal.fork(&original, &replies[2], &target).unwrap_err();
    assert!(matches!(&err, ForkError::OpenCalls { open, .. } if open == &[CallId::from("c3")]));
    assert!(err.to_string().contains("its calls would be in flight in two sessions"), "{err}");
    let err = journal.fork(&original, &replies[1], &target).unwrap_err();
    assert!(
        matches!(&err, ForkError::NotAStepCommit { commit: Some(c), .. } if c == &commits[1]),
        "{err}"
    );
    let err = journal.fork(&original, &CheckpointId::new("nowhere"), &target).unwrap_err();
    assert!(matches!(err, ForkError::UnknownCheckpoint { .. }), "{err}");
    let err = journal.fork(&s("missing"), &commits[0], &target).unwrap_err();
    assert!(matches!(err, ForkError::NoSession { .. }), "{err}");
    let err = journal.fork(&original, &commits[1], &fork).unwrap_err();
    let tail = store.tail(&fork).unwrap().get();
    assert!(matches!(err, ForkError::SessionExists { events, .. } if events == tail), "{err}");
    let err = journal.fork(&original, &commits[1], &original).unwrap_err();
    assert!(matches!(err, ForkError::SessionExists { .. }), "{err}");
    let bad = SessionId::from_stored(format!("{tag}-bad\nid"));
    let err = journal.fork(&original, &commits[1], &bad).unwrap_err();
    assert!(matches!(err, ForkError::InvalidSession { .. }), "{err}");
    for session in [&target, &bad] {
        assert_eq!(store.tail(session).unwrap(), Seq(0), "nothing written to {session}");
    }
    assert_eq!(store.read_all(&original).unwrap(), before);

    // Two forks racing to one new session: one lands, the other finds it taken.
    let raced = s("raced");
    let answers: Vec<Result<_, ForkError>> = std::thread::scope(|scope| {
        let forks: Vec<_> = (0..2)
            .map(|i| {
                let (journal, original, raced) = (&journal, &original, &raced);
                let at = commits[i].clone();
                scope.spawn(move || journal.fork(original, &at, raced))
            })
            .collect();
        forks.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let landed = answers.iter().filter(|a| a.is_ok()).count();
    assert_eq!(landed, 1, "{answers:?}");
    assert!(answers.iter().any(|a| matches!(a, Err(ForkError::SessionExists { .. }))));
    assert_eq!(store.tail(&raced).unwrap(), Seq(2));

    // A fork of a fork follows both to the first session's turns; once the original is gone,
    // the fork shows its own turns only.
    let fork_commit = journal.state(&fork).unwrap().last_commit().unwrap().checkpoint.clone();
    let grandchild = s("grandchild");
    journal.fork(&fork, &fork_commit, &grandchild).unwrap();
    let n = journal.transcript(&fork).unwrap().len();
    assert_eq!(journal.transcript(&grandchild).unwrap().len(), n);
    // Forked again at the commit a fork opens with: the same fork of the original.
    let again = s("again");
    let opened = journal.fork(&fork, &commits[0], &again).unwrap();
    assert_eq!(opened.iter().map(|r| &r.event).collect::<Vec<_>>(), log.iter().collect::<Vec<_>>());
    store.delete(&original).unwrap();
    let own = journal.transcript(&fork).unwrap();
    assert!(matches!(&own[0], TranscriptItem::Message { text, .. } if text == "another way"));
    assert!(journal.state(&fork).unwrap().forked_from().is_some(), "it still says it is a fork");
}

#[test]
fn a_fork_on_the_memory_store() {
    fork_on(Arc::new(MemoryStore::new()), "mem");
}

#[test]
fn a_fork_on_the_file_backend() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        stepjournal::backends::file::FileStore::open(dir.path(), Default::default()).unwrap();
    fork_on(Arc::new(store), "file");
}

#[cfg(feature = "sqlite")]
#[test]
fn a_fork_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite");
    let store =
        stepjournal::backends::sqlite::SqliteStore::open(&path, Default::default()).unwrap();
    fork_on(Arc::new(store), "sqlite");
}

#[cfg(feature = "postgres")]
mod support;

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_fork_on_postgres() {
    use stepjournal::backends::postgres::{PostgresOptions, PostgresStore};
    use support::pg;
    let schema = pg::fresh_schema("fork");
    let fixture = pg::PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let url = pg::with_param(&pg::url(), "schema", &schema);
    let store = PostgresStore::connect(&url, PostgresOptions::default()).unwrap();
    fork_on(Arc::new(store), "pg");
    drop(fixture);
}
