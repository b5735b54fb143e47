//! Snapshots through the writer: written by policy and on demand at committed step
//! boundaries, each the fold of the log before it; an entry reads from the newest one and plans
//! as over the whole log; a run's view stays bounded; damaged or insufficient snapshots fall
//! back to the whole log.

mod writer_support;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use stepjournal::recovery::{TranscriptItem, verify};
use stepjournal::{Journal, JournalOptions, Reply, Run};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, Durability, JournalStore, StoreError, StoreFuture,
};
use stepjournal_codec::{
    CheckpointId, Entry, Event, EventKind, Record, ResumeMode, Seq, SessionId, Stamped,
};
use writer_support::*;

/// A store that counts the records its reads return.
struct Counting {
    inner: MemoryStore,
    read: AtomicU64,
}

impl Counting {
    fn new() -> Arc<Self> {
        Arc::new(Counting { inner: MemoryStore::new(), read: AtomicU64::new(0) })
    }

    fn take(&self) -> u64 {
        self.read.swap(0, Ordering::SeqCst)
    }

    fn counted(&self, records: Result<Vec<Record>, StoreError>) -> Result<Vec<Record>, StoreError> {
        if let Ok(r) = &records {
            self.read.fetch_add(r.len() as u64, Ordering::SeqCst);
        }
        records
    }
}

impl JournalStore for Counting {
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
        self.counted(self.inner.read(session, range))
    }
    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.counted(self.inner.read_from_snapshot(session))
    }
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        StoreFuture::ready(self.read_from_snapshot(session))
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
    fn max_durability(&self) -> Durability {
        self.inner.max_durability()
    }
}

fn journal(store: Arc<dyn JournalStore>, every: u32) -> Journal {
    let options = JournalOptions::new().ids(ids()).snapshot_every(every).snapshot_after_bytes(0);
    Journal::new(store, Arc::new(registry()), options).unwrap()
}

/// `steps` steps of one safe call each, every one answered and committed.
fn grow(run: &Run, steps: usize) {
    for i in 0..steps {
        let c = format!("c{i}");
        let step =
            run.commit_reply(Reply::new(format!("step {i}")).call(call(&c, "search"))).unwrap();
        step.start_body(&id(&c)).unwrap().finish(json(&format!("{{\"n\":{i}}}")), false).unwrap();
        step.commit().unwrap();
    }
}

fn snapshot_seqs(store: &dyn JournalStore, session: &SessionId) -> Vec<u64> {
    store
        .read_all(session)
        .unwrap()
        .iter()
        .filter(|r| r.event.kind() == EventKind::Snapshot)
        .map(|r| r.seq.get())
        .collect()
}

#[test]
fn the_policy_writes_a_snapshot_every_n_steps_each_the_fold_of_the_log_before_it() {
    let store = Arc::new(MemoryStore::new());
    let journal = journal(store.clone(), 10);
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    grow(&run, 35);
    let seqs = snapshot_seqs(&*store, &session());
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    let seqs_shown = seqs.clone();
    // Ten steps of five events each, and the snapshot, between two snapshots.
    assert!(seqs.windows(2).all(|w| w[1] - w[0] == 51), "{seqs:?}");
    let events = events(&*store, &session());
    assert_eq!(verify(&events), vec![], "every snapshot is the fold of the log before it");
    for seq in seqs_shown.iter().copied() {
        let before = events[seq as usize - 1].kind();
        assert_eq!(before, EventKind::StepCommit, "a snapshot follows its step's commit");
    }
    // The run's own view was folded from its newest snapshot: it holds the steps since.
    let replies = run.with_state(|s| {
        s.replies().iter().map(|r| (r.seq.get(), r.step.get())).collect::<Vec<_>>()
    });
    assert!(replies.len() <= 6, "the run keeps {replies:?} replies; snapshots at {seqs_shown:?}");
    run.end(stepjournal_codec::RunOutcome::Completed).unwrap();
}

#[test]
fn a_few_steps_of_large_outputs_make_a_snapshot_before_the_step_count_does() {
    let store = Arc::new(MemoryStore::new());
    let options =
        JournalOptions::new().ids(ids()).snapshot_every(1000).snapshot_after_bytes(10_000);
    let journal = Journal::new(store.clone(), Arc::new(registry()), options).unwrap();
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let big = json(&format!("\"{}\"", "x".repeat(4_000)));
    for i in 0..7 {
        let c = format!("c{i}");
        let step = run.commit_reply(Reply::new("").call(call(&c, "search"))).unwrap();
        step.start_body(&id(&c)).unwrap().finish(big.clone(), false).unwrap();
        step.commit().unwrap();
    }
    // 4,000 bytes a step: the third commit passes 10,000 (and the sixth, counted from the
    // snapshot the third wrote).
    let events = events(&*store, &session());
    let commits_before: Vec<usize> = snapshot_seqs(&*store, &session())
        .iter()
        .map(|&seq| {
            events[..seq as usize].iter().filter(|e| e.kind() == EventKind::StepCommit).count()
        })
        .collect();
    assert_eq!(commits_before, vec![3, 6]);
    assert_eq!(verify(&events), vec![]);
}

#[test]
fn an_entry_reads_from_the_newest_snapshot_and_plans_as_over_the_whole_log() {
    let store = Counting::new();
    let writer = journal(store.clone(), 8);
    let run = writer.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    grow(&run, 40);
    // A crash inside step 41: its safe call's body started and never finished.
    let step = run.commit_reply(Reply::new("last").call(call("z", "search"))).unwrap();
    let _body = step.start_body(&id("z")).unwrap();
    drop(step);
    drop(run);
    let tail = store.tail(&session()).unwrap().get();
    let newest = *snapshot_seqs(&*store, &session()).last().unwrap();
    store.take();
    let again = journal(separate(store.clone()), 8);
    let woken = again.begin_run(&session(), Entry::Wake).unwrap();
    let read = store.take();
    assert!(
        read <= tail - newest,
        "read {read} records; the suffix from the snapshot holds {}",
        tail - newest
    );
    // The same plan as a fold of the whole log would give.
    let records = store.inner.read_all(&session()).unwrap();
    let whole: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    let before_wake: Vec<Event> = whole[..tail as usize].to_vec();
    let state = stepjournal::recovery::fold(&before_wake);
    let planned = stepjournal::recovery::plan(
        &state,
        &stepjournal::recovery::NewRun {
            run: woken.id().clone(),
            entry: Entry::Wake,
            commit_checkpoint: CheckpointId::new("unused"),
        },
        &registry(),
        &stepjournal::recovery::Config::default(),
    );
    assert_eq!(woken.plan(), &planned);
    assert!(matches!(
        woken.plan().call(&id("z")).unwrap().action,
        stepjournal::recovery::Action::Run { .. }
    ));
}

#[test]
fn an_entry_naming_a_checkpoint_before_the_snapshot_reads_the_whole_log_to_refuse_it_exactly() {
    let store = Counting::new();
    let writer = journal(store.clone(), 4);
    let run = writer.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    grow(&run, 9);
    run.end(stepjournal_codec::RunOutcome::Completed).unwrap();
    let records = store.inner.read_all(&session()).unwrap();
    let first_reply = records
        .iter()
        .find_map(|r| match &r.event {
            Event::ReplyCommitted(reply) => Some(reply.checkpoint.clone()),
            _ => None,
        })
        .unwrap();
    store.take();
    let entry = Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: first_reply.clone() });
    let err = writer.begin_run(&session(), entry).unwrap_err().to_string();
    assert!(err.contains("cannot be entered"), "an old checkpoint, not an unknown one: {err}");
    assert!(store.take() >= records.len() as u64, "the whole log was read");
    let entry = Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: CheckpointId::new("no") });
    let err = writer.begin_run(&session(), entry).unwrap_err().to_string();
    assert!(err.contains("is not named by any"), "{err}");
}

#[test]
fn a_damaged_snapshot_falls_back_to_the_whole_log() {
    let store = Arc::new(MemoryStore::new());
    let writer = journal(store.clone(), 0);
    let run = writer.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    grow(&run, 3);
    run.end(stepjournal_codec::RunOutcome::Failed).unwrap();
    // A snapshot that stands for the wrong number of events and leaves the failure out.
    let tail = store.tail(&session()).unwrap();
    let mut snapshot = {
        let events = events(&*store, &session());
        stepjournal::recovery::fold(&events).snapshot().unwrap()
    };
    snapshot.len += 7;
    snapshot.run_end = None;
    let at = Stamped::at(T0, Event::from(snapshot));
    store.append(&session(), tail, &[at], Durability::Synced).unwrap();
    // `retry` reads the failure the damaged snapshot dropped: from the whole log.
    let retried = writer.begin_run(&session(), Entry::Retry { checkpoint: None, message: None });
    assert!(retried.is_ok(), "{retried:?}");
}

#[test]
fn a_run_snapshots_on_demand_only_between_steps_and_tells_what_is_new() {
    let store = Arc::new(MemoryStore::new());
    let writer = journal(store.clone(), 0);
    let run = writer.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    grow(&run, 2);
    let seen = run.tail();
    let step = run.commit_reply(Reply::new("third").call(call("c9", "search"))).unwrap();
    let refused = run.snapshot().unwrap_err();
    assert!(refused.to_string().contains("step"), "{refused}");
    step.start_body(&id("c9")).unwrap().finish(json("1"), false).unwrap();
    step.commit().unwrap();
    let at = run.snapshot().unwrap().unwrap();
    assert_eq!(snapshot_seqs(&*store, &session()), vec![at.get()]);
    assert_eq!(verify(&events(&*store, &session())), vec![]);
    assert_eq!(run.with_state(|s| s.replies().len()), 1, "the run's view starts at it");
    // The transcript still shows everything, read from the store; `since` only what is new.
    let all = run.transcript().unwrap();
    let new = run.transcript_since(seen).unwrap();
    assert!(all.len() > new.len());
    assert!(matches!(&new[0], TranscriptItem::Reply { text, .. } if text == "third"), "{new:?}");
    assert!(new.iter().all(|i| i.seq() >= seen));
}
