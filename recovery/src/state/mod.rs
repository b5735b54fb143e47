//! The fold: [`SessionState`], built from a session's events one at a time.

mod call;
mod records;

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use stepjournal_codec::{CallId, CheckpointId, Event, RunOutcome, Seq, StepNo};

pub use call::{ApprovalState, CallRecord, Resolution, reason_blocks};
pub use records::{
    AbortRecord, AnswerRecord, ApprovalRecord, AttemptRecord, ChildRecord, ChunkRecord,
    CommitRecord, DispatchRecord, MessageRecord, PairingRecord, ReplyRecord, ResultRecord,
    RewindRecord, RunEndRecord, RunRecord, SuspensionRecord,
};

/// A hasher with fixed keys: the fold reads no randomness, and nothing it returns depends on the
/// order of a map.
type FixedState = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// How many calls of the last reply are scanned before the id map is asked.
const SCAN_LAST_REPLY: usize = 16;

/// Everything recovery needs to know about a session, folded from its events.
///
/// Built by [`fold`] or by [`SessionState::default`] and [`SessionState::apply`] one event at a
/// time; both give the same state. The fold is pure: no I/O, no clock, no randomness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Events folded so far; the next event's sequence number.
    len: u64,
    runs: Vec<RunRecord>,
    run_ends: Vec<RunEndRecord>,
    replies: Vec<ReplyRecord>,
    /// Every call of every reply, reply after reply; a reply's calls are a range of this table.
    calls: Vec<CallRecord>,
    /// Call id to the call of the latest reply that holds it (its first occurrence there).
    bindings: HashMap<CallId, usize, FixedState>,
    /// Every `paired` in log order: (its seq, the call's index, the pairing's index in the call).
    /// A `rewound` walks it backwards to void what it covers.
    pairing_log: Vec<(Seq, usize, usize)>,
    commits: Vec<CommitRecord>,
    messages: Vec<MessageRecord>,
    aborts: Vec<AbortRecord>,
    rewinds: Vec<RewindRecord>,
    suspensions: Vec<SuspensionRecord>,
    /// Events that named a call no reply holds (see [`crate::verify`]).
    unbound: Vec<Seq>,
}

/// Folds a whole log, oldest event first.
pub fn fold(events: &[Event]) -> SessionState {
    let mut state = SessionState::default();
    for event in events {
        state.apply(event);
    }
    state
}

impl SessionState {
    /// Folds one more event: the next one of the log.
    pub fn apply(&mut self, event: &Event) {
        let seq = Seq(self.len);
        self.len = self.len.saturating_add(1);
        match event {
            Event::RunStarted(e) => {
                self.runs.push(RunRecord { seq, run: e.run.clone(), entry: e.entry.clone() })
            }
            Event::Message(e) => {
                self.messages.push(MessageRecord { seq, role: e.role, text: e.text.clone() })
            }
            Event::ReplyCommitted(e) => self.apply_reply(seq, e),
            Event::DispatchMinted(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.dispatches.push(DispatchRecord { seq, dispatch: e.dispatch.clone() });
                }
            }
            Event::AttemptStarted(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.attempts.push(AttemptRecord { seq, attempt: e.attempt });
                }
            }
            Event::OutputChunk(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.chunks.push(ChunkRecord { seq, attempt: e.attempt, text: e.text.clone() });
                }
            }
            Event::ToolResult(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.results.push(ResultRecord {
                        seq,
                        attempt: e.attempt,
                        output: e.output.clone(),
                        is_error: e.is_error,
                    });
                }
            }
            Event::ApprovalDecided(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.approvals.push(ApprovalRecord { seq, approved: e.approved });
                }
            }
            Event::ClientAnswer(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.answers.push(AnswerRecord { seq, output: e.output.clone() });
                }
            }
            Event::ChildAttached(e) => {
                if let Some(c) = self.bound(seq, &e.call) {
                    c.children.push(ChildRecord { seq, child: e.child.clone() });
                }
            }
            Event::Paired(e) => {
                if let Some(index) = self.binding(&e.call) {
                    if let Some(c) = self.calls.get_mut(index) {
                        self.pairing_log.push((seq, index, c.pairings.len()));
                        c.pairings.push(PairingRecord {
                            seq,
                            reason: e.reason,
                            message: e.message.clone(),
                            partial: e.partial.clone(),
                            voided_by: None,
                        });
                    }
                } else {
                    self.unbound.push(seq);
                }
            }
            Event::Suspended(e) => {
                self.suspensions.push(SuspensionRecord { seq, calls: e.calls.clone() })
            }
            Event::StepCommit(e) => self.commits.push(CommitRecord {
                seq,
                step: e.step,
                checkpoint: e.checkpoint.clone(),
            }),
            Event::RunEnded(e) => self.run_ends.push(RunEndRecord {
                seq,
                run: e.run.clone(),
                outcome: e.outcome,
                error: e.error.clone(),
                voided_by: None,
            }),
            Event::Rewound(e) => self.apply_rewind(seq, &e.to),
            Event::ModelAborted(e) => {
                self.aborts.push(AbortRecord { seq, partial: e.partial.clone() })
            }
        }
    }

    fn apply_reply(&mut self, seq: Seq, e: &stepjournal_codec::ReplyCommitted) {
        let start = self.calls.len();
        let mut repeated_call = None;
        for call in &e.calls {
            let index = self.calls.len();
            // The first occurrence of an id in the reply holds the events; a repeat is recorded
            // and refused by the plan.
            // The id map already points into this reply only for an id it named before.
            let repeated = self.bindings.get(&call.call).is_some_and(|&i| i >= start);
            if repeated {
                repeated_call.get_or_insert_with(|| call.call.clone());
            } else {
                self.bindings.insert(call.call.clone(), index);
            }
            self.calls.push(CallRecord::new(call.clone(), e.step, seq));
        }
        self.replies.push(ReplyRecord {
            seq,
            step: e.step,
            checkpoint: e.checkpoint.clone(),
            text: e.text.clone(),
            repeated_call,
            calls: start..self.calls.len(),
        });
    }

    fn apply_rewind(&mut self, seq: Seq, to: &CheckpointId) {
        let reply = self.replies.iter().rev().find(|r| &r.checkpoint == to).map(|r| r.seq);
        if let Some(from) = reply {
            for &(at, call, pairing) in self.pairing_log.iter().rev() {
                if at <= from {
                    break;
                }
                if let Some(p) = self.calls.get_mut(call).and_then(|c| c.pairings.get_mut(pairing))
                {
                    p.voided_by.get_or_insert(seq);
                }
            }
            for end in self.run_ends.iter_mut().rev() {
                if end.seq <= from {
                    break;
                }
                end.voided_by.get_or_insert(seq);
            }
        }
        self.rewinds.push(RewindRecord { seq, to: to.clone(), reply });
    }

    /// The index of the call an event naming `id` belongs to: the latest reply holding it.
    fn binding(&self, id: &CallId) -> Option<usize> {
        if let Some(last) = self.replies.last()
            && last.calls.len() <= SCAN_LAST_REPLY
            && let Some(calls) = self.calls.get(last.calls.clone())
            && let Some(pos) = calls.iter().position(|c| &c.call.call == id)
        {
            return Some(last.calls.start + pos);
        }
        self.bindings.get(id).copied()
    }

    fn bound(&mut self, seq: Seq, id: &CallId) -> Option<&mut CallRecord> {
        match self.binding(id) {
            Some(index) => self.calls.get_mut(index),
            None => {
                self.unbound.push(seq);
                None
            }
        }
    }

    /// How many events have been folded: the next event's sequence number.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no event has been folded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every `run_started`, in log order.
    pub fn runs(&self) -> &[RunRecord] {
        &self.runs
    }

    /// The last `run_started`.
    pub fn last_run(&self) -> Option<&RunRecord> {
        self.runs.last()
    }

    /// Every `run_ended`, voided ones included, in log order.
    pub fn run_ends(&self) -> &[RunEndRecord] {
        &self.run_ends
    }

    /// The last `run_ended` that still counts.
    pub fn last_counting_run_end(&self) -> Option<&RunEndRecord> {
        self.run_ends.iter().rev().find(|e| e.counts())
    }

    /// How the session's last run ended: the outcome of the last `run_ended` that still counts,
    /// when no `run_started` follows it; `None` while the last run has no counting end (it is
    /// running, or was lost).
    pub fn last_run_outcome(&self) -> Option<RunOutcome> {
        let end = self.last_counting_run_end()?;
        match self.runs.last() {
            Some(run) if run.seq > end.seq => None,
            _ => Some(end.outcome),
        }
    }

    /// Every reply, in log order.
    pub fn replies(&self) -> &[ReplyRecord] {
        &self.replies
    }

    /// The last `reply_committed`.
    pub fn last_reply(&self) -> Option<&ReplyRecord> {
        self.replies.last()
    }

    /// The calls of a reply of this state, in reply order.
    pub fn calls_of(&self, reply: &ReplyRecord) -> &[CallRecord] {
        self.calls.get(reply.calls.clone()).unwrap_or(&[])
    }

    /// The call an event naming `id` now would belong to: the one of the latest reply holding it.
    pub fn call(&self, id: &CallId) -> Option<&CallRecord> {
        self.binding(id).and_then(|i| self.calls.get(i))
    }

    /// Every `step_commit`, in log order.
    pub fn commits(&self) -> &[CommitRecord] {
        &self.commits
    }

    /// The last `step_commit`.
    pub fn last_commit(&self) -> Option<&CommitRecord> {
        self.commits.last()
    }

    /// Whether the log holds a `step_commit` for `step`.
    pub fn is_committed(&self, step: StepNo) -> bool {
        self.commits.iter().rev().any(|c| c.step == step)
    }

    /// The saved step: the last reply, when its step has no `step_commit`.
    pub fn saved_step(&self) -> Option<&ReplyRecord> {
        self.replies.last().filter(|r| !self.is_committed(r.step))
    }

    /// Whether a `reply_committed` or `step_commit` names this checkpoint.
    pub fn names_checkpoint(&self, checkpoint: &CheckpointId) -> bool {
        self.replies.iter().any(|r| &r.checkpoint == checkpoint)
            || self.commits.iter().any(|c| &c.checkpoint == checkpoint)
    }

    /// Every `message`, in log order.
    pub fn messages(&self) -> &[MessageRecord] {
        &self.messages
    }

    /// Every `model_aborted`, in log order.
    pub fn aborts(&self) -> &[AbortRecord] {
        &self.aborts
    }

    /// Every `rewound`, in log order.
    pub fn rewinds(&self) -> &[RewindRecord] {
        &self.rewinds
    }

    /// Every `suspended`, in log order.
    pub fn suspensions(&self) -> &[SuspensionRecord] {
        &self.suspensions
    }

    /// The events that named a call no reply holds.
    pub fn unbound(&self) -> &[Seq] {
        &self.unbound
    }
}

#[cfg(test)]
mod tests;
