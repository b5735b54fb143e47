//! The backend conformance suite on PostgreSQL, each test in a fresh schema dropped after.
//! Needs `STEPJOURNAL_PG_URL`; without it every test is reported ignored, with the reason.
#![cfg(feature = "postgres")]

mod support;

use support::pg::PgFixture;

stepjournal_tests::backend_conformance!(
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    || PgFixture::new("conf")
);

stepjournal_tests::backend_lease_conformance!(
    #[cfg_attr(
        not(stepjournal_pg),
        ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
    )]
    || PgFixture::new("lease")
);

use std::sync::Barrier;

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};
use stepjournal_tests::sample::{numbered, stamped_numbered};
use support::pg;

#[test]
fn an_unreachable_server_is_a_clear_error_naming_it() {
    let mut options = PostgresOptions::default();
    options.connect_timeout = std::time::Duration::from_secs(2);
    let err =
        PostgresStore::connect("postgres://nobody:secret@127.0.0.1:1/nowhere?schema=x", options);
    let err = err.unwrap_err().to_string();
    assert!(err.contains("127.0.0.1:1/nowhere") && err.contains("connecting"), "{err}");
    assert!(!err.contains("secret"), "the password leaked: {err}");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn stores_opening_one_new_schema_at_once_all_succeed() {
    let schema = pg::fresh_schema("migrate");
    let barrier = Barrier::new(4);
    let fixtures: Vec<PgFixture> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (schema, barrier) = (&schema, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    if i == 0 {
                        PgFixture::at(&pg::url(), schema, PostgresOptions::default())
                    } else {
                        PgFixture::guest(&pg::url(), schema, PostgresOptions::default())
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let s = SessionId::new("shared").unwrap();
    fixtures[1].append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    for f in &fixtures {
        assert_eq!(f.tail(&s).unwrap(), Seq(2));
    }
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn appends_are_there_for_a_store_connecting_later() {
    let first = PgFixture::new("later");
    let s = SessionId::new("kept").unwrap();
    first.append(&s, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    first.append(&s, Seq(3), &stamped_numbered(3, 2), Durability::Buffered).unwrap();
    let later = PgFixture::guest(&pg::url(), first.schema(), PostgresOptions::default());
    let log = later.read_all(&s).unwrap();
    assert_eq!(log.len(), 5);
    assert!(log.iter().all(|r| r.event == numbered(r.seq.get()) && r.session == s));
    assert_eq!(later.sessions().unwrap(), vec![s]);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_pool_of_one_serves_many_threads_in_turn() {
    let schema = pg::fresh_schema("pool");
    let url = pg::with_param(&pg::url(), "pool_size", "1");
    let store = PgFixture::at(&url, &schema, PostgresOptions::default());
    std::thread::scope(|scope| {
        for t in 0..6u64 {
            let store = &store;
            scope.spawn(move || {
                let s = SessionId::new(format!("pool-{t}").as_str()).unwrap();
                for i in 0..5 {
                    store.append(&s, Seq(i), &stamped_numbered(i, 1), Durability::Synced).unwrap();
                }
            });
        }
    });
    assert_eq!(store.sessions().unwrap().len(), 6);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_read_only_store_creates_no_schema_and_refuses_writes() {
    let mut read_only = PostgresOptions::default();
    read_only.read_only = true;
    // A schema that does not exist is an error.
    let absent = pg::fresh_schema("absent");
    let url = pg::with_param(&pg::url(), "schema", &absent);
    let err = PostgresStore::connect(&url, read_only.clone()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("holds no stepjournal store"), "{err}");
    // On an existing store it reads, and refuses appends and deletes.
    let writer = PgFixture::new("ro");
    let s = SessionId::new("s").unwrap();
    writer.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    let url = pg::with_param(&pg::url(), "schema", writer.schema());
    let reader = PostgresStore::connect(&url, read_only).unwrap();
    assert_eq!(reader.read_all(&s).unwrap().len(), 2);
    let err = reader.append(&s, Seq(2), &stamped_numbered(2, 1), Durability::Synced).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(reader.delete(&s).is_err());
    assert_eq!(writer.tail(&s).unwrap(), Seq(2));
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn appends_reads_and_tails_are_awaited_by_a_caller_that_is_no_runtime() {
    // Forty appends in flight at once from one thread, polled by a plain executor on it: the
    // store's own runtime completes them, no thread waits per append.
    let store = PgFixture::new("async");
    let sessions: Vec<SessionId> =
        (0..40).map(|i| SessionId::new(format!("async-{i:02}")).unwrap()).collect();
    let appends: Vec<_> = sessions
        .iter()
        .map(|s| store.append_async(s, Seq(0), &stamped_numbered(0, 2), Durability::Synced))
        .collect();
    for ack in support::exec::join_all(appends) {
        assert_eq!(ack.unwrap().next, Seq(2));
    }
    let tails = support::exec::join_all(sessions.iter().map(|s| store.tail_async(s)).collect());
    assert!(tails.into_iter().all(|t| t.unwrap() == Seq(2)));
    let log = support::exec::block_on(store.read_async(&sessions[7], Seq(0)..Seq(9))).unwrap();
    assert!(log.iter().all(|r| r.event == numbered(r.seq.get()) && r.session == sessions[7]));
    assert_eq!(log.len(), 2);
    let m = store.metrics();
    assert_eq!((m.appends, m.syncs), (40, 40), "{m:?}");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn sessions_of_a_schema_written_before_heads_read_as_unknown_until_a_run_event() {
    use stepjournal_backends::RunState;
    use stepjournal_codec::{Entry, RunId, RunStarted, Stamped, UnixMillis};
    let first = PgFixture::new("preheads");
    let s = SessionId::new("old").unwrap();
    first.append(&s, Seq(0), &stamped_numbered(0, 3), Durability::Synced).unwrap();
    // The schema as version 2 left it: no head columns.
    let mut c = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let schema = first.schema().to_owned();
    c.batch_execute(&format!(
        "ALTER TABLE \"{schema}\".sessions DROP COLUMN last_at, DROP COLUMN run_state,
             DROP COLUMN run_id, DROP COLUMN outcome, DROP COLUMN answered,
             DROP COLUMN lease_owner, DROP COLUMN lease_run, DROP COLUMN lease_expires;
         DELETE FROM \"{schema}\".schema_version WHERE version > 2;"
    ))
    .unwrap();
    let store = PgFixture::guest(&pg::url(), &schema, PostgresOptions::default());
    let head = store.head(&s).unwrap().unwrap();
    let last = stamped_numbered(2, 1)[0].at;
    assert_eq!((head.tail, head.last_at, head.run), (Seq(3), last, RunState::Unknown));
    store.append(&s, Seq(3), &stamped_numbered(3, 1), Durability::Synced).unwrap();
    assert_eq!(store.head(&s).unwrap().unwrap().run, RunState::Unknown, "still not known");
    let started = Stamped::at(
        UnixMillis(9),
        RunStarted { run: RunId::new("r"), entry: Entry::Wake, by: None },
    );
    store.append(&s, Seq(4), &[started], Durability::Synced).unwrap();
    let head = store.head(&s).unwrap().unwrap();
    assert_eq!((head.tail, head.run), (Seq(5), RunState::Open { run: RunId::new("r") }));
    assert_eq!(store.heads().unwrap().len(), 1);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_schema_at_version_3_gets_the_snapshot_index_on_open() {
    use stepjournal_backends::postgres::SCHEMA_VERSION;
    use stepjournal_codec::{EventKind, Stamped, UnixMillis};
    use stepjournal_tests::sample::every_event_type;
    let snapshot = every_event_type().into_iter().find(|e| e.kind() == EventKind::Snapshot);
    let snapshot = Stamped::at(UnixMillis(1_700_000_000_003), snapshot.unwrap());
    let first = PgFixture::new("presnap");
    let s = SessionId::new("old").unwrap();
    let mut log = stamped_numbered(0, 6);
    log[3] = snapshot.clone();
    first.append(&s, Seq(0), &log, Durability::Synced).unwrap();
    // The schema as version 3 left it: no index of snapshots.
    let mut c = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let schema = first.schema().to_owned();
    c.batch_execute(&format!(
        "DROP INDEX \"{schema}\".events_snapshots;
         DELETE FROM \"{schema}\".schema_version WHERE version > 3;"
    ))
    .unwrap();
    let mut read_only = PostgresOptions::default();
    read_only.read_only = true;
    let url = pg::with_param(&pg::url(), "schema", &schema);
    let err = PostgresStore::connect(&url, read_only.clone()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("is at version 3, older than this build's 4"), "{err}");

    let store = PgFixture::guest(&pg::url(), &schema, PostgresOptions::default());
    let versions: Vec<i32> = c
        .query(&format!("SELECT version FROM \"{schema}\".schema_version ORDER BY version"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!((versions, SCHEMA_VERSION), (vec![1, 2, 3, 4], 4));
    let index: String = c
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'events_snapshots'",
            &[&schema],
        )
        .unwrap()
        .get(0);
    assert!(index.ends_with("(session, seq) WHERE (kind = 17)"), "{index}");
    // The plan of the read (the statement's text as the store prepares it) finds the snapshot
    // in its index. Sequential scans are off: on a table this small one would cost less.
    c.batch_execute("SET enable_seqscan = off").unwrap();
    let explain = format!(
        "EXPLAIN SELECT seq, record FROM \"{schema}\".events
         WHERE session = $1 AND seq >= coalesce(
             (SELECT max(seq) FROM \"{schema}\".events WHERE session = $1 AND kind = 17), 0)
         ORDER BY seq"
    );
    let plan: Vec<String> =
        c.query(&explain, &[&"old"]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(plan.iter().any(|l| l.contains("using events_snapshots")), "{plan:#?}");
    let got = store.read_from_snapshot(&s).unwrap();
    assert_eq!(got, store.read(&s, Seq(3)..Seq(6)).unwrap(), "the rows written before the index");
    store.append(&s, Seq(6), &[snapshot], Durability::Synced).unwrap();
    let got = support::exec::block_on(store.read_from_snapshot_async(&s)).unwrap();
    assert_eq!(got.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![Seq(6)]);
    // Opened again, read-only too, the index is the store's own.
    let reader = PostgresStore::connect(&url, read_only).unwrap();
    assert_eq!(reader.read_from_snapshot(&s).unwrap(), got);
    drop(PgFixture::guest(&pg::url(), &schema, PostgresOptions::default()));
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_closed_store_ends_its_connections_to_the_server() {
    // Its connections are told apart by their application name.
    let name = format!("sj-close-{}", std::process::id());
    let fixture = PgFixture::new("close");
    let url = pg::with_param(&pg::url(), "schema", fixture.schema());
    let url = pg::with_param(&url, "application_name", &name);
    let store = PostgresStore::connect(&url, PostgresOptions::default()).unwrap();
    let s = SessionId::new("s").unwrap();
    store.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    assert_eq!(store.read_all(&s).unwrap().len(), 2);
    let mut server = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let mut open = || -> i64 {
        let q = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1";
        server.query_one(q, &[&name]).unwrap().get(0)
    };
    assert!(open() >= 1, "the store holds a connection");
    store.close().unwrap();
    // Ended by the store's side: the server sees them go within moments.
    let start = std::time::Instant::now();
    while open() > 0 {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "{} still open", open());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(store);
    drop(fixture);
}
