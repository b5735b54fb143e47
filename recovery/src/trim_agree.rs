//! The snapshot property for trims: [`trims_agree`] trims a log where [`trim_point`] says it
//! may, and checks that the trimmed log (what the store keeps, folded as every reader folds it:
//! [`SessionState::of_log`]) plans every entry as the whole log does, then and as the log goes
//! on. Unlike a fold from a snapshot of a whole log, a trimmed log has no history to fall back
//! on: entries that need it are compared too.

use stepjournal_codec::{Event, Record, Seq, SessionId, Trimmed, UnixMillis};

use crate::agree::{Agreement, spread};
use crate::fork_agree::alike;
use crate::{Config, NewRun, SessionState, ToolRegistry, plan, trim_point};

/// Writes `events` as a writer with a snapshot after every step commit would (a snapshot where
/// the log is at a committed step boundary right after a `step_commit`), then, at up to
/// `points` places (after a snapshot, and at the end), trims the log so far as
/// [`trim_point`] chooses keeping no turn whole (the most it ever drops), and checks for every
/// entry of `entries` that the trimmed log and the whole one plan alike (the same actions by the
/// same rules, or both refused: refusals name seqs) there and after each later event. `Err`
/// names the place, the prefix and the entry where they differ.
pub fn trims_agree(
    events: &[Event],
    entries: &[NewRun],
    registry: &dyn ToolRegistry,
    config: &Config,
    points: usize,
) -> Result<Agreement, String> {
    let mut log: Vec<Event> = Vec::with_capacity(events.len() * 2);
    let mut state = SessionState::default();
    let mut after_snapshot = Vec::new();
    for event in events {
        state.apply(event);
        log.push(event.clone());
        if let Event::StepCommit(_) = event
            && let Some(snapshot) = state.snapshot()
        {
            let snapshot = Event::from(snapshot);
            state.apply(&snapshot);
            log.push(snapshot);
            after_snapshot.push(log.len());
        }
    }
    after_snapshot.push(log.len());
    let records: Vec<Record> = log
        .iter()
        .enumerate()
        .map(|(i, event)| Record {
            session: SessionId::from_stored("trimmed"),
            seq: Seq(i as u64),
            at: UnixMillis(0),
            event: event.clone(),
        })
        .collect();
    let mut agreement = Agreement::default();
    let record = |seq: usize, event: Event| Record {
        session: SessionId::from_stored("trimmed"),
        seq: Seq(seq as u64),
        at: UnixMillis(0),
        event,
    };
    for p in spread(&after_snapshot, points) {
        let p = p.min(records.len());
        let (upto, rest) = records.split_at(p);
        let mut whole = crate::fold(log.get(..p).unwrap_or_default());
        let mut upto = upto.to_vec();
        // A snapshot a run writes on demand (`Run::snapshot`) where the log is at a committed
        // boundary but not right after a step commit: the newest then lies past the last
        // commit, and the trim must still keep that commit's reply.
        if let Some(extra) = whole.snapshot()
            && !matches!(upto.last().map(|r| &r.event), Some(Event::Snapshot(_)))
        {
            let extra = Event::from(extra);
            whole.apply(&extra);
            upto.push(record(upto.len(), extra));
        }
        let Ok((before, turns)) = trim_point(&upto, 0) else { continue };
        let trimmed = Event::Trimmed(Trimmed { before, turns });
        let kept = upto.get(usize::try_from(before.get()).unwrap_or(usize::MAX)..);
        let mut kept: Vec<Record> = kept.unwrap_or_default().to_vec();
        kept.push(record(upto.len(), trimmed.clone()));
        whole.apply(&trimmed);
        let mut based = SessionState::of_log(&kept)
            .map_err(|e| format!("the log trimmed at seq {before} (after {p}) folds not: {e}"))?;
        agreement.snapshots += 1;
        let check = |whole: &SessionState, based: &SessionState, n: usize, a: &mut Agreement| {
            for new_run in entries {
                if based.needs_history(&new_run.entry) {
                    a.needed_history += 1;
                }
                let ours = plan(based, new_run, registry, config);
                let theirs = plan(whole, new_run, registry, config);
                if !alike(&ours, &theirs) {
                    return Err(format!(
                        "trimmed at seq {before} after {p} events, {n} events later: entry {:?} \
                         plans {ours:?} on the trimmed log but {theirs:?} on the whole one",
                        new_run.entry
                    ));
                }
                a.plans += 1;
            }
            Ok(())
        };
        check(&whole, &based, 0, &mut agreement)?;
        for (n, r) in rest.iter().enumerate() {
            whole.apply(&r.event);
            based.apply(&r.event);
            check(&whole, &based, n + 1, &mut agreement)?;
        }
    }
    Ok(agreement)
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{Entry, PairReason, RunOutcome};

    use super::*;
    use crate::testlog::*;

    fn entries() -> Vec<NewRun> {
        entries_naming(&["cp-1", "cp-1-commit", "cp-2", "cp-2-commit", "cp-3", "cp-3-commit"], true)
    }

    #[test]
    fn a_trimmed_log_plans_every_entry_as_the_whole_one_at_every_later_prefix() {
        let log = Log::new()
            .run("r1", wake())
            .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
            .bodies("c1", 1)
            .result("c1", 1)
            .commit(1, "cp-1-commit")
            .reply(2, "cp-2", vec![call("c2", "safe_tool").safe()])
            .bodies("c2", 1)
            .result("c2", 1)
            .commit(2, "cp-2-commit")
            .ended("r1", RunOutcome::Completed)
            .run("r2", Entry::NewTurn { message: "more".into() })
            .reply(3, "cp-3", vec![call("c3", "safe_tool").safe(), call("c4", "unsafe_tool")])
            .bodies("c3", 2)
            .bodies("c4", 1)
            .paired("c4", PairReason::OutcomeUnknown)
            .ended("r2", RunOutcome::Failed)
            .run("r3", retry())
            .rewound("cp-3")
            .result("c3", 2)
            .commit(3, "cp-3-commit")
            .reply(4, "cp-4", vec![call("c5", "unsafe_tool")])
            .bodies("c5", 1);
        let got = trims_agree(&log.events, &entries(), &registry(), &Config::default(), 8).unwrap();
        assert!(got.snapshots >= 2, "{got:?}");
        assert!(got.plans > 100, "{got:?}");
    }
}
