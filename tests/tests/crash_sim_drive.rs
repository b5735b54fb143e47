//! The crash simulator with every step run by the tool executor (`Step::drive`), as a runtime
//! built on `Tools` and `drive` runs it: a crash at every append of a session whose first step
//! holds three calls in a group and the sequential chain (the batch landed, lost or torn), a
//! crash, a failed run and an abandoned run at every point of every body (the abandoned body's
//! late writes must be refused), on the memory store, the file backend on a simulated disk
//! and (feature `sqlite`) SQLite. Every invariant of `sim::check` is asserted after every fault
//! and at the end, among them: the ledger never shows a body of a call started before the body
//! that resolved a call it is behind had ended.

use stepjournal_codec::Replay;
use stepjournal_sim::{
    AppendFault, BodyFault, Case, Fault, Landing, Medium, MemoryMedium, Reentry, Report, Script,
    ScriptCall, ScriptStep, SimDiskMedium, ToolSet, Trigger, simulate_through_drive,
};

fn tools() -> ToolSet {
    ToolSet::new()
        .tool("search", Replay::Safe)
        .tool("send_email", Replay::Unsafe)
        .tool("charge_card", Replay::Unsafe)
}

/// A first step of three calls: `c2` is behind `c1` in group `g`, `c3` behind `c1` on the
/// sequential chain; then a reply with no calls.
fn script() -> Script {
    Script::new("Book the trip and tell Ann.")
        .step(
            ScriptStep::new("On it.")
                .call(ScriptCall::tool("c1", "search").group("g").sequential())
                .call(ScriptCall::tool("c2", "send_email").group("g"))
                .call(ScriptCall::tool("c3", "charge_card").sequential()),
        )
        .step(ScriptStep::new("Done."))
}

/// Runs `case` on a fresh medium and asserts every invariant held.
fn simulate_ok(case: &Case, medium: &mut dyn Medium) -> Report {
    let report = simulate_through_drive(&script(), &tools(), case, medium).unwrap();
    assert!(report.is_ok(), "{case:#?}\n{}", report.summary());
    report
}

/// The appends the session makes with no fault: every append a crash can hit.
fn appends_without_faults() -> u32 {
    let report = simulate_ok(&Case::new(), &mut MemoryMedium::new());
    assert!(report.outcome.is_some(), "the session ended: {}", report.summary());
    let mut batches = 0;
    let mut last = None;
    for record in &report.log {
        if last != Some(record.at) {
            batches += 1;
            last = Some(record.at);
        }
    }
    batches
}

fn every_crash_at_an_append(medium: impl Fn() -> Box<dyn Medium>) {
    let appends = appends_without_faults();
    assert!(appends >= 10, "{appends}");
    let mut fired = 0;
    for n in 0..appends {
        for landing in [Landing::Lands, Landing::Lost, Landing::Torn] {
            for then in [Reentry::Wake, Reentry::Retry] {
                let fault = Fault::new(Trigger::Append { n, fault: AppendFault::Crash(landing) });
                let case = Case::new().fault(fault.then(then).seed(u64::from(n)));
                let report = simulate_ok(&case, &mut *medium());
                fired += report.faults_fired;
            }
        }
    }
    assert_eq!(fired, appends * 6, "every crash fired");
}

fn every_body_fault(medium: impl Fn() -> Box<dyn Medium>) {
    let mut fired = 0;
    let mut late = 0;
    for fault in [BodyFault::Crash, BodyFault::Abandon, BodyFault::FailRun] {
        for n in 0..3 {
            for point in 0..4 {
                let then = if fault == BodyFault::FailRun { Reentry::Retry } else { Reentry::Wake };
                let case =
                    Case::new().fault(Fault::new(Trigger::Body { n, point, fault }).then(then));
                let report = simulate_ok(&case, &mut *medium());
                fired += report.faults_fired;
                if report.trace.iter().any(|l| l.contains("late writes of") && l.contains("fenced"))
                {
                    late += 1;
                }
            }
        }
    }
    assert_eq!(fired, 3 * 3 * 4, "every body fault fired");
    assert_eq!(late, 3 * 4, "every abandoned body's late writes were fenced");
}

#[test]
fn a_crash_at_every_append_keeps_every_invariant_through_drive_on_the_memory_store() {
    every_crash_at_an_append(|| Box::new(MemoryMedium::new()));
}

#[test]
fn a_crash_at_every_append_keeps_every_invariant_through_drive_on_the_file_backend() {
    every_crash_at_an_append(|| Box::new(SimDiskMedium::new()));
}

#[test]
fn every_fault_inside_every_body_keeps_every_invariant_through_drive_on_the_memory_store() {
    every_body_fault(|| Box::new(MemoryMedium::new()));
}

#[test]
fn every_fault_inside_every_body_keeps_every_invariant_through_drive_on_the_file_backend() {
    every_body_fault(|| Box::new(SimDiskMedium::new()));
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use stepjournal_tests::media::sqlite::SqliteMedium;

    #[test]
    fn a_crash_at_every_append_keeps_every_invariant_through_drive_on_sqlite() {
        super::every_crash_at_an_append(|| Box::new(SqliteMedium::new()));
    }

    #[test]
    fn every_fault_inside_every_body_keeps_every_invariant_through_drive_on_sqlite() {
        super::every_body_fault(|| Box::new(SqliteMedium::new()));
    }
}

#[test]
fn client_calls_and_approvals_suspend_and_are_answered_through_the_journal_under_crashes() {
    let script = Script::new("Pick a seat, then pay.")
        .step(
            ScriptStep::new("Choose.")
                .call(
                    ScriptCall::tool("seat", "search")
                        .kind(stepjournal_codec::CallKind::Client)
                        .sequential(),
                )
                .call(
                    ScriptCall::tool("pay", "charge_card")
                        .kind(stepjournal_codec::CallKind::Approval)
                        .sequential(),
                )
                .call(ScriptCall::tool("look", "search")),
        )
        .step(ScriptStep::new("Done."));
    let tools = tools();
    for n in 0..12 {
        let case = Case::new().fault(
            Fault::new(Trigger::Append { n, fault: AppendFault::Crash(Landing::Lands) })
                .then(Reentry::Wake),
        );
        let report =
            simulate_through_drive(&script, &tools, &case, &mut MemoryMedium::new()).unwrap();
        assert!(report.is_ok(), "{n}: {}", report.summary());
        assert!(report.trace.iter().any(|l| l.contains("suspended for")), "{}", report.summary());
    }
}
