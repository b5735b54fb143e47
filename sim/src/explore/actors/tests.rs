#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails by panicking, on the inputs it built itself"
)]

use super::*;
use crate::Violation;

fn rule_of(v: &Violation) -> &'static str {
    match v {
        Violation::Actors { rule, .. } => rule,
        _ => "",
    }
}

#[test]
fn actors_ci_scope_finds_no_violation() {
    println!("{}", ActorScope::Ci.describe());
    let summary = explore_actor_scope(ActorScope::Ci, Options::default()).unwrap();
    println!("scope actors-ci: {}", summary.counts_line());
    assert!(summary.findings.is_empty(), "{}", summary.findings_text());
    assert_eq!(summary.counts.failing, 0);
    assert_eq!(summary.counts.variants, ActorScope::Ci.variants().len() as u64);
    assert!(summary.counts.states > 10_000, "{}", summary.counts_line());
    assert!(summary.counts.interleavings > u128::from(summary.counts.states));
}

/// Searches `variant` with `plant` for the first failing interleaving (breadth first: one with
/// the fewest moves of the variant), prints it with its replay command, and asserts that it
/// breaks `rule`, that replaying it breaks `rule` again, and that without the plant it breaks
/// nothing.
fn caught(variant: &str, plant: Plant, rule: &str) {
    let variant: ActorVariant = variant.parse().unwrap();
    let options = Options { plant: Some(plant), first_only: true, keep: 1, progress: false };
    let summary = explore_actors(std::slice::from_ref(&variant), options).unwrap();
    println!("plant {plant}: {}", summary.counts_line());
    print!("{}", summary.findings_text());
    let [finding] = summary.findings.as_slice() else {
        panic!("plant {plant} was not caught: {}", summary.counts_line());
    };
    assert!(finding.violations.iter().any(|v| rule_of(v) == rule), "{}", summary.findings_text());
    let moves = finding.interleaving.text(&variant);
    let text = summary.findings_text();
    assert!(text.contains(&replay_command(&variant, &moves, Some(plant))), "{text}");
    let again = Interleaving::parse(&moves, &variant).unwrap();
    assert_eq!(again, finding.interleaving);
    let replayed = replay_actors(&variant, &again, Some(plant)).unwrap();
    assert!(replayed.violations.iter().any(|v| rule_of(v) == rule), "{:?}", replayed.violations);
    let clean = replay_actors(&variant, &again, None).unwrap();
    assert!(clean.violations.is_empty(), "without the plant: {:?}", clean.violations);
    // No shorter interleaving of the variant fails: every prefix is clean with the plant.
    for k in 0..again.0.len() {
        let prefix = Interleaving(again.0.iter().take(k).copied().collect());
        let ran = replay_actors(&variant, &prefix, Some(plant)).unwrap();
        assert!(ran.violations.is_empty(), "the prefix of {k} moves fails already");
    }
}

#[test]
fn actors_catch_a_lease_judged_by_the_actor_s_clock() {
    caught("fresh/d+r1/skew+60/t1", Plant::LeaseByActorClock, "at most one live run per session");
}

#[cfg(feature = "plant")]
#[test]
fn actors_catch_a_claim_that_does_not_compare_the_head() {
    caught(
        "crashed-safe/r1+o/skew+60/t1",
        Plant::ClaimIgnoresHead,
        "no session woken after another actor completed it",
    );
}

#[cfg(feature = "plant")]
#[test]
fn actors_catch_a_decision_not_compared_with_the_tail_its_decider_read() {
    caught(
        "suspended-approval/r1+o/skew+0/t0",
        Plant::DecisionIgnoresTail,
        "a decision applies to what its decider saw",
    );
}

#[cfg(feature = "plant")]
#[test]
fn actors_catch_a_dropped_future_s_append_the_run_does_not_learn_of() {
    caught(
        "fresh/d+r1/skew+60/t1",
        Plant::DroppedAppendUnseen,
        "every call of a committed step answered",
    );
}

#[cfg(feature = "plant")]
#[test]
fn actors_catch_a_stop_over_a_run_that_ended_completed() {
    caught("crashed-safe/r1+o/skew+60/t1", Plant::StopOverEnded, "no run ended twice");
}

#[cfg(not(feature = "plant"))]
#[test]
fn actors_a_writer_plant_needs_the_plant_feature() {
    let variant: ActorVariant = "crashed-safe/r1+o/skew+60/t1".parse().unwrap();
    let options =
        Options { plant: Some(Plant::StopOverEnded), first_only: true, keep: 1, progress: false };
    let err = explore_actors(&[variant], options).unwrap_err();
    assert_eq!(err, ExploreError::PlantNeedsFeature(Plant::StopOverEnded));
}

fn replay(variant: &str, moves: &str) -> ActorFinding {
    let variant: ActorVariant = variant.parse().unwrap();
    let interleaving = Interleaving::parse(moves, &variant).unwrap();
    replay_actors(&variant, &interleaving, None).unwrap()
}

fn log_of(found: &ActorFinding) -> String {
    found.trace.iter().find(|l| l.starts_with("log of")).cloned().unwrap_or_default()
}

#[test]
fn actors_two_recoveries_at_once_wake_the_session_once() {
    // r1 takes the lease and reads; r2's start-up then finds the lease live and skips it; r1
    // wakes, drives and ends. One `run_started` after the setup's.
    let found = replay(
        "crashed-unsafe/r1+r2/skew+0/t1",
        "r1:recover r2:recover r1:go r1:go r1:go r1:go r1:go r1:go r1:end r1:go",
    );
    assert!(found.violations.is_empty(), "{:?}", found.violations);
    let log = log_of(&found);
    assert_eq!(log.matches("run_started").count(), 2, "{log}");
    assert!(log.ends_with("run_ended"), "{log}");
}

#[test]
fn actors_a_runtime_stalled_past_its_lease_is_fenced_by_the_one_that_recovered() {
    // d begins a new turn and saves a reply; time passes twice past its lease; r1 recovers the
    // session; d's body start is refused (fenced), nothing of it lands after r1's wake.
    let found = replay(
        "fresh/d+r1/skew+60/t2",
        "d:new-turn d:go d:go d:commit-reply d:go tick tick r1:recover r1:go r1:go \
         d:drive d:go",
    );
    assert!(found.violations.is_empty(), "{:?}", found.violations);
    let log = log_of(&found);
    assert_eq!(log.matches("run_started").count(), 2, "{log}");
    assert!(!log.contains("attempt_started"), "{log}");
}

#[test]
fn actors_variants_and_interleavings_read_back_as_written() {
    for variant in ActorScope::Ci.variants().into_iter().chain(ActorScope::Deep.variants()) {
        let text = variant.to_string();
        assert_eq!(text.parse::<ActorVariant>().unwrap(), variant, "{text}");
    }
    let variant: ActorVariant = "fresh/d+r1+o/skew-60/t1".parse().unwrap();
    let moves = "d:new-turn d:drop-landed r1:recover r1:crash-landed tick o:stop o:go";
    assert_eq!(Interleaving::parse(moves, &variant).unwrap().text(&variant), moves);
    assert!(Interleaving::parse("r2:go", &variant).is_err());
    assert!("fresh/r1+r1/skew+0/t0".parse::<ActorVariant>().is_err());
}
