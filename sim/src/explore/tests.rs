#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails by panicking, on the inputs it built itself"
)]

use super::*;
use crate::Violation;

fn first_failing(jobs: &[Job], plant: Plant) -> Summary {
    let options = Options { plant: Some(plant), first_only: true, keep: 1, progress: false };
    let summary = explore(jobs, options).unwrap();
    println!("plant {plant}: {}", summary.counts_line());
    print!("{}", summary.findings_text());
    summary
}

/// Asserts that `summary` holds one failing execution of one fault (none has fewer: the
/// execution with no fault of every variant passed), that `wanted` is among what it broke,
/// and that replaying its printed variant and choice vector breaks it again.
fn caught(summary: &Summary, plant: Plant, wanted: impl Fn(&Violation) -> bool) {
    let [finding] = summary.findings.as_slice() else {
        panic!("plant {plant} was not caught: {}", summary.counts_line());
    };
    assert_eq!(finding.choices.0.len(), 1, "{}", summary.findings_text());
    assert!(finding.violations.iter().any(&wanted), "{}", summary.findings_text());
    let text = summary.findings_text();
    assert!(text.contains(&format!("--choices '{}'", finding.choices)), "{text}");
    let variant: Variant = finding.variant.to_string().parse().unwrap();
    let choices: Choices = finding.choices.to_string().parse().unwrap();
    let again = replay(&variant, &choices, Some(plant)).unwrap();
    assert!(again.violations.iter().any(&wanted), "{:?}", again.violations);
    let clean = replay(&variant, &choices, None).unwrap();
    assert!(clean.violations.is_empty(), "without the plant: {:?}", clean.violations);
}

fn jobs_where(keep: impl Fn(&Variant) -> bool) -> Vec<Job> {
    Scope::Ci.jobs().into_iter().filter(|j| keep(&j.variant)).collect()
}

#[test]
fn exhaustive_ci_scope_finds_no_violation() {
    println!("{}", Scope::Ci.describe());
    let summary = explore_scope(Scope::Ci, Options::default()).unwrap();
    println!("scope ci: {}", summary.counts_line());
    assert!(summary.findings.is_empty(), "{}", summary.findings_text());
    assert_eq!(summary.counts.failing, 0);
    assert_eq!(summary.counts.variants, Scope::Ci.jobs().len() as u64);
    assert!(summary.counts.executions > 10_000, "{}", summary.counts_line());
    assert!(summary.counts.states >= summary.counts.executions, "{}", summary.counts_line());
}

#[test]
fn exhaustive_search_catches_a_fenced_result_accepted() {
    let jobs = jobs_where(|v| v.calls.len() == 1 && v.runner == Runner::Step);
    let summary = first_failing(&jobs, Plant::FencedResultAccepted);
    caught(&summary, Plant::FencedResultAccepted, |v| {
        matches!(v, Violation::FencedWriteAccepted { .. } | Violation::FencedWriteLanded { .. })
    });
}

#[test]
fn exhaustive_search_catches_max_bodies_off_by_one() {
    // max_bodies 1: one crash lets the planted writer start the second body it must not.
    let jobs = jobs_where(|v| v.calls.len() == 1 && v.max_bodies == 1);
    let summary = first_failing(&jobs, Plant::MaxBodiesOffByOne);
    caught(&summary, Plant::MaxBodiesOffByOne, |v| matches!(v, Violation::TooManyBodies { .. }));
}

#[test]
fn exhaustive_search_catches_a_lost_acknowledged_append() {
    let jobs = jobs_where(|v| v.calls.len() == 1 && v.runner == Runner::Step);
    let summary = first_failing(&jobs, Plant::LostAcknowledgedAppend);
    caught(&summary, Plant::LostAcknowledgedAppend, |v| matches!(v, Violation::AckedLost { .. }));
}

#[cfg(feature = "plant")]
#[test]
fn exhaustive_search_catches_an_unsafe_call_run_again() {
    let jobs = jobs_where(|v| v.calls.len() == 1 && v.runner == Runner::Step);
    let summary = first_failing(&jobs, Plant::UnsafeRerun);
    caught(&summary, Plant::UnsafeRerun, |v| {
        matches!(v, Violation::UnsafeBodyTwice { .. } | Violation::UnsafeEffectTwice { .. })
    });
}

#[cfg(feature = "plant")]
#[test]
fn exhaustive_search_catches_the_order_rule_ignoring_the_sequential_chain() {
    let jobs = jobs_where(|v| v.order == Order::Sequential);
    let summary = first_failing(&jobs, Plant::OrderIgnoresSequential);
    caught(&summary, Plant::OrderIgnoresSequential, |v| matches!(v, Violation::OrderBroken { .. }));
}

#[cfg(not(feature = "plant"))]
#[test]
fn a_plant_in_the_rules_needs_the_plant_feature() {
    let jobs = jobs_where(|v| v.calls.len() == 1).into_iter().take(1).collect::<Vec<_>>();
    let options =
        Options { plant: Some(Plant::UnsafeRerun), first_only: true, keep: 1, progress: false };
    let err = explore(&jobs, options).unwrap_err();
    assert_eq!(err, ExploreError::PlantNeedsFeature(Plant::UnsafeRerun));
}

#[test]
fn variants_and_choice_vectors_read_back_as_written() {
    for job in Scope::Ci.jobs().into_iter().chain(Scope::Deep.jobs()) {
        let text = job.variant.to_string();
        assert_eq!(text.parse::<Variant>().unwrap(), job.variant, "{text}");
    }
    let tail = crate::probe::Tail { appends: 3, bodies: 2 };
    for child in Choices::default().children(tail, &Menu::FULL) {
        for grandchild in child.children(tail, &Menu::FULL) {
            let text = grandchild.to_string();
            assert_eq!(text.parse::<Choices>().unwrap(), grandchild, "{text}");
        }
    }
    assert_eq!("-".parse::<Choices>().unwrap(), Choices::default());
    assert!("a1.sideways>wake".parse::<Choices>().is_err());
    assert!("step/mb0/free/tool:s>s".parse::<Variant>().is_err());
}

#[test]
fn a_companion_whose_body_died_before_its_child_was_recorded_is_reentered_through_drive() {
    // Regression: with max_bodies 1, the companion's first body started (its attempt_started
    // landed) and the process died before `child_attached`. The wake plans `reenter_child`;
    // the writer refused to re-attach (no child) and to start a body (max_bodies), so every
    // `drive` of the step failed. Found by this search (`drive/mb1/free/companion:u>u`,
    // `a2.lands>wake`); now the started body goes on and asks for the child under the same
    // dispatch id.
    let variant: Variant = "drive/mb1/free/companion:u>u".parse().unwrap();
    let choices: Choices = "a2.lands>wake".parse().unwrap();
    let found = replay(&variant, &choices, None).unwrap();
    assert!(found.violations.is_empty(), "{:?}\n{:?}", found.violations, found.trace);
    let step: Variant = "step/mb1/free/companion:u>u".parse().unwrap();
    let found = replay(&step, &choices, None).unwrap();
    assert!(found.violations.is_empty(), "{:?}", found.violations);
    assert!(found.trace.iter().any(|l| l.contains("re-attached")), "{:?}", found.trace);
    assert!(!found.trace.iter().any(|l| l.contains("the run fails")), "{:?}", found.trace);
}

#[test]
fn an_execution_replays_exactly() {
    let variant: Variant = "drive/mb2/sequential/tool:s>s+remote_agent:u>u".parse().unwrap();
    let choices: Choices = "b1.1.abandon>retry_message a2.lands>wake".parse().unwrap();
    let once = replay(&variant, &choices, None).unwrap();
    let twice = replay(&variant, &choices, None).unwrap();
    assert_eq!(once.trace, twice.trace);
    assert!(once.violations.is_empty(), "{:?}", once.violations);
    assert!(once.trace.iter().any(|l| l.contains("abandoned")), "{:?}", once.trace);
}

/// The answers' events in the order they landed: `client_answer` as `c`, `approval_decided`
/// as `a`.
fn answers_landed(variant: &str, choices: &str) -> (String, crate::Report) {
    let variant: Variant = variant.parse().unwrap();
    let choices: Choices = choices.parse().unwrap();
    let report = crate::simulate(
        &variant.script(),
        &variant.tools(),
        &variant.case(choices.0),
        &mut crate::MemoryMedium::new(),
    )
    .unwrap();
    let order = report
        .log
        .iter()
        .filter_map(|r| match &r.event {
            stepjournal_codec::Event::ClientAnswer(_) => Some('c'),
            stepjournal_codec::Event::ApprovalDecided(_) => Some('a'),
            _ => None,
        })
        .collect();
    (order, report)
}

#[test]
fn a_suspended_run_is_answered_from_outside_in_either_order() {
    let (order, report) = answers_landed("step/mb2/free/client:u>u+approval:u>u/suspend", "-");
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!(order, "ca", "{}", report.summary());
    assert!(report.trace.iter().any(|t| t.contains("suspended")), "{}", report.summary());
    assert_eq!(report.runs, 2, "{}", report.summary());
    let (order, report) =
        answers_landed("step/mb2/sequential/client:u>u+approval:u>u/suspend-reversed", "-");
    assert!(report.is_ok(), "{}", report.summary());
    assert_eq!(order, "ac", "{}", report.summary());
    let (order, report) = answers_landed("step/mb2/free/client:u>u+approval:u>u", "-");
    assert!(report.is_ok(), "{}", report.summary());
    assert!(!report.trace.iter().any(|t| t.contains("suspended")), "{}", report.summary());
    assert_eq!((order.as_str(), report.runs), ("ca", 1), "{}", report.summary());
}

#[test]
fn a_crash_while_suspended_is_followed_by_the_answers() {
    // The first append after the suspension is the woken run's `run_started`: the crash lands
    // it, the next wake answers.
    let variant: Variant = "step/mb2/free/client:u>u/suspend".parse().unwrap();
    let clean = replay(&variant, &Choices::default(), None).unwrap();
    assert!(clean.violations.is_empty(), "{:?}", clean.violations);
    let mut while_suspended = 0;
    for n in 0..8 {
        let choices: Choices = format!("a{n}.lands>wake").parse().unwrap();
        let found = replay(&variant, &choices, None).unwrap();
        assert!(found.violations.is_empty(), "a{n}: {:?}", found.violations);
        let at = |what: &str| found.trace.iter().position(|t| t.contains(what));
        if let (Some(s), Some(f)) = (at("suspended"), at("fault 1")) {
            while_suspended += usize::from(s < f);
        }
    }
    assert!(while_suspended > 0, "no crash fired after the suspension");
}
