//! The operator's write commands while the server ends their connections (the audit's
//! connection-kill loop, on PostgreSQL): `answer` and `stop`, run again until they say the
//! work is done, each run either succeeding or failing with a message (no raw control
//! character); in the end every client call is answered exactly once and the stuck session is
//! stopped exactly once: nothing written twice.

mod cli_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cli_support::*;
use stepjournal_backends::JournalStore;
use stepjournal_codec::{CallId, CallKind, Entry, Event, Replay, RunOutcome, SessionId, Suspended};

/// A session suspended on a client call (c1).
fn waiting() -> Batches {
    vec![
        vec![run_started("run-1", Entry::NewTurn { message: "ask me".into() }), message("ask me")],
        vec![
            reply(
                1,
                "cp-1",
                "Which seat?",
                vec![call("c1", "ask_seat", Replay::Unsafe, CallKind::Client)],
            ),
            dispatch("c1", "d-1"),
        ],
        vec![
            Suspended { calls: vec![CallId::from("c1")] }.into(),
            ended("run-1", RunOutcome::Suspended),
        ],
    ]
}

fn events(store: &dyn JournalStore, session: &str) -> Vec<Event> {
    store
        .read_all(&SessionId::new(session).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// Runs `args` until it succeeds or says the work was done by an earlier run whose outcome it
/// could not learn (`done_already`); every failure must say what failed, without raw control
/// characters. Returns the runs made.
fn until_done(args: &[&str], done_already: &[&str]) -> u32 {
    for n in 1..=60 {
        let out = bin(args);
        if out.status.success() {
            return n;
        }
        let err = stderr(&out);
        assert!(!err.trim().is_empty(), "{args:?}: a failure with no message");
        assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{args:?}: {err:?}");
        if done_already.iter().any(|d| err.contains(d)) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{args:?} never went through in 60 runs");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn answer_and_stop_under_connection_kills_write_each_thing_once() {
    let place = pg_place();
    let store = place.open();
    populate(&*store);
    let sessions: Vec<String> = (0..4).map(|i| format!("waiting-{i}")).collect();
    for s in &sessions {
        append_session(&*store, s, &waiting(), T0);
    }
    let name = format!("sjcli_kills_{}", std::process::id());
    let url = format!("{}&application_name={name}", place.url);
    let base = std::env::var("STEPJOURNAL_PG_URL").unwrap();
    let mut killer = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let done = AtomicBool::new(false);
    let killed = AtomicU64::new(0);
    let runs = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut n = 0u64;
            while !done.load(Ordering::SeqCst) {
                let rows = killer
                    .query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1",
                        &[&name],
                    )
                    .unwrap();
                killed.fetch_add(rows.len() as u64, Ordering::SeqCst);
                n += 1;
                std::thread::sleep(Duration::from_millis(5 + 5 * (n % 4)));
            }
        });
        let mut runs = 0;
        for s in &sessions {
            runs += until_done(
                &["answer", &url, s, "c1", "--output", "\"12A\""],
                &["resolved", "answered"],
            );
        }
        runs += until_done(&["stop", &url, "stuck"], &["nothing to stop", "not running", "ended"]);
        done.store(true, Ordering::SeqCst);
        runs
    });
    for s in &sessions {
        let answers =
            events(&*store, s).iter().filter(|e| matches!(e, Event::ClientAnswer(_))).count();
        assert_eq!(answers, 1, "{s}: the client call answered {answers} times");
    }
    let stops = events(&*store, "stuck")
        .iter()
        .filter(|e| matches!(e, Event::RunEnded(r) if r.outcome == RunOutcome::Stopped))
        .count();
    assert_eq!(stops, 1, "stuck: stopped {stops} times");
    eprintln!(
        "{runs} command runs for 5 actions under {} ended connections",
        killed.load(Ordering::SeqCst)
    );
}
