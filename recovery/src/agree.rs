//! The snapshot property: a fold that starts at a `snapshot` plans as the fold of the whole log.
//! [`snapshots_agree`] checks it over one log at every prefix; the explorer, the differential
//! fuzzer and this crate's tests run it over the logs they make.

use stepjournal_codec::{Event, Seq};

use crate::{Config, NewRun, SessionState, ToolRegistry, plan};

/// What [`snapshots_agree`] compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Snapshots taken (committed step boundaries tried).
    pub snapshots: usize,
    /// Plans compared: one per entry per prefix after a snapshot.
    pub plans: usize,
    /// Entries that needed the history before the snapshot (planned over the whole fold, so not
    /// compared).
    pub needed_history: usize,
}

/// For up to `boundaries` committed step boundaries of `events` (the first, the last and some
/// between), inserts the snapshot taken there and checks, for every longer prefix and every
/// entry of `entries`, that the plan over the state folded from the snapshot equals the plan
/// over the fold of the whole prefix (the snapshot included). `Err` names the first prefix and
/// entry where they differ.
pub fn snapshots_agree(
    events: &[Event],
    entries: &[NewRun],
    registry: &dyn ToolRegistry,
    config: &Config,
    boundaries: usize,
) -> Result<Agreement, String> {
    let mut at = Vec::new();
    let mut state = SessionState::default();
    // A committed step boundary: no saved step (what `SessionState::snapshot` asks, without
    // building one at every event).
    for (k, event) in events.iter().enumerate() {
        if state.saved_step().is_none() {
            at.push(k);
        }
        state.apply(event);
    }
    if state.saved_step().is_none() {
        at.push(events.len());
    }
    let chosen = spread(&at, boundaries);
    let mut agreement = Agreement::default();
    for k in chosen {
        let (before, after) = events.split_at(k.min(events.len()));
        let mut whole = crate::fold(before);
        let Some(snapshot) = whole.snapshot() else {
            return Err(format!("no snapshot at a committed boundary ({k} events)"));
        };
        let seq = Seq(k as u64);
        let mut based = SessionState::from_snapshot(seq, &snapshot)
            .map_err(|e| format!("the snapshot taken at seq {seq} is refused: {e}"))?;
        whole.apply(&Event::from(snapshot));
        agreement.snapshots += 1;
        compare(&whole, &based, entries, registry, config, &mut agreement)
            .map_err(|e| format!("snapshot at seq {seq}, nothing after it: {e}"))?;
        for (i, event) in after.iter().enumerate() {
            whole.apply(event);
            based.apply(event);
            compare(&whole, &based, entries, registry, config, &mut agreement).map_err(|e| {
                format!("snapshot at seq {seq}, {} events after it ({event:?} last): {e}", i + 1)
            })?;
        }
        if let Some(ours) = whole.snapshot() {
            let theirs = based.snapshot();
            if theirs.is_some() && theirs.as_ref() != Some(&ours) {
                return Err(format!(
                    "snapshot at seq {seq}: the snapshot taken after it differs from the whole \
                     fold's: {theirs:?} vs {ours:?}"
                ));
            }
        }
    }
    Ok(agreement)
}

pub(crate) fn compare(
    whole: &SessionState,
    based: &SessionState,
    entries: &[NewRun],
    registry: &dyn ToolRegistry,
    config: &Config,
    agreement: &mut Agreement,
) -> Result<(), String> {
    for new_run in entries {
        if based.needs_history(&new_run.entry) {
            agreement.needed_history += 1;
            continue;
        }
        let ours = plan(based, new_run, registry, config);
        let theirs = plan(whole, new_run, registry, config);
        if ours != theirs {
            return Err(format!(
                "entry {:?} plans {ours:?} from the snapshot but {theirs:?} from the whole log",
                new_run.entry
            ));
        }
        agreement.plans += 1;
    }
    Ok(())
}

/// Up to `n` of `at`, spread: the first, the last, and evenly between.
pub(crate) fn spread(at: &[usize], n: usize) -> Vec<usize> {
    if at.len() <= n {
        return at.to_vec();
    }
    if n == 0 {
        return Vec::new();
    }
    if n == 1 {
        return at.last().copied().into_iter().collect();
    }
    let mut chosen: Vec<usize> =
        (0..n).filter_map(|i| at.get(i * (at.len() - 1) / (n - 1)).copied()).collect();
    chosen.dedup();
    chosen
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{CheckpointId, Entry, PairReason, RunOutcome, StepNo};

    use super::*;
    use crate::testlog::*;

    fn entries() -> Vec<NewRun> {
        entries_naming(&["cp-1", "cp-1-commit", "cp-2", "cp-2-commit", "cp-3", "nowhere"], true)
    }

    #[test]
    fn a_fold_from_a_snapshot_plans_as_the_whole_fold_at_every_prefix() {
        let log = Log::new()
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
            .rewound("cp-1");
        let got =
            snapshots_agree(&log.events, &entries(), &registry(), &Config::default(), 8).unwrap();
        assert!(got.snapshots >= 3, "{got:?}");
        assert!(got.plans > 100, "{got:?}");
        assert!(got.needed_history > 0, "the rewound to cp-1 reaches back: {got:?}");
    }

    #[test]
    fn a_rewound_to_a_reply_before_the_snapshot_needs_the_history() {
        let log = Log::new()
            .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
            .bodies("c1", 1)
            .ended("r1", RunOutcome::Failed)
            .result("c1", 1)
            .commit(1, "cp-1-commit");
        let state = crate::fold(&log.events);
        let snapshot = state.snapshot().unwrap();
        let mut based =
            SessionState::from_snapshot(Seq(log.events.len() as u64), &snapshot).unwrap();
        assert!(!based.needs_history(&Entry::Wake));
        assert!(based.needs_history(&from_checkpoint("cp-0")), "a checkpoint it cannot place");
        assert!(!based.needs_history(&from_checkpoint("cp-1-commit")));
        based.apply(&Event::Rewound(stepjournal_codec::Rewound { to: CheckpointId::new("cp-1") }));
        assert!(based.needs_history(&Entry::Wake));
        assert_eq!(based.snapshot(), None, "no snapshot over what it cannot see");
    }

    #[test]
    fn a_damaged_snapshot_is_refused_and_names_why() {
        let log = Log::new().reply(1, "cp-1", vec![]).commit(1, "cp-1-commit");
        let mut snapshot = crate::fold(&log.events).snapshot().unwrap();
        let at = Seq(log.events.len() as u64);
        SessionState::from_snapshot(at, &snapshot).unwrap();
        let err = SessionState::from_snapshot(at.next(), &snapshot).unwrap_err();
        assert!(err.contains(&format!("at seq {}", at.next())), "{err}");
        snapshot.committed.clear();
        snapshot.commit = None;
        let err = SessionState::from_snapshot(at, &snapshot).unwrap_err();
        assert!(err.contains("not at a committed step boundary"), "{err}");
    }

    #[test]
    fn a_snapshot_that_leaves_out_what_a_rule_reads_is_caught() {
        let log = Log::new()
            .run("r1", wake())
            .reply(1, "cp-1", vec![])
            .commit(1, "cp-1-commit")
            .ended("r1", RunOutcome::Failed);
        let mut whole = crate::fold(&log.events);
        let mut snapshot = whole.snapshot().unwrap();
        snapshot.run_end = None;
        let at = Seq(log.events.len() as u64);
        let based = SessionState::from_snapshot(at, &snapshot).unwrap();
        whole.apply(&Event::from(snapshot));
        let err = compare(
            &whole,
            &based,
            &entries(),
            &registry(),
            &Config::default(),
            &mut Agreement::default(),
        )
        .unwrap_err();
        assert!(err.contains("Retry"), "{err}");
    }

    #[test]
    fn the_snapshot_after_a_commit_is_the_one_taken_once_the_commit_is_folded() {
        let log = Log::new()
            .run("r1", wake())
            .reply(1, "cp-1", vec![])
            .commit(1, "cp-1-commit")
            .reply(2, "cp-2", vec![call("c1", "safe_tool").safe()])
            .result("c1", 1);
        let mut state = crate::fold(&log.events);
        assert_eq!(state.snapshot(), None, "step 2 is saved");
        let commit =
            stepjournal_codec::StepCommit { step: StepNo(2), checkpoint: "cp-2-commit".into() };
        let other =
            stepjournal_codec::StepCommit { step: StepNo(7), checkpoint: "cp-7-commit".into() };
        assert_eq!(state.snapshot_after_commit(&other), None, "step 2 would still be saved");
        let ahead = state.snapshot_after_commit(&commit).unwrap();
        state.apply(&Event::StepCommit(commit));
        assert_eq!(Some(ahead), state.snapshot());
    }

    #[test]
    fn spread_keeps_the_first_and_the_last() {
        assert_eq!(spread(&[1, 2, 3, 4, 5, 6, 7], 3), vec![1, 4, 7]);
        assert_eq!(spread(&[1, 2], 3), vec![1, 2]);
        assert_eq!(spread(&[1, 2, 3], 1), vec![3]);
    }
}
