//! The fold: [`fold`] and [`fold_owned`] over a whole log, and [`SessionState::apply`] and
//! [`SessionState::apply_owned`] for one event, from a borrowed event (its text copied) or an
//! owned one (its text moved in). One match serves both (`fold_event!`), so both give the same
//! state.

use stepjournal_codec::{
    Call, CallId, CheckpointId, DispatchId, Event, EventKind, PairReason, RawJson, Seq, SessionId,
    StepNo,
};

use super::call::CallSlot;
use super::records::{
    AbortRecord, AnswerRecord, ApprovalRecord, AttemptRecord, ChildRecord, ChunkSlot, CommitRecord,
    DispatchRecord, MessageRecord, PairingRecord, ReplyRecord, ResultRecord, RewindRecord,
    RunEndRecord, RunRecord, SuspensionRecord,
};
use super::{SCAN_LAST_REPLY, SessionState, slot_id};

/// The one body of [`SessionState::apply`] and [`SessionState::apply_owned`]: folds `$event`,
/// the event at `$seq`, into `$state`. `$take` is what a record keeps of a field of the matched
/// event: `moved!` out of an owned event, `cloned!` from a borrowed one. Fields that are
/// `Copy`, or only read (the call an event names), are used as they are.
macro_rules! fold_event {
    ($state:ident, $seq:ident, $event:expr, $take:ident) => {
        match $event {
            Event::RunStarted(e) => $state.runs.push(RunRecord {
                seq: $seq,
                run: $take!(e.run),
                entry: $take!(e.entry),
            }),
            Event::Message(e) => $state.messages.push(MessageRecord {
                seq: $seq,
                role: e.role,
                text: $take!(e.text),
            }),
            Event::ReplyCommitted(e) => {
                $state.on_reply($seq, e.step, $take!(e.checkpoint), $take!(e.text), $take!(e.calls))
            }
            Event::DispatchMinted(e) => $state.on_dispatch($seq, &e.call, $take!(e.dispatch)),
            Event::AttemptStarted(e) => $state.on_attempt($seq, &e.call, e.attempt),
            Event::OutputChunk(e) => $state.on_chunk($seq, &e.call, e.attempt, &e.text),
            Event::ToolResult(e) => {
                $state.on_result($seq, &e.call, e.attempt, $take!(e.output), e.is_error)
            }
            Event::ApprovalDecided(e) => $state.on_approval($seq, &e.call, e.approved),
            Event::ClientAnswer(e) => $state.on_answer($seq, &e.call, $take!(e.output)),
            Event::ChildAttached(e) => $state.on_child($seq, &e.call, $take!(e.child)),
            Event::Paired(e) => {
                $state.on_paired($seq, &e.call, e.reason, $take!(e.message), $take!(e.partial))
            }
            Event::Suspended(e) => {
                $state.suspensions.push(SuspensionRecord { seq: $seq, calls: $take!(e.calls) })
            }
            Event::StepCommit(e) => $state.commits.push(CommitRecord {
                seq: $seq,
                step: e.step,
                checkpoint: $take!(e.checkpoint),
            }),
            Event::RunEnded(e) => $state.run_ends.push(RunEndRecord {
                seq: $seq,
                run: $take!(e.run),
                outcome: e.outcome,
                error: $take!(e.error),
                voided_by: None,
            }),
            Event::Rewound(e) => $state.on_rewind($seq, $take!(e.to)),
            Event::ModelAborted(e) => $state.aborts.push(AbortRecord {
                seq: $seq,
                partial: $take!(e.partial),
                continuation: $take!(e.continuation),
            }),
            // Changes no plan: a fold of the whole log notes where it is, and skips it; but a
            // fork's first state is its snapshot (`fork.rs`).
            Event::Snapshot(e) => $state.on_snapshot($seq, &e),
            Event::ForkedFrom(e) => $state.on_forked($seq, $take!(e)),
            Event::Trimmed(e) => $state.on_trimmed($seq, &e),
        }
    };
}

/// A field of an owned event, moved into the record.
macro_rules! moved {
    ($field:expr) => {
        $field
    };
}

/// A field of a borrowed event, cloned into the record.
macro_rules! cloned {
    ($field:expr) => {
        $field.clone()
    };
}

/// A hasher with fixed keys: the fold draws no randomness.
type FixedState = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// Folds a whole log, oldest event first.
pub fn fold(events: &[Event]) -> SessionState {
    let mut state = SessionState::with_capacity_for(events);
    for event in events {
        state.apply(event);
    }
    state
}

/// Folds a whole log it owns, oldest event first: the same state as [`fold`], without copying
/// the events' text.
pub fn fold_owned(events: Vec<Event>) -> SessionState {
    let mut state = SessionState::with_capacity_for(&events);
    for event in events {
        state.apply_owned(event);
    }
    state
}

impl SessionState {
    /// An empty state with room for `events` (one pass over their types), so that folding them
    /// grows no table: a large allocation in the middle of many small frees is what makes a
    /// general-purpose allocator stall.
    fn with_capacity_for(events: &[Event]) -> Self {
        let mut counts = [0usize; EventKind::COUNT];
        let (mut calls, mut text) = (0usize, 0usize);
        for e in events {
            if let Some(n) = counts.get_mut(e.kind().index()) {
                *n += 1;
            }
            match e {
                Event::ReplyCommitted(r) => calls += r.calls.len(),
                Event::OutputChunk(c) => text += c.text.len(),
                _ => {}
            }
        }
        let count = |k: EventKind| counts.get(k.index()).copied().unwrap_or(0);
        let mut state = SessionState::default();
        state.calls.reserve(calls);
        state.index.reserve(calls);
        state.replies.reserve(count(EventKind::ReplyCommitted));
        state.lists.dispatches.items.reserve(count(EventKind::DispatchMinted));
        state.lists.attempts.items.reserve(count(EventKind::AttemptStarted));
        state.lists.chunks.items.reserve(count(EventKind::OutputChunk));
        state.lists.chunk_text.reserve(text);
        state.lists.results.items.reserve(count(EventKind::ToolResult));
        state.lists.answers.items.reserve(count(EventKind::ClientAnswer));
        state.lists.approvals.items.reserve(count(EventKind::ApprovalDecided));
        state.lists.children.items.reserve(count(EventKind::ChildAttached));
        state.lists.pairings.items.reserve(count(EventKind::Paired));
        state.pairing_calls.reserve(count(EventKind::Paired));
        state.commits.reserve(count(EventKind::StepCommit));
        state.runs.reserve(count(EventKind::RunStarted));
        state.run_ends.reserve(count(EventKind::RunEnded));
        state.messages.reserve(count(EventKind::Message));
        state
    }

    fn next_seq(&mut self) -> Seq {
        let seq = Seq(self.len);
        self.len = self.len.saturating_add(1);
        seq
    }

    /// Folds one more event: the next one of the log.
    pub fn apply(&mut self, event: &Event) {
        let seq = self.next_seq();
        fold_event!(self, seq, event, cloned);
    }

    /// Folds one more event it owns: the same as [`SessionState::apply`], moving the event's
    /// text in instead of copying it.
    pub fn apply_owned(&mut self, event: Event) {
        let seq = self.next_seq();
        fold_event!(self, seq, event, moved);
    }

    fn on_reply(
        &mut self,
        seq: Seq,
        step: StepNo,
        checkpoint: CheckpointId,
        text: String,
        calls: Vec<Call>,
    ) {
        let (Ok(reply), Ok(first)) =
            (u32::try_from(self.replies.len()), u32::try_from(self.calls.len()))
        else {
            return;
        };
        // The first occurrence of an id in the reply holds the events; a repeat is recorded and
        // refused by the plan.
        let mut repeated = vec![false; calls.len()];
        if calls.len() <= SCAN_LAST_REPLY {
            for (j, call) in calls.iter().enumerate() {
                let seen = calls.get(..j).unwrap_or(&[]);
                if let Some(r) = repeated.get_mut(j) {
                    *r = seen.iter().any(|c| c.call == call.call);
                }
            }
        } else {
            let mut seen: std::collections::HashSet<&str, FixedState> =
                std::collections::HashSet::with_capacity_and_hasher(
                    calls.len(),
                    FixedState::default(),
                );
            for (call, r) in calls.iter().zip(repeated.iter_mut()) {
                *r = !seen.insert(call.call.as_str());
            }
        }
        let repeated_call =
            calls.iter().zip(&repeated).find(|(_, r)| **r).map(|(c, _)| c.call.clone());
        let count = u32::try_from(calls.len()).unwrap_or(u32::MAX);
        self.replies.push(ReplyRecord {
            seq,
            step,
            checkpoint,
            text,
            repeated_call,
            calls,
            first: first as usize,
        });
        for pos in 0..count {
            self.calls.push(CallSlot::new(reply, pos));
            if repeated.get(pos as usize).copied().unwrap_or(true) {
                continue;
            }
            let (calls, replies) = (&self.calls, &self.replies);
            if let Some(id) = slot_id(calls, replies, first.saturating_add(pos)) {
                self.index.insert(id, first.saturating_add(pos), |i| slot_id(calls, replies, i));
            }
        }
        debug_assert_eq!(
            self.calls.len(),
            first as usize + count as usize,
            "a reply's calls follow the calls of the replies before it"
        );
    }

    fn on_dispatch(&mut self, seq: Seq, call: &CallId, dispatch: DispatchId) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            self.lists.dispatches.push(&mut c.dispatches, DispatchRecord { seq, dispatch });
        }
    }

    fn on_attempt(&mut self, seq: Seq, call: &CallId, attempt: stepjournal_codec::Attempt) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            c.bodies = c.bodies.saturating_add(1);
            self.lists.attempts.push(&mut c.attempts, AttemptRecord { seq, attempt });
        }
    }

    fn on_chunk(
        &mut self,
        seq: Seq,
        call: &CallId,
        attempt: stepjournal_codec::Attempt,
        text: &str,
    ) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            let start = self.lists.chunk_text.len();
            self.lists.chunk_text.push_str(text);
            let text = start..self.lists.chunk_text.len();
            self.lists.chunks.push(&mut c.chunks, ChunkSlot { seq, attempt, text });
        }
    }

    fn on_result(
        &mut self,
        seq: Seq,
        call: &CallId,
        attempt: stepjournal_codec::Attempt,
        output: RawJson,
        is_error: bool,
    ) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            let record = ResultRecord { seq, attempt, output, is_error };
            self.lists.results.push(&mut c.results, record);
        }
    }

    fn on_approval(&mut self, seq: Seq, call: &CallId, approved: bool) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            if !approved {
                c.denials = c.denials.saturating_add(1);
            }
            self.lists.approvals.push(&mut c.approvals, ApprovalRecord { seq, approved });
        }
    }

    fn on_answer(&mut self, seq: Seq, call: &CallId, output: RawJson) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            self.lists.answers.push(&mut c.answers, AnswerRecord { seq, output });
        }
    }

    fn on_child(&mut self, seq: Seq, call: &CallId, child: SessionId) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            self.lists.children.push(&mut c.children, ChildRecord { seq, child });
        }
    }

    fn on_paired(
        &mut self,
        seq: Seq,
        call: &CallId,
        reason: PairReason,
        message: String,
        partial: String,
    ) {
        if let Some(i) = self.bound(seq, call)
            && let Some(c) = self.calls.get_mut(i)
        {
            let record = PairingRecord { seq, reason, message, partial, voided_by: None };
            if let Ok(call) = u32::try_from(i)
                && self.lists.pairings.push(&mut c.pairings, record)
            {
                c.paired = c.paired.saturating_add(1);
                self.pairing_calls.push(call);
            }
            debug_assert_eq!(
                self.pairing_calls.len(),
                self.lists.pairings.items.len(),
                "every pairing kept has its call"
            );
        }
    }

    /// A `rewound`: every `paired` and `run_ended` between the latest reply whose append
    /// checkpoint is `to` and this event stops counting. A `to` that names no reply voids nothing.
    fn on_rewind(&mut self, seq: Seq, to: CheckpointId) {
        let reply = self.replies.iter().rev().find(|r| r.checkpoint == to).map(|r| r.seq);
        if let Some(from) = reply {
            let pairings = self.lists.pairings.items.iter_mut().rev();
            for (linked, &call) in pairings.zip(self.pairing_calls.iter().rev()) {
                if linked.item.seq <= from {
                    break;
                }
                if linked.item.voided_by.is_none() {
                    linked.item.voided_by = Some(seq);
                    if let Some(c) = self.calls.get_mut(call as usize) {
                        c.voided = c.voided.saturating_add(1);
                        debug_assert!(
                            c.voided <= c.paired,
                            "only a call's own pairings are voided"
                        );
                    }
                }
            }
            for end in self.run_ends.iter_mut().rev() {
                if end.seq <= from {
                    break;
                }
                end.voided_by.get_or_insert(seq);
            }
        }
        self.note_rewind_target(seq, reply);
        self.rewinds.push(RewindRecord { seq, to, reply });
    }
}
