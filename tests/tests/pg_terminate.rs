//! The server ends the store's connections while several writers append (the audit's
//! connection-kill loop, bounded): `pg_terminate_backend` of every connection of the store,
//! round after round. No acknowledged append is lost, none lands twice, and every log stays
//! dense: a connection lost in the middle of an append is resolved through its batch token.
#![cfg(feature = "postgres")]

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use stepjournal_backends::postgres::PostgresOptions;
use stepjournal_backends::{AppendError, Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};
use stepjournal_tests::sample::{numbered, stamped_numbered};
use stepjournal_tests::watchdog::Watchdog;
use support::pg::{self, PgFixture};

const WRITERS: u64 = 6;
const APPENDS: u64 = 40;

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn terminated_connections_lose_no_acknowledged_append_and_duplicate_none() {
    let schema = pg::fresh_schema("terminate");
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    // The store under fire names its connections, so that only they are ended.
    let name = format!("sjt_terminate_{}", std::process::id());
    let url = pg::with_param(&pg::url(), "application_name", &name);
    let store = PgFixture::guest(&url, &schema, PostgresOptions::default());
    let _watchdog = Watchdog::start("the writers under connection kills", Duration::from_secs(120));

    let done = AtomicBool::new(false);
    /// Stops the kills when a writer's panic unwinds it, so that the scope can end.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.store(true, Ordering::SeqCst);
            }
        }
    }
    let killed = AtomicU64::new(0);
    let gave_up = AtomicU64::new(0);
    let acked: Vec<(SessionId, u64)> = std::thread::scope(|scope| {
        // A round every 10 to 40 ms: connections live long enough to carry appends.
        let kills = scope.spawn(|| {
            pg::kill_loop(&name, &done, &killed, |n| Duration::from_millis(10 + 10 * (n % 4)))
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (store, direct, done, gave_up) = (&*store, &*direct, &done, &gave_up);
                scope.spawn(move || {
                    let _stop = Stop(done);
                    let s = SessionId::new(format!("writer-{w}")).unwrap();
                    let mut tail = Seq(0);
                    for i in 0..APPENDS {
                        let n = 1 + (w + i) % 2;
                        let batch = stamped_numbered(tail.get(), n);
                        match store.append(&s, tail, &batch, Durability::Synced) {
                            Ok(ack) => tail = ack.next,
                            // Said plainly when it cannot be learned: read the tail, go on.
                            Err(AppendError::OutcomeUnknown { .. }) => {
                                tail = direct.tail(&s).unwrap();
                            }
                            // Given up after its retries: it says nothing was written.
                            Err(AppendError::Store(e)) => {
                                gave_up.fetch_add(1, Ordering::SeqCst);
                                assert_eq!(direct.tail(&s).unwrap(), tail, "{e}");
                            }
                            Err(e) => panic!("writer {w}, append {i} at {tail}: {e}"),
                        }
                    }
                    (s, tail.get())
                })
            })
            .collect();
        let acked = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::SeqCst);
        kills.join().unwrap();
        acked
    });
    assert!(killed.load(Ordering::SeqCst) > 0, "no connection of the store was ended");
    for (s, acked) in &acked {
        let log = direct.read_all(s).unwrap();
        assert_eq!(log.len() as u64, *acked, "{s}: the log ends at the last acknowledged tail");
        for r in &log {
            assert_eq!(r.event, numbered(r.seq.get()), "{s} seq {} is not its own event", r.seq);
        }
        assert_eq!(direct.head(s).unwrap().unwrap().tail, Seq(*acked));
    }
    let stats = store.stats();
    eprintln!(
        "connections ended: {}; appends given up: {}; {stats:?}",
        killed.load(Ordering::SeqCst),
        gave_up.load(Ordering::SeqCst)
    );
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_connection_ended_while_its_statements_are_prepared_is_opened_again() {
    // The defect: a read, delete or lease call whose new connection the server ended while its
    // statements were being prepared returned the FATAL error at once, where docs/backends.md
    // says such a connection is retried like one lost before anything was sent (as appends
    // did).
    let schema = pg::fresh_schema("prepare_kill");
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let s = SessionId::new("s").unwrap();
    direct.append(&s, Seq(0), &stamped_numbered(0, 2), Durability::Synced).unwrap();
    let name = format!("sjt_prepare_kill_{}", std::process::id());
    let url = pg::with_param(&pg::url(), "application_name", &name);
    // A store with no connection open yet: its first call opens one and prepares statements.
    let store = PgFixture::guest(&url, &schema, PostgresOptions::default());
    let _watchdog = Watchdog::start("a connection ended while preparing", Duration::from_secs(120));
    // Preparing a statement over `events` waits while another transaction holds the table.
    let mut locker = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let mut hold = locker.transaction().unwrap();
    hold.batch_execute(&format!("LOCK TABLE \"{schema}\".events IN ACCESS EXCLUSIVE MODE"))
        .unwrap();
    let mut killer = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    std::thread::scope(|scope| {
        let reading = scope.spawn(|| store.read_all(&s));
        let waiting = loop {
            let rows = killer
                .query(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                     AND wait_event_type = 'Lock'",
                    &[&name],
                )
                .unwrap();
            if let Some(row) = rows.first() {
                break row.get::<_, i32>(0);
            }
            assert!(!reading.is_finished(), "the read ended before it waited on the lock");
            std::thread::sleep(Duration::from_millis(5));
        };
        let ended: bool =
            killer.query_one("SELECT pg_terminate_backend($1)", &[&waiting]).unwrap().get(0);
        assert!(ended, "the connection preparing its statements was ended");
        hold.commit().unwrap();
        let read = reading.join().unwrap();
        let log = read.unwrap_or_else(|e| panic!("the read was not retried: {e}"));
        assert_eq!(log.len(), 2);
    });
    // Its next calls run on the connection opened again.
    assert_eq!(store.tail(&s).unwrap(), Seq(2));
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_start_up_and_its_lease_keeper_under_connection_kills_recover_every_session_once() {
    // The connection-kill loop beside a runtime's start-up: `sessions_to_recover` and
    // `recover_all` run round after round, and the journal's lease keeper renews its runs'
    // leases, while every connection of the store is ended every 100 to 250 ms. Each call
    // answers (recovered, or an error saying what failed); in the end every crashed session is
    // recovered, its log keeps the protocol, and no run was written twice.
    use std::sync::Arc;

    use serde_json::json;
    use stepjournal::{CallCtx, Journal, JournalOptions, RecoverOptions, StepOutcome, Tools};
    use stepjournal_codec::{CallId, Entry, Event, Replay, RunOutcome};

    const SESSIONS: usize = 10;
    let tools = Tools::new().tool(
        "search",
        json!({}),
        Replay::Safe,
        |_: serde_json::Value, _: CallCtx| async {
            Ok::<_, stepjournal::ToolError>(json!({"hits": 1}))
        },
    );
    let schema = pg::fresh_schema("startup_kill");
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let sessions: Vec<SessionId> =
        (0..SESSIONS).map(|i| SessionId::new(format!("crashed-{i}")).unwrap()).collect();
    {
        // A first process crashes with each session's safe body started.
        let store: Arc<dyn JournalStore> = Arc::new(
            stepjournal_backends::postgres::PostgresStore::connect(
                &pg::with_param(&pg::url(), "schema", &schema),
                PostgresOptions::default(),
            )
            .unwrap(),
        );
        let first = Journal::new(store, Arc::new(tools.clone()), JournalOptions::new()).unwrap();
        for s in &sessions {
            let run = first.begin_run(s, Entry::NewTurn { message: "go".into() }).unwrap();
            let call = tools.call("c1", "search", json!({})).unwrap();
            let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
            drop(step.start_body(&CallId::from("c1")).unwrap());
        }
        first.keep_leases().unwrap();
    }
    let name = format!("sjt_startup_kill_{}", std::process::id());
    let url =
        pg::with_param(&pg::with_param(&pg::url(), "schema", &schema), "application_name", &name);
    let store: Arc<dyn JournalStore> = Arc::new(
        stepjournal_backends::postgres::PostgresStore::connect(&url, PostgresOptions::default())
            .unwrap(),
    );
    // A lease of 3 s, renewed every second: slack for a renewal that needs a few new
    // connections under the kills on a loaded machine.
    let options = JournalOptions::new().lease_ttl(Duration::from_secs(3));
    let journal = Journal::new(store, Arc::new(tools.clone()), options).unwrap();
    // Another process, polling what it would recover: a session the first holds under a live
    // lease must never be listed, whatever the kills do to the keeper's renewals.
    let other_store: Arc<dyn JournalStore> = Arc::new(
        stepjournal_backends::postgres::PostgresStore::connect(
            &pg::with_param(&pg::url(), "schema", &schema),
            PostgresOptions::default(),
        )
        .unwrap(),
    );
    // Another process: its store apart from this one's (one journal per store in a process).
    let other_store: Arc<dyn JournalStore> =
        Arc::new(stepjournal_backends::SeparateProcess(other_store));
    let other = Journal::new(other_store, Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let _watchdog = Watchdog::start("a start-up under connection kills", Duration::from_secs(180));
    let done = AtomicBool::new(false);
    let holding = AtomicU64::new(0);
    let killed = AtomicU64::new(0);
    let listed_while_held = AtomicU64::new(0);
    let (rounds, errors) = std::thread::scope(|scope| {
        // A round every 100 to 250 ms: a lease renewal (one statement on a fresh connection)
        // fits between two, as it must for the lease to be kept at all.
        scope.spawn(|| {
            pg::kill_loop(&name, &done, &killed, |n| Duration::from_millis(100 + 50 * (n % 4)))
        });
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                // Sampled while every recovered run is held: (held before, listed, held after).
                let before = holding.load(Ordering::SeqCst);
                if let Ok(listed) = other.sessions_to_recover()
                    && before == SESSIONS as u64
                    && holding.load(Ordering::SeqCst) == SESSIONS as u64
                    && !listed.is_empty()
                {
                    listed_while_held.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (mut rounds, mut errors) = (0u64, Vec::new());
        loop {
            rounds += 1;
            match journal.sessions_to_recover() {
                Ok(left) if left.is_empty() => break,
                Ok(_) => {}
                Err(e) => errors.push(format!("sessions_to_recover: {e}")),
            }
            let holding = &holding;
            let report = futures_executor::block_on(journal.recover_all(
                &tools,
                RecoverOptions::new().concurrency(SESSIONS),
                |run, outcome| async move {
                    if matches!(outcome, Some(StepOutcome::Committed { .. }) | None) {
                        // Held past its lease (3 s) while the keeper renews it under the
                        // kills; then ended (a failed end is recovered by the next round).
                        holding.fetch_add(1, Ordering::SeqCst);
                        while holding.load(Ordering::SeqCst) < SESSIONS as u64 {
                            futures_timer_sleep(Duration::from_millis(10)).await;
                        }
                        futures_timer_sleep(Duration::from_millis(4_500)).await;
                        let _ = run.end_async(RunOutcome::Completed).await;
                    }
                },
            ));
            holding.store(0, Ordering::SeqCst);
            match report {
                Ok(r) => errors.extend(r.failed.iter().map(|f| format!("{f:?}"))),
                Err(e) => errors.push(format!("recover_all: {e}")),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        done.store(true, Ordering::SeqCst);
        (rounds, errors)
    });
    assert_eq!(
        listed_while_held.load(Ordering::SeqCst),
        0,
        "another process listed a session whose run was held under a live lease"
    );
    assert!(killed.load(Ordering::SeqCst) > 0, "no connection of the store was ended");
    for s in &sessions {
        let log = direct.read_all(s).unwrap();
        let problems = stepjournal_recovery::verify_log(&log);
        assert!(problems.is_empty(), "{s}: {problems:?}");
        let runs: Vec<&Event> =
            log.iter().map(|r| &r.event).filter(|e| matches!(e, Event::RunStarted(_))).collect();
        let mut ids: Vec<String> = runs
            .iter()
            .filter_map(|e| match e {
                Event::RunStarted(r) => Some(r.run.as_str().to_owned()),
                _ => None,
            })
            .collect();
        let all = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all, "{s}: a run was begun twice");
        assert!(
            matches!(log.last().map(|r| &r.event), Some(Event::RunEnded(e)) if e.outcome == RunOutcome::Completed),
            "{s}: not recovered to its end"
        );
    }
    eprintln!(
        "start-up under kills: {rounds} rounds, {} connections ended, {} calls answered with an \
         error (each saying what failed), every session recovered: {errors:?}",
        killed.load(Ordering::SeqCst),
        errors.len()
    );
}

/// Sleeps without a timer runtime: a thread completes the future (the test's executor is
/// `futures_executor`).
async fn futures_timer_sleep(d: Duration) {
    let (future, completer) = stepjournal_backends::StoreFuture::pending_or(());
    std::thread::spawn(move || {
        std::thread::sleep(d);
        completer.complete(());
    });
    future.await;
}
