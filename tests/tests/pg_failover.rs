//! A primary with a synchronous streaming standby, killed with SIGKILL while 8 writers append
//! through a multi-host URL (`target_session_attrs=read-write`); the standby is promoted, the
//! writers go on against it, and a new synchronous standby is built from it before the next
//! kill. After every failover, every append acknowledged as `Synced` is on the new primary, in
//! place, and every log is dense; an append whose outcome was unknown is resolved by reading
//! the tail. The same with asynchronous replication counts what was lost. Then runtimes through
//! the failovers: two runtime processes with clocks 60 s apart, one holding runs open (half of
//! them mid-way through an unsafe body), one recovering what lapsed, a third frozen and fenced
//! before each failover, beside the writers.
//!
//! The clusters are this test's own ([`support::cluster`]); the shared server is not touched.
//! Three failovers by default; `STEPJOURNAL_FAILOVERS=N` runs N (the full run).
#![cfg(feature = "postgres")]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use stepjournal::recovery::verify;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_backends::{AppendError, Durability, JournalStore};
use stepjournal_codec::{Event, PairReason, Record, Seq, SessionId};
use stepjournal_tests::sample::{numbered, stamped_numbered};
use stepjournal_tests::watchdog::{StopOnPanic, Watchdog, hung};
use support::actor::{
    Actor, LIMIT, Report, assert_none, events, excerpt, is_wake, libfaketime, session, takeover,
};
use support::cluster::{Cluster, Pair, server_binaries};

const WRITERS: usize = 8;

/// What the writers' acknowledged appends were: each session and its acknowledged tail.
type Acked = Vec<(SessionId, u64)>;

/// Appends from `WRITERS` threads to their own sessions until `stop`, through `url` (every
/// host); each returns its session and the tail acknowledged last. An append whose outcome is
/// unknown, or that failed, is followed by a read of the tail when the store answers again.
fn write(url: &str, round: usize, stop: &AtomicBool, unknown: &AtomicU64) -> Acked {
    let mut options = PostgresOptions::default();
    options.max_retries = 50;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let options = options.clone();
                scope.spawn(move || {
                    let store = connect(url, options);
                    let s = SessionId::new(format!("round-{round}-writer-{w}")).unwrap();
                    let mut tail = Seq(0);
                    let mut acked = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let batch = stamped_numbered(tail.get(), 1 + (w as u64 % 3));
                        match store.append(&s, tail, &batch, Durability::Synced) {
                            Ok(ack) => {
                                tail = ack.next;
                                acked = tail.get();
                            }
                            Err(e) => {
                                if matches!(e, AppendError::OutcomeUnknown { .. }) {
                                    unknown.fetch_add(1, Ordering::SeqCst);
                                }
                                // Learn where the log is once the (new) primary answers.
                                std::thread::sleep(Duration::from_millis(50));
                                if let Ok(t) = store.tail(&s) {
                                    tail = t;
                                }
                            }
                        }
                    }
                    (s, acked)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn connect(url: &str, options: PostgresOptions) -> PostgresStore {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match PostgresStore::connect(url, options.clone()) {
            Ok(store) => return store,
            Err(e) => {
                assert!(Instant::now() < until, "no primary to open {url} on: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Checks on `primary` that every session holds at least its acknowledged tail, each event as
/// written (`stamped_numbered`), dense from 0; returns the acknowledged events lost.
fn lost(primary: &Cluster, acked: &Acked) -> u64 {
    let store = connect(&primary.url(), PostgresOptions::default());
    let mut lost = 0;
    for (s, tail) in acked {
        let records: Vec<Record> = store.read_all(s).unwrap();
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.seq, Seq(i as u64), "{s}: the log is dense");
            assert_eq!(r.event, numbered(i as u64), "{s} seq {i} as written");
        }
        lost += tail.saturating_sub(records.len() as u64);
    }
    lost
}

/// One failover of `pair` under load: the writers append through `url` while, `kill_after`
/// round `round`'s delay, the primary is killed and the standby promoted (their appends wait, or
/// fail and are retried, until it commits), then go on against the new primary for 800 ms;
/// `beside` runs on a thread of its own until the flag it is given is set. Returns what the
/// writers acknowledged, the failover's outage, and what `beside` returned.
fn fail_over_under_load<T: Send>(
    pair: &mut Pair,
    url: &str,
    round: usize,
    unknown: &AtomicU64,
    beside: impl FnOnce(&AtomicBool) -> T + Send,
) -> (Acked, Duration, T) {
    let stop = AtomicBool::new(false);
    let kill_after = Duration::from_millis(300 + 137 * (round as u64 % 5));
    std::thread::scope(|scope| {
        let writers = scope.spawn(|| write(url, round, &stop, unknown));
        let beside = scope.spawn(|| beside(&stop));
        let outage = {
            let _stop = StopOnPanic(&stop);
            std::thread::sleep(kill_after);
            let outage = pair.fail_over();
            std::thread::sleep(Duration::from_millis(800));
            outage
        };
        stop.store(true, Ordering::SeqCst);
        (writers.join().unwrap(), outage, beside.join().unwrap())
    })
}

/// `failovers` rounds: writers appending while the primary is killed and the standby
/// promoted; the acknowledged appends lost, over every round, and how many were unknown.
fn failovers(bin: &Path, failovers: usize, synchronous: bool) -> (u64, u64, u64) {
    let mut pair = Pair::start(bin, synchronous);
    let url = pair.url("postgres");
    let (mut lost_total, mut acked_total, unknown) = (0u64, 0u64, AtomicU64::new(0));
    for round in 0..failovers {
        let (acked, _, ()) = fail_over_under_load(&mut pair, &url, round, &unknown, |_| ());
        acked_total += acked.iter().map(|(_, t)| t).sum::<u64>();
        lost_total += lost(&pair.primary, &acked);
    }
    (lost_total, acked_total, unknown.load(Ordering::SeqCst))
}

fn rounds() -> usize {
    std::env::var("STEPJOURNAL_FAILOVERS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_synchronous_standby_promoted_mid_load_holds_every_acknowledged_append() {
    let Some(bin) = server_binaries() else { return };
    let n = rounds();
    let _watchdog = Watchdog::start("the failovers", Duration::from_secs(60 + 40 * n as u64));
    let (lost, acked, unknown) = failovers(&bin, n, true);
    eprintln!(
        "synchronous standby: {n} failovers, {acked} acknowledged events checked on the new \
         primaries, {lost} lost, {unknown} appends of unknown outcome resolved by the tail"
    );
    assert_eq!(lost, 0, "an acknowledged append was lost with synchronous replication");
    assert!(acked > 0, "the writers appended");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn an_asynchronous_standby_promoted_mid_load_is_counted_for_what_it_loses() {
    let Some(bin) = server_binaries() else { return };
    let n = rounds();
    let _watchdog = Watchdog::start("the failovers", Duration::from_secs(60 + 40 * n as u64));
    let (lost, acked, unknown) = failovers(&bin, n, false);
    // Not a promise: what asynchronous replication may lose, said and counted.
    eprintln!(
        "asynchronous standby: {n} failovers, {acked} acknowledged events checked, {lost} lost, \
         {unknown} of unknown outcome"
    );
    assert!(acked > 0, "the writers appended");
}

/// How long a holder's leases last: far above a failover's outage here (about 2 to 4 s), so a
/// holder's renewals reach the new primary before its leases lapse.
const HOLD_TTL_MS: &str = "15000";
/// How long the leases of the runtime frozen before each failover last.
const FROZEN_TTL_MS: u64 = 1000;
/// How long a taker's leases last: a taker whose run could not be ended (the primary gone under
/// it) leaves it for the next taker soon.
const TAKER_TTL_MS: &str = "3000";
/// The runs each holder keeps open: even ones mid-way through a safe body, odd ones through an
/// unsafe one (`runtime_child crash`).
const HELD: usize = 4;

/// What the taking runtimes did and saw, and what broke the rules.
#[derive(Default)]
struct Tally {
    tries: usize,
    /// Takeovers that found no primary (they exited before reading the sessions to recover).
    unreachable: usize,
    /// How often each session was reported recovered.
    recovered: BTreeMap<String, usize>,
    /// How often each session was reported failed (its wake may have landed: a drive that failed
    /// after it, or a wake whose outcome the store could not learn).
    failed: BTreeMap<String, usize>,
    /// Sessions whose recovered run a taker ended `completed`.
    ended: BTreeMap<String, usize>,
    violations: Vec<String>,
}

/// One takeover (`runtime_child takeover`: `recover_all`, each recovered run ended) by a runtime
/// whose clock is `skew`; recovering a session in `live` (a holder's, whose leases it renews) is
/// a violation.
fn take(lib: &str, skew: &str, url: &str, live: &[String], tally: &mut Tally, when: &str) {
    let mut b = Actor::spawn_skewed("taker", lib, skew, &["takeover", url, TAKER_TTL_MS]);
    let (lines, status) = b.finish();
    tally.tries += 1;
    if !status.success() {
        // It said why on its standard error; it woke nothing (it fails only before its list).
        tally.unreachable += 1;
        return;
    }
    let report = Report::parse("taker", &lines);
    for s in report.list("recovered") {
        if live.contains(s) {
            tally.violations.push(format!("{when}: a runtime {skew} recovered {s}, a live run"));
        }
        *tally.recovered.entry(s.clone()).or_default() += 1;
    }
    for s in report.list("failed") {
        *tally.failed.entry(s.clone()).or_default() += 1;
    }
    for (s, said) in &report.ended {
        if said == "ok" {
            *tally.ended.entry(s.clone()).or_default() += 1;
        }
    }
}

/// What the log of a holder's session `s` must show: every wake one a taker reported (recovered,
/// or failed after its wake), the last run ended, the body of the unsafe call started once and
/// its call answered "outcome unknown", the safe call's bodies at most 3, and the rules kept.
fn check_held(s: &str, log: &[Record], tally: &Tally, n: usize) -> Vec<String> {
    let mut wrong = Vec::new();
    let wakes = log.iter().filter(|r| is_wake(&r.event)).count();
    let recovered = tally.recovered.get(s).copied().unwrap_or(0);
    let failed = tally.failed.get(s).copied().unwrap_or(0);
    if wakes < recovered.max(1) || wakes > recovered + failed {
        wrong
            .push(format!("{s}: {wakes} wakes in the log, {recovered} recovered, {failed} failed"));
    }
    let bodies = log.iter().filter(|r| matches!(&r.event, Event::AttemptStarted(_))).count();
    let unknown = log
        .iter()
        .any(|r| matches!(&r.event, Event::Paired(p) if p.reason == PairReason::OutcomeUnknown));
    if !n.is_multiple_of(2) && (bodies != 1 || !unknown) {
        wrong
            .push(format!("{s}: the unsafe call ran {bodies} bodies, answered unknown: {unknown}"));
    }
    if n.is_multiple_of(2) && !(1..=3).contains(&bodies) {
        wrong.push(format!("{s}: the safe call ran {bodies} bodies"));
    }
    let findings = verify(&events(log));
    if !findings.is_empty() {
        wrong.push(format!("{s}: verify: {findings:?}"));
    }
    if !matches!(log.last().map(|r| &r.event), Some(Event::RunEnded(_))) {
        wrong.push(format!("{s}: its last run did not end"));
    }
    wrong.into_iter().map(|w| format!("{w}; the log:\n{}", excerpt(log))).collect()
}

/// `rounds` failovers of a synchronous pair, each with: a new holder (`runtime_child crash`,
/// its clock 60 s behind in even rounds and ahead in odd ones) keeping `HELD` runs open through
/// it, the previous holder killed just before; a runtime frozen (SIGSTOP) past its lease and
/// its session taken over before the failover, thawed after it; takers (the other skew) trying
/// `recover_all` every 300 ms through it; and the 8 writers. After the last round the last
/// holder is killed and the takers recover every crashed run.
fn runtimes_through_failovers(bin: &Path, lib: &str, rounds: usize) {
    let mut pair = Pair::start(bin, true);
    let url = pair.url("postgres");
    let gates = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let (mut held, mut frozen): (Vec<String>, Vec<(String, String)>) = (Vec::new(), Vec::new());
    let mut told: BTreeMap<String, usize> = BTreeMap::new();
    let (mut outages, mut acked_total, mut lost_total) = (Vec::new(), 0u64, 0u64);
    let unknown = AtomicU64::new(0);
    let mut holder: Option<Actor> = None;
    for round in 0..rounds {
        let (hold_skew, take_skew) =
            if round % 2 == 0 { ("-60s", "+60s") } else { ("+60s", "-60s") };
        let prefix = format!("held{round}");
        let mut a = Actor::spawn_skewed(
            "holder",
            lib,
            hold_skew,
            &["crash", &url, &prefix, &HELD.to_string(), HOLD_TTL_MS],
        );
        a.expect("ready");
        let live: Vec<String> = (0..HELD).map(|n| format!("{prefix}-{n}")).collect();
        held.extend(live.iter().cloned());
        // The previous holder dies: its leases lapse, by the server's clock, during or after
        // this round's failover.
        if let Some(mut old) = holder.replace(a) {
            old.kill();
        }
        // A runtime frozen past its lease and taken over: fenced before the failover.
        let name = format!("frozen{round}");
        let gate = gates.path().join(&name);
        let ttl = FROZEN_TTL_MS.to_string();
        let mut f = Actor::spawn_skewed(
            "frozen",
            lib,
            hold_skew,
            &["freeze", &url, &name, &ttl, gate.to_str().unwrap()],
        );
        let f_run = f.expect("run ").trim_start_matches("run ").to_owned();
        f.expect("body-started");
        f.signal(Signal::STOP);
        std::thread::sleep(Duration::from_millis(FROZEN_TTL_MS + 100));
        let deadline = Instant::now() + LIMIT;
        while !tally.recovered.contains_key(&name) {
            assert!(Instant::now() < deadline, "{}", hung("the frozen runtime's takeover", LIMIT));
            take(lib, take_skew, &url, &live, &mut tally, "before the failover");
            std::thread::sleep(Duration::from_millis(200));
        }
        // The failover, the writers appending and the takers trying all through it.
        let (acked, outage, ()) = fail_over_under_load(&mut pair, &url, round, &unknown, |stop| {
            while !stop.load(Ordering::SeqCst) {
                take(lib, take_skew, &url, &live, &mut tally, "through the failover");
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        outages.push(outage.as_millis());
        acked_total += acked.iter().map(|(_, t)| t).sum::<u64>();
        lost_total += lost(&pair.primary, &acked);
        // The frozen runtime thaws on the new primary, its body's result and its run's end
        // still fenced.
        std::fs::write(&gate, b"go").unwrap();
        f.signal(Signal::CONT);
        let (lines, _) = f.finish();
        for line in lines {
            if line.ends_with(": ok") {
                tally.violations.push(format!("round {round}: the fenced runtime said {line:?}"));
            }
            *told.entry(line).or_default() += 1;
        }
        frozen.push((name, f_run));
    }
    if let Some(mut last) = holder.take() {
        last.kill();
    }
    // Every crashed run lapses by the server's clock and is recovered and ended.
    let every: Vec<String> = held.iter().chain(frozen.iter().map(|(s, _)| s)).cloned().collect();
    let deadline = Instant::now() + LIMIT;
    while every.iter().any(|s| !tally.ended.contains_key(s)) {
        assert!(Instant::now() < deadline, "{}", hung("the crashed runs' recovery", LIMIT));
        take(lib, "+60s", &url, &[], &mut tally, "after the last holder died");
        std::thread::sleep(Duration::from_millis(300));
    }
    let store = connect(&url, PostgresOptions::default());
    let mut violations = std::mem::take(&mut tally.violations);
    for (i, s) in held.iter().enumerate() {
        let log = store.read_all(&session(s)).unwrap();
        violations.extend(check_held(s, &log, &tally, i % HELD));
    }
    for (s, run) in &frozen {
        let log = store.read_all(&session(s)).unwrap();
        let late = takeover(&log, run).map(|t| t.late.len());
        if late != Some(0) || !verify(&events(&log)).is_empty() {
            violations.push(format!("{s}: fenced run {run} landed {late:?}:\n{}", excerpt(&log)));
        }
    }
    let told: Vec<String> = told.iter().map(|(line, n)| format!("{line} x{n}")).collect();
    eprintln!(
        "runtimes through failovers: {rounds} failovers (outages {outages:?} ms); {} held runs \
         live through one each, none taken; {} takeovers, {} found no primary; {} crashed runs \
         recovered; the fenced runtimes said {}; writers: {acked_total} acknowledged events, \
         {lost_total} lost, {} of unknown outcome; violations: {}",
        held.len(),
        tally.tries,
        tally.unreachable,
        every.len(),
        told.join(", "),
        unknown.load(Ordering::SeqCst),
        violations.len()
    );
    assert_none("runtimes through failovers", &violations);
    assert_eq!(lost_total, 0, "an acknowledged append was lost with synchronous replication");
}

/// Two runtimes with clocks 60 s apart and a frozen one, through failovers of a synchronous
/// pair beside 8 writers: no live run taken by a skewed peer, no unsafe body run twice, a run
/// fenced before a failover fenced after it, every crashed run recovered once its lease lapsed.
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn skewed_runtimes_through_failovers_keep_live_runs_fenced_runs_and_unsafe_bodies() {
    let Some(bin) = server_binaries() else { return };
    let Some(lib) = libfaketime() else { return };
    let n = rounds();
    let _watchdog = Watchdog::start("the failovers", Duration::from_secs(120 + 60 * n as u64));
    runtimes_through_failovers(&bin, lib, n);
}
