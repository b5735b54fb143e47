//! The fold: [`SessionState`], built from a session's events one at a time.

mod apply;
mod call;
mod fork;
mod index;
mod records;
mod snapshot;
mod trim;

use stepjournal_codec::{CallId, CheckpointId, RunOutcome, Seq, StepNo};

pub use apply::{fold, fold_owned};
use call::CallSlot;
pub use call::{ApprovalState, CallRecord, Resolution, reason_blocks};
use index::CallIndex;
use records::CallLists;
pub use records::{
    AbortRecord, AnswerRecord, ApprovalRecord, AttemptRecord, ChainIter, ChildRecord, Chunk,
    CommitRecord, DispatchRecord, MessageRecord, PairingRecord, ReplyRecord, ResultRecord,
    RewindRecord, RunEndRecord, RunRecord, SuspensionRecord,
};
pub use trim::{NoStart, TrimRecord, trim_point};

/// How many calls of the last reply are scanned before the id index is asked.
const SCAN_LAST_REPLY: usize = 16;

/// Everything recovery needs to know about a session, folded from its events.
///
/// Built by [`fold`] or by [`SessionState::default`] and [`SessionState::apply`] one event at a
/// time; both give the same state. The fold is pure: no I/O, no clock, no randomness.
///
/// The records of every call live in shared lists (one per event type) and are chained per call,
/// so folding allocates per list, not per call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Events folded so far; the next event's sequence number.
    len: u64,
    runs: Vec<RunRecord>,
    run_ends: Vec<RunEndRecord>,
    replies: Vec<ReplyRecord>,
    /// Every call of every reply, reply after reply; a reply's calls start at its `first`.
    calls: Vec<CallSlot>,
    /// Call id to the call of the latest reply that holds it (its first occurrence there).
    index: CallIndex,
    /// The records of every call's events, chained per call.
    lists: CallLists,
    /// The call of each `paired` in `lists.pairings`, in log order (a `rewound` walks both
    /// backwards). Invariant: as long as `lists.pairings`.
    pairing_calls: Vec<u32>,
    commits: Vec<CommitRecord>,
    messages: Vec<MessageRecord>,
    aborts: Vec<AbortRecord>,
    rewinds: Vec<RewindRecord>,
    suspensions: Vec<SuspensionRecord>,
    /// Events that named a call no reply holds (see [`crate::verify`]).
    unbound: Vec<Seq>,
    /// Set when the fold started at a snapshot (see [`SessionState::from_snapshot`]).
    base: Option<Box<snapshot::Base>>,
    /// Where the last `snapshot` folded (or started from) is.
    last_snapshot: Option<Seq>,
    /// The `forked_from` that opens the log (seq 0), when the session is a fork.
    forked: Option<Box<stepjournal_codec::ForkedFrom>>,
    /// The last `trimmed` folded.
    trimmed: Option<Box<TrimRecord>>,
}

/// The id of the call in slot `i`.
fn slot_id<'a>(calls: &'a [CallSlot], replies: &'a [ReplyRecord], i: u32) -> Option<&'a CallId> {
    let slot = calls.get(i as usize)?;
    let reply = replies.get(slot.reply as usize)?;
    reply.calls.get(slot.pos as usize).map(|c| &c.call)
}

impl SessionState {
    /// The index of the call an event naming `id` belongs to: the latest reply holding it.
    fn binding(&self, id: &CallId) -> Option<u32> {
        if let Some(last) = self.replies.last()
            && last.calls.len() <= SCAN_LAST_REPLY
            && let Some(pos) = last.calls.iter().position(|c| &c.call == id)
        {
            return u32::try_from(last.first + pos).ok();
        }
        let (calls, replies) = (&self.calls, &self.replies);
        self.index.get(id, |i| slot_id(calls, replies, i))
    }

    fn bound(&mut self, seq: Seq, id: &CallId) -> Option<usize> {
        match self.binding(id) {
            Some(index) => Some(index as usize),
            None => {
                self.unbound.push(seq);
                None
            }
        }
    }

    fn view<'a>(&'a self, slot: &'a CallSlot) -> Option<CallRecord<'a>> {
        let reply = self.replies.get(slot.reply as usize)?;
        let call = reply.calls.get(slot.pos as usize)?;
        Some(CallRecord { lists: &self.lists, slot, reply, call })
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
    pub fn calls_of<'a>(&'a self, reply: &ReplyRecord) -> Vec<CallRecord<'a>> {
        let slots = reply.first..reply.first.saturating_add(reply.calls.len());
        self.calls.get(slots).unwrap_or(&[]).iter().filter_map(|slot| self.view(slot)).collect()
    }

    /// The call an event naming `id` now would belong to: the one of the latest reply holding it.
    pub fn call(&self, id: &CallId) -> Option<CallRecord<'_>> {
        self.binding(id).and_then(|i| self.calls.get(i as usize)).and_then(|slot| self.view(slot))
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
            || self.base.as_ref().is_some_and(|b| b.is_committed(step))
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
