//! What only the backend's own connection can show: damaged rows, the schema version, the
//! `synchronous` level per append, poisoning.

use rusqlite::{Connection, params};
use stepjournal_codec::{Message, Role, UnixMillis};

use super::conn::lock;
use super::*;

fn events(from: u64, n: u64) -> Vec<Stamped> {
    (from..from + n)
        .map(|i| Stamped::at(UnixMillis(i), Message { role: Role::User, text: format!("e{i}") }))
        .collect()
}

fn store(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("db.sqlite"), SqliteOptions::default()).unwrap()
}

fn raw(dir: &tempfile::TempDir) -> Connection {
    Connection::open(dir.path().join("db.sqlite")).unwrap()
}

#[test]
fn a_damaged_row_is_reported_corrupt_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    store.append(&s, Seq(0), &events(0, 3), Durability::Synced).unwrap();
    let conn = raw(&dir);
    let mut record: Vec<u8> =
        conn.query_row("SELECT record FROM events WHERE seq = 1", [], |r| r.get(0)).unwrap();
    let last = record.len() - 1;
    record[last] ^= 0x40;
    conn.execute("UPDATE events SET record = ?1 WHERE seq = 1", [&record]).unwrap();
    let err = store.read_all(&s).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("session s, seq 1"), "{err}");
    assert_eq!(store.read(&s, Seq(0)..Seq(1)).unwrap().len(), 1, "rows before it still read");
    conn.execute("UPDATE events SET record = 'text' WHERE seq = 2", []).unwrap();
    let err = store.read(&s, Seq(2)..Seq(3)).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("not a blob"), "{err}");
}

#[test]
fn a_row_moved_to_another_place_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (s, t) = (SessionId::from_stored("s"), SessionId::from_stored("t"));
    let store = store(&dir);
    store.append(&s, Seq(0), &events(0, 2), Durability::Synced).unwrap();
    raw(&dir).execute("UPDATE events SET session = 't' WHERE seq = 1", []).unwrap();
    let err = store.read_all(&t).unwrap_err();
    assert!(err.to_string().contains("holds the record of session s seq 1"), "{err}");
    let err = store.read_all(&s);
    assert_eq!(err.unwrap().len(), 1, "s keeps its first row");
    raw(&dir).execute("UPDATE events SET session = 's', seq = 2 WHERE session = 't'", []).unwrap();
    let err = store.read_all(&s).unwrap_err();
    assert!(err.to_string().contains("holds the record of session s seq 1"), "{err}");
}

#[test]
fn a_schema_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(store(&dir));
    raw(&dir).execute("INSERT INTO schema_version VALUES (99)", []).unwrap();
    let err = SqliteStore::open(dir.path().join("db.sqlite"), SqliteOptions::default());
    let err = err.unwrap_err().to_string();
    assert!(err.contains("version 99") && err.contains("newer"), "{err}");
}

#[test]
fn opening_twice_migrates_once() {
    let dir = tempfile::tempdir().unwrap();
    drop(store(&dir));
    drop(store(&dir));
    let versions: Vec<i64> = raw(&dir)
        .prepare("SELECT version FROM schema_version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
}

#[test]
fn each_append_sets_the_synchronous_level_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    let level = |store: &SqliteStore| -> i64 {
        lock(&store.shared.writer).conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap()
    };
    let ack = store.append(&s, Seq(0), &events(0, 1), Durability::Buffered).unwrap();
    assert_eq!((ack.durability, level(&store)), (Durability::Buffered, 1), "NORMAL");
    let ack = store.append(&s, Seq(1), &events(1, 1), Durability::Synced).unwrap();
    assert_eq!((ack.durability, level(&store)), (Durability::Synced, 2), "FULL");
    let mode: String = raw(&dir).query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_failed_write_poisons_the_store_until_it_is_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    store.append(&s, Seq(0), &events(0, 1), Durability::Synced).unwrap();
    // The insert fails inside the transaction, after the tail check.
    let conn = raw(&dir);
    conn.execute_batch(
        "CREATE TRIGGER fail BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'injected'); END",
    )
    .unwrap();
    let err = store.append(&s, Seq(1), &events(1, 1), Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Store(StoreError::Backend { .. })), "{err:?}");
    for err in [
        store.tail(&s).unwrap_err(),
        store.read_all(&s).unwrap_err(),
        store.delete(&s).unwrap_err(),
        store.append(&s, Seq(1), &events(1, 1), Durability::Synced).unwrap_err().into_store(),
    ] {
        assert!(matches!(err, StoreError::Poisoned { .. }), "{err:?}");
        assert!(err.to_string().contains("appending to s at 1"), "{err}");
    }
    drop(store);
    conn.execute_batch("DROP TRIGGER fail").unwrap();
    let reopened = SqliteStore::open(dir.path().join("db.sqlite"), SqliteOptions::default());
    assert_eq!(reopened.unwrap().tail(&s).unwrap(), Seq(1), "nothing of the failed batch");
}

#[test]
fn a_busy_database_fails_the_append_without_poisoning() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let options = SqliteOptions { busy_timeout: Duration::from_millis(50), ..Default::default() };
    let store = SqliteStore::open(dir.path().join("db.sqlite"), options).unwrap();
    let other = raw(&dir);
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store.append(&s, Seq(0), &events(0, 1), Durability::Synced).unwrap_err();
    assert!(err.to_string().contains("busy timeout"), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    store.append(&s, Seq(0), &events(0, 1), Durability::Synced).unwrap();
}

#[test]
fn appends_waiting_for_a_commit_share_the_next_one_each_with_its_own_check() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let writer = lock(&store.shared.writer);
    let results = std::thread::scope(|scope| {
        // The first append takes the lead and waits for the writer connection held here; the
        // others queue behind it. Two of them race for one session at 0.
        let first = scope.spawn(|| {
            store.append(&SessionId::from_stored("lead"), Seq(0), &events(0, 1), Durability::Synced)
        });
        while store.shared.queue.counts().1 < 1 {
            std::thread::yield_now();
        }
        let names = ["a", "b", "c", "same", "same"];
        let handles: Vec<_> = names
            .into_iter()
            .map(|n| {
                let store = &store;
                scope.spawn(move || {
                    let s = SessionId::from_stored(n);
                    store.append(&s, Seq(0), &events(0, 2), Durability::Buffered)
                })
            })
            .collect();
        while store.shared.queue.counts().0 < names.len() {
            std::thread::yield_now();
        }
        drop(writer);
        let mut results = vec![first.join().unwrap()];
        results.extend(handles.into_iter().map(|h| h.join().unwrap()));
        results
    });
    assert_eq!(
        store.shared.queue.counts(),
        (0, 2),
        "two transactions: the leader's, then the rest"
    );
    let landed = results.iter().filter(|r| r.is_ok()).count();
    let conflicts: Vec<_> = results
        .iter()
        .filter_map(|r| match r {
            Err(AppendError::Conflict { expected, actual }) => Some((*expected, *actual)),
            _ => None,
        })
        .collect();
    assert_eq!((landed, conflicts), (5, vec![(Seq(0), Seq(2))]), "{results:?}");
    for n in ["a", "b", "c", "same"] {
        assert_eq!(store.read_all(&SessionId::from_stored(n)).unwrap().len(), 2, "{n}");
    }
}

#[test]
fn an_enormous_busy_timeout_is_capped_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions { busy_timeout: Duration::MAX, ..Default::default() };
    let store = SqliteStore::open(dir.path().join("db.sqlite"), options).unwrap();
    assert_eq!(store.tail(&SessionId::from_stored("s")).unwrap(), Seq(0));
}

trait IntoStore {
    fn into_store(self) -> StoreError;
}

impl IntoStore for AppendError {
    fn into_store(self) -> StoreError {
        match self {
            AppendError::Store(e) => e,
            other => panic!("expected a store error, got {other:?}"),
        }
    }
}

#[test]
fn a_read_only_store_reads_behind_a_held_write_lock_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let writer = store(&dir);
    writer.append(&s, Seq(0), &events(0, 3), Durability::Synced).unwrap();
    // Another connection holds the write lock for as long as the reader works.
    let other = raw(&dir);
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let options = SqliteOptions { busy_timeout: Duration::from_millis(50), ..Default::default() };
    let reader = SqliteStore::open(dir.path().join("db.sqlite"), options.read_only(true)).unwrap();
    assert_eq!(reader.read_all(&s).unwrap().len(), 3);
    assert_eq!(reader.sessions().unwrap(), vec![s.clone()]);
    let err = reader.append(&s, Seq(3), &events(3, 1), Durability::Synced).unwrap_err();
    assert!(matches!(err, AppendError::Store(StoreError::ReadOnly { .. })), "{err:?}");
    assert!(matches!(reader.delete(&s), Err(StoreError::ReadOnly { .. })));
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(writer.tail(&s).unwrap(), Seq(3), "the refused writes wrote nothing");
}

#[test]
fn a_read_only_open_creates_nothing_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sqlite");
    let options = SqliteOptions::default().read_only(true);
    let err = SqliteStore::open(&missing, options.clone()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("missing.sqlite"), "{err}");
    assert!(!missing.exists(), "a read-only open created the file");
    let other = dir.path().join("other.sqlite");
    Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    let err = SqliteStore::open(&other, options).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("is this a stepjournal database"), "{err}");
}

#[test]
fn an_async_append_never_commits_on_its_callers_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    // With the write connection held here, an append that ran its transaction on the calling
    // thread would block this test forever; async appends return at once, pending.
    let writer = lock(&store.shared.writer);
    let futures: Vec<_> = (0..100u64)
        .map(|i| {
            let s = SessionId::from_stored(format!("s{i}"));
            store.append_async(&s, Seq(0), &events(i, 1), Durability::Synced)
        })
        .collect();
    assert!(futures.iter().all(|f| !f.is_ready()), "nothing commits while the writer is held");
    drop(writer);
    for (i, f) in futures.into_iter().enumerate() {
        let ack = f.wait().unwrap();
        assert_eq!((ack.first, ack.next), (Seq(0), Seq(1)), "s{i}");
    }
    let m = store.metrics();
    assert_eq!(m.appends, 100);
    // The committer took what had queued when it woke and blocked on the writer; everything
    // else queued behind it, for one more group.
    assert!(m.groups <= 2, "{m:?}");
}

#[test]
fn a_dropped_store_commits_what_is_queued_before_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    let futures: Vec<_> = (0..20u64)
        .map(|i| store.append_async(&s, Seq(i), &events(i, 1), Durability::Buffered))
        .collect();
    drop(store);
    let landed = futures.into_iter().filter(|f| f.is_ready()).count();
    assert_eq!(landed, 20, "every future was answered before the store closed");
    assert_eq!(self::store(&dir).tail(&s).unwrap(), Seq(20));
}

#[test]
fn metrics_count_landed_appends_groups_and_synced_commits() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    store.append(&s, Seq(0), &events(0, 2), Durability::Synced).unwrap();
    store.append(&s, Seq(2), &events(2, 1), Durability::Buffered).unwrap();
    store.append(&s, Seq(0), &events(0, 1), Durability::Synced).unwrap_err();
    let m = store.metrics();
    // The conflicting append had a transaction of its own, rolled back: a group, no sync.
    assert_eq!((m.appends, m.groups, m.max_group, m.syncs), (2, 3, 1, 1), "{m:?}");
    assert!(m.bytes > 0 && m.poisoned == 0, "{m:?}");
}

#[test]
fn sessions_of_a_journal_written_before_heads_read_as_unknown_until_a_run_event() {
    use crate::head::RunState;
    use stepjournal_codec::{Entry, RunId, RunStarted};
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("old");
    drop(store(&dir));
    // The file as schema version 1 left it: events only.
    raw(&dir)
        .execute_batch(
            "DROP TABLE sessions; DROP INDEX events_snapshots;
             DELETE FROM schema_version WHERE version > 1;",
        )
        .unwrap();
    let v1 = raw(&dir);
    let mut insert = v1.prepare("INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5)").unwrap();
    let limits = Limits::default();
    let (batch, _) = crate::sql::encode_batch(&s, Seq(0), &events(0, 3), &limits).unwrap();
    for row in &batch.rows {
        insert.execute(params![s.as_str(), row.seq, row.at, row.kind, batch.record(row)]).unwrap();
    }
    drop(insert);
    drop(v1);
    let store = store(&dir);
    let head = store.head(&s).unwrap().unwrap();
    assert_eq!((head.tail, head.last_at, head.run), (Seq(3), UnixMillis(2), RunState::Unknown));
    store.append(&s, Seq(3), &events(3, 1), Durability::Synced).unwrap();
    assert_eq!(store.head(&s).unwrap().unwrap().run, RunState::Unknown, "still not known");
    let started = Stamped::at(
        UnixMillis(9),
        RunStarted { run: RunId::new("r"), entry: Entry::Wake, by: None },
    );
    store.append(&s, Seq(4), &[started], Durability::Synced).unwrap();
    let head = store.head(&s).unwrap().unwrap();
    assert_eq!((head.tail, head.run), (Seq(5), RunState::Open { run: RunId::new("r") }));
}

fn snapshot(seq: u64) -> Stamped {
    let snapshot = stepjournal_codec::Snapshot {
        len: seq,
        run: None,
        run_end: None,
        reply: None,
        commit: None,
        committed: vec![],
    };
    Stamped::at(UnixMillis(seq), snapshot)
}

/// The plan SQLite makes for the read from a session's newest snapshot: each step's detail.
fn plan_of_the_read_from_a_snapshot(conn: &Connection, session: &str) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", read::FROM_SNAPSHOT)).unwrap();
    let details = stmt.query_map([session], |r| r.get::<_, String>(3)).unwrap();
    details.collect::<Result<_, _>>().unwrap()
}

#[test]
fn the_read_from_a_snapshot_searches_the_snapshot_index_never_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let (s, t) = (SessionId::from_stored("s"), SessionId::from_stored("t"));
    // Long histories with a snapshot every 50 events, in two sessions.
    for session in [&s, &t] {
        for from in (0..500).step_by(50) {
            let mut batch = events(from, 50);
            batch[10] = snapshot(from + 10);
            store.append(session, Seq(from), &batch, Durability::Buffered).unwrap();
        }
    }
    let conn = raw(&dir);
    for stats in ["without statistics", "after ANALYZE"] {
        if stats == "after ANALYZE" {
            conn.execute_batch("ANALYZE").unwrap();
        }
        let plan = plan_of_the_read_from_a_snapshot(&conn, "s");
        assert!(
            plan.iter().any(|d| d.starts_with("SEARCH") && d.contains("INDEX events_snapshots")),
            "{stats}: the snapshot is not looked up in its index: {plan:?}"
        );
        assert!(
            plan.iter()
                .any(|d| d.starts_with("SEARCH events USING PRIMARY KEY (session=? AND seq>?)")),
            "{stats}: the rows are not a range of the primary key: {plan:?}"
        );
        assert!(!plan.iter().any(|d| d.starts_with("SCAN")), "{stats}: a scan: {plan:?}");
    }
    let got = store.read_from_snapshot(&s).unwrap();
    assert_eq!(got, store.read(&s, Seq(460)..Seq(500)).unwrap());
    assert_eq!(got.len(), 40);
    let other = store.read_from_snapshot_async(&t).wait().unwrap();
    assert_eq!(other, store.read(&t, Seq(460)..Seq(500)).unwrap());
}

#[test]
fn a_journal_at_schema_version_2_gets_the_snapshot_index_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("old");
    let mut log = events(0, 6);
    log[3] = snapshot(3);
    // The file as schema version 2 left it, made by its own migrations: events first (the
    // second fills the head rows from them).
    let v2 = raw(&dir);
    v2.execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL)").unwrap();
    v2.execute_batch(schema::MIGRATIONS[0]).unwrap();
    let (batch, _) = crate::sql::encode_batch(&s, Seq(0), &log, &Limits::default()).unwrap();
    let mut insert = v2.prepare("INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5)").unwrap();
    for row in &batch.rows {
        insert.execute(params![s.as_str(), row.seq, row.at, row.kind, batch.record(row)]).unwrap();
    }
    drop(insert);
    v2.execute_batch(schema::MIGRATIONS[1]).unwrap();
    v2.execute_batch("INSERT INTO schema_version VALUES (1), (2)").unwrap();
    drop(v2);
    let read_only = SqliteOptions::default().read_only(true);
    let err = SqliteStore::open(dir.path().join("db.sqlite"), read_only.clone()).unwrap_err();
    assert!(err.to_string().contains("version 2, older than this build's 3"), "{err}");

    let store = store(&dir);
    let conn = raw(&dir);
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM schema_version ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, vec![1, 2, 3]);
    let plan = plan_of_the_read_from_a_snapshot(&conn, "old");
    assert!(plan.iter().any(|d| d.contains("INDEX events_snapshots")), "{plan:?}");
    let got = store.read_from_snapshot(&s).unwrap();
    assert_eq!(got, store.read(&s, Seq(3)..Seq(6)).unwrap(), "the rows written before the index");
    store.append(&s, Seq(6), &[snapshot(6)], Durability::Synced).unwrap();
    assert_eq!(store.read_from_snapshot(&s).unwrap().first().map(|r| r.seq), Some(Seq(6)));
    drop(store);
    // Its index is the journal's own: reopened, read-only too, it is no foreign object.
    let reader = SqliteStore::open(dir.path().join("db.sqlite"), read_only).unwrap();
    assert_eq!(reader.read_from_snapshot(&s).unwrap().len(), 1);
    drop(self::store(&dir));
}

#[test]
fn a_snapshot_row_whose_record_is_no_snapshot_is_reported_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    store.append(&s, Seq(0), &events(0, 4), Durability::Synced).unwrap();
    raw(&dir).execute("UPDATE events SET kind = 17 WHERE seq = 2", []).unwrap();
    let err = store.read_from_snapshot(&s).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("starts at seq 2 with a `message` record"), "{err}");
}

#[test]
fn async_reads_run_on_reading_threads_and_answer_as_the_sync_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = SessionId::from_stored("s");
    let store = store(&dir);
    for b in 0..5 {
        store.append(&s, Seq(b * 2), &events(b * 2, 2), Durability::Buffered).unwrap();
    }
    let whole = store.read(&s, Seq(0)..Seq(u64::MAX)).unwrap();
    let from = store.read_from_snapshot(&s).unwrap();
    let heads = store.heads().unwrap();
    assert_eq!(store.readers.threads(), 0, "a sync read starts no thread");
    assert_eq!(store.read_async(&s, Seq(0)..Seq(u64::MAX)).wait().unwrap(), whole);
    assert_eq!(store.readers.threads(), 1);
    assert_eq!(store.read_async(&s, Seq(3)..Seq(7)).wait().unwrap(), whole[3..7]);
    assert_eq!(store.read_from_snapshot_async(&s).wait().unwrap(), from);
    // The same heads, each read at its own time by the store's clock.
    let unstamped = |heads: Vec<SessionHead>| {
        heads.into_iter().map(|h| SessionHead { read_at: None, ..h }).collect::<Vec<_>>()
    };
    assert_eq!(unstamped(store.heads_async().wait().unwrap()), unstamped(heads.clone()));
    let head = store.head_async(&s).wait().unwrap().map(|h| SessionHead { read_at: None, ..h });
    assert_eq!(head, unstamped(heads).pop());
    let missing = SessionId::from_stored("missing");
    assert_eq!(store.head_async(&missing).wait().unwrap(), None);
    assert_eq!(whole.len(), 10);
}
