//! Output committed by `drive` once its interval has passed, beside the handler's own commits.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::backends::{
    AppendAck, AppendError, AppendFuture, Durability, JournalStore, StoreError, StoreFuture,
    StoreIdentity,
};
use stepjournal::codec::{Entry, Event, Record, Replay, Seq, SessionId, Stamped, UnixMillis};
use stepjournal::writer::Clock;
use stepjournal::{CallCtx, Journal, JournalOptions, StepOutcome, ToolError, Tools};

/// A clock the test moves by hand: whether output is due is decided by it, apart from the real
/// time the executor's timer waits.
#[derive(Debug, Default)]
struct HandClock(AtomicU64);

impl Clock for HandClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.0.load(Ordering::SeqCst))
    }
}

/// A memory store whose output chunks land 300 ms after they are handed over, completed from a
/// thread of their own: the handler that commits one is suspended that long.
#[derive(Debug)]
struct SlowChunks(Arc<MemoryStore>);

impl JournalStore for SlowChunks {
    fn identity(&self) -> StoreIdentity {
        self.0.identity()
    }
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
    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        if !events.iter().any(|e| matches!(e.event, Event::OutputChunk(_))) {
            return self.0.append_async(session, expected, events, durability);
        }
        let (future, completer) = StoreFuture::pending_or(Err(AppendError::EmptyBatch));
        let (store, session, events) = (self.0.clone(), session.clone(), events.to_vec());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            completer.complete(store.append(&session, expected, &events, durability));
        });
        future
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

#[test]
fn the_flusher_never_waits_on_output_the_handler_is_committing() {
    // The handler leaves "a" pending, so drive arms its timer; then the journal's clock passes
    // the interval and the handler's next output commits "ab" itself, suspended in a slow
    // append while holding the output. The timer fires meanwhile: had the flusher waited for
    // the output, it would have waited on a handler the executor no longer polled, for ever.
    let clock = Arc::new(HandClock(AtomicU64::new(1_000)));
    let moved = clock.clone();
    let tools = Tools::new().tool(
        "chatty",
        json!({}),
        Replay::Safe,
        move |_: serde_json::Value, ctx: CallCtx| {
            let clock = moved.clone();
            async move {
                ctx.output("a").await.map_err(ToolError::new)?;
                // drive sees "a" pending and arms its timer for the rest of the interval.
                tokio::time::sleep(Duration::from_millis(20)).await;
                clock.0.store(2_000, Ordering::SeqCst);
                ctx.output("b").await.map_err(ToolError::new)?;
                Ok::<_, ToolError>(json!("done"))
            }
        },
    );
    let memory = Arc::new(MemoryStore::new());
    let store: Arc<dyn JournalStore> = Arc::new(SlowChunks(memory.clone()));
    let journal =
        Journal::new(store, Arc::new(tools.clone()), JournalOptions::new().clock(clock)).unwrap();
    let session = SessionId::new("s").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let outcome = runtime.block_on(async {
        let run = journal
            .begin_run_async(&session, Entry::NewTurn { message: "go".into() })
            .await
            .unwrap();
        let call = tools.call("c1", "chatty", json!({})).unwrap();
        let step = run.commit_reply_async(tools.reply("", [call]).unwrap()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), step.drive(&tools)).await
    });
    let outcome = outcome.expect("drive finished: the flusher did not wait on the handler");
    assert!(matches!(outcome, Ok(StepOutcome::Committed { .. })), "{outcome:?}");
    let chunks: Vec<String> = memory
        .read_all(&session)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::OutputChunk(c) => Some(c.text),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, ["ab"]);
}
