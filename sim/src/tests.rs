#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, on the inputs it built itself"
)]

use stepjournal_codec::{
    Attempt, AttemptStarted, Call, CallId, CallKind, DispatchId, DispatchMinted, Entry, Event,
    Message, OutputChunk, PairReason, Paired, RawJson, Record, Replay, ReplyCommitted, Role,
    RunEnded, RunOutcome, RunStarted, Seq, SessionId, StepCommit, StepNo, ToolResult, UnixMillis,
};
use stepjournal_recovery::{Config, TranscriptItem, fold, transcript};

use super::*;

// ---- `check` on histories built by hand ----

fn session() -> SessionId {
    SessionId::new("sim-session").unwrap()
}

fn id(s: &str) -> CallId {
    CallId::new(s)
}

fn d(s: &str) -> DispatchId {
    DispatchId::new(s)
}

fn call(c: &str, tool: &str, replay: Replay, group: Option<&str>) -> Call {
    Call {
        call: id(c),
        tool: tool.into(),
        args: RawJson::empty_object(),
        kind: CallKind::Tool,
        replay,
        group: group.map(str::to_owned),
        sequential: false,
    }
}

fn attempt(c: &str, a: u32) -> Event {
    Event::AttemptStarted(AttemptStarted { call: id(c), attempt: Attempt(a) })
}

fn result(c: &str, a: u32) -> Event {
    Event::ToolResult(ToolResult {
        call: id(c),
        attempt: Attempt(a),
        output: RawJson::null(),
        is_error: false,
        metadata: None,
    })
}

fn started(c: &str, dispatch: &str, a: u32) -> LedgerEntry {
    LedgerEntry::BodyStarted {
        step: StepNo(1),
        call: id(c),
        dispatch: d(dispatch),
        attempt: Attempt(a),
    }
}

fn effect(c: &str, dispatch: &str, a: u32) -> LedgerEntry {
    LedgerEntry::Effect {
        step: StepNo(1),
        call: id(c),
        dispatch: d(dispatch),
        attempt: Attempt(a),
        what: "sent".to_owned(),
        late: false,
    }
}

/// A correct, ended session: one step with an unsafe `c1` and a safe `c2` behind it in group
/// `g`, each run once to its result.
fn good() -> (Vec<Event>, Vec<LedgerEntry>) {
    let events = vec![
        Event::RunStarted(RunStarted {
            run: "r1".into(),
            entry: Entry::NewTurn { message: "go".into() },
            by: None,
        }),
        Event::Message(Message { role: Role::User, text: "go".into() }),
        Event::ReplyCommitted(ReplyCommitted {
            step: StepNo(1),
            checkpoint: "cp-1".into(),
            text: String::new(),
            calls: vec![
                call("c1", "send_email", Replay::Unsafe, Some("g")),
                call("c2", "search", Replay::Safe, Some("g")),
            ],
            metadata: None,
        }),
        Event::DispatchMinted(DispatchMinted { call: id("c1"), dispatch: d("d-1") }),
        Event::DispatchMinted(DispatchMinted { call: id("c2"), dispatch: d("d-2") }),
        attempt("c1", 1),
        result("c1", 1),
        attempt("c2", 1),
        result("c2", 1),
        Event::StepCommit(StepCommit { step: StepNo(1), checkpoint: "cp-2".into() }),
        Event::RunEnded(RunEnded {
            run: "r1".into(),
            outcome: RunOutcome::Completed,
            error: None,
            by: None,
        }),
    ];
    let ledger = vec![
        started("c1", "d-1", 1),
        effect("c1", "d-1", 1),
        ended("c1", "d-1", 1),
        started("c2", "d-2", 1),
        effect("c2", "d-2", 1),
        ended("c2", "d-2", 1),
    ];
    (events, ledger)
}

fn ended(c: &str, dispatch: &str, a: u32) -> LedgerEntry {
    LedgerEntry::BodyEnded {
        step: StepNo(1),
        call: id(c),
        dispatch: d(dispatch),
        attempt: Attempt(a),
    }
}

fn history(events: Vec<Event>, ledger: Vec<LedgerEntry>) -> History {
    let log: Vec<Record> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Record {
            session: session(),
            seq: Seq(i as u64),
            at: UnixMillis(0),
            event: e.clone(),
        })
        .collect();
    let acked = vec![Acked { session: session(), first: Seq(0), events }];
    History {
        session: session(),
        log,
        ledger,
        acked,
        fenced: Vec::new(),
        config: Config::default(),
        ended: true,
    }
}

fn violations(h: &History) -> Vec<Violation> {
    check(h)
}

#[test]
fn a_correct_history_breaks_nothing() {
    let (events, ledger) = good();
    assert_eq!(violations(&history(events, ledger)), Vec::new());
}

#[test]
fn a_body_started_before_the_body_ahead_of_it_in_its_group_ended_is_reported() {
    let (events, mut ledger) = good();
    // c1's body ends only after c2's started: they overlapped.
    let end = ledger.remove(2);
    ledger.insert(3, end);
    assert_eq!(
        violations(&history(events, ledger)),
        [Violation::StartedBeforeAheadEnded {
            call: id("c2"),
            attempt: Attempt(1),
            ahead: id("c1"),
            ahead_attempt: Attempt(1),
        }]
    );
}

#[test]
fn an_unsafe_body_started_twice_for_one_dispatch_id_is_reported() {
    let (mut events, mut ledger) = good();
    // c1 starts a second body after its first, under the same dispatch id.
    events.insert(6, attempt("c1", 2));
    events[7] = result("c1", 2);
    ledger.insert(2, started("c1", "d-1", 2));
    ledger.insert(3, effect("c1", "d-1", 2));
    let found = violations(&history(events, ledger));
    assert!(
        found.contains(&Violation::UnsafeBodyTwice {
            call: id("c1"),
            dispatch: d("d-1"),
            bodies: 2
        }),
        "{found:?}"
    );
    assert!(
        found.contains(&Violation::UnsafeEffectTwice {
            call: id("c1"),
            dispatch: d("d-1"),
            attempts: vec![Attempt(1), Attempt(2)]
        }),
        "{found:?}"
    );
}

#[test]
fn an_effect_before_its_body_started_is_reported() {
    let (events, mut ledger) = good();
    ledger.swap(0, 1);
    let found = violations(&history(events, ledger));
    assert!(
        found.contains(&Violation::EffectWithoutBody { call: id("c1"), attempt: Attempt(1) }),
        "{found:?}"
    );
}

#[test]
fn a_lost_acknowledged_append_is_reported() {
    let (events, ledger) = good();
    let mut h = history(events.clone(), ledger);
    // The log lost everything from seq 7 on: c2's body, the commit and the end.
    h.log.truncate(7);
    let found = violations(&h);
    assert!(
        found.contains(&Violation::AckedLost {
            session: session(),
            seq: Seq(7),
            expected: stepjournal_codec::EventKind::AttemptStarted,
            found: None,
        }),
        "{found:?}"
    );
    // And an acknowledged event replaced by another one.
    let mut h = history(events, Vec::new());
    h.log[6].event = attempt("c1", 2);
    let found = violations(&h);
    assert!(
        found.iter().any(|v| matches!(v, Violation::AckedLost { seq: Seq(6), .. })),
        "{found:?}"
    );
}

#[test]
fn more_bodies_than_max_bodies_are_reported() {
    let (mut events, _) = good();
    // c2 (safe) starts four bodies; max_bodies is 3.
    for a in 2..=4 {
        events.insert(7 + a as usize - 1, attempt("c2", a));
    }
    events[11] = result("c2", 4);
    let ledger: Vec<_> = (1..=4).map(|a| started("c2", "d-2", a)).collect();
    let mut h = history(events, ledger);
    h.ledger.insert(0, started("c1", "d-1", 1));
    let found = violations(&h);
    assert!(
        found.contains(&Violation::TooManyBodies { call: id("c2"), bodies: 4, max: 3 }),
        "{found:?}"
    );
}

#[test]
fn an_unanswered_call_at_the_end_and_a_call_answered_twice_are_reported() {
    let (mut events, ledger) = good();
    // c2's result is gone (and the commit with it: the step is still open at the end).
    events.remove(8);
    events.remove(8);
    let found = violations(&history(events, ledger.clone()));
    assert!(
        found.contains(&Violation::Unanswered {
            call: id("c2"),
            step: StepNo(1),
            when: "at the end"
        }),
        "{found:?}"
    );
    assert!(found.iter().any(|v| matches!(v, Violation::NotEnded { .. })), "{found:?}");

    let (mut events, ledger) = good();
    // c1 has its result and a pairing that counts.
    events.insert(
        7,
        Event::Paired(Paired {
            call: id("c1"),
            reason: PairReason::OutcomeUnknown,
            message: PairReason::OutcomeUnknown.model_message().to_owned(),
            partial: String::new(),
            rule: None,
        }),
    );
    let found = violations(&history(events, ledger));
    assert!(found.contains(&Violation::AnsweredTwice { call: id("c1"), answers: 2 }), "{found:?}");
}

#[test]
fn a_body_started_behind_an_unresolved_or_doubtful_call_is_reported() {
    let (mut events, ledger) = good();
    // c2 starts while c1 (ahead of it in group g) has no result yet.
    events.swap(6, 7);
    events.swap(7, 8);
    let found = violations(&history(events, ledger));
    assert!(
        found.iter().any(|v| matches!(
            v,
            Violation::OrderBroken { call, ahead, why, .. }
                if call == &id("c2") && ahead == &id("c1") && why == "was unresolved"
        )),
        "{found:?}"
    );

    let (mut events, ledger) = good();
    // c1 is paired outcome_unknown instead of its result; c2 runs behind it anyway.
    events[6] = Event::Paired(Paired {
        call: id("c1"),
        reason: PairReason::OutcomeUnknown,
        message: String::new(),
        partial: String::new(),
        rule: None,
    });
    let found = violations(&history(events, ledger));
    assert!(
        found.iter().any(|v| matches!(
            v,
            Violation::OrderBroken { call, why, .. }
                if call == &id("c2") && why == "was paired `outcome_unknown`"
        )),
        "{found:?}"
    );
}

#[test]
fn a_body_after_its_step_was_closed_is_reported() {
    let (mut events, mut ledger) = good();
    // A redirect closed step 1 before c2's body; c2 started anyway.
    let commit = events.remove(9);
    events.insert(7, commit);
    ledger.insert(2, LedgerEntry::StepClosed { step: StepNo(1), entry: "new_turn" });
    let found = violations(&history(events, ledger));
    assert!(
        found.iter().any(|v| matches!(
            v,
            Violation::RanAfterClose { call, seq: Seq(8), .. } if call == &id("c2")
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&Violation::StartedAfterClose {
            call: id("c2"),
            attempt: Attempt(1),
            step: StepNo(1),
            entry: "new_turn"
        }),
        "{found:?}"
    );
}

#[test]
fn a_fenced_write_that_was_accepted_or_landed_is_reported() {
    let (events, ledger) = good();
    let mut h = history(events, ledger);
    h.fenced.push(FencedWrite {
        call: id("c2"),
        attempt: Attempt(1),
        event: result("c2", 1),
        accepted: true,
    });
    let found = violations(&h);
    assert!(found.iter().any(|v| matches!(v, Violation::FencedWriteAccepted { .. })), "{found:?}");
    assert!(
        found.iter().any(|v| matches!(v, Violation::FencedWriteLanded { seq: Seq(8), .. })),
        "{found:?}"
    );
    // A late chunk that never landed and was refused breaks nothing.
    let (events, ledger) = good();
    let mut h = history(events, ledger);
    h.fenced.push(FencedWrite {
        call: id("c2"),
        attempt: Attempt(1),
        event: Event::OutputChunk(OutputChunk {
            call: id("c2"),
            attempt: Attempt(1),
            text: "late".into(),
        }),
        accepted: false,
    });
    assert_eq!(violations(&h), Vec::new());
}

#[test]
fn a_body_the_log_does_not_know_and_a_changed_dispatch_id_are_reported() {
    let (events, mut ledger) = good();
    ledger.push(started("c9", "d-9", 1));
    ledger.push(started("c2", "d-2", 2));
    ledger.push(effect("c2", "d-other", 2));
    let found = violations(&history(events, ledger));
    assert!(
        found.contains(&Violation::BodyWithoutReply { step: StepNo(1), call: id("c9") }),
        "{found:?}"
    );
    assert!(
        found.contains(&Violation::BodyNotInLog { call: id("c2"), attempt: Attempt(2) }),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| matches!(v, Violation::DispatchChanged { call, .. } if call == &id("c2"))),
        "{found:?}"
    );
}

#[test]
fn a_protocol_problem_verify_finds_is_reported() {
    let (mut events, ledger) = good();
    events.insert(5, Event::DispatchMinted(DispatchMinted { call: id("c1"), dispatch: d("d-1") }));
    let found = violations(&history(events, ledger));
    assert!(found.iter().any(|v| matches!(v, Violation::Protocol(_))), "{found:?}");
}

// ---- whole simulations ----

fn tools() -> ToolSet {
    ToolSet::new()
        .tool("search", Replay::Safe)
        .with("write_file", Replay::Safe, LedgerTool { chunks: 2 })
        .tool("send_email", Replay::Unsafe)
        .tool("researcher", Replay::Unsafe)
}

fn two_calls() -> Script {
    Script::new("go")
        .step(
            ScriptStep::new("first")
                .call(ScriptCall::tool("c1", "write_file"))
                .call(ScriptCall::tool("c2", "send_email")),
        )
        .step(ScriptStep::new("done"))
}

fn run(script: &Script, case: &Case) -> Report {
    simulate(script, &tools(), case, &mut MemoryMedium::new()).unwrap()
}

fn shown(report: &Report) -> Vec<TranscriptItem> {
    let events: Vec<Event> = report.log.iter().map(|r| r.event.clone()).collect();
    transcript(&fold(&events))
}

fn paired(report: &Report, c: &str) -> Option<PairReason> {
    shown(report).into_iter().find_map(|i| match i {
        TranscriptItem::Paired { call, reason, .. } if call == id(c) => Some(reason),
        _ => None,
    })
}

#[test]
fn a_session_without_faults_runs_to_its_end() {
    let report = run(&two_calls(), &Case::new());
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!((report.faults_fired, report.runs), (0, 1));
    assert_eq!(report.outcome, Some(RunOutcome::Completed));
    let bodies = report.ledger.iter().filter(|e| matches!(e, LedgerEntry::BodyStarted { .. }));
    assert_eq!(bodies.count(), 2);
}

#[test]
fn a_crash_inside_both_bodies_reruns_the_safe_call_and_pairs_the_unsafe_one() {
    // Crash inside c2's body (the second body), after its effect.
    let case = Case::new().fault(Fault::crash_in_body(1, 2));
    let report = run(&two_calls(), &case);
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!(report.faults_fired, 1);
    assert_eq!(paired(&report, "c2"), Some(PairReason::OutcomeUnknown));
    // c1 had finished before the crash: it has one body.
    let c1_bodies = report
        .ledger
        .iter()
        .filter(|e| matches!(e, LedgerEntry::BodyStarted { call, .. } if call == &id("c1")))
        .count();
    assert_eq!(c1_bodies, 1);

    // Crash inside c1's body (safe): it runs again as attempt 2 under its dispatch id.
    let report = run(&two_calls(), &Case::new().fault(Fault::crash_in_body(0, 1)));
    assert!(report.is_ok(), "{}", report.summary());
    let c1: Vec<_> = report
        .ledger
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::BodyStarted { call, dispatch, attempt, .. } if call == &id("c1") => {
                Some((dispatch.clone(), *attempt))
            }
            _ => None,
        })
        .collect();
    assert_eq!(c1.len(), 2, "{}", report.summary());
    assert_eq!(c1[0].0, c1[1].0, "the same dispatch id on both attempts");
    assert_eq!((c1[0].1, c1[1].1), (Attempt(1), Attempt(2)));
}

#[test]
fn an_abandoned_body_writes_late_and_both_writes_are_fenced() {
    for then in [Reentry::Wake, Reentry::Stop, Reentry::NewTurn] {
        let fault =
            Fault::new(Trigger::Body { n: 1, point: 0, fault: BodyFault::Abandon }).then(then);
        let report = run(&two_calls(), &Case::new().fault(fault));
        assert!(report.is_ok(), "{then:?}: {}", report.summary());
        let fenced = report.trace.iter().filter(|l| l.contains("fenced by")).count();
        assert_eq!(fenced, 2, "{}", report.summary());
        // The late body's effect happened (ledger), and nothing of it is in the log.
        assert!(report.ledger.iter().any(|e| matches!(e, LedgerEntry::Effect { late: true, .. })));
        assert!(!report.log.iter().any(|r| matches!(
            &r.event,
            Event::OutputChunk(c) if c.text.starts_with("late output")
        )));
        assert_ne!(paired(&report, "c2"), None, "{}", report.summary());
    }
}

#[test]
fn a_run_the_runtime_fails_is_retried_and_the_safe_call_runs_again() {
    let fault = Fault::new(Trigger::Body { n: 0, point: 1, fault: BodyFault::FailRun })
        .then(Reentry::Retry);
    let report = run(&two_calls(), &Case::new().fault(fault));
    assert!(report.is_ok(), "{}", report.summary());
    assert!(report.trace.iter().any(|l| l.contains("begins: retry")), "{}", report.summary());
    let attempts: Vec<_> = report
        .ledger
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::BodyStarted { call, attempt, .. } if call == &id("c1") => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![Attempt(1), Attempt(2)]);
}

#[test]
fn a_store_failure_ends_the_run_failed_and_a_poisoned_store_is_reopened() {
    for poisoned in [false, true] {
        // Appends: begin (0), reply (1), c1's start (2), its chunk (3).
        let fault = Fault::new(Trigger::Append { n: 3, fault: AppendFault::Fail { poisoned } })
            .then(Reentry::Retry);
        let report = run(&two_calls(), &Case::new().fault(fault));
        assert!(report.is_ok(), "poisoned {poisoned}: {}", report.summary());
        let failed = report
            .log
            .iter()
            .any(|r| matches!(&r.event, Event::RunEnded(e) if e.outcome == RunOutcome::Failed));
        // A store that still accepts writes ends the run failed; a poisoned one cannot.
        assert_eq!(failed, !poisoned, "{}", report.summary());
    }
}

#[test]
fn a_crash_at_every_append_with_every_landing_keeps_the_invariants() {
    let script = two_calls();
    for landing in [Landing::Lands, Landing::Lost, Landing::Torn] {
        for n in 0..16 {
            for then in Reentry::ALL {
                let case = Case::new().fault(Fault::crash_at_append(n, landing).then(then));
                let report = run(&script, &case);
                assert!(
                    report.is_ok(),
                    "append {n} {landing:?} then {then:?}: {}",
                    report.summary()
                );
            }
        }
    }
}

#[test]
fn a_suspended_step_is_woken_and_its_client_call_answered() {
    let script = Script::new("go").step(
        ScriptStep::new("ask")
            .call(ScriptCall::tool("c1", "search").kind(CallKind::Client).group("g"))
            .call(ScriptCall::tool("c2", "search").group("g"))
            .call(ScriptCall::tool("c3", "send_email").kind(CallKind::Approval).denied()),
    );
    let report = run(&script, &Case::new().suspending());
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!(report.runs, 2, "{}", report.summary());
    assert!(shown(&report).iter().any(|i| matches!(i, TranscriptItem::ApprovalDenied { .. })));
}

fn delegating() -> Script {
    Script::new("go")
        .step(
            ScriptStep::new("delegate")
                .call(ScriptCall::tool("c1", "researcher").kind(CallKind::RemoteAgent)),
        )
        .step(ScriptStep::new("done"))
}

fn count(report: &Report, f: impl Fn(&LedgerEntry) -> bool) -> usize {
    report.ledger.iter().filter(|e| f(e)).count()
}

#[test]
fn a_remote_agent_with_no_body_left_finishes_through_its_reattached_child() {
    // max_bodies 1: the child is attached, then the process dies before the result; the wake
    // re-attaches to the child, which starts no body, and records its result under attempt 1.
    let case = Case::new().config(Config::new(1).unwrap()).fault(Fault::crash_in_body(0, 2));
    let report = run(&delegating(), &case);
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!(report.outcome, Some(RunOutcome::Completed), "{}", report.summary());
    assert!(report.trace.iter().any(|l| l.contains("c1 re-attached")), "{}", report.summary());
    assert_eq!(paired(&report, "c1"), None);
    let results: Vec<_> = report
        .log
        .iter()
        .filter_map(|r| match &r.event {
            Event::ToolResult(t) if t.call == id("c1") => Some(t.attempt),
            _ => None,
        })
        .collect();
    assert_eq!(results, [Attempt(1)]);
    let started =
        report.log.iter().filter(|r| matches!(&r.event, Event::AttemptStarted(_))).count();
    assert_eq!(started, 1);
    assert_eq!(count(&report, |e| matches!(e, LedgerEntry::ChildStarted { .. })), 1);
    assert_eq!(count(&report, |e| matches!(e, LedgerEntry::BodyStarted { .. })), 1);
}

#[test]
fn a_crash_inside_a_reattached_body_reattaches_again() {
    // The first crash leaves the child attached; the second fires inside the re-attached body.
    let case = Case::new()
        .config(Config::new(1).unwrap())
        .fault(Fault::crash_in_body(0, 2))
        .fault(Fault::crash_in_body(0, 1));
    let report = run(&delegating(), &case);
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!((report.faults_fired, report.outcome), (2, Some(RunOutcome::Completed)));
    let reattached = report.trace.iter().filter(|l| l.contains("c1 re-attached")).count();
    assert_eq!(reattached, 2, "{}", report.summary());
    assert_eq!(count(&report, |e| matches!(e, LedgerEntry::ChildStarted { .. })), 1);
    assert_eq!(count(&report, |e| matches!(e, LedgerEntry::BodyStarted { .. })), 1);
}

#[test]
fn a_remote_agent_whose_child_was_never_attached_and_no_body_is_left_finishes_by_its_dispatch_id() {
    // Regression: with max_bodies 1, the child is asked to start, then the process dies before
    // `child_attached`; the wake plans `start_child`, and no body was left to start it through,
    // so the run could only be failed and redirected. The start is keyed on the dispatch id:
    // the earlier body goes on, the remote side hands back the same child, the call finishes.
    let case = Case::new().config(Config::new(1).unwrap()).fault(Fault::crash_in_body(0, 1));
    let report = run(&delegating(), &case);
    assert!(report.is_ok(), "{}", report.summary());
    assert!(
        report.trace.iter().any(|l| l.contains("keyed on its dispatch id")),
        "{}",
        report.summary()
    );
    assert_eq!(paired(&report, "c1"), None, "{}", report.summary());
    assert_eq!(count(&report, |e| matches!(e, LedgerEntry::BodyStarted { .. })), 1);
}

#[test]
fn a_torn_append_on_the_simulated_disk_keeps_the_invariants() {
    let script = two_calls();
    for n in 0..12 {
        for seed in 0..6 {
            let case = Case::new()
                .fault(Fault::crash_at_append(n, Landing::Torn).seed(seed).then(Reentry::Wake));
            let report = simulate(&script, &tools(), &case, &mut SimDiskMedium::new()).unwrap();
            assert!(report.is_ok(), "append {n} seed {seed}: {}", report.summary());
        }
    }
}

/// Every file of the simulated disk's journal directory, with its written bytes.
fn journal_files(medium: &SimDiskMedium) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let disk = medium.disk();
    let files = disk.files(std::path::Path::new("/journal"));
    files.into_iter().map(|(path, _)| (path.clone(), disk.read_file(&path).unwrap())).collect()
}

#[test]
fn two_identical_simulations_write_byte_identical_journals() {
    let script = two_calls();
    let case = Case::new()
        .fault(Fault::crash_in_body(1, 1).then(Reentry::Wake))
        .fault(Fault::crash_at_append(2, Landing::Torn).seed(3).then(Reentry::Continue));
    let (mut first, mut second) = (SimDiskMedium::new(), SimDiskMedium::new());
    let a = simulate(&script, &tools(), &case, &mut first).unwrap();
    let b = simulate(&script, &tools(), &case, &mut second).unwrap();
    assert!(a.is_ok(), "{}", a.summary());
    assert_eq!(a.faults_fired, 2, "{}", a.summary());
    assert_eq!(a.log, b.log, "the same records, times included");
    let (files, again) = (journal_files(&first), journal_files(&second));
    assert!(files.iter().any(|(_, bytes)| !bytes.is_empty()), "the journal holds segments");
    assert!(files == again, "the segment files differ byte for byte");
    // The times are the simulation's clock's, one step per append, not the system's.
    let times: Vec<u64> = a.log.iter().map(|r| r.at.get()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.first().is_some_and(|t| (1_700_000_000_000..1_700_000_001_000).contains(t)));
}

#[test]
fn a_script_the_simulator_cannot_run_is_refused() {
    let script = Script::new("go")
        .step(ScriptStep::new("a").call(ScriptCall::tool("c1", "search")))
        .step(ScriptStep::new("b").call(ScriptCall::tool("c1", "search")));
    let err = simulate(&script, &tools(), &Case::new(), &mut MemoryMedium::new()).unwrap_err();
    assert_eq!(err, ScriptError::RepeatedCall { call: id("c1") });
    let script = Script::new("go").step(ScriptStep::new("a").call(ScriptCall::tool("c1", "nope")));
    let err = simulate(&script, &tools(), &Case::new(), &mut MemoryMedium::new()).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}
