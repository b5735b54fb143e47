//! Retention on every backend: `Journal::retain` deletes the sessions whose last run ended
//! (completed, failed, stopped) longer ago than the age, never an open, crashed or suspended
//! one nor a recent one; a session resumed between the listing and its delete is kept; the
//! journal's retention thread makes the passes by itself when the options ask for it.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::backends::{
    AppendAck, AppendError, DeleteAt, Durability, JournalStore, SessionHead, StoreError,
};
use stepjournal::codec::UnixMillis;
use stepjournal::codec::{Entry, Message, Record, Role, RunOutcome, Seq, SessionId, Stamped};
use stepjournal::writer::Clock;
use stepjournal::{Journal, JournalOptions, StepOutcome, Tools};

/// A clock the test sets.
#[derive(Debug)]
struct SetClock(AtomicU64);

impl Clock for SetClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.0.load(Ordering::SeqCst))
    }
}

fn real_now() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

const DAY: u64 = 24 * 3600 * 1000;

fn sid(tag: &str, name: &str) -> SessionId {
    SessionId::new(format!("{tag}-{name}")).unwrap()
}

/// Sessions in every state, the old ones stamped two days ago, the recent ones now; then a
/// retention pass of one day.
fn every_state_on(store: Arc<dyn JournalStore>, tag: &str) {
    let clock = Arc::new(SetClock(AtomicU64::new(real_now() - 2 * DAY)));
    let options = JournalOptions::new().clock(clock.clone());
    let tools = Tools::new().client_tool("ask_user", json!({}));
    let journal = Journal::new(store.clone(), Arc::new(tools.clone()), options).unwrap();
    let turn = |name: &str| {
        let message = format!("{name}, go");
        journal.begin_run(&sid(tag, name), Entry::NewTurn { message }).unwrap()
    };
    for (name, outcome) in [
        ("completed", RunOutcome::Completed),
        ("failed", RunOutcome::Failed),
        ("stopped", RunOutcome::Stopped),
    ] {
        turn(name).end(outcome).unwrap();
    }
    // Suspended on a client call nobody answered yet.
    let run = turn("suspended");
    let call = tools.call("c1", "ask_user", json!({})).unwrap();
    let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
    let outcome = futures_executor::block_on(step.drive(&tools)).unwrap();
    assert!(matches!(outcome, StepOutcome::Suspended { .. }), "{outcome:?}");
    // A crashed run (its handles dropped before it ended), and one open here.
    drop(turn("crashed"));
    let open = turn("open");
    // A session ended as long ago, then resumed a moment ago and ended again: recent.
    let resumed = turn("resumed");
    resumed.end(RunOutcome::Completed).unwrap();
    clock.0.store(real_now(), Ordering::SeqCst);
    let again = journal.begin_run(&sid(tag, "resumed"), Entry::NewTurn { message: "more".into() });
    again.unwrap().end(RunOutcome::Completed).unwrap();
    let recent = turn("recent");
    recent.end(RunOutcome::Completed).unwrap();

    let done = journal.retain(Duration::from_millis(DAY)).unwrap();
    let mut deleted = done.deleted.clone();
    deleted.sort();
    let names = |ns: &[&str]| ns.iter().map(|n| sid(tag, n)).collect::<Vec<_>>();
    assert_eq!(deleted, names(&["completed", "failed", "stopped"]), "{done:?}");
    assert!(done.changed.is_empty(), "{done:?}");
    let mut kept = store.sessions().unwrap();
    kept.sort();
    assert_eq!(kept, names(&["crashed", "open", "recent", "resumed", "suspended"]));
    for s in names(&["completed", "failed", "stopped"]) {
        assert!(store.read_all(&s).unwrap().is_empty(), "{s} reads as empty");
    }
    // A second pass finds nothing more.
    assert_eq!(journal.retain(Duration::from_millis(DAY)).unwrap().deleted, vec![]);
    drop(open);
}

#[test]
fn retention_on_the_memory_store() {
    every_state_on(Arc::new(MemoryStore::new()), "mem");
}

#[test]
fn retention_on_the_file_backend() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        stepjournal::backends::file::FileStore::open(dir.path(), Default::default()).unwrap();
    every_state_on(Arc::new(store), "file");
}

#[cfg(feature = "sqlite")]
#[test]
fn retention_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite");
    let store =
        stepjournal::backends::sqlite::SqliteStore::open(&path, Default::default()).unwrap();
    every_state_on(Arc::new(store), "sqlite");
}

#[cfg(feature = "postgres")]
mod support;

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn retention_on_postgres() {
    use stepjournal::backends::postgres::{PostgresOptions, PostgresStore};
    use support::pg;
    let schema = pg::fresh_schema("retain");
    let fixture = pg::PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let url = pg::with_param(&pg::url(), "schema", &schema);
    let store = PostgresStore::connect(&url, PostgresOptions::default()).unwrap();
    every_state_on(Arc::new(store), "pg");
    drop(fixture);
}

/// A memory store on which a runtime resumes `resume` right after the heads are listed.
struct Resuming {
    inner: MemoryStore,
    resume: SessionId,
    resumed: Mutex<bool>,
}

impl JournalStore for Resuming {
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
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<DeleteAt, StoreError> {
        self.inner.delete_at(session, tail)
    }
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let heads = self.inner.heads()?;
        let mut resumed = self.resumed.lock().unwrap();
        if !*resumed {
            *resumed = true;
            let tail = self.inner.tail(&self.resume)?;
            let message = Message { role: Role::User, text: "back again".into() };
            let event = Stamped::at(UnixMillis(real_now()), message);
            self.inner.append(&self.resume, tail, &[event], Durability::Volatile).unwrap();
        }
        Ok(heads)
    }
}

#[test]
fn a_session_resumed_after_the_listing_is_kept_and_reported() {
    let resume = sid("race", "resumed");
    let store =
        Arc::new(Resuming { inner: MemoryStore::new(), resume, resumed: Mutex::new(false) });
    let clock = Arc::new(SetClock(AtomicU64::new(real_now() - 2 * DAY)));
    let options = JournalOptions::new().clock(clock.clone());
    let journal = Journal::new(store.clone(), Arc::new(Tools::new()), options).unwrap();
    for name in ["resumed", "left"] {
        let run =
            journal.begin_run(&sid("race", name), Entry::NewTurn { message: "go".into() }).unwrap();
        run.end(RunOutcome::Completed).unwrap();
    }
    clock.0.store(real_now(), Ordering::SeqCst);
    let done = journal.retain(Duration::from_millis(DAY)).unwrap();
    assert_eq!(done.deleted, vec![sid("race", "left")]);
    assert_eq!(done.changed, vec![sid("race", "resumed")]);
    let kept = store.read_all(&sid("race", "resumed")).unwrap();
    assert_eq!(kept.len(), 4, "every event kept, the one appended after the listing too");
}

#[test]
fn the_journal_s_retention_thread_deletes_by_itself_and_stops_with_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let open = || stepjournal::backends::file::FileStore::open(dir.path(), Default::default());
    let store: Arc<dyn JournalStore> = Arc::new(open().unwrap());
    let clock = Arc::new(SetClock(AtomicU64::new(real_now() - 2 * DAY)));
    let options =
        JournalOptions::new().clock(clock.clone()).retain_ended_for(Duration::from_secs(5));
    let journal = Journal::new(store.clone(), Arc::new(Tools::new()), options).unwrap();
    let s = sid("thread", "old");
    let run = journal.begin_run(&s, Entry::NewTurn { message: "go".into() }).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    drop(run);
    clock.0.store(real_now(), Ordering::SeqCst);
    // A pass every second (a tenth of 5 s, at least a second): watched for up to 30 s.
    let start = Instant::now();
    while store.tail(&s).unwrap() != Seq(0) {
        assert!(start.elapsed() < Duration::from_secs(30), "the retention thread deleted nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The thread holds neither the journal nor the store: once both are dropped the
    // directory's lock is free at once.
    drop((journal, store));
    assert!(open().is_ok(), "the store was released with the journal");
}
