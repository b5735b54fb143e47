//! The command racing a runtime on one store, the auditors' loops bounded in rounds: `approve`
//! and `deny` against the runtime's own `decide_approval` on a suspended session (exactly one
//! decision lands, the loser writes nothing and says so, the winner's run drives the step to
//! its end), and `stop` against the runtime ending its run (never two ends of one run: the stop
//! lands first and the end is refused, or the stop writes nothing). On SQLite and on
//! PostgreSQL. The runtime is this test process; each round the command is started and, a
//! moment later, the runtime acts: the moment is moved round after round towards where the two
//! meet (later after a round the runtime won, earlier after one the command won). Each loop
//! prints its figures on one line.
//!
//! Defects pinned: a decision began a wake at whatever tail it then read and appended the
//! decision after it, so the loser's wake landed all the same: it fenced the run the winner's
//! decision had woken, or stood as a stray wake beside a refused decision (15 and 16 of 20
//! rounds on SQLite and PostgreSQL); a stop that had read the run open appended its `run_ended
//! stopped` after the runtime's `run_ended completed`, ending the run twice (6 and 2 of 40).

mod cli_support;

use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use cli_support::*;
use serde_json::{Value, json};
use stepjournal::writer::block_on;
use stepjournal::{
    AnswerError, BeginError, CallCtx, Journal, JournalOptions, RecoverOptions, StepOutcome,
    ToolError, Tools, WriteError,
};
use stepjournal_backends::{JournalStore, OpenOptions, open_url};
use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{CallId, Entry, Event, Record, Replay, RunOutcome, SessionId};
use stepjournal_recovery::verify;

/// How long one round may take before the test fails as hung (a watchdog, far above a normal
/// round; never a timing assertion).
const LIMIT: Duration = Duration::from_secs(60);

/// Ends the test process, failing the test, unless dropped within `LIMIT`: for the runtime's
/// own calls, which have no deadline of their own (a store waiting on a server).
struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    fn start(what: String) -> Watchdog {
        let (done, finished) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(LIMIT) {
                eprintln!(
                    "hung: {what} did not finish within {} s (a hang watchdog, not a timing \
                     assertion)",
                    LIMIT.as_secs()
                );
                std::process::exit(101);
            }
        });
        Watchdog(Some(done))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

/// The command, started; killed and reaped if dropped before it exited.
struct Racer(Option<Child>);

impl Racer {
    fn start(args: &[&str]) -> Racer {
        let child = Command::new(env!("CARGO_BIN_EXE_stepjournal"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        Racer(Some(child))
    }

    fn finish(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Racer {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How long the command takes from its start to its exit here, the median of three runs of
/// `args` made by `prepare` (each on a session of its own): where the runtime's moment starts
/// from, and how far it moves.
fn command_time(prepare: impl Fn(usize) -> Vec<String>) -> Duration {
    let mut times: Vec<Duration> = (0..3)
        .map(|i| {
            let args = prepare(i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let started = Instant::now();
            let out = Racer::start(&args).finish();
            assert_eq!(out.status.code(), Some(0), "{args:?} alone: {}", stderr(&out));
            started.elapsed()
        })
        .collect();
    times.sort();
    times[1]
}

/// When the runtime acts, after the command's start: moved towards where the two meet, so
/// that the rounds fall on both sides of it and close to it.
struct Moment {
    at: Duration,
    step: Duration,
}

impl Moment {
    /// Starts halfway through the command's usual run (`span`), moving by an eighth of it.
    fn new(span: Duration) -> Moment {
        Moment { at: span / 2, step: span / 8 }
    }

    /// The moment for round `round`: within a step either side of where the two meet.
    fn of(&self, round: usize) -> Duration {
        let jitter = ((round * 7) % 5) as f64 / 2.0 - 1.0;
        let at = self.at.as_secs_f64() + self.step.as_secs_f64() * jitter;
        Duration::from_secs_f64(at.max(0.0))
    }

    /// After a round: later if the runtime acted first, earlier if the command did.
    fn went(&mut self, runtime_first: bool) {
        self.at =
            if runtime_first { self.at + self.step } else { self.at.saturating_sub(self.step) };
    }
}

fn tools() -> Tools {
    Tools::new()
        .tool("lookup", json!({"type": "object"}), Replay::Safe, |_: Value, _: CallCtx| async {
            Ok::<_, ToolError>(json!({"found": 3}))
        })
        .approval_tool(
            "send_email",
            json!({"type": "object"}),
            Replay::Unsafe,
            |_: Value, _: CallCtx| async { Ok::<_, ToolError>(json!({"sent": true})) },
        )
}

fn runtime(store: &Arc<dyn JournalStore>, tools: &Tools) -> Journal {
    Journal::new(Arc::clone(store), Arc::new(tools.clone()), JournalOptions::new()).unwrap()
}

fn excerpt(log: &[Record]) -> String {
    let lines: Vec<String> =
        log.iter().map(|r| format!("  {} {}", r.seq, event_to_json(&r.event))).collect();
    lines.join("\n")
}

fn findings(log: &[Record]) -> Vec<String> {
    let events: Vec<Event> = log.iter().map(|r| r.event.clone()).collect();
    verify(&events).iter().map(ToString::to_string).collect()
}

fn assert_none(loop_name: &str, violations: &[String]) {
    assert!(
        violations.is_empty(),
        "{loop_name}: {} violation(s):\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// A session suspended on approval-gated call `c1`, its run ended and its lease released.
fn suspended_on_approval(journal: &Journal, tools: &Tools, session: &SessionId) {
    let run = journal.begin_run(session, Entry::NewTurn { message: "tell them".into() }).unwrap();
    let call = tools.call("c1", "send_email", json!({"to": "team"})).unwrap();
    let step = run.commit_reply(tools.reply("Asking first.", [call]).unwrap()).unwrap();
    let outcome = block_on(step.drive(tools)).unwrap();
    assert_eq!(outcome, StepOutcome::Suspended { awaiting: vec![CallId::from("c1")] });
    drop((step, run));
    journal.keep_leases().unwrap();
}

/// `approve` or `deny` from the command racing the runtime's `decide_approval(true)`,
/// `rounds` times on the store at `url`.
fn approve_race(backend: &str, url: &str, rounds: usize) {
    let store = open_url(url, OpenOptions::create()).unwrap();
    let tools = tools();
    let journal = runtime(&store, &tools);
    let span = command_time(|i| {
        let session = SessionId::new(format!("calibrate-{i}")).unwrap();
        suspended_on_approval(&journal, &tools, &session);
        ["approve", url, session.as_str(), "c1"].map(str::to_owned).to_vec()
    });
    // The calibration's sessions are left to the runtime's recovery, as a command's are.
    let report =
        block_on(journal.recover_all(&tools, RecoverOptions::new(), |run, _| async move {
            run.end(RunOutcome::Completed).unwrap();
        }))
        .unwrap();
    assert_eq!(report.recovered.len(), 3, "{report:?}");
    let mut moment = Moment::new(span);
    let mut violations = Vec::new();
    let (mut runtime_won, mut command_won, mut two, mut none) = (0, 0, 0, 0);
    // Why the loser was refused: the call no longer waited, or the winner's run held the lease.
    let (mut not_waiting, mut lease_held) = (0, 0);
    for round in 0..rounds {
        let _watchdog = Watchdog::start(format!("round {round} of the approve race"));
        let name = format!("a{round}");
        let session = SessionId::new(name.as_str()).unwrap();
        let c1 = CallId::from("c1");
        suspended_on_approval(&journal, &tools, &session);
        let command = if round % 2 == 0 { "approve" } else { "deny" };
        let racer = Racer::start(&[command, url, &name, "c1"]);
        std::thread::sleep(moment.of(round));
        let decided = block_on(journal.decide_approval(&session, &c1, true));
        let out = racer.finish();
        let said = format!(
            "the command exited {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        let command_wins = match out.status.code() {
            Some(0) => true,
            Some(2) if stderr(&out).contains("waiting for an approval decision") => {
                not_waiting += 1;
                false
            }
            Some(2) if stderr(&out).contains("lease live until") => {
                lease_held += 1;
                false
            }
            _ => {
                violations.push(format!("round {round}: {said}"));
                continue;
            }
        };
        let runtime_run = match decided {
            Ok(run) => Some(run),
            Err(AnswerError::NotWaiting { .. }) => {
                not_waiting += 1;
                None
            }
            Err(AnswerError::Begin(e)) if matches!(*e, BeginError::LeaseHeld { .. }) => {
                lease_held += 1;
                None
            }
            Err(e) => {
                violations.push(format!("round {round}: the runtime's decision failed: {e}"));
                continue;
            }
        };
        match (runtime_run.is_some(), command_wins) {
            (true, true) => two += 1,
            (false, false) => none += 1,
            (true, false) => runtime_won += 1,
            (false, true) => command_won += 1,
        }
        moment.went(runtime_run.is_some());
        if runtime_run.is_some() == command_wins {
            violations.push(format!(
                "round {round}: the runtime's decision {}, {said}",
                if runtime_run.is_some() { "landed" } else { "was refused" }
            ));
        }
        // The winner's run drives the step to its end: the runtime's own, or, after the
        // command, the runtime's recovery of the run the command left to it.
        if let Some(run) = runtime_run {
            let driven = block_on(run.drive(&tools));
            let ended = run.end(RunOutcome::Completed);
            if !matches!(driven, Ok(Some(StepOutcome::Committed { .. }))) || ended.is_err() {
                violations.push(format!(
                    "round {round}: the runtime won, then its drive gave {driven:?} and its end \
                     {ended:?}"
                ));
            }
            drop(run);
            journal.keep_leases().unwrap();
        } else if command_wins {
            let report = block_on(journal.recover_all(
                &tools,
                RecoverOptions::new(),
                |run, outcome| async move {
                    assert!(matches!(outcome, Some(StepOutcome::Committed { .. })), "{outcome:?}");
                    run.end_async(RunOutcome::Completed).await.unwrap();
                },
            ))
            .unwrap();
            if report.recovered != [session.clone()] || !report.failed.is_empty() {
                violations.push(format!(
                    "round {round}: the command won, then the runtime's recovery gave {report:?}"
                ));
            }
            journal.keep_leases().unwrap();
        }
        let log = store.read_all(&session).unwrap();
        let decisions: Vec<bool> = log
            .iter()
            .filter_map(|r| match &r.event {
                Event::ApprovalDecided(d) => Some(d.approved),
                _ => None,
            })
            .collect();
        let wakes = log
            .iter()
            .filter(|r| matches!(&r.event, Event::RunStarted(s) if s.entry == Entry::Wake))
            .count();
        let results =
            log.iter().filter(|r| matches!(&r.event, Event::ToolResult(t) if t.call == c1)).count();
        let ends: Vec<RunOutcome> = log
            .iter()
            .filter_map(|r| match &r.event {
                Event::RunEnded(e) => Some(e.outcome),
                _ => None,
            })
            .collect();
        let approved = decisions.first().copied().unwrap_or(false);
        let expected_decision = if command_wins { command == "approve" } else { true };
        // The runtime's own wake, or the command's and then the recovery's.
        let expected_wakes = if command_wins { 2 } else { 1 };
        let problems = findings(&log);
        if decisions.len() != 1
            || approved != expected_decision
            || wakes != expected_wakes
            || results != usize::from(approved)
            || ends != [RunOutcome::Suspended, RunOutcome::Completed]
            || !problems.is_empty()
        {
            violations.push(format!(
                "round {round}: {} decision(s) {decisions:?}, {wakes} wake(s) (the {} won), {} \
                 result(s), ends {ends:?}, verify {problems:?}; the log:\n{}",
                decisions.len(),
                if command_wins { "command" } else { "runtime" },
                results,
                excerpt(&log)
            ));
        }
    }
    println!(
        "approve race on {backend}: {rounds} rounds, the runtime won {runtime_won}, the command \
         won {command_won}, two decisions: {two}, none: {none}, the loser refused as the call no \
         longer waited: {not_waiting}, as the winner held the lease: {lease_held}, violations: \
         {} (the command runs {} ms; the two met about {} ms after its start)",
        violations.len(),
        span.as_millis(),
        moment.at.as_millis()
    );
    assert_none("approve race", &violations);
    assert!(
        runtime_won > 0 && command_won > 0,
        "one side won every round: the moments never met the command's run"
    );
}

/// `stop` from the command racing the runtime's `end(completed)`, `rounds` times on the store
/// at `url`.
fn stop_race(backend: &str, url: &str, rounds: usize) {
    let store = open_url(url, OpenOptions::create()).unwrap();
    let tools = tools();
    let journal = runtime(&store, &tools);
    // A run with its step committed, open: the command stops it, or the runtime ends it.
    let open_run = |session: &SessionId| {
        let run =
            journal.begin_run(session, Entry::NewTurn { message: "look it up".into() }).unwrap();
        let call = tools.call("c1", "lookup", json!({"q": "x"})).unwrap();
        let step = run.commit_reply(tools.reply("Looking.", [call]).unwrap()).unwrap();
        let outcome = block_on(step.drive(&tools)).unwrap();
        assert!(matches!(outcome, StepOutcome::Committed { .. }), "{outcome:?}");
        run
    };
    let span = command_time(|i| {
        let session = SessionId::new(format!("calibrate-{i}")).unwrap();
        drop(open_run(&session));
        journal.keep_leases().unwrap();
        ["stop", url, session.as_str()].map(str::to_owned).to_vec()
    });
    let mut moment = Moment::new(span);
    let mut violations = Vec::new();
    let (mut stopped_first, mut ended_first, mut second_ends) = (0, 0, 0);
    for round in 0..rounds {
        let _watchdog = Watchdog::start(format!("round {round} of the stop race"));
        let name = format!("s{round}");
        let session = SessionId::new(name.as_str()).unwrap();
        let run = open_run(&session);
        let racer = Racer::start(&["stop", url, &name]);
        std::thread::sleep(moment.of(round));
        let ended = run.end(RunOutcome::Completed);
        moment.went(ended.is_ok());
        let out = racer.finish();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        drop(run);
        journal.keep_leases().unwrap();
        let said = format!("the command exited {:?}: {stdout}{}", out.status.code(), stderr(&out));
        let log = store.read_all(&session).unwrap();
        let ends: Vec<RunOutcome> = log
            .iter()
            .filter_map(|r| match &r.event {
                Event::RunEnded(e) => Some(e.outcome),
                _ => None,
            })
            .collect();
        if ends.len() > 1 {
            second_ends += 1;
        }
        let problems = findings(&log);
        let consistent = match (&ended, out.status.code()) {
            (Ok(()), Some(0)) => {
                ended_first += 1;
                stdout.contains("nothing to stop") && ends == [RunOutcome::Completed]
            }
            (Err(WriteError::Fenced { .. }), Some(0)) => {
                stopped_first += 1;
                stdout.starts_with("stopped session") && ends == [RunOutcome::Stopped]
            }
            _ => false,
        };
        if !consistent || !problems.is_empty() {
            violations.push(format!(
                "round {round}: the runtime's end gave {ended:?}, {said}; ends {ends:?}, verify \
                 {problems:?}; the log:\n{}",
                excerpt(&log)
            ));
        }
    }
    println!(
        "stop race on {backend}: {rounds} rounds, stopped first: {stopped_first}, ended first: \
         {ended_first}, second ends: {second_ends}, violations: {} (the command runs {} ms; the two \
         met about {} ms after its start)",
        violations.len(),
        span.as_millis(),
        moment.at.as_millis()
    );
    assert_none("stop race", &violations);
    assert!(
        stopped_first > 0 && ended_first > 0,
        "one side won every round: the moments never met the command's run"
    );
}

#[test]
fn approve_racing_the_runtimes_decision_lands_one_decision_on_sqlite() {
    let place = sqlite_place();
    approve_race("sqlite", &place.url, 20);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn approve_racing_the_runtimes_decision_lands_one_decision_on_postgresql() {
    let place = pg_place();
    approve_race("postgresql", &place.url, 20);
}

#[test]
fn stop_racing_the_runs_end_never_ends_it_twice_on_sqlite() {
    let place = sqlite_place();
    stop_race("sqlite", &place.url, 40);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn stop_racing_the_runs_end_never_ends_it_twice_on_postgresql() {
    let place = pg_place();
    stop_race("postgresql", &place.url, 40);
}
