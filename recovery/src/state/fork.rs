//! Forks: a session that starts with `forked_from` (seq 0) and the `snapshot` of the original's
//! state at the step commit it was forked at (seq 1). The state before that snapshot is the
//! original's, which this log does not hold, so a fold of the whole log adopts the snapshot (as
//! [`SessionState::from_snapshot`] would start there) instead of skipping it as it skips every
//! other snapshot. The fold from that snapshot and the fold of the whole log are then the same
//! fold. [`SessionState::fork_snapshot`] takes the snapshot a fork opens with.
//!
//! The fork's snapshot places everything it keeps at seq 0: it all lies before the snapshot
//! (seq 1) in the original, whose positions the fork does not have (`forked_from` names the
//! original and the commit's seq there). The one order between kept records a rule reads, a
//! run begun after the last run end (then the last run has not ended), is kept by leaving that
//! run end out: it is then no longer the last run's end, and no rule reads it.

use stepjournal_codec::{ForkedFrom, Seq, Snapshot};

use super::SessionState;

impl SessionState {
    /// A `forked_from` at `seq`: the session is a fork when it is the first event.
    pub(super) fn on_forked(&mut self, seq: Seq, forked: ForkedFrom) {
        if seq == Seq(0) {
            self.forked = Some(Box::new(forked));
        }
    }

    /// A `snapshot` at `seq`: adopted when it directly follows the `forked_from` that opens the
    /// log (a fork's first state); skipped otherwise, as a fold of the whole log skips
    /// snapshots. A fork's snapshot that cannot stand there ([`Snapshot::flaw`]) is not
    /// adopted: the fork then folds as a session with no history.
    pub(super) fn on_snapshot(&mut self, seq: Seq, snapshot: &Snapshot) {
        if seq == Seq(1)
            && self.forked.is_some()
            && self.base.is_none()
            && let Ok(mut adopted) = SessionState::from_snapshot(seq, snapshot)
        {
            adopted.forked = self.forked.take();
            *self = adopted;
            return;
        }
        self.last_snapshot = Some(seq);
    }

    /// The `forked_from` that opens the log, when the session is a fork (folded from its first
    /// event: a state folded from a snapshot does not see it).
    pub fn forked_from(&self) -> Option<&ForkedFrom> {
        self.forked.as_deref()
    }

    /// The snapshot a fork of this state opens with, right after its `forked_from`: `None`
    /// unless the state is at a committed step boundary ([`snapshot`](Self::snapshot)). Every
    /// record it keeps is placed at seq 0 and it stands at seq 1 (see the module's text).
    pub fn fork_snapshot(&self) -> Option<Snapshot> {
        let mut snapshot = self.snapshot()?;
        snapshot.len = 1;
        let run_after_end = match (&snapshot.run, &snapshot.run_end) {
            (Some(run), Some(end)) => run.seq > end.seq,
            _ => false,
        };
        if run_after_end {
            snapshot.run_end = None;
        }
        if let Some(r) = &mut snapshot.run {
            r.seq = Seq(0);
        }
        if let Some(e) = &mut snapshot.run_end {
            e.seq = Seq(0);
        }
        if let Some(r) = &mut snapshot.reply {
            r.seq = Seq(0);
        }
        if let Some(c) = &mut snapshot.commit {
            c.seq = Seq(0);
        }
        debug_assert_eq!(snapshot.flaw(Seq(1)), None, "a fork's snapshot stands at seq 1");
        Some(snapshot)
    }
}
