//! The PostgreSQL store's crash properties under the connection-kill loop, each written once and
//! run on each route to the server: directly (`pg_terminate.rs`) and through a PgBouncer in
//! transaction mode (`pg_pooler_faults.rs`).
//!
//! The store under fire names itself with an `application_name`, and the kill loop ends every
//! server connection carrying that name. Directly, those are the store's own connections.
//! Through the pooler they are PgBouncer's server connections: PgBouncer opens a server
//! connection with the name of the client it opens it for and sets the name of each client it
//! hands a server connection to, so every server connection that runs the store's
//! transactions carries the name, whether it is in a transaction (PgBouncer then ends the
//! client's connection, after passing on the server's `FATAL`) or idle in the pool (PgBouncer
//! drops it, and the store sees nothing).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use stepjournal::{CallCtx, Journal, JournalOptions, RecoverOptions, StepOutcome, Tools};
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_backends::{AppendError, Durability, JournalStore, SeparateProcess};
use stepjournal_codec::{CallId, Entry, Event, Replay, RunOutcome, Seq, SessionId};
use stepjournal_tests::sample::{numbered, stamped_numbered};
use stepjournal_tests::watchdog::{StopOnPanic, Watchdog};

use super::pg::{self, Killed, PgFixture};
use stepjournal_tests::pgbouncer::Bouncer;

/// How a store reaches the server.
pub enum Route {
    /// Connected to the server.
    Direct,
    /// Through a PgBouncer of the test's own in `pool_mode = transaction`, with
    /// `?pooler=transaction`.
    Pooled(Bouncer),
}

impl Route {
    /// Through a PgBouncer started for this route.
    pub fn pooled() -> Route {
        Route::Pooled(Bouncer::start())
    }

    /// The URL a store on this route opens (its schema not yet added).
    pub fn url(&self) -> String {
        match self {
            Route::Direct => pg::url(),
            Route::Pooled(bouncer) => bouncer.url(),
        }
    }

    /// Where a store on this route connects: the server, or the pooler.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Route::Direct => pg::server_addr(),
            Route::Pooled(bouncer) => bouncer.addr(),
        }
    }

    /// This route's URL pointed at `addr` (a proxy in front of [`Route::addr`]) instead.
    pub fn url_via(&self, addr: SocketAddr) -> String {
        match self {
            Route::Direct => pg::url_via(addr),
            Route::Pooled(_) => pg::with_param(&pg::url_via(addr), "pooler", "transaction"),
        }
    }
}

/// The `application_name` of the store under fire in a test tagged `tag`.
fn fire_name(tag: &str) -> String {
    format!("sjt_{tag}_{}", std::process::id())
}

const WRITERS: u64 = 6;
const APPENDS: u64 = 40;

/// Six writers append to a session each through a store on `route` while the kill loop ends
/// every server connection serving that store, a round every 10 to 40 ms. No acknowledged
/// append is lost, none lands twice, every log stays dense and ends at its writer's last
/// acknowledged tail, and an append given up wrote nothing: a connection lost in the middle of
/// an append is resolved through its batch token.
pub fn writers_under_kills(route: &Route, tag: &str) {
    let schema = pg::fresh_schema(tag);
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    // The store under fire names its connections, so that only they are ended.
    let name = fire_name(tag);
    let url = pg::with_param(&route.url(), "application_name", &name);
    let store = PgFixture::guest(&url, &schema, PostgresOptions::default());
    let _watchdog = Watchdog::start("the writers under connection kills", Duration::from_secs(120));

    let done = AtomicBool::new(false);
    let killed = Killed::default();
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
                    let _stop = StopOnPanic(done);
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
    assert!(killed.all.load(Ordering::SeqCst) > 0, "no connection of the store was ended");
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
        "connections ended: {} ({} in a statement or transaction); appends given up: {}; \
         {stats:?}",
        killed.all.load(Ordering::SeqCst),
        killed.busy.load(Ordering::SeqCst),
        gave_up.load(Ordering::SeqCst)
    );
}

const SESSIONS: usize = 10;

/// A store on `route` in `schema`, its connections named `name` when one is given.
fn store_on(route: &Route, schema: &str, name: Option<&str>) -> Arc<dyn JournalStore> {
    let mut url = pg::with_param(&route.url(), "schema", schema);
    if let Some(name) = name {
        url = pg::with_param(&url, "application_name", name);
    }
    Arc::new(PostgresStore::connect(&url, PostgresOptions::default()).unwrap())
}

/// The connection-kill loop beside a runtime's start-up on `route`: `sessions_to_recover` and
/// `recover_all` run round after round, and the journal's lease keeper renews its runs'
/// leases, while every server connection serving the store is ended, round after round. Each
/// call answers (recovered, or an error saying what failed); in the end every crashed session
/// is recovered, its log keeps the protocol, and no run was written twice. Another process on
/// the same route, polling what it would recover, never lists a session the first holds under
/// a live lease.
pub fn start_up_under_kills(route: &Route, tag: &str) {
    let tools = Tools::new().tool(
        "search",
        json!({}),
        Replay::Safe,
        |_: serde_json::Value, _: CallCtx| async {
            Ok::<_, stepjournal::ToolError>(json!({"hits": 1}))
        },
    );
    let schema = pg::fresh_schema(tag);
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let sessions: Vec<SessionId> =
        (0..SESSIONS).map(|i| SessionId::new(format!("crashed-{i}")).unwrap()).collect();
    {
        // A first process crashes with each session's safe body started.
        let store = store_on(route, &schema, None);
        let first = Journal::new(store, Arc::new(tools.clone()), JournalOptions::new()).unwrap();
        for s in &sessions {
            let run = first.begin_run(s, Entry::NewTurn { message: "go".into() }).unwrap();
            let call = tools.call("c1", "search", json!({})).unwrap();
            let step = run.commit_reply(tools.reply("", [call]).unwrap()).unwrap();
            drop(step.start_body(&CallId::from("c1")).unwrap());
        }
        first.keep_leases().unwrap();
    }
    let name = fire_name(tag);
    let store = store_on(route, &schema, Some(&name));
    // A lease of 3 s, renewed every second: slack for a renewal that needs a few new
    // connections under the kills on a loaded machine.
    let options = JournalOptions::new().lease_ttl(Duration::from_secs(3));
    let journal = Journal::new(store, Arc::new(tools.clone()), options).unwrap();
    // Another process, polling what it would recover: a session the first holds under a live
    // lease must never be listed, whatever the kills do to the keeper's renewals. Its store
    // apart from this one's (one journal per store in a process).
    let other_store: Arc<dyn JournalStore> =
        Arc::new(SeparateProcess(store_on(route, &schema, None)));
    let other = Journal::new(other_store, Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let _watchdog = Watchdog::start("a start-up under connection kills", Duration::from_secs(180));
    let done = AtomicBool::new(false);
    // The sessions whose recovered runs are held now, each with the number of its hold.
    let held: Mutex<HashMap<SessionId, u64>> = Mutex::new(HashMap::new());
    let holds = AtomicU64::new(0);
    let killed = Killed::default();
    let listed_while_held = Mutex::new(Vec::new());
    let judged = AtomicU64::new(0);
    // Directly, a round every 100 to 250 ms: a lease renewal (one statement on a fresh
    // connection) fits between two, as it must for the lease to be kept at all. Behind the
    // pooler the store's connections to it live on, and a server connection ended while idle
    // is replaced unseen: only the kills that land in a statement or transaction reach the
    // store, so the rounds come as often as the writers' (10 to 40 ms) to land more of them.
    let every: fn(u64) -> Duration = match route {
        Route::Direct => |n| Duration::from_millis(100 + 50 * (n % 4)),
        Route::Pooled(_) => |n| Duration::from_millis(10 + 10 * (n % 4)),
    };
    let (rounds, errors) = std::thread::scope(|scope| {
        scope.spawn(|| pg::kill_loop(&name, &done, &killed, every));
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                // (held before, listed, held after): a session under the same hold before and
                // after the call was held all through it.
                let before = held.lock().unwrap().clone();
                if let Ok(listed) = other.sessions_to_recover() {
                    let after = held.lock().unwrap().clone();
                    let through: Vec<&SessionId> = before
                        .iter()
                        .filter(|(s, h)| after.get(*s) == Some(h))
                        .map(|(s, _)| s)
                        .collect();
                    if !through.is_empty() {
                        judged.fetch_add(1, Ordering::SeqCst);
                    }
                    listed_while_held
                        .lock()
                        .unwrap()
                        .extend(listed.into_iter().filter(|s| through.contains(&s)));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let _stop = StopOnPanic(&done);
        let (mut rounds, mut errors) = (0u64, Vec::new());
        loop {
            rounds += 1;
            match journal.sessions_to_recover() {
                Ok(left) if left.is_empty() => break,
                Ok(_) => {}
                Err(e) => errors.push(format!("sessions_to_recover: {e}")),
            }
            let (held, holds) = (&held, &holds);
            let report = futures_executor::block_on(journal.recover_all(
                &tools,
                RecoverOptions::new().concurrency(SESSIONS),
                |run, outcome| async move {
                    if matches!(outcome, Some(StepOutcome::Committed { .. }) | None) {
                        // Held past its lease (3 s) while the keeper renews it under the
                        // kills; then ended (a failed end is recovered by the next round).
                        let hold = holds.fetch_add(1, Ordering::SeqCst);
                        held.lock().unwrap().insert(run.session().clone(), hold);
                        sleep(Duration::from_millis(4_500)).await;
                        held.lock().unwrap().remove(run.session());
                        let _ = run.end_async(RunOutcome::Completed).await;
                    }
                },
            ));
            match report {
                Ok(r) => errors.extend(r.failed.iter().map(|f| format!("{f:?}"))),
                Err(e) => errors.push(format!("recover_all: {e}")),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        done.store(true, Ordering::SeqCst);
        (rounds, errors)
    });
    let listed_while_held = listed_while_held.into_inner().unwrap();
    assert!(
        listed_while_held.is_empty(),
        "another process listed sessions whose runs were held under a live lease: \
         {listed_while_held:?}"
    );
    assert!(
        judged.load(Ordering::SeqCst) > 0,
        "the other process was never asked while a run was held"
    );
    assert!(killed.all.load(Ordering::SeqCst) > 0, "no connection of the store was ended");
    for s in &sessions {
        let log = direct.read_all(s).unwrap();
        let problems = stepjournal_recovery::verify_log(&log);
        assert!(problems.is_empty(), "{s}: {problems:?}");
        let mut ids: Vec<&str> = log
            .iter()
            .filter_map(|r| match &r.event {
                Event::RunStarted(r) => Some(r.run.as_str()),
                _ => None,
            })
            .collect();
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all, "{s}: a run was begun twice");
        assert!(
            matches!(log.last().map(|r| &r.event), Some(Event::RunEnded(e)) if e.outcome == RunOutcome::Completed),
            "{s}: not recovered to its end"
        );
    }
    eprintln!(
        "start-up under kills: {rounds} rounds, {} connections ended ({} in a statement or \
         transaction), the other process asked {} times while runs were held, {} calls answered \
         with an error (each saying what failed), every session recovered: {errors:?}",
        killed.all.load(Ordering::SeqCst),
        killed.busy.load(Ordering::SeqCst),
        judged.load(Ordering::SeqCst),
        errors.len()
    );
}

/// Sleeps without a timer runtime: a thread completes the future (the callers' executor is
/// `futures_executor`).
async fn sleep(d: Duration) {
    let (future, completer) = stepjournal_backends::StoreFuture::pending_or(());
    std::thread::spawn(move || {
        std::thread::sleep(d);
        completer.complete(());
    });
    future.await;
}
