//! A store failure after the save: the run pairs its open calls and ends `failed` while the
//! store accepts writes (a `retry` recovers), or is broken when it does not (reopen; `wake`).

mod writer_support;

use std::sync::Arc;

use stepjournal::recovery::{Action, TranscriptItem, verify};
use stepjournal::writer::IdSource;
use stepjournal::{AfterFailure, RunStatus, WriteError};
use stepjournal::{Body, Reply, Run, Step};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{Attempt, Entry, Event, PairReason, Paired, RunEnded, RunOutcome};
use writer_support::*;

/// A run with a safe call `c1` and an unsafe `c2` running (`c2` has committed output) and a
/// safe `c3` not started.
fn three_calls_two_running(journal: &stepjournal::Journal) -> (Run, Step, Body, Body) {
    let run = journal.begin_run(&session(), Entry::NewTurn { message: "go".into() }).unwrap();
    let step = run
        .commit_reply(
            Reply::new("")
                .call(call("c1", "set_preference"))
                .call(call("c2", "charge_card"))
                .call(call("c3", "search")),
        )
        .unwrap();
    let b1 = step.start_body(&id("c1")).unwrap();
    let b2 = step.start_body(&id("c2")).unwrap();
    b2.output_chunk("charging").unwrap();
    (run, step, b1, b2)
}

fn pairings(events: &[Event]) -> Vec<(String, PairReason, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Paired(Paired { call, reason, partial, .. }) => {
                Some((call.to_string(), *reason, partial.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Recovery after the failure: the safe call runs again as attempt 2, the unsafe one is
/// paired `outcome_unknown`, the one that never started runs as attempt 1; then the step ends.
fn recover_and_finish(run: &Run) {
    let plan = run.plan();
    assert!(matches!(
        plan.call(&id("c1")).unwrap().action,
        Action::Run { attempt: Attempt(2), .. }
    ));
    assert_eq!(
        plan.call(&id("c2")).unwrap().action,
        Action::Pair { reason: PairReason::OutcomeUnknown }
    );
    assert!(matches!(
        plan.call(&id("c3")).unwrap().action,
        Action::Run { attempt: Attempt(1), .. }
    ));
    let step = run.step().unwrap();
    step.start_body(&id("c1")).unwrap().finish(json("1"), false).unwrap();
    step.start_body(&id("c3")).unwrap().finish(json("3"), false).unwrap();
    step.commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
}

#[test]
fn a_store_failure_after_the_save_pairs_the_open_calls_ends_failed_and_retry_recovers() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    let (run, _step, b1, b2) = three_calls_two_running(&journal);
    let before = events(&*store, &session()).len();

    store.fault_in(1, Fault::Fail);
    let err = *b1.finish(json("1"), false).unwrap_err().error;
    let WriteError::Store { then, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*then, AfterFailure::EndedFailed);
    assert!(err.to_string().contains("injected write failure"), "{err}");
    assert!(err.to_string().contains("`retry`"), "{err}");

    let log = events(&*store, &session());
    let written = &log[before..];
    assert_eq!(
        pairings(written),
        vec![
            ("c1".into(), PairReason::OutcomeUnknown, String::new()),
            ("c2".into(), PairReason::OutcomeUnknown, "charging".into()),
            ("c3".into(), PairReason::NotStarted, String::new()),
        ],
        "the failed result is not among them; each open call is answered"
    );
    let Some(Event::RunEnded(RunEnded { outcome, error, .. })) = written.last() else {
        panic!("{written:?}")
    };
    assert_eq!(*outcome, RunOutcome::Failed);
    assert!(error.as_deref().unwrap().contains("injected write failure"));
    assert!(matches!(run.status(), RunStatus::Ended { outcome: RunOutcome::Failed, .. }));
    let late = *b2.finish(json("2"), false).unwrap_err().error;
    assert!(matches!(late, WriteError::Ended { outcome: RunOutcome::Failed, .. }), "{late:?}");
    assert_eq!(events(&*store, &session()).len(), log.len(), "nothing after the run ended");

    let run =
        journal.begin_run(&session(), Entry::Retry { checkpoint: None, message: None }).unwrap();
    assert!(matches!(run.plan().appends.get(1), Some(Event::Rewound(_))), "{:?}", run.plan());
    recover_and_finish(&run);
    let log = events(&*store, &session());
    assert!(verify(&log).is_empty(), "{:?}", verify(&log));
    let shown = journal.transcript(&session()).unwrap();
    let c2: Vec<_> = shown
        .iter()
        .filter(|t| matches!(t, TranscriptItem::Paired { call, .. } if call == &id("c2")))
        .collect();
    assert_eq!(c2.len(), 1, "the rewound pairing is dropped, recovery's stays: {shown:?}");
}

#[test]
fn a_poisoned_store_breaks_the_run_and_reopening_then_wake_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Arc<dyn IdSource> = ids();
    {
        let file: Arc<dyn JournalStore> =
            Arc::new(FileStore::open(dir.path(), FileOptions::default()).unwrap());
        let store = Arc::new(FaultyStore::new(file));
        let journal = journal_with(store.clone(), ids.clone());
        let (run, step, b1, b2) = three_calls_two_running(&journal);
        let tail = run.tail();
        store.fault_in(1, Fault::Poison);
        let err = *b1.finish(json("1"), false).unwrap_err().error;
        assert!(matches!(err, WriteError::Store { then: AfterFailure::Unwritable, .. }), "{err:?}");
        assert!(err.to_string().contains("reopen the store"), "{err}");
        assert!(matches!(run.status(), RunStatus::Broken { .. }), "{:?}", run.status());
        let late = *b2.finish(json("2"), false).unwrap_err().error;
        assert!(matches!(late, WriteError::Broken { .. }), "{late:?}");
        assert!(matches!(step.commit().unwrap_err(), WriteError::Broken { .. }));
        assert_eq!(run.tail(), tail, "nothing was written");
    }
    // Reopen: the store re-reads the disk; recovery covers the step.
    let store: Arc<dyn JournalStore> =
        Arc::new(FileStore::open(dir.path(), FileOptions::default()).unwrap());
    let log = events(&*store, &session());
    assert!(pairings(&log).is_empty() && !log.iter().any(|e| matches!(e, Event::RunEnded(_))));
    let journal = journal_with(store.clone(), ids);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    recover_and_finish(&run);
    assert!(verify(&events(&*store, &session())).is_empty());
}

#[test]
fn a_failure_whose_own_write_fails_leaves_the_run_broken_and_wake_recovers() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let journal = journal_with(store.clone(), ids());
    let (run, _step, b1, _b2) = three_calls_two_running(&journal);
    let tail = run.tail();
    store.fault_in(1, Fault::Fail);
    store.fault_in(2, Fault::Fail);
    let err = *b1.finish(json("1"), false).unwrap_err().error;
    assert!(matches!(err, WriteError::Store { then: AfterFailure::Unwritable, .. }), "{err:?}");
    assert!(matches!(run.status(), RunStatus::Broken { .. }));
    assert_eq!(store.tail(&session()).unwrap(), tail);
    let run = journal.begin_run(&session(), Entry::Wake).unwrap();
    recover_and_finish(&run);
}

#[test]
fn a_run_the_runtime_fails_pairs_its_open_calls_and_retry_recovers() {
    let (journal, store) = memory_journal();
    let (run, _step, _b1, b2) = three_calls_two_running(&journal);
    run.fail(Some("the model provider is down".into())).unwrap();
    let log = events(&*store, &session());
    assert_eq!(pairings(&log).len(), 3);
    assert!(
        matches!(log.last(), Some(Event::RunEnded(RunEnded { outcome: RunOutcome::Failed, error: Some(e), .. })) if e.contains("provider"))
    );
    assert!(matches!(*b2.finish(json("2"), false).unwrap_err().error, WriteError::Ended { .. }));
    let run =
        journal.begin_run(&session(), Entry::Retry { checkpoint: None, message: None }).unwrap();
    recover_and_finish(&run);
    assert!(verify(&events(&*store, &session())).is_empty());
}
