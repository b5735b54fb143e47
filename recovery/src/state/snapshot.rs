//! Folding from a `snapshot`: [`SessionState::snapshot`] takes one at a committed step
//! boundary, [`SessionState::from_snapshot`] starts a fold there, and
//! [`SessionState::needs_history`] says when an entry reads further back than the snapshot
//! keeps, so the caller folds the whole log instead.
//!
//! A state folded from a snapshot plans every entry as the fold of the whole log would, except
//! where it says it needs the history: after a `rewound` whose target is not a reply after the
//! snapshot (it voids pairings and run ends the snapshot does not keep), and for an entry naming
//! a checkpoint that neither the suffix nor the snapshot's last reply and commit name (whether
//! some older event names it decides between two refusals). Other views of the state (every
//! reply, every call, the transcript) hold only what came after the snapshot.

use stepjournal_codec::{
    Entry, ResumeMode, Seq, Snapshot, SnapshotRun, SnapshotRunEnd, SnapshotStep, StepCommit,
    StepNo, StepRange,
};

use super::SessionState;
use super::records::{CommitRecord, ReplyRecord, RunEndRecord, RunRecord};

/// What a state folded from a snapshot knows of the log before it, beyond its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Base {
    /// Where the snapshot is.
    pub(crate) seq: Seq,
    /// The step numbers committed before it (the snapshot's ranges).
    pub(crate) committed: Vec<StepRange>,
    /// The first `rewound` after it whose target is not a reply after it.
    pub(crate) reaches_back: Option<Seq>,
}

impl Base {
    pub(crate) fn is_committed(&self, step: StepNo) -> bool {
        StepRange::holds(&self.committed, step)
    }
}

impl SessionState {
    /// The snapshot of this state, to be appended as the next event: `None` unless the state is
    /// at a committed step boundary (no saved step), and unless it was folded from a snapshot
    /// and a `rewound` since reached before it.
    pub fn snapshot(&self) -> Option<Snapshot> {
        if self.saved_step().is_some() {
            return None;
        }
        self.snapshot_of_records()
    }

    /// The snapshot this state gives once `commit` is folded as its next event: what a writer
    /// appends in the same batch, right after the `step_commit` that closes its saved step.
    /// `None` when a step would still be saved after it (the commit is not the saved step's),
    /// as for [`snapshot`](Self::snapshot).
    pub fn snapshot_after_commit(&self, commit: &StepCommit) -> Option<Snapshot> {
        let saved_after = self.saved_step().filter(|r| r.step != commit.step);
        if saved_after.is_some() {
            return None;
        }
        let mut snapshot = self.snapshot_of_records()?;
        snapshot.len = self.len.saturating_add(1);
        snapshot.commit = Some(SnapshotStep {
            seq: Seq(self.len),
            step: commit.step,
            checkpoint: commit.checkpoint.clone(),
        });
        snapshot.commit_step(commit.step);
        Some(snapshot)
    }

    /// The snapshot of what the state's records say, whether or not a step is saved.
    fn snapshot_of_records(&self) -> Option<Snapshot> {
        let mut committed = Vec::new();
        if let Some(base) = &self.base {
            if base.reaches_back.is_some() {
                return None;
            }
            committed.clone_from(&base.committed);
        }
        let mut snapshot = Snapshot {
            len: self.len,
            run: self.last_run().map(|r| SnapshotRun {
                seq: r.seq,
                run: r.run.clone(),
                entry: r.entry.clone(),
            }),
            run_end: self.last_counting_run_end().map(|e| SnapshotRunEnd {
                seq: e.seq,
                run: e.run.clone(),
                outcome: e.outcome,
                error: e.error.clone(),
            }),
            reply: self.last_reply().map(|r| SnapshotStep {
                seq: r.seq,
                step: r.step,
                checkpoint: r.checkpoint.clone(),
            }),
            commit: self.last_commit().map(|c| SnapshotStep {
                seq: c.seq,
                step: c.step,
                checkpoint: c.checkpoint.clone(),
            }),
            committed,
        };
        for commit in &self.commits {
            snapshot.commit_step(commit.step);
        }
        Some(snapshot)
    }

    /// A state folded up to and including `snapshot`, the event at `seq`: fold the events after
    /// it into it. `Err` says why the snapshot cannot stand there ([`Snapshot::flaw`]: it is
    /// damaged): fold the whole log instead.
    pub fn from_snapshot(seq: Seq, snapshot: &Snapshot) -> Result<SessionState, String> {
        if let Some(flaw) = snapshot.flaw(seq) {
            return Err(flaw);
        }
        let mut state = SessionState { len: seq.get().saturating_add(1), ..Default::default() };
        if let Some(r) = &snapshot.run {
            state.runs.push(RunRecord { seq: r.seq, run: r.run.clone(), entry: r.entry.clone() });
        }
        if let Some(e) = &snapshot.run_end {
            state.run_ends.push(RunEndRecord {
                seq: e.seq,
                run: e.run.clone(),
                outcome: e.outcome,
                error: e.error.clone(),
                voided_by: None,
            });
        }
        if let Some(r) = &snapshot.reply {
            state.replies.push(ReplyRecord {
                seq: r.seq,
                step: r.step,
                checkpoint: r.checkpoint.clone(),
                text: String::new(),
                repeated_call: None,
                calls: Vec::new(),
                first: 0,
            });
        }
        if let Some(c) = &snapshot.commit {
            state.commits.push(CommitRecord {
                seq: c.seq,
                step: c.step,
                checkpoint: c.checkpoint.clone(),
            });
        }
        state.last_snapshot = Some(seq);
        state.base =
            Some(Box::new(Base { seq, committed: snapshot.committed.clone(), reaches_back: None }));
        Ok(state)
    }

    /// Where the last snapshot of the state's log is: the one it was folded from, or a later
    /// one folded since.
    pub fn last_snapshot(&self) -> Option<Seq> {
        self.last_snapshot
    }

    /// How many `step_commit`s came after the last snapshot (after the first event when there
    /// is none): what a snapshot policy counts.
    pub fn commits_since_snapshot(&self) -> usize {
        let since = self.last_snapshot;
        self.commits.iter().rev().take_while(|c| since.is_none_or(|s| c.seq > s)).count()
    }

    /// The bytes of text in the events after the last snapshot (after the first event when
    /// there is none): tool outputs and output chunks, replies with their calls' arguments,
    /// client answers and messages. What a snapshot policy weighs besides steps: a few steps
    /// of large outputs make a long suffix too.
    pub fn text_since_snapshot(&self) -> u64 {
        let after = |seq: Seq| self.last_snapshot.is_none_or(|s| seq > s);
        let len = |n: usize| n as u64;
        let results: u64 = (self.lists.results.items.iter().rev())
            .take_while(|r| after(r.item.seq))
            .map(|r| len(r.item.output.get().len()))
            .sum();
        let chunks: u64 = (self.lists.chunks.items.iter().rev())
            .take_while(|c| after(c.item.seq))
            .map(|c| len(c.item.text.len()))
            .sum();
        let answers: u64 = (self.lists.answers.items.iter().rev())
            .take_while(|a| after(a.item.seq))
            .map(|a| len(a.item.output.get().len()))
            .sum();
        let replies: u64 = (self.replies.iter().rev())
            .take_while(|r| after(r.seq))
            .map(|r| {
                len(r.text.len()) + r.calls.iter().map(|c| len(c.args.get().len())).sum::<u64>()
            })
            .sum();
        let messages: u64 = (self.messages.iter().rev())
            .take_while(|m| after(m.seq))
            .map(|m| len(m.text.len()))
            .sum();
        results + chunks + answers + replies + messages
    }

    /// Where the snapshot this state was folded from is, if it was.
    pub fn snapshot_seq(&self) -> Option<Seq> {
        self.base.as_ref().map(|b| b.seq)
    }

    /// Whether planning `entry` over this state needs the log before the snapshot it was folded
    /// from: fold the whole log and plan over that instead. Never for a state folded from the
    /// first event.
    pub fn needs_history(&self, entry: &Entry) -> bool {
        let Some(base) = &self.base else { return false };
        if base.reaches_back.is_some() {
            return true;
        }
        let checkpoint = match entry {
            Entry::Resume(ResumeMode::FromCheckpoint { checkpoint }) => Some(checkpoint),
            Entry::Retry { checkpoint, .. } => checkpoint.as_ref(),
            _ => None,
        };
        checkpoint.is_some_and(|c| !self.names_checkpoint(c))
    }

    /// A `rewound` at `seq` found its target reply at `reply` (or none): when the state was
    /// folded from a snapshot and the target is not after it, the state now needs the history.
    pub(super) fn note_rewind_target(&mut self, seq: Seq, reply: Option<Seq>) {
        if let Some(base) = &mut self.base
            && reply.is_none_or(|r| r < base.seq)
        {
            base.reaches_back.get_or_insert(seq);
        }
    }
}
