//! The calls a runtime makes at start-up, in async form: each reads through the store's async
//! forms, never its sync ones on the executor's thread, and answers as its sync form does.

mod writer_support;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use stepjournal::codec::Replay;
use stepjournal::{CallCtx, Journal, JournalOptions, RecoverOptions, Reply, ToolError, Tools};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, Durability, JournalStore, OpenError, SessionHead, StoreError,
    StoreFuture,
};
use stepjournal_codec::{Entry, Record, Seq, SessionId, Stamped};
use writer_support::*;

/// A memory store that notes the name of the thread each `heads` and `read` ran on, and
/// answers its async forms on a thread of its own (as a store across a network would).
struct Noting {
    inner: MemoryStore,
    threads: Mutex<Vec<Option<String>>>,
    this: Mutex<std::sync::Weak<Noting>>,
}

impl Noting {
    fn note(&self) {
        let name = std::thread::current().name().map(str::to_owned);
        self.threads.lock().unwrap().push(name);
    }
}

impl JournalStore for Noting {
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
        self.note();
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
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.note();
        self.inner.heads()
    }
    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        let (me, session) = (self.me(), session.clone());
        StoreFuture::on_thread(ASYNC, Err(lost()), move || me.read(&session, range))
    }
    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        let me = self.me();
        StoreFuture::on_thread(ASYNC, Err(lost()), move || me.heads())
    }
    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.note();
        self.inner.head(session)
    }
    fn head_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Option<SessionHead>, StoreError>> {
        let (me, session) = (self.me(), session.clone());
        StoreFuture::on_thread(ASYNC, Err(lost()), move || me.head(&session))
    }
}

/// The name of the threads `Noting` answers its async forms on.
const ASYNC: &str = "noting-async";

impl Noting {
    fn me(&self) -> Arc<Noting> {
        self.this.lock().unwrap().upgrade().unwrap()
    }
}

fn lost() -> StoreError {
    StoreError::Io { context: "noting".into(), source: std::io::Error::other("lost") }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn listing_heads_transcripts_and_trims_read_off_the_executor_thread_and_answer_as_the_sync_forms() {
    let store = Arc::new(Noting {
        inner: MemoryStore::new(),
        threads: Mutex::new(Vec::new()),
        this: Mutex::new(std::sync::Weak::new()),
    });
    *store.this.lock().unwrap() = Arc::downgrade(&store);
    let journal = Journal::new(store.clone(), Arc::new(registry()), JournalOptions::new()).unwrap();
    // A crashed run: its session is listed for recovery.
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    drop(step.start_body(&id("c1")).unwrap());
    drop(step);
    drop(run);
    journal.keep_leases().unwrap();
    let executor = std::thread::current().id();
    let (listed, heads, shown) = runtime().block_on(async {
        store.threads.lock().unwrap().clear();
        let listed = journal.sessions_to_recover_async().await.unwrap();
        let heads = journal.heads_async().await.unwrap();
        let shown = journal.transcript_async(&session()).await.unwrap();
        assert_eq!(std::thread::current().id(), executor);
        (listed, heads, shown)
    });
    let threads = std::mem::take(&mut *store.threads.lock().unwrap());
    // Every read of the async forms ran on the store's async side, none on the executor's
    // thread: the listing's heads, the heads, the transcript's read.
    assert!(threads.iter().all(|t| t.as_deref() == Some(ASYNC)), "{threads:?}");
    assert!(threads.len() >= 3, "{threads:?}");
    assert_eq!(listed, journal.sessions_to_recover().unwrap());
    assert_eq!(listed, vec![session()]);
    assert_eq!(heads, store.heads().unwrap());
    assert_eq!(shown, journal.transcript(&session()).unwrap());
    // `recover_all` lists, wakes and reads the same way.
    let tools =
        Tools::new().tool("search", json!({}), Replay::Safe, |_: Value, _: CallCtx| async {
            Ok::<_, ToolError>(json!({"hits": 1}))
        });
    let report = runtime().block_on(async {
        store.threads.lock().unwrap().clear();
        let report = journal.recover_all(&tools, RecoverOptions::new(), |_, _| async {}).await;
        assert_eq!(std::thread::current().id(), executor);
        report.unwrap()
    });
    assert_eq!(report.recovered, vec![session()]);
    let threads = std::mem::take(&mut *store.threads.lock().unwrap());
    assert!(threads.iter().all(|t| t.as_deref() == Some(ASYNC)), "{threads:?}");
    assert!(threads.len() >= 2, "{threads:?}");
    // A trim reads the session's head (is a run live?) and its log the same way.
    let trimmed = runtime().block_on(async {
        let trimmed = journal.trim_async(&session(), 1).await;
        assert_eq!(std::thread::current().id(), executor);
        trimmed
    });
    assert!(trimmed.is_ok(), "{trimmed:?}");
    let threads = std::mem::take(&mut *store.threads.lock().unwrap());
    assert!(threads.iter().all(|t| t.as_deref() == Some(ASYNC)), "{threads:?}");
    assert!(threads.len() >= 2, "{threads:?}");
}

#[test]
fn a_file_journal_opens_in_async_form_and_a_locked_one_is_refused_so() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let store = FileStore::open_async(dir.path(), FileOptions::new()).await.unwrap();
        store.append(&session(), Seq(0), &stamped_numbered(2), Durability::Synced).unwrap();
        let second = FileStore::open_async(dir.path(), FileOptions::new()).await;
        assert!(matches!(second, Err(OpenError::Locked { .. })), "{second:?}");
        drop(store);
        let again = FileStore::open_async(dir.path(), FileOptions::new()).await.unwrap();
        assert_eq!(again.tail(&session()).unwrap(), Seq(2));
    });
}

fn stamped_numbered(n: u64) -> Vec<Stamped> {
    (0..n)
        .map(|i| {
            let text = format!("event {i}");
            Stamped::at(
                T0,
                stepjournal_codec::Message { role: stepjournal_codec::Role::User, text },
            )
        })
        .collect()
}
