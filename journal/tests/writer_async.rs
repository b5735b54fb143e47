//! The async writer: its futures are `Send`, run on tokio's multi-thread runtime and on any
//! other executor, and a task waiting for a store's answer holds no thread.

mod writer_support;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use stepjournal::writer::Journal;
use stepjournal::{Body, Reply, Run, Step};
use stepjournal::{RunStatus, WriteError};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, AppendFuture, Completer, Durability, JournalStore, StoreError,
    StoreFuture,
};
use stepjournal_codec::{Entry, EventKind, Record, RunOutcome, Seq, SessionId, Stamped};
use writer_support::*;

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

/// One step of one call, through every async twin.
async fn one_step(journal: &Journal, session: &SessionId) -> Result<(), WriteError> {
    let run = journal.begin_run_async(session, new_turn()).await.unwrap();
    let reply = Reply::new("looking").call(call("c1", "search"));
    let step = run.commit_reply_async(reply).await?;
    let body = step.start_body_async(&id("c1")).await?;
    body.output_chunk_async("half way").await?;
    body.finish_async(json(r#"{"hits":1}"#), false).await?;
    step.commit_async().await?;
    run.end_async(RunOutcome::Completed).await
}

#[test]
fn the_writer_s_handles_and_futures_are_send() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Journal>();
    send_sync::<Run>();
    send_sync::<Step>();
    send_sync::<Body>();
    let (journal, _store) = memory_journal();
    let s = session();
    // Each future is checked by `assert_send`, then dropped unpolled: nothing is written.
    drop(assert_send(journal.begin_run_async(&s, new_turn())));
    drop(assert_send(one_step(&journal, &s)));
}

#[test]
fn many_sessions_run_their_steps_from_tasks_of_tokio_s_multi_thread_runtime() {
    let store = Arc::new(MemoryStore::new());
    let journal = journal_with(store.clone(), ids());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..32)
            .map(|n| {
                let journal = journal.clone();
                tokio::spawn(async move {
                    one_step(&journal, &SessionId::new(format!("s-{n}")).unwrap()).await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    });
    for n in 0..32 {
        let kinds = kinds(&*store, &SessionId::new(format!("s-{n}")).unwrap());
        assert_eq!(kinds.first(), Some(&EventKind::RunStarted));
        assert_eq!(kinds.last(), Some(&EventKind::RunEnded));
        assert_eq!(kinds.len(), 9, "{kinds:?}");
    }
}

/// An append a [`HeldStore`] holds: where it goes, its batch, and its future's completer.
type Held = (SessionId, Seq, Vec<Stamped>, Durability, Completer<Result<AppendAck, AppendError>>);

/// A store whose appends are completed only when the test says so: each `append_async` is
/// held, its batch not yet written, until [`HeldStore::release`].
struct HeldStore {
    inner: MemoryStore,
    held: Mutex<Vec<Held>>,
}

impl HeldStore {
    fn new() -> Self {
        HeldStore { inner: MemoryStore::new(), held: Mutex::new(Vec::new()) }
    }

    /// How many appends wait.
    fn waiting(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    /// Writes every held batch and completes its future with the answer.
    fn release(&self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap());
        for (session, expected, batch, durability, completer) in held {
            completer.complete(self.inner.append(&session, expected, &batch, durability));
        }
    }
}

impl JournalStore for HeldStore {
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
        let gone = AppendError::Store(StoreError::Poisoned { first_failure: "dropped".into() });
        let (future, completer) = StoreFuture::pending_or(Err(gone));
        let batch = events.to_vec();
        self.held.lock().unwrap().push((session.clone(), expected, batch, durability, completer));
        future
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

#[test]
fn a_task_waiting_for_its_append_leaves_the_only_thread_to_other_tasks() {
    let store = Arc::new(HeldStore::new());
    let journal = journal_with(store.clone(), ids());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let waiting = {
            let journal = journal.clone();
            tokio::spawn(async move {
                journal.begin_run_async(&SessionId::new("held").unwrap(), new_turn()).await
            })
        };
        // The spawned task runs up to its append and waits there; this task, on the same (only)
        // thread, goes on.
        while store.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        assert_eq!(
            store.tail(&SessionId::new("held").unwrap()).unwrap(),
            Seq(0),
            "nothing landed yet"
        );
        store.release();
        let run = waiting.await.unwrap().unwrap();
        assert_eq!(run.status(), RunStatus::Open);
        assert_eq!(run.tail(), Seq(2), "run_started and the message landed");
    });
}

#[test]
fn the_async_writer_runs_on_another_executor_with_appends_completed_from_another_thread() {
    let store = Arc::new(HeldStore::new());
    let journal = journal_with(store.clone(), ids());
    let releaser = {
        let store = store.clone();
        std::thread::spawn(move || {
            // Completes every append the writer makes, from this thread, until the run ended.
            let s = SessionId::new("elsewhere").unwrap();
            loop {
                store.release();
                let ended = store
                    .inner
                    .read_all(&s)
                    .unwrap()
                    .last()
                    .is_some_and(|r| r.event.kind() == EventKind::RunEnded);
                if ended {
                    return;
                }
                std::thread::yield_now();
            }
        })
    };
    futures_executor::block_on(one_step(&journal, &SessionId::new("elsewhere").unwrap())).unwrap();
    releaser.join().unwrap();
    assert_eq!(kinds(&store.inner, &SessionId::new("elsewhere").unwrap()).len(), 9);
}

#[test]
fn the_sync_api_waits_on_the_same_path_and_nests_inside_an_executor() {
    let (journal, store) = memory_journal();
    // A tool handler driven by an executor may call the sync API: it waits in place.
    futures_executor::block_on(async {
        let run = journal.begin_run(&session(), new_turn()).unwrap();
        let step = run.commit_reply(Reply::new("").call(call("c1", "search"))).unwrap();
        let body = step.start_body_async(&id("c1")).await.unwrap();
        body.finish(json("1"), false).unwrap();
        step.commit().unwrap();
        run.end(RunOutcome::Completed).unwrap();
    });
    assert_eq!(kinds(&*store, &session()).len(), 8);
}
