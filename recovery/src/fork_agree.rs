//! The snapshot property for forks: [`forks_agree`] forks a log at every committed step (a
//! `step_commit` after which no step is saved) and checks that the fork recovers by the same
//! rules as the original.

use stepjournal_codec::{Event, ForkedFrom, Seq, SessionId};

use crate::agree::{Agreement, compare, spread};
use crate::{Config, NewRun, Plan, SessionState, ToolRegistry, plan};

/// For each `step_commit` of `events` that leaves no step saved (at most `forks` of them, the
/// first, the last and some between), builds the fork's log (`forked_from`, then
/// [`SessionState::fork_snapshot`]) and checks, for every entry of `entries`:
///
/// - the whole fold of the fork and the fold from its snapshot plan alike, right after the
///   fork and after each event of the original's suffix appended to the fork as if it went on
///   the same way (entries that need the history are not compared);
/// - the fork plans as the original does at the same point (right after the commit, and after
///   each suffix event), except where the fork's fold from its snapshot needs the history; the
///   refusal messages may differ (they name seqs), so a refusal is compared as a refusal.
///
/// `Err` names the fork point, the prefix and the entry where they differ.
pub fn forks_agree(
    events: &[Event],
    entries: &[NewRun],
    registry: &dyn ToolRegistry,
    config: &Config,
    forks: usize,
) -> Result<Agreement, String> {
    let mut at = Vec::new();
    let mut state = SessionState::default();
    for (k, event) in events.iter().enumerate() {
        state.apply(event);
        if let Event::StepCommit(_) = event
            && state.saved_step().is_none()
        {
            at.push(k);
        }
    }
    let mut agreement = Agreement::default();
    for k in spread(&at, forks) {
        let (upto, after) = events.split_at((k + 1).min(events.len()));
        let Some(Event::StepCommit(commit)) = upto.last() else { continue };
        let mut original = crate::fold(upto);
        let Some(snapshot) = original.fork_snapshot() else {
            return Err(format!("no fork snapshot at the step commit at seq {k}"));
        };
        let forked = ForkedFrom {
            original: SessionId::from_stored("original"),
            commit_seq: Seq(k as u64),
            checkpoint: commit.checkpoint.clone(),
        };
        let opening = [Event::ForkedFrom(forked), Event::from(snapshot.clone())];
        let mut whole = crate::fold(&opening);
        if whole.snapshot_seq() != Some(Seq(1)) {
            return Err(format!("the whole fold of the fork at seq {k} skipped its snapshot"));
        }
        let mut based = SessionState::from_snapshot(Seq(1), &snapshot)
            .map_err(|e| format!("the fork's snapshot at seq {k} is refused: {e}"))?;
        agreement.snapshots += 1;
        let check = |whole: &SessionState,
                     based: &SessionState,
                     original: &SessionState,
                     n: usize,
                     agreement: &mut Agreement| {
            compare(whole, based, entries, registry, config, agreement)
                .map_err(|e| format!("fork at seq {k}, {n} events after it: {e}"))?;
            same_as_original(based, original, entries, registry, config).map_err(|e| {
                format!("fork at seq {k}, {n} events after it, against the original: {e}")
            })
        };
        check(&whole, &based, &original, 0, &mut agreement)?;
        for (n, event) in after.iter().enumerate() {
            whole.apply(event);
            based.apply(event);
            original.apply(event);
            check(&whole, &based, &original, n + 1, &mut agreement)?;
        }
    }
    Ok(agreement)
}

/// The fork (folded from its snapshot) plans every entry that needs no history as the original
/// does.
fn same_as_original(
    fork: &SessionState,
    original: &SessionState,
    entries: &[NewRun],
    registry: &dyn ToolRegistry,
    config: &Config,
) -> Result<(), String> {
    for new_run in entries {
        if fork.needs_history(&new_run.entry) {
            continue;
        }
        let ours = plan(fork, new_run, registry, config);
        let theirs = plan(original, new_run, registry, config);
        if !alike(&ours, &theirs) {
            return Err(format!(
                "entry {:?} plans {ours:?} on the fork but {theirs:?} on the original",
                new_run.entry
            ));
        }
    }
    Ok(())
}

/// Two plans decide alike: both refused, or the same step, appends, and calls with the same
/// actions by the same rules (the rules' sentences name seqs, which differ between the logs).
pub(crate) fn alike(a: &Plan, b: &Plan) -> bool {
    let decided = |p: &Plan| -> Vec<_> {
        p.calls.iter().map(|c| (c.call.clone(), c.action.clone(), c.rule.id)).collect()
    };
    match (&a.error, &b.error) {
        (Some(_), Some(_)) => true,
        (None, None) => a.step == b.step && a.appends == b.appends && decided(a) == decided(b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{CheckpointId, PairReason, RunOutcome};

    use super::*;
    use crate::testlog::*;

    fn entries() -> Vec<NewRun> {
        entries_naming(&["cp-1", "cp-1-commit", "cp-2", "cp-2-commit", "cp-3", "nowhere"], false)
    }

    fn log() -> Log {
        Log::new()
            .run("r1", wake())
            .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
            .bodies("c1", 1)
            .result("c1", 1)
            .commit(1, "cp-1-commit")
            .ended("r1", RunOutcome::Failed)
            .run("r2", retry())
            .reply(2, "cp-2", vec![call("c2", "safe_tool").safe(), call("c3", "unsafe_tool")])
            .bodies("c2", 2)
            .bodies("c3", 1)
            .paired("c3", PairReason::OutcomeUnknown)
            .ended("r2", RunOutcome::Failed)
            .run("r3", retry())
            .rewound("cp-2")
            .commit(2, "cp-2-commit")
            .reply(3, "cp-3", vec![call("c1", "safe_tool").safe()])
            .bodies("c1", 1)
            .ended("r3", RunOutcome::Failed)
    }

    #[test]
    fn a_fork_at_every_committed_step_plans_as_its_whole_fold_and_as_the_original() {
        let got =
            forks_agree(&log().events, &entries(), &registry(), &Config::default(), 8).unwrap();
        assert_eq!(got.snapshots, 2, "two committed steps: {got:?}");
        assert!(got.plans > 100, "{got:?}");
    }

    #[test]
    fn the_whole_fold_of_a_fork_adopts_its_snapshot_and_verify_finds_nothing() {
        let events = log().events;
        let k = events.iter().rposition(|e| matches!(e, Event::StepCommit(_))).unwrap();
        let original = crate::fold(&events[..=k]);
        let snapshot = original.fork_snapshot().unwrap();
        assert_eq!(snapshot.len, 1);
        assert!(snapshot.run_end.is_none(), "run r3 began after r2 ended: its end is left out");
        let forked = ForkedFrom {
            original: SessionId::from_stored("s-1"),
            commit_seq: Seq(k as u64),
            checkpoint: CheckpointId::new("cp-2-commit"),
        };
        let fork = vec![Event::ForkedFrom(forked.clone()), Event::from(snapshot.clone())];
        let whole = crate::fold(&fork);
        assert_eq!(whole.forked_from(), Some(&forked));
        assert_eq!(whole.last_run().map(|r| r.run.as_str()), Some("r3"));
        assert_eq!(whole.last_run_outcome(), original.last_run_outcome());
        assert!(whole.is_committed(stepjournal_codec::StepNo(1)));
        assert_eq!(whole.len(), 2);
        assert_eq!(crate::verify(&fork), vec![]);
        // Out of place, a `forked_from` stands for nothing, and verify says so.
        let mut late = events[..=k].to_vec();
        late.push(fork[0].clone());
        assert_eq!(crate::fold(&late).forked_from(), None);
        let found = crate::verify(&late);
        assert!(
            found.iter().any(|f| f.to_string().contains("not the log's first event")),
            "{found:?}"
        );
        // A fork whose second event is no snapshot folds as a session with no history.
        let bare = vec![
            fork[0].clone(),
            Event::from(stepjournal_codec::Message {
                role: stepjournal_codec::Role::User,
                text: "hi".into(),
            }),
        ];
        assert_eq!(crate::fold(&bare).last_run(), None);
        let found = crate::verify(&bare);
        assert!(found.iter().any(|f| f.to_string().contains("usable snapshot")), "{found:?}");
    }

    #[test]
    fn a_snapshot_elsewhere_is_still_skipped_by_the_whole_fold() {
        let events = log().events;
        let k = events.iter().position(|e| matches!(e, Event::StepCommit(_))).unwrap() + 1;
        let mut state = crate::fold(&events[..k]);
        let snapshot = state.snapshot().unwrap();
        state.apply(&Event::from(snapshot));
        assert_eq!(state.snapshot_seq(), None, "not adopted: the log does not open with a fork");
        assert_eq!(state.last_snapshot(), Some(Seq(k as u64)));
    }
}
