//! Ownership, start-up and shutdown: leases taken, renewed, lost and released; the sessions to
//! recover; `recover_all`; a graceful shutdown.

mod drive_support;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drive_support::*;
use serde_json::json;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::backends::{
    AppendAck, AppendError, Durability, JournalStore, Lease, LeaseTaken, OwnerId, RunHead,
    RunState, SessionHead, StoreError,
};
use stepjournal::codec::{
    CallId, Entry, Record, RunId, RunOutcome, Seq, SessionId, Stamped, UnixMillis,
};
use stepjournal::writer::FixedClock;
use stepjournal::{BeginError, Interruption, RunStatus};
use stepjournal::{Journal, JournalOptions, RecoverOptions, StepOutcome};

/// What the store does once it has read the heads (another host acting in between).
type AfterHeads = Box<dyn FnOnce(&LeasingStore) + Send>;

/// A memory store that keeps leases, by a clock the test moves, as a shared SQL store would.
struct LeasingStore {
    inner: MemoryStore,
    leases: Mutex<HashMap<SessionId, Lease>>,
    now: AtomicU64,
    /// Report every head as `Unknown` (an older journal's store).
    unknown_heads: bool,
    /// Renewals do not reach the store (their host is cut off): nothing is renewed, nothing
    /// reported lost.
    cut_off: AtomicBool,
    /// Run once, after the next `heads()`.
    after_heads: Mutex<Option<AfterHeads>>,
}

impl LeasingStore {
    fn new() -> Self {
        LeasingStore {
            inner: MemoryStore::new(),
            leases: Mutex::new(HashMap::new()),
            now: AtomicU64::new(1_000),
            unknown_heads: false,
            cut_off: AtomicBool::new(false),
            after_heads: Mutex::new(None),
        }
    }

    fn now(&self) -> UnixMillis {
        UnixMillis(self.now.load(Ordering::SeqCst))
    }

    fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    fn lease(&self, session: &SessionId) -> Option<Lease> {
        self.leases.lock().unwrap().get(session).cloned()
    }

    /// Another owner takes the session's lease over.
    fn steal(&self, session: &SessionId, owner: &str) {
        let lease = Lease {
            owner: OwnerId::new(owner),
            run: RunId::new("their-run"),
            expires: UnixMillis(self.now().get() + 60_000),
        };
        self.leases.lock().unwrap().insert(session.clone(), lease);
    }

    fn expires(&self, ttl: Duration) -> UnixMillis {
        UnixMillis(self.now().get() + ttl.as_millis() as u64)
    }
}

impl JournalStore for LeasingStore {
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
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let mut heads = Vec::new();
        for session in self.sessions()? {
            heads.extend(self.head(&session)?);
        }
        if let Some(then) = self.after_heads.lock().unwrap().take() {
            then(self);
        }
        Ok(heads)
    }
    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        let records = self.inner.read_all(session)?;
        let Some(last) = records.last() else { return Ok(None) };
        let mut run = RunHead::default();
        for r in &records {
            run.advance(&r.event);
        }
        let (state, answered) = if self.unknown_heads {
            (RunState::Unknown, false)
        } else {
            (run.run, run.answered_while_suspended)
        };
        Ok(Some(SessionHead {
            session: session.clone(),
            tail: last.seq.next(),
            last_at: last.at,
            run: state,
            answered_while_suspended: answered,
            lease: self.lease(session),
            read_at: Some(self.now()),
        }))
    }
    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        let mut leases = self.leases.lock().unwrap();
        let held = leases.get(session).filter(|l| l.expires > self.now() && &l.owner != owner);
        if let Some(held) = held.cloned()
            && !force
        {
            return Ok(LeaseTaken::HeldBy(held));
        }
        let took_over =
            leases.get(session).filter(|l| l.expires > self.now() && &l.owner != owner).cloned();
        let expires = self.expires(ttl);
        leases.insert(session.clone(), Lease { owner: owner.clone(), run: run.clone(), expires });
        Ok(LeaseTaken::Taken { expires, took_over })
    }
    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        if self.cut_off.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        let mut leases = self.leases.lock().unwrap();
        let mut lost = Vec::new();
        for (session, run) in runs {
            match leases.get_mut(session) {
                Some(l) if &l.owner == owner && &l.run == run => l.expires = self.expires(ttl),
                _ => lost.push(session.clone()),
            }
        }
        Ok(lost)
    }
    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        let mut leases = self.leases.lock().unwrap();
        if leases.get(session).is_some_and(|l| &l.owner == owner && &l.run == run) {
            leases.remove(session);
        }
        Ok(())
    }
}

fn new_turn() -> Entry {
    Entry::NewTurn { message: "hello".into() }
}

fn session(n: &str) -> SessionId {
    SessionId::new(n).unwrap()
}

/// A journal over `store`, owned by `owner`, its clock reading `at`.
fn owned(store: Arc<dyn JournalStore>, owner: &str, at: u64) -> Journal {
    let options = JournalOptions::new()
        .ids(Arc::new(stepjournal::writer::SequentialIds::with_prefix(owner)))
        .owner(OwnerId::new(owner))
        .lease_ttl(Duration::from_secs(30))
        .clock(Arc::new(FixedClock::new(UnixMillis(at))));
    Journal::new(separate(store), Arc::new(tools(&Ledger::default())), options).unwrap()
}

#[test]
fn begin_run_takes_the_session_s_lease_forcing_a_live_one_and_counts_the_take_over() {
    let store = Arc::new(LeasingStore::new());
    store.steal(&session("s"), "host-b");
    let journal = owned(store.clone(), "host-a", 1_000);
    let run = journal.begin_run(&session("s"), new_turn()).unwrap();
    let lease = store.lease(&session("s")).unwrap();
    assert_eq!((lease.owner.as_str(), &lease.run), ("host-a", run.id()));
    assert_eq!(journal.metrics().leases_taken_over, 1);
    assert_eq!(journal.metrics().runs_begun, 1);
}

#[test]
fn the_keeper_s_round_renews_leases_and_a_lease_taken_over_fires_the_run_s_signal() {
    let store = Arc::new(LeasingStore::new());
    let journal = owned(store.clone(), "host-a", 1_000);
    let kept = journal.begin_run(&session("kept"), new_turn()).unwrap();
    let taken = journal.begin_run(&session("taken"), new_turn()).unwrap();
    let before = store.lease(&session("kept")).unwrap().expires;
    store.advance(5_000);
    store.steal(&session("taken"), "host-b");
    journal.keep_leases().unwrap();
    assert!(store.lease(&session("kept")).unwrap().expires > before, "renewed");
    assert!(!kept.signal().is_cancelled());
    assert!(taken.signal().is_cancelled(), "the run whose lease was lost is told to stop");
    assert_eq!(journal.metrics().leases_lost, 1);
}

#[test]
fn a_run_s_lease_is_released_once_it_ends() {
    let store = Arc::new(LeasingStore::new());
    let journal = owned(store.clone(), "host-a", 1_000);
    let run = journal.begin_run(&session("s"), new_turn()).unwrap();
    assert!(store.lease(&session("s")).is_some());
    run.end(RunOutcome::Completed).unwrap();
    journal.keep_leases().unwrap();
    assert_eq!(store.lease(&session("s")), None);
}

#[test]
fn a_stop_in_this_journal_fires_the_signal_of_the_run_it_stops() {
    let store = Arc::new(MemoryStore::new());
    let journal = owned(store, "host-a", 1_000);
    let run = journal.begin_run(&session("s"), new_turn()).unwrap();
    assert!(!run.signal().is_cancelled());
    journal.stop(&session("s")).unwrap();
    assert!(run.signal().is_cancelled());
    // A newer run of the session fences an older one live here just the same.
    let second = journal.begin_run(&session("s"), new_turn()).unwrap();
    let third = journal.begin_run(&session("s"), new_turn()).unwrap();
    assert!(second.signal().is_cancelled() && !third.signal().is_cancelled());
}

/// Sessions in every state on `store`, written by `journal`: `done` completed, `crashed` (an
/// open run whose handles are gone), `live` (an open run held), `waiting` suspended with no
/// answer, `answered` suspended with its answer landed.
fn every_state(journal: &Journal, tools: &stepjournal::Tools) -> stepjournal::Run {
    let run = journal.begin_run(&session("done"), new_turn()).unwrap();
    run.end(RunOutcome::Completed).unwrap();
    drop(journal.begin_run(&session("crashed"), new_turn()).unwrap());
    let live = journal.begin_run(&session("live"), new_turn()).unwrap();
    for name in ["waiting", "answered"] {
        let run = journal.begin_run(&session(name), new_turn()).unwrap();
        let call = tools.call("c1", "ask_user", json!({})).unwrap();
        let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
        step.suspend(&[CallId::from("c1")]).unwrap();
    }
    // The answer lands from outside any run (another process's handler).
    let store = journal.store();
    let tail = store.tail(&session("answered")).unwrap();
    let answer = stepjournal::codec::Event::ClientAnswer(stepjournal::codec::ClientAnswer {
        call: CallId::from("c1"),
        output: stepjournal::codec::RawJson::parse("\"12A\"").unwrap(),
    });
    store
        .append(
            &session("answered"),
            tail,
            &[Stamped::at(UnixMillis(1), answer)],
            Durability::Volatile,
        )
        .unwrap();
    live
}

fn names(sessions: &[SessionId]) -> Vec<&str> {
    sessions.iter().map(SessionId::as_str).collect()
}

#[test]
fn on_a_store_without_leases_the_sessions_to_recover_are_open_runs_not_live_here_and_answered_suspensions()
 {
    let store = Arc::new(MemoryStore::new());
    let tools = tools(&Ledger::default());
    let journal = owned(store.clone(), "host-a", 1_000);
    let live = every_state(&journal, &tools);
    assert_eq!(names(&journal.sessions_to_recover().unwrap()), ["answered", "crashed"]);
    // A new process (a new journal) finds every open run crashed.
    let restarted = owned(store, "host-a-again", 1_000);
    assert_eq!(names(&restarted.sessions_to_recover().unwrap()), ["answered", "crashed", "live"]);
    drop(live);
}

#[test]
fn on_a_store_with_leases_a_run_whose_lease_is_live_elsewhere_is_not_listed_until_it_lapses() {
    let store = Arc::new(LeasingStore::new());
    let tools = tools(&Ledger::default());
    let host_a = owned(store.clone(), "host-a", 1_000);
    let _live = every_state(&host_a, &tools);
    // host-a's dropped run is not live there: crashed, whether or not its keeper has released
    // its lease yet.
    assert_eq!(names(&host_a.sessions_to_recover().unwrap()), ["answered", "crashed"]);
    // Once released, every host sees it crashed; host-b sees host-a's live run's lease until
    // it lapses by the store's clock: host-a is cut off (its renewals stop reaching the store),
    // and 30 s after it was taken the lease has lapsed. host-b's own clock has no say.
    host_a.keep_leases().unwrap();
    assert_eq!(store.lease(&session("crashed")), None);
    let host_b = owned(store.clone(), "host-b", 2_000);
    assert_eq!(names(&host_b.sessions_to_recover().unwrap()), ["answered", "crashed"]);
    let ahead = owned(store.clone(), "host-b", 40_000);
    assert_eq!(names(&ahead.sessions_to_recover().unwrap()), ["answered", "crashed"]);
    store.cut_off.store(true, Ordering::SeqCst);
    store.advance(30_000);
    assert_eq!(names(&host_b.sessions_to_recover().unwrap()), ["answered", "crashed", "live"]);
}

#[test]
fn a_head_the_store_does_not_know_is_found_by_folding_that_session() {
    let store = Arc::new(LeasingStore { unknown_heads: true, ..LeasingStore::new() });
    let tools = tools(&Ledger::default());
    let journal = owned(store.clone(), "host-a", 1_000);
    let _live = every_state(&journal, &tools);
    assert_eq!(names(&journal.sessions_to_recover().unwrap()), ["answered", "crashed"]);
}

#[test]
fn recover_all_wakes_each_session_drives_its_step_and_hands_the_run_on() {
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store = Arc::new(MemoryStore::new());
    {
        // A crash with a safe call's body started, and a suspension whose answer landed.
        let before = owned(store.clone(), "host-a", 1_000);
        let run = before.begin_run(&session("crashed"), new_turn()).unwrap();
        let call = tools.call("c1", "search", json!({"q": "x"})).unwrap();
        let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
        drop(step.start_body(&CallId::from("c1")).unwrap());
    }
    let journal = owned(store.clone(), "host-b", 1_000);
    let handed = Arc::new(Mutex::new(Vec::new()));
    let report =
        run(journal.recover_all(&tools, RecoverOptions::new().concurrency(2), |run, outcome| {
            let handed = handed.clone();
            async move {
                let committed = matches!(outcome, Some(StepOutcome::Committed { .. }));
                handed.lock().unwrap().push((run.session().to_string(), committed));
                run.end_async(RunOutcome::Completed).await.unwrap();
            }
        }))
        .unwrap();
    assert_eq!(names(&report.recovered), ["crashed"]);
    assert!(report.skipped.is_empty() && report.failed.is_empty());
    assert_eq!(*handed.lock().unwrap(), [("crashed".to_owned(), true)]);
    assert!(ledger.has("end c1"), "{:?}", ledger.entries());
    assert!(journal.sessions_to_recover().unwrap().is_empty());
}

#[test]
fn recover_all_never_fences_a_run_whose_lease_is_live() {
    let store = Arc::new(LeasingStore::new());
    let tools = tools(&Ledger::default());
    let host_a = owned(store.clone(), "host-a", 1_000);
    let _running = host_a.begin_run(&session("s"), new_turn()).unwrap();
    // host-a is cut off and its lease lapses, so host-b lists the session; host-a's link
    // comes back and its renewal lands between host-b's listing and its wake, which finds the
    // lease live again.
    store.cut_off.store(true, Ordering::SeqCst);
    store.advance(40_000);
    let host_a_back = host_a.clone();
    *store.after_heads.lock().unwrap() = Some(Box::new(move |store: &LeasingStore| {
        store.cut_off.store(false, Ordering::SeqCst);
        host_a_back.keep_leases().unwrap();
    }));
    let host_b = owned(store.clone(), "host-b", 1_000);
    let report = run(host_b.recover_all(&tools, RecoverOptions::new(), |_, _| async {})).unwrap();
    assert!(report.recovered.is_empty());
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].1.owner.as_str(), "host-a");
    let kinds: Vec<_> =
        store.read_all(&session("s")).unwrap().iter().map(|r| r.event.kind()).collect();
    assert_eq!(kinds.len(), 2, "nothing was written: {kinds:?}");
}

#[test]
fn shutdown_refuses_new_runs_and_lets_go_of_open_ones_for_the_next_start_to_recover() {
    let store = Arc::new(LeasingStore::new());
    let journal = owned(store.clone(), "host-a", 1_000);
    let ended = journal.begin_run(&session("ended"), new_turn()).unwrap();
    ended.end(RunOutcome::Completed).unwrap();
    let open = journal.begin_run(&session("open"), new_turn()).unwrap();
    let report = run(journal.shutdown(Duration::ZERO));
    assert_eq!(names(&report.abandoned), ["open"]);
    assert!(open.signal().is_cancelled());
    // Let go, not ended: nothing was written for it, and nothing of it will be.
    assert_eq!(open.status(), RunStatus::Interrupted(Interruption::ShutDown));
    assert_eq!(store.read_all(&session("open")).unwrap().len(), 2, "only its entry's batch");
    assert_eq!(store.lease(&session("open")), None, "its lease was released");
    assert_eq!(store.lease(&session("ended")), None);
    assert!(journal.is_shutting_down());
    let refused = journal.begin_run(&session("new"), new_turn()).unwrap_err();
    assert!(matches!(refused, BeginError::ShuttingDown { .. }), "{refused}");
    let next = owned(store, "host-a-next", 1_000);
    assert_eq!(names(&next.sessions_to_recover().unwrap()), ["open"]);
}

#[test]
fn shutdown_returns_once_the_open_runs_have_ended() {
    let store = Arc::new(MemoryStore::new());
    let journal = owned(store, "host-a", 1_000);
    let open = journal.begin_run(&session("s"), new_turn()).unwrap();
    let report = run(async {
        let mut shutting = std::pin::pin!(journal.shutdown(Duration::from_secs(3_600)));
        assert!(poll_once(&mut shutting).is_none(), "it waits for the open run");
        open.end_async(RunOutcome::Completed).await.unwrap();
        shutting.await
    });
    assert!(report.abandoned.is_empty());
}

#[test]
fn the_journal_s_metrics_are_the_store_s_figures_and_the_writer_s_counters() {
    let store = Arc::new(MemoryStore::new());
    let journal = owned(store.clone(), "host-a", 1_000);
    let first = journal.begin_run(&session("s"), new_turn()).unwrap();
    let _second = journal.begin_run(&session("s"), new_turn()).unwrap();
    assert!(first.end(RunOutcome::Completed).is_err(), "the first run is fenced");
    let metrics = journal.metrics();
    assert_eq!((metrics.runs_begun, metrics.fenced_writes_refused), (2, 1));
    assert_eq!(metrics.store, store.metrics());
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
