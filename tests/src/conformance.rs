//! The backend conformance suite: written once over `&dyn JournalStore`, run on every backend.
//!
//! A backend joins it with one line in a test file:
//!
//! ```ignore
//! stepjournal_tests::backend_conformance!(|| MyFixture::new());
//! ```
//!
//! where the closure returns a fresh, empty store (or something that derefs to one and keeps its
//! temporary directory alive).

use std::collections::BTreeSet;
use std::sync::Barrier;

use stepjournal_backends::{
    AppendError, DeleteAt, Durability, JournalStore, RunHead, SessionHead, StoreError,
};
use stepjournal_codec::{
    ApprovalDecided, CallId, ClientAnswer, Entry, Event, Limits, RawJson, RunEnded, RunId,
    RunOutcome, RunStarted, Seq, SessionId, Stamped, UnixMillis,
};

use crate::sample::{every_event_type, numbered, oversized, stamped_numbered};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

pub fn round_trip_returns_every_event_as_appended(store: &dyn JournalStore) {
    let s = sid("round-trip");
    let events: Vec<Stamped> = every_event_type()
        .into_iter()
        .enumerate()
        .map(|(i, e)| Stamped::at(UnixMillis(1_700_000_000_000 + i as u64), e))
        .collect();
    let ack = store.append(&s, Seq(0), &events, Durability::Synced).unwrap();
    assert_eq!((ack.first, ack.next), (Seq(0), Seq(events.len() as u64)));
    let back = store.read_all(&s).unwrap();
    assert_eq!(back.len(), events.len());
    for (i, (r, e)) in back.iter().zip(&events).enumerate() {
        assert_eq!(r.session, s);
        assert_eq!(r.seq, Seq(i as u64));
        assert_eq!(r.at, e.at);
        assert_eq!(r.event, e.event);
    }
}

pub fn sequence_numbers_are_dense_across_appends(store: &dyn JournalStore) {
    let s = sid("dense");
    let mut next = Seq(0);
    for n in [1u64, 3, 1, 7, 2] {
        let ack = store.append(&s, next, &stamped_numbered(next.get(), n), Durability::Synced);
        let ack = ack.unwrap();
        assert_eq!(ack.first, next);
        next = next.add(n);
        assert_eq!(ack.next, next);
        assert_eq!(store.tail(&s).unwrap(), next);
    }
    let all = store.read_all(&s).unwrap();
    let seqs: Vec<u64> = all.iter().map(|r| r.seq.get()).collect();
    assert_eq!(seqs, (0..next.get()).collect::<Vec<_>>());
    for r in &all {
        assert_eq!(r.event, numbered(r.seq.get()), "event at {} is another's", r.seq);
    }
}

pub fn a_refused_batch_writes_none_of_its_events(store: &dyn JournalStore) {
    let s = sid("atomic");
    store.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    let mut batch = stamped_numbered(2, 3);
    batch.push(Stamped::at(UnixMillis(1), oversized(Limits::default().max_record as usize)));
    let err = store.append(&s, Seq(2), &batch, Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Encode { .. }), "{err:?}");
    assert!(err.to_string().contains("maximum record size"), "{err}");
    assert_eq!(store.tail(&s).unwrap(), Seq(2));
    assert_eq!(store.read_all(&s).unwrap().len(), 2);
    // The session still takes appends at its real tail.
    store.append(&s, Seq(2), &stamped_numbered(2, 1), Durability::Synced).unwrap();
    assert_eq!(store.tail(&s).unwrap(), Seq(3));
}

pub fn a_conflict_names_both_positions_and_writes_nothing(store: &dyn JournalStore) {
    let s = sid("conflict");
    store.append(&s, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    for wrong in [0u64, 2, 4, 100] {
        let err = store.append(&s, Seq(wrong), &stamped_numbered(50, 2), Durability::Synced);
        match err {
            Err(AppendError::Conflict { expected, actual }) => {
                assert_eq!((expected, actual), (Seq(wrong), Seq(3)));
            }
            other => panic!("expected a conflict at {wrong}, got {other:?}"),
        }
    }
    let all = store.read_all(&s).unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.iter().enumerate().all(|(i, r)| r.event == numbered(i as u64)));
}

pub fn a_batch_cannot_land_past_the_tail(store: &dyn JournalStore) {
    let s = sid("gap");
    let err = store.append(&s, Seq(1), &stamped_numbered(1, 1), Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Conflict { expected: Seq(1), actual: Seq(0) }), "{err:?}");
    assert_eq!(store.tail(&s).unwrap(), Seq(0));
    assert!(store.read_all(&s).unwrap().is_empty());
    assert!(!store.sessions().unwrap().contains(&s), "a refused append created the session");
}

pub fn an_empty_batch_is_refused(store: &dyn JournalStore) {
    let s = sid("empty-batch");
    let err = store.append(&s, Seq(0), &[], Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::EmptyBatch), "{err:?}");
    assert_eq!(store.tail(&s).unwrap(), Seq(0));
}

pub fn an_invalid_session_id_is_refused(store: &dyn JournalStore) {
    // Defect pinned: a session id holding NUL was taken by the file and SQLite backends and could
    // not be stored in PostgreSQL, so such an export could not move there. One rule for every
    // backend: 1 to 1024 bytes of UTF-8 holding no control character, line separator or
    // bidirectional control; an append under any other id is refused before anything is written.
    let refused = |raw: &str| {
        let id = SessionId::from_stored(raw);
        let err = store.append(&id, Seq(0), &stamped_numbered(0, 1), Durability::Synced);
        assert!(matches!(err, Err(AppendError::Encode { .. })), "{raw:?}: {err:?}");
        err.err().map(|e| e.to_string()).unwrap_or_default()
    };
    refused("");
    refused(&"s".repeat(SessionId::MAX_LEN + 1));
    for c in [
        '\u{0}', '\u{1b}', '\n', '\t', '\u{7f}', '\u{85}', '\u{9b}', '\u{2028}', '\u{202e}',
        '\u{2066}',
    ] {
        let message = refused(&format!("user{c}42"));
        let code = format!("U+{:04X}", u32::from(c));
        assert!(message.contains(&code) && message.contains("byte 4"), "{message}");
        assert!(SessionId::new(format!("user{c}42")).is_err(), "the constructor keeps the rule");
    }
    assert!(store.sessions().unwrap().is_empty());
    // Any other text is an id on every backend, and reads back as it was given.
    let fine = sid("séance-日本-🙂 with spaces/and:punctuation");
    store.append(&fine, Seq(0), &stamped_numbered(0, 1), Durability::Synced).unwrap();
    assert_eq!(store.sessions().unwrap(), vec![fine.clone()]);
    assert_eq!(store.read_all(&fine).unwrap().len(), 1);
}

pub fn an_invalid_run_id_is_refused(store: &dyn JournalStore) {
    // Defect pinned: a run id holding NUL was taken by the file and SQLite backends and could not
    // move to PostgreSQL (`invalid byte sequence ... 0x00`). Run ids keep the session ids' rule;
    // an append naming another is refused before anything is written.
    let s = sid("runs");
    let started = |run: &str| {
        let entry = Entry::NewTurn { message: "go".into() };
        Stamped::at(UnixMillis(1), RunStarted { run: RunId::new(run), entry, by: None })
    };
    let ended = |run: &str| {
        let outcome = RunOutcome::Completed;
        Stamped::at(
            UnixMillis(1),
            RunEnded { run: RunId::new(run), outcome, error: None, by: None },
        )
    };
    for bad in ["r\u{0}1", "r\u{1b}]0;x\u{7}", "r\u{202e}1", ""] {
        for event in [started(bad), ended(bad)] {
            let err = store.append(&s, Seq(0), &[event], Durability::Synced).unwrap_err();
            let AppendError::Encode { source, .. } = &err else { panic!("{bad:?}: {err:?}") };
            assert!(source.to_string().contains("invalid run id"), "{bad:?}: {err}");
        }
    }
    assert_eq!(store.tail(&s).unwrap(), Seq(0), "nothing was written");
    store
        .append(&s, Seq(0), &[started("run-1 ok"), ended("run-1 ok")], Durability::Synced)
        .unwrap();
    assert_eq!(store.read_all(&s).unwrap().len(), 2);
}

pub fn racing_writers_win_each_sequence_number_exactly_once(store: &dyn JournalStore) {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 40;
    let s = sid("race");
    let barrier = Barrier::new(THREADS);
    let wins: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (s, barrier) = (&s, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let mut won = Vec::new();
                    loop {
                        let tail = store.tail(s).unwrap();
                        if tail.get() >= ROUNDS {
                            return won;
                        }
                        // Each writer marks its events with its thread number.
                        let e = Stamped::at(UnixMillis(t as u64), numbered(t as u64));
                        match store.append(s, tail, &[e], Durability::Synced) {
                            Ok(ack) => won.push(ack.first.get()),
                            Err(AppendError::Conflict { actual, .. }) => {
                                assert!(actual > tail, "a conflict must report a later tail");
                            }
                            Err(e) => panic!("unexpected error in a race: {e}"),
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = wins.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..ROUNDS).collect::<Vec<_>>(), "every seq won exactly once");
    let log = store.read_all(&s).unwrap();
    assert_eq!(log.len() as u64, ROUNDS);
    for (t, seqs) in wins.iter().enumerate() {
        for &q in seqs {
            assert_eq!(log[q as usize].event, numbered(t as u64), "seq {q} holds another's event");
        }
    }
}

pub fn interleaved_sessions_keep_their_own_events(store: &dyn JournalStore) {
    let names: Vec<SessionId> = (0..12).map(|i| sid(&format!("inter-{i:02}"))).collect();
    for round in 0..5u64 {
        for (i, s) in names.iter().enumerate() {
            let from = round * 100 + i as u64;
            let tail = store.tail(s).unwrap();
            store
                .append(s, tail, &stamped_numbered(from, 1 + (i as u64 % 3)), Durability::Synced)
                .unwrap();
        }
    }
    for (i, s) in names.iter().enumerate() {
        let log = store.read_all(s).unwrap();
        let per = 1 + (i as u64 % 3);
        assert_eq!(log.len() as u64, 5 * per);
        for (k, r) in log.iter().enumerate() {
            let round = k as u64 / per;
            let expected = numbered(round * 100 + i as u64 + k as u64 % per);
            assert_eq!(r.session, *s);
            assert_eq!(r.event, expected, "session {s} seq {k}");
        }
    }
    let listed: Vec<SessionId> = store.sessions().unwrap();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "sessions are listed once each, sorted");
}

pub fn delete_removes_a_session_and_its_id_can_start_again(store: &dyn JournalStore) {
    let (a, b) = (sid("del-a"), sid("del-b"));
    store.append(&a, Seq(0), &stamped_numbered(0, 4), Durability::Synced).unwrap();
    store.append(&b, Seq(0), &stamped_numbered(10, 2), Durability::Synced).unwrap();
    assert!(store.delete(&a).unwrap());
    assert!(!store.delete(&a).unwrap(), "deleting twice reports it was gone");
    assert_eq!(store.tail(&a).unwrap(), Seq(0));
    assert!(store.read_all(&a).unwrap().is_empty());
    assert_eq!(store.sessions().unwrap(), vec![b.clone()]);
    assert_eq!(store.read_all(&b).unwrap().len(), 2, "the other session is untouched");
    store.append(&a, Seq(0), &stamped_numbered(20, 1), Durability::Synced).unwrap();
    assert_eq!(store.read_all(&a).unwrap()[0].event, numbered(20));
}

pub fn a_delete_at_a_tail_deletes_only_the_session_as_it_was_read(store: &dyn JournalStore) {
    let (a, b) = (sid("del-at-a"), sid("del-at-b"));
    store.append(&a, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    store.append(&b, Seq(0), &stamped_numbered(10, 2), Durability::Synced).unwrap();
    // A tail that is not the session's now: nothing deleted, the tail told.
    assert_eq!(store.delete_at(&a, Seq(2)).unwrap(), DeleteAt::Changed { tail: Seq(3) });
    assert_eq!(store.read_all(&a).unwrap().len(), 3, "nothing was deleted");
    assert_eq!(store.delete_at(&a, Seq(3)).unwrap(), DeleteAt::Deleted);
    assert_eq!(store.tail(&a).unwrap(), Seq(0));
    assert!(store.read_all(&a).unwrap().is_empty());
    assert_eq!(store.sessions().unwrap(), vec![b.clone()], "the other session is untouched");
    // A session deleted meanwhile is a conflict too; tail 0 of a missing one deletes nothing.
    assert_eq!(store.delete_at(&a, Seq(3)).unwrap(), DeleteAt::Changed { tail: Seq(0) });
    assert_eq!(store.delete_at(&a, Seq(0)).unwrap(), DeleteAt::Deleted);
    store.append(&a, Seq(0), &stamped_numbered(20, 1), Durability::Synced).unwrap();
    assert_eq!(store.read_all(&a).unwrap()[0].event, numbered(20));
}

pub fn a_delete_at_a_tail_racing_an_append_never_deletes_what_landed_after(
    store: &dyn JournalStore,
) {
    // An operator deletes "old" sessions while a runtime resumes them: each session ends
    // either deleted with nothing the runtime appended after the deleter's read, or kept
    // with everything.
    let sessions: Vec<SessionId> = (0..24).map(|i| sid(&format!("race-del-{i}"))).collect();
    for s in &sessions {
        store.append(s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    }
    let barrier = Barrier::new(2);
    let (appended, deleted) = std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            barrier.wait();
            sessions
                .iter()
                .map(|s| {
                    store.append(s, Seq(2), &stamped_numbered(2, 1), Durability::Synced).is_ok()
                })
                .collect::<Vec<_>>()
        });
        let deleter = scope.spawn(|| {
            barrier.wait();
            let deleted = |s| store.delete_at(s, Seq(2)).unwrap() == DeleteAt::Deleted;
            sessions.iter().rev().map(deleted).collect::<Vec<_>>()
        });
        (appender.join().unwrap(), deleter.join().unwrap())
    });
    for (i, s) in sessions.iter().enumerate() {
        let (landed, gone) = (appended[i], deleted[sessions.len() - 1 - i]);
        let tail = store.tail(s).unwrap();
        match (landed, gone) {
            // The append came first: the delete at 2 was refused.
            (true, false) => assert_eq!(tail, Seq(3), "{s}"),
            // The delete came first: the append at 2 found the session gone.
            (false, true) => assert_eq!(tail, Seq(0), "{s}"),
            other => panic!("{s}: append landed and delete done = {other:?}, tail {tail:?}"),
        }
    }
}

pub fn a_closed_store_refuses_every_call_and_closing_again_does_nothing(store: &dyn JournalStore) {
    let s = sid("closing");
    store.append(&s, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    store.close().unwrap();
    let closed = |e: &StoreError| matches!(e, StoreError::Closed { .. });
    let refused = store.append(&s, Seq(3), &stamped_numbered(3, 1), Durability::Synced);
    assert!(matches!(&refused, Err(AppendError::Store(e)) if closed(e)), "{refused:?}");
    let refused = store.append_async(&s, Seq(3), &stamped_numbered(3, 1), Durability::Synced);
    assert!(matches!(&refused.wait(), Err(AppendError::Store(e)) if closed(e)));
    assert!(store.read_all(&s).is_err_and(|e| closed(&e)));
    assert!(store.read_async(&s, Seq(0)..Seq(3)).wait().is_err_and(|e| closed(&e)));
    assert!(store.read_from_snapshot_async(&s).wait().is_err_and(|e| closed(&e)));
    assert!(store.tail(&s).is_err_and(|e| closed(&e)));
    assert!(store.heads().is_err_and(|e| closed(&e)));
    assert!(store.heads_async().wait().is_err_and(|e| closed(&e)));
    assert!(store.delete(&s).is_err_and(|e| closed(&e)));
    assert!(store.delete_at(&s, Seq(3)).is_err_and(|e| closed(&e)));
    let e = store.tail(&s).unwrap_err();
    assert_eq!(stepjournal_codec::Coded::code(&e), stepjournal_codec::ErrorCode::Closed);
    assert!(e.to_string().contains("closed"), "{e}");
    store.close().unwrap();
}

pub fn appends_racing_a_close_are_each_answered(store: &dyn JournalStore) {
    // Four writers append until refused while the store is closed under them: each append is
    // answered (written, refused as closed, or, for a request the close caught in the queue,
    // outcome unknown), none waits forever.
    let barrier = Barrier::new(5);
    let answered = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let s = sid(&format!("closing-{w}"));
                    let mut tail = Seq(0);
                    let mut acked = 0u64;
                    barrier.wait();
                    loop {
                        let batch = stamped_numbered(tail.get(), 1);
                        match store.append(&s, tail, &batch, Durability::Synced) {
                            Ok(ack) => {
                                tail = ack.next;
                                acked += 1;
                            }
                            Err(AppendError::Store(StoreError::Closed { .. })) => return acked,
                            Err(AppendError::OutcomeUnknown { .. }) => return acked,
                            Err(other) => panic!("{s}: {other}"),
                        }
                    }
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(std::time::Duration::from_millis(20));
        store.close().unwrap();
        writers.into_iter().map(|w| w.join().unwrap()).sum::<u64>()
    });
    assert!(answered > 0, "the writers appended before the close");
}

pub fn missing_and_empty_sessions_read_as_empty(store: &dyn JournalStore) {
    let s = sid("never-written");
    assert_eq!(store.tail(&s).unwrap(), Seq(0));
    assert!(store.read_all(&s).unwrap().is_empty());
    assert!(store.read(&s, Seq(3)..Seq(9)).unwrap().is_empty());
    assert!(!store.delete(&s).unwrap());
    assert!(store.sessions().unwrap().is_empty());
}

pub fn reads_are_clipped_to_the_range_asked(store: &dyn JournalStore) {
    let s = sid("ranges");
    store.append(&s, Seq(0), &stamped_numbered(0, 6), Durability::Synced).unwrap();
    store.append(&s, Seq(6), &stamped_numbered(6, 4), Durability::Synced).unwrap();
    let seqs = |r: std::ops::Range<u64>| -> Vec<u64> {
        store.read(&s, Seq(r.start)..Seq(r.end)).unwrap().iter().map(|r| r.seq.get()).collect()
    };
    assert_eq!(seqs(2..5), vec![2, 3, 4]);
    assert_eq!(seqs(5..7), vec![5, 6], "a range across two batches");
    assert_eq!(seqs(8..100), vec![8, 9]);
    assert_eq!(seqs(10..20), Vec::<u64>::new());
    assert_eq!(seqs(4..4), Vec::<u64>::new());
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = seqs(7..3);
    assert_eq!(backwards, Vec::<u64>::new());
}

pub fn an_ack_promises_no_more_than_the_store_gives(store: &dyn JournalStore) {
    let s = sid("durability");
    let max = store.max_durability();
    let mut next = Seq(0);
    for want in [Durability::Synced, Durability::Buffered] {
        let ack = store.append(&s, next, &stamped_numbered(next.get(), 1), want).unwrap();
        next = ack.next;
        assert!(ack.durability <= want && ack.durability <= max, "{want:?} gave {ack:?}");
        if max >= want {
            assert_eq!(ack.durability, want, "a store that can give {want:?} must");
        }
    }
}

pub fn many_small_batches_read_back_in_order(store: &dyn JournalStore) {
    let s = sid("many");
    for i in 0..300u64 {
        store.append(&s, Seq(i), &stamped_numbered(i, 1), Durability::Buffered).unwrap();
    }
    let log = store.read_all(&s).unwrap();
    let seen: BTreeSet<u64> = log.iter().map(|r| r.seq.get()).collect();
    assert_eq!(seen.len(), 300);
    assert!(log.iter().all(|r| r.event == numbered(r.seq.get())));
}

fn started(run: &str) -> Event {
    RunStarted { run: RunId::from(run), entry: Entry::Wake, by: None }.into()
}

fn ended(run: &str, outcome: RunOutcome) -> Event {
    RunEnded { run: RunId::from(run), outcome, error: None, by: None }.into()
}

fn answered() -> Event {
    ClientAnswer { call: CallId::from("c1"), output: RawJson::parse("\"ok\"").unwrap() }.into()
}

fn approved() -> Event {
    ApprovalDecided { call: CallId::from("c1"), approved: true }.into()
}

pub fn heads_agree_with_a_fold_of_every_session(store: &dyn JournalStore) {
    let mut clock = 1_700_000_000_000u64;
    let mut append = |s: &str, batch: Vec<Event>| {
        let s = sid(s);
        let events: Vec<Stamped> = batch
            .into_iter()
            .map(|e| {
                clock += 7;
                Stamped::at(UnixMillis(clock), e)
            })
            .collect();
        let tail = store.tail(&s).unwrap();
        store.append(&s, tail, &events, Durability::Synced).unwrap();
    };
    append("head-no-run", vec![numbered(1), numbered(2)]);
    append("head-open", vec![started("r1"), numbered(3)]);
    append("head-open", vec![numbered(4)]);
    append("head-ended", vec![started("r1"), ended("r1", RunOutcome::Completed)]);
    append("head-answered", vec![started("r1")]);
    append("head-answered", vec![ended("r1", RunOutcome::Suspended)]);
    append("head-answered", vec![answered(), numbered(5)]);
    append("head-approved", vec![started("r1"), ended("r1", RunOutcome::Suspended)]);
    append("head-approved", vec![approved()]);
    append(
        "head-answer-in-run",
        vec![started("r1"), answered(), ended("r1", RunOutcome::Suspended)],
    );
    append("head-woken", vec![started("r1"), ended("r1", RunOutcome::Suspended), answered()]);
    append("head-woken", vec![started("r2")]);
    for chunk in every_event_type().chunks(3) {
        append("head-every-type", chunk.to_vec());
    }
    append("head-deleted", vec![started("r1")]);
    assert!(store.delete(&sid("head-deleted")).unwrap());
    append("head-reborn", vec![started("r1")]);
    assert!(store.delete(&sid("head-reborn")).unwrap());
    append("head-reborn", vec![numbered(6)]);

    let heads = store.heads().unwrap();
    let listed: Vec<SessionId> = heads.iter().map(|h| h.session.clone()).collect();
    assert_eq!(listed, store.sessions().unwrap(), "a head per session, sorted");
    for h in &heads {
        let log = store.read_all(&h.session).unwrap();
        let mut fold = RunHead::default();
        for r in &log {
            fold.advance(&r.event);
        }
        let last = log.last().unwrap();
        assert_eq!((h.tail, h.last_at), (last.seq.next(), last.at), "{}", h.session);
        assert_eq!(h.run, fold.run, "{}", h.session);
        assert_eq!(h.answered_while_suspended, fold.answered_while_suspended, "{}", h.session);
        // Read later, by a clock that moved on.
        let one =
            store.head(&h.session).unwrap().map(|one| SessionHead { read_at: h.read_at, ..one });
        assert_eq!(one.as_ref(), Some(h), "head() agrees with heads()");
    }
    let by_name = |s: &str| heads.iter().find(|h| h.session.as_str() == s).unwrap();
    assert!(by_name("head-answered").answered_while_suspended);
    assert!(by_name("head-approved").answered_while_suspended);
    assert!(!by_name("head-answer-in-run").answered_while_suspended);
    assert!(!by_name("head-woken").answered_while_suspended);
    assert!(!listed.contains(&sid("head-deleted")));
    assert_eq!(by_name("head-reborn").run, stepjournal_backends::RunState::NoRun);
    assert_eq!(store.head(&sid("head-deleted")).unwrap(), None);
    assert_eq!(store.head(&sid("head-never")).unwrap(), None);
}

/// A `snapshot` event (its members are not the store's to check).
fn snapshot_event() -> Event {
    every_event_type()
        .into_iter()
        .find(|e| e.kind() == stepjournal_codec::EventKind::Snapshot)
        .unwrap_or_else(|| numbered(0))
}

/// `read_from_snapshot` (and its async form) gives the log from the newest snapshot on,
/// whether the snapshot came alone, in a batch, or two in one batch; the whole log when there
/// is none; nothing for a missing session; and forgets a deleted session's snapshot.
pub fn reads_from_the_newest_snapshot(store: &dyn JournalStore) {
    let both = |s: &SessionId| {
        let sync = store.read_from_snapshot(s).unwrap();
        let async_ = store.read_from_snapshot_async(s).wait().unwrap();
        assert_eq!(sync, async_, "the async form reads the same");
        sync
    };
    let at = |i: u64, e: Event| Stamped::at(UnixMillis(1_700_000_000_000 + i), e);
    let none = sid("snap-none");
    store.append(&none, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    assert_eq!(both(&none), store.read_all(&none).unwrap());
    assert!(both(&sid("snap-missing")).is_empty());

    let s = sid("snap-two");
    let mut tail = Seq(0);
    let mut put = |events: Vec<Stamped>| {
        let ack = store.append(&s, tail, &events, Durability::Synced).unwrap();
        tail = ack.next;
    };
    put(stamped_numbered(0, 3));
    put(vec![at(3, snapshot_event())]);
    assert_eq!(both(&s), store.read(&s, Seq(3)..Seq(u64::MAX)).unwrap(), "alone");
    put(vec![at(4, numbered(4)), at(5, snapshot_event()), at(6, numbered(6))]);
    assert_eq!(both(&s), store.read(&s, Seq(5)..Seq(u64::MAX)).unwrap(), "in a batch");
    put(vec![at(7, snapshot_event()), at(8, numbered(8)), at(9, snapshot_event())]);
    put(stamped_numbered(10, 2));
    let got = both(&s);
    assert_eq!(got, store.read(&s, Seq(9)..Seq(u64::MAX)).unwrap(), "the last of two");
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].seq, Seq(9));

    assert!(store.delete(&s).unwrap());
    assert!(both(&s).is_empty(), "a deleted session reads as empty");
    store.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    assert_eq!(both(&s), store.read_all(&s).unwrap(), "its old snapshot is forgotten");
}

/// A `trimmed` event keeping the log from `before`.
pub fn trimmed_event(before: u64, turns: u64) -> Event {
    stepjournal_codec::Trimmed { before: Seq(before), turns }.into()
}

/// A batch holding a `trimmed` drops the session's events before its `before` as it lands, and
/// only if it lands: reads start at the kept snapshot (a few events before it on a store that
/// drops whole batches: here the snapshot starts its batch, so every store keeps exactly from
/// it), the tail and later appends go on, a trim that keeps nothing the session holds or loses
/// its compare-and-set changes nothing, and a deleted session starts again from seq 0.
pub fn a_trim_drops_the_events_before_its_snapshot_as_its_batch_lands(store: &dyn JournalStore) {
    let at = |i: u64, e: Event| Stamped::at(UnixMillis(1_700_000_000_000 + i), e);
    let s = sid("trim-me");
    let other = sid("trim-not-me");
    store.append(&other, Seq(0), &stamped_numbered(0, 4), Durability::Synced).unwrap();
    let mut tail = Seq(0);
    let mut put = |events: Vec<Stamped>| -> Result<(), AppendError> {
        tail = store.append(&s, tail, &events, Durability::Synced)?.next;
        Ok(())
    };
    put(stamped_numbered(0, 3)).unwrap();
    put(vec![at(3, snapshot_event()), at(4, numbered(4))]).unwrap();
    put(vec![at(5, numbered(5))]).unwrap();
    put(vec![at(6, snapshot_event()), at(7, numbered(7))]).unwrap();
    put(vec![at(8, numbered(8))]).unwrap();
    let before = store.read_all(&s).unwrap();
    assert_eq!(before.len(), 9);

    // Refused before anything is written: a trim past what the session holds.
    let e = store.append(&s, Seq(9), &[at(9, trimmed_event(9, 0))], Durability::Synced);
    assert!(matches!(e, Err(AppendError::Encode { .. })), "{e:?}");
    // A lost compare-and-set drops nothing.
    let e = store.append(&s, Seq(8), &[at(9, trimmed_event(6, 0))], Durability::Synced);
    assert!(matches!(e, Err(AppendError::Conflict { .. })), "{e:?}");
    assert_eq!(store.read_all(&s).unwrap(), before, "nothing changed");

    put(vec![at(9, trimmed_event(6, 1))]).unwrap();
    let kept = store.read_all(&s).unwrap();
    assert_eq!(kept.first().map(|r| r.seq), Some(Seq(6)), "the log starts at the kept snapshot");
    assert_eq!(kept.len(), 4);
    assert_eq!(&kept[..3], &before[6..], "what is kept is as it was");
    assert_eq!(kept[3].event, trimmed_event(6, 1));
    assert_eq!(store.tail(&s).unwrap(), Seq(10));
    assert!(store.read(&s, Seq(0)..Seq(6)).unwrap().is_empty(), "the dropped part reads empty");
    assert_eq!(store.read(&s, Seq(2)..Seq(8)).unwrap(), &before[6..8]);
    assert_eq!(store.read_async(&s, Seq(0)..Seq(u64::MAX)).wait().unwrap(), kept);
    assert_eq!(store.read_from_snapshot(&s).unwrap(), kept, "the newest snapshot is the kept one");
    assert_eq!(store.head(&s).unwrap().map(|h| h.tail), Some(Seq(10)));
    assert_eq!(store.read_all(&other).unwrap().len(), 4, "another session keeps everything");

    // Appends go on after a trim, and a later trim drops more.
    put(vec![at(10, snapshot_event())]).unwrap();
    put(vec![at(11, numbered(11)), at(12, trimmed_event(10, 1))]).unwrap();
    let kept = store.read_all(&s).unwrap();
    assert_eq!(kept.iter().map(|r| r.seq.get()).collect::<Vec<_>>(), vec![10, 11, 12]);

    assert!(store.delete(&s).unwrap());
    store.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    assert_eq!(store.read_all(&s).unwrap().first().map(|r| r.seq), Some(Seq(0)));
}

/// Instantiates every conformance test for one backend. `$make` is an expression that evaluates to
/// a closure returning a fresh, empty store, or a value that derefs to one. Attributes before it
/// are put on every test (for example a `cfg_attr(..., ignore = "why")`).
#[macro_export]
macro_rules! backend_conformance {
    // Attributes are taken one at a time: `$(#[..])* $make:expr` would be ambiguous, since an
    // expression may itself start with an attribute.
    (@attrs [$($attrs:tt)*] #[$attr:meta] $($rest:tt)*) => {
        $crate::backend_conformance!(@attrs [$($attrs)* #[$attr]] $($rest)*);
    };
    (@attrs [$($attrs:tt)*] $make:expr) => {
        $crate::backend_conformance!(@tests [$($attrs)*] $make;
            round_trip_returns_every_event_as_appended,
            sequence_numbers_are_dense_across_appends,
            a_refused_batch_writes_none_of_its_events,
            a_conflict_names_both_positions_and_writes_nothing,
            a_batch_cannot_land_past_the_tail,
            an_empty_batch_is_refused,
            an_invalid_session_id_is_refused,
            an_invalid_run_id_is_refused,
            racing_writers_win_each_sequence_number_exactly_once,
            interleaved_sessions_keep_their_own_events,
            delete_removes_a_session_and_its_id_can_start_again,
            a_delete_at_a_tail_deletes_only_the_session_as_it_was_read,
            a_delete_at_a_tail_racing_an_append_never_deletes_what_landed_after,
            a_closed_store_refuses_every_call_and_closing_again_does_nothing,
            appends_racing_a_close_are_each_answered,
            missing_and_empty_sessions_read_as_empty,
            reads_are_clipped_to_the_range_asked,
            an_ack_promises_no_more_than_the_store_gives,
            many_small_batches_read_back_in_order,
            heads_agree_with_a_fold_of_every_session,
            heads_equal_a_fold_of_the_log_after_every_kind_of_batch,
            reads_from_the_newest_snapshot,
            a_trim_drops_the_events_before_its_snapshot_as_its_batch_lands,
        );
    };
    (@tests $attrs:tt $make:expr; $($name:ident,)*) => {
        $( $crate::backend_conformance!(@one $attrs $make; $name); )*
    };
    (@one [$($attr:tt)*] $make:expr; $name:ident) => {
        #[test]
        $($attr)*
        fn $name() {
            let fixture = ($make)();
            $crate::conformance::$name(&*fixture);
        }
    };
    ($($input:tt)*) => {
        $crate::backend_conformance!(@attrs [] $($input)*);
    };
}

// ---------------------------------------------------------------------------------------------
// Heads and leases: what a runtime reads and takes at start-up. The heads test runs on every
// backend (through `backend_conformance!`); the lease tests on the backends that keep leases
// (`backend_lease_conformance!`).

mod runtime {
    use std::time::Duration;

    use stepjournal_backends::{
        Durability, JournalStore, Lease, LeaseTaken, OwnerId, RunHead, SessionHead,
    };
    use stepjournal_codec::{
        ApprovalDecided, CallId, ClientAnswer, Entry, Event, RawJson, RunEnded, RunId, RunOutcome,
        RunStarted, Seq, SessionId, Stamped, UnixMillis,
    };

    use crate::sample::numbered;

    fn sid(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    fn started(run: &str) -> Event {
        RunStarted { run: RunId::new(run), entry: Entry::Wake, by: None }.into()
    }

    fn ended(run: &str, outcome: RunOutcome) -> Event {
        RunEnded { run: RunId::new(run), outcome, error: None, by: None }.into()
    }

    fn answered() -> Event {
        ClientAnswer { call: CallId::new("c1"), output: RawJson::parse("\"yes\"").unwrap() }.into()
    }

    fn decided() -> Event {
        ApprovalDecided { call: CallId::new("c2"), approved: true }.into()
    }

    /// The head the provided implementation computes: a fold of the session's log.
    fn folded(store: &dyn JournalStore, session: &SessionId) -> Option<(Seq, UnixMillis, RunHead)> {
        let log = store.read_all(session).unwrap();
        let last = log.last()?;
        let mut head = RunHead::default();
        for r in &log {
            head.advance(&r.event);
        }
        Some((last.seq.next(), last.at, head))
    }

    fn without_lease(head: &SessionHead) -> (Seq, UnixMillis, RunHead) {
        let run = RunHead {
            run: head.run.clone(),
            answered_while_suspended: head.answered_while_suspended,
        };
        (head.tail, head.last_at, run)
    }

    pub fn heads_equal_a_fold_of_the_log_after_every_kind_of_batch(store: &dyn JournalStore) {
        use RunOutcome::{Completed, Stopped, Suspended};
        let batches: Vec<Vec<Event>> = vec![
            vec![numbered(0)],
            vec![started("r1")],
            vec![numbered(1), answered()],
            vec![ended("r1", Suspended)],
            vec![numbered(2)],
            vec![answered()],
            vec![decided(), numbered(3)],
            vec![started("r2"), numbered(4), ended("r2", Suspended), decided()],
            vec![started("r3")],
            vec![ended("r3", Completed), answered()],
            vec![started("r4"), ended("r4", Stopped), started("r5")],
            vec![ended("r5", Suspended)],
        ];
        // Two sessions written in turns (one a batch behind), and one never touched by a run.
        let (a, b, plain) = (sid("heads-b"), sid("heads-a"), sid("heads-c"));
        store
            .append(&plain, Seq(0), &[Stamped::at(UnixMillis(5), numbered(9))], Durability::Synced)
            .unwrap();
        let mut at = 1_700_000_000_000u64;
        for (i, batch) in batches.iter().enumerate() {
            for (session, batch) in [(&a, Some(batch)), (&b, i.checked_sub(1).map(|p| &batches[p]))]
            {
                let Some(batch) = batch else { continue };
                at += 7;
                let stamped: Vec<Stamped> =
                    batch.iter().map(|e| Stamped::at(UnixMillis(at), e.clone())).collect();
                let tail = store.tail(session).unwrap();
                store.append(session, tail, &stamped, Durability::Synced).unwrap();
                let head = store.head(session).unwrap().expect("a session with events has a head");
                assert_eq!(head.session, *session);
                assert_eq!(
                    Some(without_lease(&head)),
                    folded(store, session),
                    "after batch {i} of {session}"
                );
            }
            let heads = store.heads().unwrap();
            let ids: Vec<&SessionId> = heads.iter().map(|h| &h.session).collect();
            let mut sorted: Vec<&SessionId> =
                [&b, &a, &plain].into_iter().filter(|s| store.tail(s).unwrap() > Seq(0)).collect();
            sorted.sort();
            assert_eq!(ids, sorted, "every session with events, sorted");
            for head in &heads {
                assert_eq!(Some(without_lease(head)), folded(store, &head.session));
            }
        }
        assert!(store.head(&sid("heads-none")).unwrap().is_none(), "no events, no head");
        assert!(store.delete(&a).unwrap());
        assert!(store.head(&a).unwrap().is_none(), "a deleted session has no head");
        assert_eq!(store.heads().unwrap().len(), 2);
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn taken(result: LeaseTaken) -> (UnixMillis, Option<Lease>) {
        match result {
            LeaseTaken::Taken { expires, took_over } => (expires, took_over),
            other => panic!("expected the lease taken, got {other:?}"),
        }
    }

    fn held_by(result: LeaseTaken) -> Lease {
        match result {
            LeaseTaken::HeldBy(lease) => lease,
            other => panic!("expected the lease refused, got {other:?}"),
        }
    }

    pub fn a_lease_held_by_one_owner_is_refused_to_another_until_it_expires(
        store: &dyn JournalStore,
    ) {
        let s = sid("lease-held");
        let (a, b) = (OwnerId::new("host-a:1"), OwnerId::new("host-b:2"));
        let (r1, r2) = (RunId::new("r1"), RunId::new("r2"));
        // A session with no events yet can be leased (a run takes it before its first append).
        let (expires, took_over) = taken(store.take_lease(&s, &a, &r1, HOUR, false).unwrap());
        assert_eq!(took_over, None);
        let lease = held_by(store.take_lease(&s, &b, &r2, HOUR, false).unwrap());
        assert_eq!(lease, Lease { owner: a.clone(), run: r1.clone(), expires });
        // The same owner takes it again (a new run of its own), for as long as it asks.
        taken(store.take_lease(&s, &a, &r1, HOUR, false).unwrap());
        assert!(store.heads().unwrap().is_empty(), "a lease alone makes no session");
        // A ttl of 0 lapses at once, by the store's clock: then another owner takes it.
        taken(store.take_lease(&s, &a, &r1, Duration::ZERO, false).unwrap());
        let (_, took_over) = taken(store.take_lease(&s, &b, &r2, HOUR, false).unwrap());
        assert_eq!(took_over, None, "an expired lease is free, not taken over");
        held_by(store.take_lease(&s, &a, &r1, HOUR, false).unwrap());
        // The head shows it once the session has events.
        store
            .append(&s, Seq(0), &[Stamped::at(UnixMillis(1), started("r2"))], Durability::Synced)
            .unwrap();
        let head = store.head(&s).unwrap().unwrap();
        let live = head.live_lease().map(|l| (l.owner.clone(), l.run.clone()));
        assert_eq!(live, Some((b.clone(), r2.clone())), "live by the store's clock at the read");
        let heads = store.heads().unwrap();
        let listed = heads.iter().find(|h| h.session == s).unwrap();
        assert_eq!(listed.live_lease().map(|l| &l.owner), Some(&b), "and so in heads()");
        // Lapsed (a ttl of 0), it is still the head's lease, and the head says it lapsed.
        taken(store.take_lease(&s, &b, &r2, Duration::ZERO, false).unwrap());
        let head = store.head(&s).unwrap().unwrap();
        assert!(head.read_at.is_some(), "a store that keeps leases reads its clock with the head");
        assert_eq!(head.lease.as_ref().map(|l| &l.owner), Some(&b));
        assert_eq!(head.live_lease(), None, "lapsed by the store's clock at the read");
        assert_eq!(store.metrics().leases_taken_over, 0);
    }

    pub fn a_forced_take_replaces_a_live_lease_and_reports_it(store: &dyn JournalStore) {
        let s = sid("lease-forced");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        let (r1, r2) = (RunId::new("r1"), RunId::new("r2"));
        let (expires, _) = taken(store.take_lease(&s, &a, &r1, HOUR, false).unwrap());
        let (_, took_over) = taken(store.take_lease(&s, &b, &r2, HOUR, true).unwrap());
        assert_eq!(took_over, Some(Lease { owner: a.clone(), run: r1.clone(), expires }));
        assert_eq!(store.metrics().leases_taken_over, 1);
        assert_eq!(held_by(store.take_lease(&s, &a, &r1, HOUR, false).unwrap()).owner, b);
        // Forcing a free or expired lease takes nothing over.
        taken(store.take_lease(&s, &b, &r2, Duration::ZERO, false).unwrap());
        let (_, took_over) = taken(store.take_lease(&s, &a, &r1, HOUR, true).unwrap());
        assert_eq!(took_over, None);
        assert_eq!(store.metrics().leases_taken_over, 1);
    }

    pub fn renewing_reports_the_leases_an_owner_lost(store: &dyn JournalStore) {
        let (s1, s2, s3) = (sid("renew-1"), sid("renew-2"), sid("renew-3"));
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        let (r1, r2, r3) = (RunId::new("r1"), RunId::new("r2"), RunId::new("r3"));
        taken(store.take_lease(&s1, &a, &r1, Duration::ZERO, false).unwrap());
        taken(store.take_lease(&s2, &a, &r2, HOUR, false).unwrap());
        taken(store.take_lease(&s2, &b, &RunId::new("rb"), HOUR, true).unwrap());
        let runs = vec![(s1.clone(), r1.clone()), (s2.clone(), r2.clone()), (s3.clone(), r3)];
        let lost = store.renew_leases(&a, &runs, HOUR).unwrap();
        assert_eq!(lost, vec![s2, s3], "taken over, and never held");
        // s1's lease had lapsed with nobody taking it: renewed, it is live again.
        assert_eq!(held_by(store.take_lease(&s1, &b, &r1, HOUR, false).unwrap()).owner, a);
        assert!(store.renew_leases(&a, &[], HOUR).unwrap().is_empty());
        // A lease of another run of the same session is not this run's.
        let lost = store.renew_leases(&a, &[(s1.clone(), RunId::new("other"))], HOUR).unwrap();
        assert_eq!(lost, vec![s1]);
    }

    pub fn a_released_lease_is_free_for_another_owner(store: &dyn JournalStore) {
        let s = sid("lease-released");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        let (r1, r2) = (RunId::new("r1"), RunId::new("r2"));
        taken(store.take_lease(&s, &a, &r1, HOUR, false).unwrap());
        // Released by another owner, or for another run: nothing changes.
        store.release_lease(&s, &b, &r1).unwrap();
        store.release_lease(&s, &a, &r2).unwrap();
        held_by(store.take_lease(&s, &b, &r2, HOUR, false).unwrap());
        store.release_lease(&s, &a, &r1).unwrap();
        let (_, took_over) = taken(store.take_lease(&s, &b, &r2, HOUR, false).unwrap());
        assert_eq!(took_over, None);
        store
            .append(&s, Seq(0), &[Stamped::at(UnixMillis(1), started("r2"))], Durability::Synced)
            .unwrap();
        store.release_lease(&s, &b, &r2).unwrap();
        assert_eq!(store.head(&s).unwrap().unwrap().lease, None);
        // Releasing what is not held is no error.
        store.release_lease(&sid("lease-never"), &a, &r1).unwrap();
    }
}

pub use runtime::*;

/// Instantiates the lease tests for a backend that keeps leases; arguments as for
/// [`backend_conformance!`].
#[macro_export]
macro_rules! backend_lease_conformance {
    (@attrs [$($attrs:tt)*] #[$attr:meta] $($rest:tt)*) => {
        $crate::backend_lease_conformance!(@attrs [$($attrs)* #[$attr]] $($rest)*);
    };
    (@attrs [$($attrs:tt)*] $make:expr) => {
        $crate::backend_conformance!(@tests [$($attrs)*] $make;
            a_lease_held_by_one_owner_is_refused_to_another_until_it_expires,
            a_forced_take_replaces_a_live_lease_and_reports_it,
            renewing_reports_the_leases_an_owner_lost,
            a_released_lease_is_free_for_another_owner,
        );
    };
    ($($input:tt)*) => {
        $crate::backend_lease_conformance!(@attrs [] $($input)*);
    };
}
