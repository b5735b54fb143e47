//! The calls a runtime makes at start-up, in async form: each reads on a thread of its own,
//! never on the executor's, and answers as its sync form does.

mod writer_support;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, Durability, JournalStore, OpenError, SessionHead, StoreError,
};
use stepjournal_codec::{Entry, Record, Seq, SessionId, Stamped};
use writer_support::*;

/// A memory store that notes the name of the thread each `heads` and `read` ran on.
struct Noting {
    inner: MemoryStore,
    threads: Mutex<Vec<Option<String>>>,
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
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn listing_heads_and_transcripts_read_off_the_executor_thread_and_answer_as_the_sync_forms() {
    let store = Arc::new(Noting { inner: MemoryStore::new(), threads: Mutex::new(Vec::new()) });
    let journal = Journal::new(store.clone(), Arc::new(registry()), JournalOptions::new()).unwrap();
    // A crashed run: its session is listed for recovery.
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
    drop(step.start_body(&id("c1")).unwrap());
    drop(step);
    drop(run);
    journal.keep_leases().unwrap();
    let executor = std::thread::current().id();
    runtime().block_on(async {
        store.threads.lock().unwrap().clear();
        let listed = journal.sessions_to_recover_async().await.unwrap();
        assert_eq!(listed, journal.sessions_to_recover().unwrap());
        assert_eq!(listed, vec![session()]);
        let heads = journal.heads_async().await.unwrap();
        assert_eq!(heads, store.heads().unwrap());
        let shown = journal.transcript_async(&session()).await.unwrap();
        assert_eq!(shown, journal.transcript(&session()).unwrap());
        assert_eq!(std::thread::current().id(), executor);
    });
    let threads = store.threads.lock().unwrap().clone();
    // Each async form's reads ran on the read thread; the sync forms' on this one.
    let off = threads.iter().filter(|t| t.as_deref() == Some("stepjournal-read")).count();
    assert!(off >= 3, "{threads:?}");
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
