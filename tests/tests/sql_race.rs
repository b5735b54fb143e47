//! Writers racing to append to one session through separate connections: two SQLite handles on
//! one file, two SQLite processes, two PostgreSQL stores (separate pools) on one schema. Exactly
//! one writer wins each sequence number, the others get `Conflict`, nothing is duplicated and no
//! gap appears.
#![cfg(any(feature = "sqlite", feature = "postgres"))]

mod support;

use std::sync::Barrier;

use stepjournal_backends::{AppendError, Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId, Stamped, UnixMillis};
use stepjournal_tests::sample::numbered;

/// Each writer `w` appends batches of `1 + w % 2` events marked `numbered(w)` at the tail it
/// last read, until the tail reaches `rounds`. Returns, per writer, the first seq of each batch
/// it won.
fn race(stores: &[&dyn JournalStore], s: &SessionId, rounds: u64) -> Vec<Vec<u64>> {
    let barrier = Barrier::new(stores.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(w, store)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let mut won = Vec::new();
                    let mut conflicts = 0u32;
                    loop {
                        let tail = store.tail(s).unwrap();
                        if tail.get() >= rounds {
                            return won;
                        }
                        let n = 1 + w as u64 % 2;
                        let batch: Vec<Stamped> = (0..n)
                            .map(|_| Stamped::at(UnixMillis(w as u64), numbered(w as u64)))
                            .collect();
                        match store.append(s, tail, &batch, Durability::Synced) {
                            Ok(ack) => {
                                assert_eq!((ack.first, ack.next), (tail, tail.add(n)));
                                won.push(tail.get());
                            }
                            Err(AppendError::Conflict { expected, actual }) => {
                                assert_eq!(expected, tail);
                                assert!(actual > tail, "a conflict reports a later tail");
                                conflicts += 1;
                                assert!(conflicts < 100_000, "writer {w} never wins");
                            }
                            Err(e) => panic!("writer {w}: unexpected error: {e}"),
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Checks the log against what each writer says it won: every seq covered once, by the writer
/// whose mark it holds.
fn check(store: &dyn JournalStore, s: &SessionId, wins: &[Vec<u64>]) {
    let log = store.read_all(s).unwrap();
    let tail = store.tail(s).unwrap();
    assert_eq!(log.len() as u64, tail.get());
    let mut owner = vec![None; log.len()];
    for (w, firsts) in wins.iter().enumerate() {
        for &first in firsts {
            for q in first..first + 1 + w as u64 % 2 {
                let slot = &mut owner[q as usize];
                assert!(slot.is_none(), "seq {q} won twice");
                *slot = Some(w);
            }
        }
    }
    for (q, (w, r)) in owner.iter().zip(&log).enumerate() {
        let w = w.unwrap_or_else(|| panic!("seq {q} is in the log but nobody won it"));
        assert_eq!(r.seq, Seq(q as u64));
        assert_eq!(r.event, numbered(w as u64), "seq {q} holds another writer's event");
    }
    assert!(wins.iter().filter(|w| !w.is_empty()).count() >= 1);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};

    use super::*;

    #[test]
    fn two_handles_on_one_file_win_each_seq_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("race.sqlite");
        let a = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        let b = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        let s = SessionId::new("race").unwrap();
        let stores: Vec<&dyn JournalStore> = vec![&a, &b, &a, &b];
        let wins = race(&stores, &s, 120);
        check(&a, &s, &wins);
        check(&b, &s, &wins);
    }

    #[test]
    fn two_processes_on_one_file_win_each_seq_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("race.sqlite");
        // Create the schema first so the children do not both start on an empty file.
        let store = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        let mut children: Vec<_> = (0..2)
            .map(|tag| {
                Command::new(env!("CARGO_BIN_EXE_sqlite_child"))
                    .args(["race", db.to_str().unwrap(), "race", "80", &tag.to_string()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Both are running: start them together.
        for child in &mut children {
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        let mut won: Vec<Vec<u64>> = Vec::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "a racing child failed: {}", out.status);
            let text = String::from_utf8(out.stdout).unwrap();
            won.push(
                text.lines()
                    .map(|l| l.strip_prefix("won ").unwrap().parse::<u64>().unwrap())
                    .collect(),
            );
        }
        let s = SessionId::new("race").unwrap();
        let log = store.read_all(&s).unwrap();
        assert_eq!(log.len(), 80);
        let mut all: Vec<u64> = won.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..80).collect::<Vec<_>>(), "every seq won exactly once");
        for (tag, seqs) in won.iter().enumerate() {
            for &q in seqs {
                assert_eq!(log[q as usize].event, numbered(tag as u64), "seq {q}");
            }
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use stepjournal_backends::postgres::PostgresOptions;

    use super::support::pg::{self, PgFixture};
    use super::*;

    #[test]
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    fn two_stores_on_one_schema_win_each_seq_once() {
        let schema = pg::fresh_schema("race");
        let a = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
        let b = PgFixture::guest(&pg::url(), &schema, PostgresOptions::default());
        let s = SessionId::new("race").unwrap();
        let stores: Vec<&dyn JournalStore> = vec![&*a, &*b, &*a, &*b, &*a, &*b];
        let wins = race(&stores, &s, 150);
        check(&*a, &s, &wins);
        check(&*b, &s, &wins);
        // A new session raced at 0: only one creates it.
        let fresh = SessionId::new("race-new").unwrap();
        let wins = race(&stores, &fresh, 1);
        assert_eq!(wins.iter().map(Vec::len).sum::<usize>(), 1, "one writer creates the session");
        check(&*a, &fresh, &wins);
    }

    #[test]
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    fn serializable_isolation_failures_are_retried_and_each_seq_is_won_once() {
        // What a Postgres-wire distributed database does by default: SERIALIZABLE, where a
        // writer that loses a race on the head row gets SQLSTATE 40001.
        let schema = pg::fresh_schema("serial");
        let url = pg::with_param(
            &pg::url(),
            "options",
            "-c%20default_transaction_isolation%3Dserializable",
        );
        let a = PgFixture::at(&url, &schema, PostgresOptions::default());
        let b = PgFixture::guest(&url, &schema, PostgresOptions::default());
        let s = SessionId::new("serial").unwrap();
        let stores: Vec<&dyn JournalStore> = vec![&*a, &*b, &*a, &*b, &*a, &*b];
        let wins = race(&stores, &s, 150);
        check(&*a, &s, &wins);
        let retried = a.stats().retried + b.stats().retried;
        assert!(retried > 0, "six writers on one head row never met a serialization failure");
    }
}
