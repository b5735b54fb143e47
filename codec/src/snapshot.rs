//! `snapshot` (format version 3): the fold state the recovery rules read, at a committed step
//! boundary, so a fold may start there instead of at the first event.
//!
//! It holds what the rules read of the log before it and nothing else: the last run and the last
//! run end that still counts, the last reply and step commit (numbers and checkpoints only), and
//! which step numbers have a commit. Never a past output, argument or message. A reader that
//! folds the whole log skips it; `stepjournal-recovery` folds from it.

use serde::{Deserialize, Serialize};

use crate::{CheckpointId, Entry, RunId, RunOutcome, Seq, StepNo};

/// `snapshot`: the fold state at a committed step boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// How many events come before it: its own sequence number. A snapshot found at another
    /// position stands for nothing.
    pub len: u64,
    /// The last `run_started` before it.
    pub run: Option<SnapshotRun>,
    /// The last `run_ended` before it that still counts.
    pub run_end: Option<SnapshotRunEnd>,
    /// The last `reply_committed` before it, without its text and calls.
    pub reply: Option<SnapshotStep>,
    /// The last `step_commit` before it.
    pub commit: Option<SnapshotStep>,
    /// The step numbers some `step_commit` before it names, as inclusive ranges, ascending and
    /// apart.
    pub committed: Vec<StepRange>,
}

/// A `run_started` as a snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRun {
    /// Where it is in the log.
    pub seq: Seq,
    /// The run.
    pub run: RunId,
    /// The entry it began through.
    pub entry: Entry,
}

/// A `run_ended` as a snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRunEnd {
    /// Where it is in the log.
    pub seq: Seq,
    /// The run.
    pub run: RunId,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error it names, if any.
    pub error: Option<String>,
}

/// A `reply_committed` or a `step_commit` as a snapshot keeps it: where, which step, which
/// checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStep {
    /// Where it is in the log.
    pub seq: Seq,
    /// The step.
    pub step: StepNo,
    /// Its checkpoint.
    pub checkpoint: CheckpointId,
}

/// Step numbers `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRange {
    /// The first step of the range.
    pub first: StepNo,
    /// The last step of the range.
    pub last: StepNo,
}

impl StepRange {
    /// Whether `ranges` (ascending and apart, as a snapshot keeps them) hold `step`.
    pub fn holds(ranges: &[StepRange], step: StepNo) -> bool {
        let i = ranges.partition_point(|r| r.last < step);
        ranges.get(i).is_some_and(|r| r.first <= step)
    }
}

impl Snapshot {
    /// Whether `step` is among the committed steps.
    pub fn is_committed(&self, step: StepNo) -> bool {
        StepRange::holds(&self.committed, step)
    }

    /// Adds `step` to the committed steps, keeping the ranges ascending and apart.
    pub fn commit_step(&mut self, step: StepNo) {
        let i = self.committed.partition_point(|r| r.last.get().saturating_add(1) < step.get());
        match self.committed.get_mut(i) {
            Some(r) if r.first <= step && step <= r.last => {}
            Some(r) if r.last.get().saturating_add(1) == step.get() => {
                r.last = step;
                // It may now touch the next range.
                let next = self.committed.get(i + 1).copied();
                if let Some(next) = next
                    && next.first.get() == step.get().saturating_add(1)
                {
                    if let Some(r) = self.committed.get_mut(i) {
                        r.last = next.last;
                    }
                    self.committed.remove(i + 1);
                }
            }
            Some(r) if step.get().saturating_add(1) == r.first.get() => r.first = step,
            _ => self.committed.insert(i, StepRange { first: step, last: step }),
        }
    }

    /// Why the snapshot cannot stand where it is (at `seq`), if it cannot: it names another
    /// position, a record at or after itself, or committed steps out of order. Such a snapshot
    /// is damaged, and a reader folds the log before it instead.
    pub fn flaw(&self, seq: Seq) -> Option<String> {
        if self.len != seq.get() {
            return Some(format!(
                "it says it stands for {} events, but it is at seq {seq}",
                self.len
            ));
        }
        let seqs = [
            self.run.as_ref().map(|r| r.seq),
            self.run_end.as_ref().map(|r| r.seq),
            self.reply.as_ref().map(|r| r.seq),
            self.commit.as_ref().map(|r| r.seq),
        ];
        if let Some(late) = seqs.into_iter().flatten().find(|s| *s >= seq) {
            return Some(format!("it names seq {late}, not before it (seq {seq})"));
        }
        let ordered = self.committed.iter().all(|r| r.first <= r.last)
            && self
                .committed
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.last.get().saturating_add(1) < b.first.get()));
        if !ordered {
            return Some("its committed steps are not ascending ranges apart".to_owned());
        }
        if let Some(commit) = &self.commit
            && !self.is_committed(commit.step)
        {
            return Some(format!(
                "its last commit's step {} is not among its committed steps",
                commit.step
            ));
        }
        if let Some(reply) = &self.reply
            && !self.is_committed(reply.step)
        {
            return Some(format!(
                "its last reply's step {} has no commit: it is not at a committed step boundary",
                reply.step
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(s: &Snapshot) -> Vec<(u64, u64)> {
        s.committed.iter().map(|r| (r.first.get(), r.last.get())).collect()
    }

    fn empty() -> Snapshot {
        Snapshot { len: 0, run: None, run_end: None, reply: None, commit: None, committed: vec![] }
    }

    #[test]
    fn committed_steps_are_kept_as_ranges_that_merge() {
        let mut s = empty();
        for n in [1, 2, 3, 7, 5, 6, 9, 4, 0, 3] {
            s.commit_step(StepNo(n));
        }
        assert_eq!(steps(&s), vec![(0, 7), (9, 9)]);
        for n in 0..=10 {
            assert_eq!(s.is_committed(StepNo(n)), n <= 7 || n == 9, "step {n}");
        }
        s.commit_step(StepNo(8));
        assert_eq!(steps(&s), vec![(0, 9)]);
        s.commit_step(StepNo(u64::MAX));
        assert!(s.is_committed(StepNo(u64::MAX)));
        assert_eq!(s.flaw(Seq(0)), None);
    }

    #[test]
    fn a_snapshot_out_of_place_or_out_of_order_is_flawed() {
        let mut s = empty();
        s.len = 3;
        assert!(s.flaw(Seq(4)).unwrap().contains("at seq 4"));
        s.commit = Some(SnapshotStep { seq: Seq(2), step: StepNo(1), checkpoint: "cp".into() });
        assert!(s.flaw(Seq(3)).unwrap().contains("not among"));
        s.committed = vec![
            StepRange { first: StepNo(2), last: StepNo(3) },
            StepRange { first: StepNo(1), last: StepNo(1) },
        ];
        assert!(s.flaw(Seq(3)).unwrap().contains("ascending"));
        s.committed = vec![StepRange { first: StepNo(1), last: StepNo(1) }];
        assert_eq!(s.flaw(Seq(3)), None);
        s.reply = Some(SnapshotStep { seq: Seq(3), step: StepNo(1), checkpoint: "cp".into() });
        assert!(s.flaw(Seq(3)).unwrap().contains("names seq 3"));
    }
}
