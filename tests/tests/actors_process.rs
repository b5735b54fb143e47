//! Several runtimes at once on one store, as separate processes (`runtime_child`), the auditors'
//! loops bounded in rounds: two runtimes recovering together after a SIGKILL never wake one
//! session twice, and a runtime frozen (SIGSTOP) past its lease lands nothing once another has
//! taken its session over, however late it thaws. On SQLite and on PostgreSQL. Each loop prints
//! its figures on one line.
#![cfg(any(feature = "sqlite", feature = "postgres"))]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use stepjournal::recovery::verify;
use stepjournal_backends::{OpenOptions, open_url};
use stepjournal_codec::{Event, RunOutcome};
use stepjournal_tests::watchdog::hung;
use support::actor::{
    Actor, LIMIT, Report, assert_none, events, excerpt, is_wake, libfaketime, session, takeover,
};

/// Two runtimes recovering at once after a SIGKILL, `rounds` times, on the store at `url`.
/// Each round: a runtime writes `SESSIONS` sessions, each a run mid-step (a safe call whose
/// body started, or an unsafe one), and is killed; once its leases lapsed, two runtimes start
/// together (a line on both standard inputs) and each runs `recover_all` (8 sessions at once;
/// in odd rounds the second one at a time), ending each run it recovered `completed`.
/// Afterwards each session was woken exactly once (a `run_started` with entry `wake`), the two
/// reports split the sessions between them without overlap and account for every session each
/// listed, and every log verifies clean.
///
/// Defect pinned: `recover_all` woke each listed session at whatever tail it then read, so a
/// runtime that came to a session after the other had recovered it, ended its run and released
/// its lease woke it a second time (30 rounds: 114 of 240 sessions on SQLite, 5 on PostgreSQL,
/// where only the rounds recovering one session at a time reach it).
fn recover_race(backend: &str, url: &str, rounds: usize) {
    const SESSIONS: usize = 8;
    const TTL_MS: u64 = 300;
    let store = open_url(url, OpenOptions::create()).unwrap();
    let mut violations = Vec::new();
    let (mut woken_twice, mut never_woken, mut contested) = (0, 0, 0);
    let (mut changed, mut skipped, mut split) = (0, 0, [0usize; 2]);
    for round in 0..rounds {
        let prefix = format!("r{round}");
        let names: Vec<String> = (0..SESSIONS).map(|n| format!("{prefix}-{n}")).collect();
        let mut crashed = Actor::spawn(
            "the crashed runtime",
            &["crash", url, &prefix, &SESSIONS.to_string(), &TTL_MS.to_string()],
        );
        crashed.expect("ready");
        crashed.kill();
        let killed = Instant::now();
        // In odd rounds the second runtime recovers one session at a time: it can come to a
        // session it listed after the first has woken it, driven and ended its run and
        // released its lease, when only the tail it listed it at tells it to keep off.
        let second = if round % 2 == 1 { "1" } else { "8" };
        let mut racers: Vec<Actor> = [("first", "8"), ("second", second)]
            .iter()
            .map(|(who, concurrency)| {
                let name = format!("the {who} recovering runtime");
                Actor::spawn(&name, &["recover", url, "30000", concurrency])
            })
            .collect();
        for racer in &mut racers {
            racer.expect("ready");
        }
        // The killed runtime's leases lapse at most a lease's time after its last renewal.
        let lapsed = killed + Duration::from_millis(TTL_MS + 100);
        std::thread::sleep(lapsed.saturating_duration_since(Instant::now()));
        for racer in &mut racers {
            racer.send("go");
        }
        let mut reports = Vec::new();
        for racer in &mut racers {
            let (lines, status) = racer.finish();
            assert!(status.success(), "round {round}: {} exited {status}: {lines:?}", racer.name);
            reports.push(Report::parse(&racer.name, &lines));
        }
        let mut recovered_by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, report) in reports.iter().enumerate() {
            for list in ["failed", "waiting"] {
                if !report.list(list).is_empty() {
                    violations.push(format!(
                        "round {round}: runtime {i} reports {list} {:?}",
                        report.list(list)
                    ));
                }
            }
            let mut accounted: Vec<&String> =
                ["recovered", "changed", "skipped"].iter().flat_map(|l| report.list(l)).collect();
            let listed = accounted.len();
            accounted.sort();
            accounted.dedup();
            if accounted.len() != listed || accounted.iter().any(|s| !names.contains(s)) {
                violations.push(format!(
                    "round {round}: runtime {i}'s report does not account for its sessions once \
                     each: {:?}",
                    report.lists
                ));
            }
            for s in report.list("recovered") {
                recovered_by.entry(s.as_str()).or_default().push(i);
                if report.ended.get(s).map(String::as_str) != Some("ok") {
                    violations.push(format!(
                        "round {round}: runtime {i} recovered {s} but its end was {:?}",
                        report.ended.get(s)
                    ));
                }
            }
            split[i] += report.list("recovered").len();
            changed += report.list("changed").len();
            skipped += report.list("skipped").len();
        }
        for name in &names {
            let listed_by = reports
                .iter()
                .filter(|r| {
                    ["recovered", "changed", "skipped"].iter().any(|l| r.list(l).contains(name))
                })
                .count();
            if listed_by == 2 {
                contested += 1;
            }
            let by = recovered_by.get(name.as_str()).map_or(&[][..], Vec::as_slice);
            if by.len() != 1 {
                violations.push(format!(
                    "round {round}: {name} recovered by runtimes {by:?} (once by one of them is \
                     right)"
                ));
            }
            let log = store.read_all(&session(name)).unwrap();
            let wakes = log.iter().filter(|r| is_wake(&r.event)).count();
            match wakes {
                1 => {}
                0 => never_woken += 1,
                _ => woken_twice += 1,
            }
            let findings = verify(&events(&log));
            let ended = matches!(
                log.last().map(|r| &r.event),
                Some(Event::RunEnded(e)) if e.outcome == RunOutcome::Completed
            );
            if wakes != 1 || !findings.is_empty() || !ended {
                let findings: Vec<String> = findings.iter().map(ToString::to_string).collect();
                violations.push(format!(
                    "round {round}: {name} woken {wakes} times, ended completed: {ended}, \
                     verify: {findings:?}; its log:\n{}",
                    excerpt(&log)
                ));
            }
        }
    }
    println!(
        "recover_all race on {backend}: {rounds} rounds, {} sessions, woken twice: {woken_twice}, \
         never woken: {never_woken}, listed by both runtimes: {contested}, recovered by the \
         first/second: {}/{}, reported changed: {changed}, skipped: {skipped}, violations: {}",
        rounds * SESSIONS,
        split[0],
        split[1],
        violations.len()
    );
    assert_none("recover_all race", &violations);
    assert!(contested > 0, "the two runtimes never listed the same session: no race was run");
}

/// Freezes `actor` with SIGSTOP at a moment it holds no write lock on the SQLite database at
/// `db` (a runtime frozen inside a write transaction would block every other writer of the
/// file, which is not what is tested here): thawed and frozen again until a store opened with
/// no busy timeout, which takes the write lock for a moment, opens. Returns how many times it
/// was frozen again.
#[cfg(feature = "sqlite")]
fn freeze_unlocked(actor: &Actor, db: &Path) -> u32 {
    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
    let mut options = SqliteOptions::default();
    options.busy_timeout = Duration::ZERO;
    let mut refused = None;
    for again in 0..1000 {
        actor.signal(Signal::STOP);
        match SqliteStore::open(db, options.clone()) {
            Ok(_) => return again,
            Err(e) => refused = Some(e),
        }
        actor.signal(Signal::CONT);
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("{}: the database stayed locked 1000 times; the last refusal: {refused:?}", actor.name)
}

/// A runtime frozen past its lease, another recovering, then the first thawed, `rounds` times,
/// on the store at `url` (`db` the SQLite file, if it is one). Each round: runtime A (leases
/// of 300 ms, renewed every 100 ms) begins a run and drives a call whose body waits on a gate
/// file; once the body started, A is frozen (SIGSTOP); once its lease lapsed, runtime B runs
/// `recover_all`, which wakes the session, runs the call again, commits and ends the run; then
/// the gate is opened and A thawed (SIGCONT): its body returns and A tries to record the
/// result, commit and end. None of A's writes may land after B's `run_started`.
fn frozen_runtime(backend: &str, url: &str, db: Option<&Path>, rounds: usize) {
    const TTL_MS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let store = open_url(url, OpenOptions::create()).unwrap();
    let mut violations = Vec::new();
    let (mut late, mut refrozen, mut b_again) = (0, 0, 0);
    let mut told: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..rounds {
        let name = format!("f{round}");
        let gate: PathBuf = dir.path().join(format!("gate-{round}"));
        let mut a = Actor::spawn(
            "runtime A",
            &["freeze", url, &name, &TTL_MS.to_string(), gate.to_str().unwrap()],
        );
        let a_run = a.expect("run ").trim_start_matches("run ").to_owned();
        a.expect("body-started");
        #[cfg(feature = "sqlite")]
        if let Some(db) = db {
            refrozen += freeze_unlocked(&a, db);
        } else {
            a.signal(Signal::STOP);
        }
        #[cfg(not(feature = "sqlite"))]
        {
            let _ = db;
            a.signal(Signal::STOP);
        }
        let frozen = Instant::now();
        // A's lease was renewed at most when it was frozen: it lapses a lease's time later.
        std::thread::sleep(Duration::from_millis(TTL_MS + 100));
        let mut b_report = None;
        for attempt in 0..5 {
            let mut b = Actor::spawn("runtime B", &["takeover", url, "30000"]);
            let (lines, status) = b.finish();
            assert!(status.success(), "round {round}: runtime B exited {status}: {lines:?}");
            let report = Report::parse("runtime B", &lines);
            if report.list("skipped") == [name.clone()] {
                // A's lease still live by the store's clock: wait longer.
                b_again += 1;
                assert!(attempt < 4, "round {round}: A's lease never lapsed");
                std::thread::sleep(Duration::from_millis(TTL_MS));
                continue;
            }
            b_report = Some(report);
            break;
        }
        let b_report = b_report.unwrap();
        if b_report.list("recovered") != [name.clone()]
            || b_report.ended.get(&name).map(String::as_str) != Some("ok")
        {
            violations.push(format!(
                "round {round}: B did not recover {name} and end it ({:?}, ended {:?}), A frozen \
                 {} ms",
                b_report.lists,
                b_report.ended,
                frozen.elapsed().as_millis()
            ));
        }
        std::fs::write(&gate, b"go").unwrap();
        a.signal(Signal::CONT);
        let (lines, status) = a.finish();
        assert!(status.success(), "round {round}: runtime A exited {status}: {lines:?}");
        for line in &lines {
            *told.entry(line.clone()).or_default() += 1;
        }
        let log = store.read_all(&session(&name)).unwrap();
        let Some(taken) = takeover(&log, &a_run) else {
            violations.push(format!("round {round}: no wake in the log:\n{}", excerpt(&log)));
            continue;
        };
        let (b_start, b_end, landed) = (taken.wake, taken.end, taken.late);
        late += landed.len();
        let findings = verify(&events(&log));
        let said_ok = lines.iter().any(|l| l.ends_with(": ok"));
        if !landed.is_empty() || !findings.is_empty() || b_end.is_none() || said_ok {
            let findings: Vec<String> = findings.iter().map(ToString::to_string).collect();
            violations.push(format!(
                "round {round}: {} of A's writes landed after B's run_started (seq {}), A said \
                 {lines:?}, B ended: {}, verify: {findings:?}; the log:\n{}",
                landed.len(),
                log[b_start].seq,
                b_end.is_some(),
                excerpt(&log)
            ));
        }
    }
    let told: Vec<String> = told.iter().map(|(line, n)| format!("{line} x{n}")).collect();
    println!(
        "frozen runtime on {backend}: {rounds} rounds, late writes landed: {late}, A was told: \
         {}, frozen again off a write lock: {refrozen}, B started again while A's lease was \
         live: {b_again}, violations: {}",
        told.join(", "),
        violations.len()
    );
    assert_none("frozen runtime", &violations);
}

#[cfg(feature = "sqlite")]
#[test]
fn two_runtimes_recovering_at_once_after_a_sigkill_wake_each_session_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("race.db").display());
    recover_race("sqlite", &url, 30);
}

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn two_runtimes_recovering_at_once_after_a_sigkill_wake_each_session_once_on_postgresql() {
    let schema = support::pg::fresh_schema("recover_race");
    let url = support::pg::with_param(&support::pg::url(), "schema", &schema);
    let _fixture = support::pg::PgFixture::at(&support::pg::url(), &schema, Default::default());
    recover_race("postgresql", &url, 30);
}

#[cfg(feature = "sqlite")]
#[test]
fn a_runtime_frozen_past_its_lease_lands_nothing_after_another_took_over_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frozen.db");
    let url = format!("sqlite:{}", db.display());
    frozen_runtime("sqlite", &url, Some(&db), 30);
}

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_runtime_frozen_past_its_lease_lands_nothing_after_another_took_over_on_postgresql() {
    let schema = support::pg::fresh_schema("frozen");
    let url = support::pg::with_param(&support::pg::url(), "schema", &schema);
    let _fixture = support::pg::PgFixture::at(&support::pg::url(), &schema, Default::default());
    frozen_runtime("postgresql", &url, None, 30);
}

/// Two runtime processes whose clocks are skewed 60 s apart against one PostgreSQL server: a
/// runtime whose clock runs behind holds 4 sessions' runs open under 2 s leases, and one whose
/// clock runs ahead tries to recover every half second for 4 s (twice the lease): it recovers
/// none of them, since leases are judged by the server's clock. Once the first is killed, the
/// second recovers all four. Then the same with the skews swapped.
#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn runtimes_with_skewed_clocks_neither_take_a_live_run_nor_leave_a_crashed_one_on_postgresql() {
    let Some(lib) = libfaketime() else { return };
    for (holder, taker) in [("-60s", "+60s"), ("+60s", "-60s")] {
        let schema = support::pg::fresh_schema("skew");
        let url = support::pg::with_param(&support::pg::url(), "schema", &schema);
        let _fixture = support::pg::PgFixture::at(&support::pg::url(), &schema, Default::default());
        let mut a =
            Actor::spawn_skewed("holder", lib, holder, &["crash", &url, "skew", "4", "2000"]);
        a.expect("ready");
        let started = Instant::now();
        let mut tries = 0;
        while started.elapsed() < Duration::from_secs(4) {
            let mut b = Actor::spawn_skewed("taker", lib, taker, &["takeover", &url, "2000"]);
            let (lines, status) = b.finish();
            assert!(status.success(), "taker ({taker}): {status}: {lines:?}");
            let report = Report::parse("taker", &lines);
            assert!(
                report.list("recovered").is_empty(),
                "a runtime {taker} took live runs of one {holder}: {lines:?}"
            );
            tries += 1;
            std::thread::sleep(Duration::from_millis(500));
        }
        a.kill();
        // The holder is gone: its leases lapse by the server's clock and the taker recovers all.
        let mut recovered: Vec<String> = Vec::new();
        let deadline = Instant::now() + LIMIT;
        while recovered.len() < 4 {
            assert!(Instant::now() < deadline, "{}", hung("the crashed sessions' recovery", LIMIT));
            let mut b = Actor::spawn_skewed("taker", lib, taker, &["takeover", &url, "2000"]);
            let (lines, _) = b.finish();
            recovered.extend(Report::parse("taker", &lines).list("recovered").iter().cloned());
            std::thread::sleep(Duration::from_millis(200));
        }
        recovered.sort();
        recovered.dedup();
        assert_eq!(recovered.len(), 4, "{recovered:?}");
        let store = open_url(&url, OpenOptions::read_only()).unwrap();
        for s in &recovered {
            let log = store.read_all(&session(s)).unwrap();
            assert_eq!(verify(&events(&log)), vec![], "{s}:\n{}", excerpt(&log));
            assert_eq!(events(&log).iter().filter(|e| is_wake(e)).count(), 1, "{s}: woken once");
        }
        eprintln!(
            "skew: a runtime {taker} of one {holder}: {tries} tries took no live run; all 4 \
             crashed sessions recovered after the kill"
        );
    }
}
