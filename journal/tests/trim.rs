//! Trims through the journal: a session trimmed on the memory, SQLite and file stores beside
//! an identical one left whole (the same ids, the same clock) plans every entry as the whole
//! one does, before and after a crash; its transcript says how many turns it dropped and shows
//! the rest as they were; an entry naming a checkpoint trimmed away is refused; a live run is
//! never trimmed under.

mod writer_support;

use std::sync::Arc;

use stepjournal::recovery::TranscriptItem;
use stepjournal::writer::FixedClock;
use stepjournal::{Journal, JournalOptions, Reply, Run, Trim, TrimError};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::sqlite::SqliteStore;
use stepjournal_codec::{CheckpointId, Entry, Event, RunOutcome, Seq};
use writer_support::*;

fn journal(store: Arc<dyn JournalStore>) -> Journal {
    let options = JournalOptions::new()
        .ids(ids())
        .clock(Arc::new(FixedClock::new(T0)))
        .snapshot_every(2)
        .snapshot_after_bytes(0);
    // Each journal a process of its own (the store's identity apart): a test makes the next
    // while the runs it forgot still hold the last one's claim.
    Journal::new(separate(store), Arc::new(registry()), options).unwrap()
}

/// `steps` steps of one safe call each, answered and committed.
fn grow(run: &Run, turn: usize, steps: usize) {
    for i in 0..steps {
        let c = format!("t{turn}c{i}");
        let step =
            run.commit_reply(Reply::new(format!("step {i}")).call(call(&c, "search"))).unwrap();
        step.start_body(&id(&c)).unwrap().finish(json(&format!("{{\"n\":{i}}}")), false).unwrap();
        step.commit().unwrap();
    }
}

/// Five turns of three steps each, every run ended.
fn turns(journal: &Journal) {
    for turn in 0..5 {
        let message = format!("turn {turn}");
        let run = journal.begin_run(&session(), Entry::NewTurn { message }).unwrap();
        grow(&run, turn, 3);
        run.end(RunOutcome::Completed).unwrap();
    }
}

/// A turn whose process dies while a safe and an unsafe body run.
fn crash(journal: &Journal) {
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "crash".into() }).unwrap();
    let step = run
        .commit_reply(
            Reply::new("both").call(call("safe", "search")).call(call("risky", "send_email")),
        )
        .unwrap();
    let a = step.start_body(&id("safe")).unwrap();
    let b = step.start_body(&id("risky")).unwrap();
    std::mem::forget((a, b, step, run));
}

/// The first step commit's checkpoint of the session.
fn first_commit(store: &dyn JournalStore) -> CheckpointId {
    let whole = store.read_all(&session()).unwrap();
    whole
        .iter()
        .find_map(|r| match &r.event {
            Event::StepCommit(c) => Some(c.checkpoint.clone()),
            _ => None,
        })
        .unwrap()
}

fn check_backend(trimmed: Arc<dyn JournalStore>) {
    let whole: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let old = {
        let (a, b) = (journal(trimmed.clone()), journal(whole.clone()));
        turns(&a);
        turns(&b);
        assert_eq!(trimmed.read_all(&session()).unwrap(), whole.read_all(&session()).unwrap());
        let old = first_commit(&*whole);
        let Trim::Trimmed { before, from, turns, .. } = a.trim(&session(), 2).unwrap() else {
            panic!("the session holds snapshots to trim at")
        };
        assert_eq!((from, turns), (Seq(0), 3), "three turns dropped, two kept whole");
        let kept = trimmed.read_all(&session()).unwrap();
        assert!(kept[0].seq <= before && before.get() - kept[0].seq.get() < 3, "{before}");
        assert!(matches!(
            &kept.iter().find(|r| r.seq == before).unwrap().event,
            Event::Snapshot(_)
        ));
        // The transcript: what was dropped, said first; the rest as it was.
        let shown = a.transcript(&session()).unwrap();
        let TranscriptItem::Trimmed { turns: 3, .. } = shown[0] else { panic!("{:?}", shown[0]) };
        let full = b.transcript(&session()).unwrap();
        let rest: Vec<_> = full.into_iter().filter(|i| i.seq() > before).collect();
        assert_eq!(&shown[1..], &rest[..]);
        // Nothing more to drop while the same turns are to be kept.
        assert!(matches!(a.trim(&session(), 2).unwrap(), Trim::Nothing { .. }));
        // A live run is never trimmed under.
        let live = a.begin_run(&session(), Entry::Wake).unwrap();
        assert!(matches!(a.trim(&session(), 0), Err(TrimError::Running { .. })));
        live.end(RunOutcome::Completed).unwrap();
        let live = b.begin_run(&session(), Entry::Wake).unwrap();
        live.end(RunOutcome::Completed).unwrap();
        crash(&a);
        crash(&b);
        old
    };
    // After the crash: the trimmed session plans the wake as the whole one does.
    let (a, b) = (journal(trimmed.clone()), journal(whole.clone()));
    let wake_a = a.begin_run(&session(), Entry::Wake).unwrap();
    let wake_b = b.begin_run(&session(), Entry::Wake).unwrap();
    assert_eq!(wake_a.plan(), wake_b.plan());
    let rules: Vec<&str> = wake_a.plan().calls.iter().map(|c| c.rule.id).collect();
    assert!(
        rules.contains(&"recovery.safe_replay") && rules.contains(&"recovery.outcome_unknown"),
        "{rules:?}"
    );
    // Both die again, the recovered step open.
    std::mem::forget((wake_a, wake_b));
    // Stopped, then retried from an old checkpoint: refused on both (only the last commit can
    // be entered), the trimmed one saying it does not know it.
    a.begin_run(&session(), Entry::Stop).unwrap();
    b.begin_run(&session(), Entry::Stop).unwrap();
    let retry = Entry::Retry { checkpoint: Some(old), message: Some("again".into()) };
    let refused = a.begin_run(&session(), retry.clone()).unwrap_err();
    assert!(refused.to_string().contains("checkpoint"), "{refused}");
    assert!(b.begin_run(&session(), retry).is_err());
    println!("trimmed: {refused}");
    // The forgotten runs hold the store: close it (the file store's lock let go).
    trimmed.close().unwrap();
}

#[test]
fn a_trimmed_session_on_memory_plans_as_the_whole_one() {
    check_backend(Arc::new(MemoryStore::new()));
}

#[test]
fn a_trimmed_session_on_sqlite_plans_as_the_whole_one() {
    let dir = tempfile::tempdir().unwrap();
    check_backend(Arc::new(
        SqliteStore::open(dir.path().join("j.db"), Default::default()).unwrap(),
    ));
}

#[test]
fn a_trimmed_session_on_the_file_store_plans_as_the_whole_one_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn JournalStore> {
        Arc::new(FileStore::open(dir.path(), FileOptions::new()).unwrap())
    };
    check_backend(open());
    // Reopened: the log starts where the trim left it, and still folds.
    let store = open();
    let records = store.read_all(&session()).unwrap();
    assert!(records[0].seq > Seq(0));
    let j = journal(store);
    let shown = j.transcript(&session()).unwrap();
    assert!(matches!(shown[0], TranscriptItem::Trimmed { turns: 3, .. }), "{:?}", shown[0]);
}

#[test]
fn the_policy_trims_after_each_run_and_keeps_a_long_session_bounded() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let options = JournalOptions::new()
        .ids(ids())
        .clock(Arc::new(FixedClock::new(T0)))
        .snapshot_every(2)
        .snapshot_after_bytes(0)
        .trim_after_runs(1);
    let journal = Journal::new(store.clone(), Arc::new(registry()), options).unwrap();
    let mut kept = Vec::new();
    for turn in 0..20 {
        let message = format!("turn {turn}");
        let run = journal.begin_run(&session(), Entry::NewTurn { message }).unwrap();
        grow(&run, turn, 3);
        run.end(RunOutcome::Completed).unwrap();
        kept.push(store.read_all(&session()).unwrap().len());
    }
    let tail = store.tail(&session()).unwrap().get();
    // Each turn is 3 steps of 5 events, a snapshot every second step, its run's start, message
    // and end: the log kept stays within a few turns however many there were.
    assert!(tail > 300, "{tail}");
    assert!(kept.iter().skip(3).all(|n| *n < 80), "{kept:?}");
    let shown = journal.transcript(&session()).unwrap();
    let TranscriptItem::Trimmed { turns, .. } = shown[0] else { panic!("{:?}", shown[0]) };
    assert!(turns >= 17, "{turns}");
    // The last turn is whole.
    assert!(
        shown
            .iter()
            .any(|i| matches!(i, TranscriptItem::Message { text, .. } if text == "turn 19"))
    );
}

/// A memory store that, once armed, appends one event of another actor right after the next
/// whole-log read: the race between a trim's read and its append.
struct Racing {
    inner: MemoryStore,
    armed: std::sync::atomic::AtomicBool,
}

impl JournalStore for Racing {
    fn append(
        &self,
        session: &stepjournal_codec::SessionId,
        expected: Seq,
        events: &[stepjournal_codec::Stamped],
        durability: stepjournal_backends::Durability,
    ) -> Result<stepjournal_backends::AppendAck, stepjournal_backends::AppendError> {
        self.inner.append(session, expected, events, durability)
    }
    fn read(
        &self,
        session: &stepjournal_codec::SessionId,
        range: std::ops::Range<Seq>,
    ) -> Result<Vec<stepjournal_codec::Record>, stepjournal_backends::StoreError> {
        let read = self.inner.read(session, range.clone());
        if range.start == Seq(0) && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            let tail = self.inner.tail(session)?;
            let answer = stepjournal_codec::Message {
                role: stepjournal_codec::Role::User,
                text: "written by another actor meanwhile".into(),
            };
            let event = stepjournal_codec::Stamped::at(T0, Event::Message(answer));
            self.inner
                .append(session, tail, &[event], stepjournal_backends::Durability::Synced)
                .unwrap();
        }
        read
    }
    fn tail(
        &self,
        session: &stepjournal_codec::SessionId,
    ) -> Result<Seq, stepjournal_backends::StoreError> {
        self.inner.tail(session)
    }
    fn sessions(
        &self,
    ) -> Result<Vec<stepjournal_codec::SessionId>, stepjournal_backends::StoreError> {
        self.inner.sessions()
    }
    fn delete(
        &self,
        session: &stepjournal_codec::SessionId,
    ) -> Result<bool, stepjournal_backends::StoreError> {
        self.inner.delete(session)
    }
    fn head(
        &self,
        session: &stepjournal_codec::SessionId,
    ) -> Result<Option<stepjournal_backends::SessionHead>, stepjournal_backends::StoreError> {
        self.inner.head(session)
    }
    fn max_durability(&self) -> stepjournal_backends::Durability {
        self.inner.max_durability()
    }
}

#[test]
fn a_trim_that_another_actor_writes_under_is_decided_by_the_store_and_writes_nothing() {
    let store = Arc::new(Racing { inner: MemoryStore::new(), armed: false.into() });
    let j = journal(store.clone());
    turns(&j);
    let before = store.read_all(&session()).unwrap();
    store.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = j.trim(&session(), 2).unwrap_err();
    assert!(matches!(e, TrimError::Changed { .. }), "{e}");
    let after = store.read_all(&session()).unwrap();
    assert_eq!(after.len(), before.len() + 1, "only the other actor's event landed");
    assert_eq!(&after[..before.len()], &before[..]);
    // Tried again, it trims.
    assert!(matches!(j.trim(&session(), 2).unwrap(), Trim::Trimmed { .. }));
}

#[test]
fn a_long_run_trims_itself_and_a_crash_after_it_is_found_and_recovered_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn JournalStore> {
        Arc::new(FileStore::open(dir.path(), FileOptions::new()).unwrap())
    };
    let whole: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    {
        let store = open();
        let (a, b) = (journal(store.clone()), journal(whole.clone()));
        let message = || Entry::NewTurn { message: "one long turn".into() };
        let (run_a, run_b) = (
            a.begin_run(&session(), message()).unwrap(),
            b.begin_run(&session(), message()).unwrap(),
        );
        grow(&run_a, 0, 12);
        grow(&run_b, 0, 12);
        // One turn, never ended: only a trim keeping no turn whole drops anything.
        assert!(matches!(run_a.trim(1).unwrap(), Trim::Nothing { .. }));
        let Trim::Trimmed { before, .. } = run_a.trim(0).unwrap() else { panic!("a trim") };
        assert!(before > Seq(0));
        // The run goes on after its own trim: it was not fenced.
        let step = run_a.commit_reply(Reply::new("more").call(call("x1", "send_email"))).unwrap();
        std::mem::forget(step.start_body(&id("x1")).unwrap());
        let step = run_b.commit_reply(Reply::new("more").call(call("x1", "send_email"))).unwrap();
        std::mem::forget(step.start_body(&id("x1")).unwrap());
        std::mem::forget((run_a, run_b));
        store.close().unwrap();
    }
    // Reopened: the run began in what was dropped, so the head is unknown and start-up folds
    // the session, finds the crashed run, and the wake plans as on the whole log.
    let store = open();
    let a = journal(store.clone());
    assert_eq!(a.sessions_to_recover().unwrap(), vec![session()]);
    let b = journal(whole);
    let wake_a = a.begin_run(&session(), Entry::Wake).unwrap();
    let wake_b = b.begin_run(&session(), Entry::Wake).unwrap();
    assert_eq!(wake_a.plan(), wake_b.plan());
    let rules: Vec<&str> = wake_a.plan().calls.iter().map(|c| c.rule.id).collect();
    assert_eq!(rules, ["recovery.outcome_unknown"]);
}

#[test]
fn a_trim_that_lands_beside_a_live_run_is_folded_by_it_and_never_fences_it() {
    // An operator's trim decided on a head read just before a run began (the store's
    // compare-and-set lets it land at the tail it read): the run's next append finds it,
    // folds it as another writer's event, and goes on.
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let whole: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let (a, b) = (journal(store.clone()), journal(whole.clone()));
    turns(&a);
    turns(&b);
    let records = store.read_all(&session()).unwrap();
    let (before, turns_dropped) = stepjournal::recovery::trim_point(&records, 2).unwrap();
    let message = || Entry::NewTurn { message: "after".into() };
    let (run_a, run_b) =
        (a.begin_run(&session(), message()).unwrap(), b.begin_run(&session(), message()).unwrap());
    let tail = store.tail(&session()).unwrap();
    let trimmed = Event::Trimmed(stepjournal_codec::Trimmed { before, turns: turns_dropped });
    store
        .append(
            &session(),
            tail,
            &[stepjournal_codec::Stamped::at(T0, trimmed)],
            stepjournal_backends::Durability::Synced,
        )
        .unwrap();
    grow(&run_a, 9, 2);
    grow(&run_b, 9, 2);
    assert_eq!(run_a.status(), run_b.status(), "the run was not fenced");
    let step_a = run_a.commit_reply(Reply::new("last").call(call("z", "send_email"))).unwrap();
    let step_b = run_b.commit_reply(Reply::new("last").call(call("z", "send_email"))).unwrap();
    std::mem::forget((step_a.start_body(&id("z")).unwrap(), step_b.start_body(&id("z")).unwrap()));
    std::mem::forget((step_a, step_b, run_a, run_b));
    let (a, b) = (journal(store.clone()), journal(whole));
    let (wake_a, wake_b) = (
        a.begin_run(&session(), Entry::Wake).unwrap(),
        b.begin_run(&session(), Entry::Wake).unwrap(),
    );
    assert_eq!(wake_a.plan().calls, wake_b.plan().calls);
    assert!(store.read_all(&session()).unwrap()[0].seq > Seq(0), "the trim held");
}
