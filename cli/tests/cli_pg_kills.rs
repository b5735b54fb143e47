//! The operator's write commands while the server ends their connections (the audit's
//! connection-kill loop, on PostgreSQL): `answer` and `stop`, run again until they say the
//! work is done, each run either succeeding or failing with a message (no raw control
//! character); in the end every client call is answered exactly once and the stuck session is
//! stopped exactly once: nothing written twice. Directly, and through a PgBouncer in
//! transaction mode whose server connections the loop ends.

mod cli_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cli_support::*;
use stepjournal_codec::{Event, RunOutcome};
use stepjournal_tests::pg::{Killed, kill_loop};
use stepjournal_tests::pgbouncer::Bouncer;

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

/// `answer` (`calls` client calls, each in a session of its own) and `stop` run against
/// `url(place)` (the place's URL, or one through a pooler) under the kill loop, every
/// connection named `application_name` ended every 5 to 20 ms; each thing written once.
fn under_kills(through: &str, calls: usize, url: impl Fn(&Place) -> String) {
    let place = pg_place();
    let store = place.open();
    populate(&*store);
    let sessions: Vec<String> = (0..calls).map(|i| format!("waiting-{i}")).collect();
    for s in &sessions {
        append_session(&*store, s, &suspended(), T0);
    }
    let name = format!("sjcli_kills_{}", std::process::id());
    let url = format!("{}&application_name={name}", url(&place));
    let done = AtomicBool::new(false);
    let killed = Killed::default();
    let runs = std::thread::scope(|scope| {
        scope
            .spawn(|| kill_loop(&name, &done, &killed, |n| Duration::from_millis(5 + 5 * (n % 4))));
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
    // The loop found the commands' connections by their name (through the pooler, the server
    // connections PgBouncer named after them): without it the test would prove nothing.
    assert!(killed.all.load(Ordering::SeqCst) > 0, "{through}: no connection was ended");
    eprintln!(
        "{through}: {runs} command runs for {} actions under {} ended connections ({} busy)",
        calls + 1,
        killed.all.load(Ordering::SeqCst),
        killed.busy.load(Ordering::SeqCst)
    );
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn answer_and_stop_under_connection_kills_write_each_thing_once() {
    under_kills("directly", 4, |place| place.url.clone());
}

#[test]
#[cfg_attr(
    not(stepjournal_pgbouncer),
    ignore = "STEPJOURNAL_PG_URL is not set or PgBouncer is not installed: the pooled test needs both"
)]
fn answer_and_stop_behind_a_transaction_pooler_under_connection_kills_write_each_thing_once() {
    let bouncer = Bouncer::start();
    // A server connection ended while idle in the pool is replaced unseen: more actions, so
    // that more kills land inside a command's transaction.
    under_kills("through PgBouncer", 16, |place| {
        format!("{}&schema={}", bouncer.url(), place.schema.as_deref().unwrap())
    });
}
