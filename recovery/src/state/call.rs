//! Everything the log says about one call of a reply: [`CallRecord`], a view into the state.

use stepjournal_codec::{
    Attempt, Call, CallId, CallKind, DispatchId, PairReason, Seq, SessionId, StepNo,
};

use super::records::{
    AnswerRecord, ApprovalRecord, AttemptRecord, CallLists, Chain, ChainIter, ChildRecord, Chunk,
    DispatchRecord, PairingRecord, ReplyRecord, ResultRecord,
};

/// Where an approval-gated call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// No `approval_decided` yet.
    Undecided,
    /// Approved (and never denied).
    Approved,
    /// Denied: an `approval_decided` with `approved: false` resolves the call.
    Denied,
}

/// What answers a call, as the model is shown it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution<'a> {
    /// A `tool_result`.
    Result(&'a ResultRecord),
    /// A `client_answer`.
    ClientAnswer(&'a AnswerRecord),
    /// An `approval_decided` with `approved: false`.
    ApprovalDenied(&'a ApprovalRecord),
    /// A `paired` that still counts.
    Paired(&'a PairingRecord),
}

impl Resolution<'_> {
    /// Where the resolving event is in the log.
    pub fn seq(&self) -> Seq {
        match self {
            Resolution::Result(r) => r.seq,
            Resolution::ClientAnswer(a) => a.seq,
            Resolution::ApprovalDenied(a) => a.seq,
            Resolution::Paired(p) => p.seq,
        }
    }
}

/// A call as kept by the state: where the call is, and the chains of its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallSlot {
    /// The reply holding the call (index in the state's replies), and its position there.
    pub(crate) reply: u32,
    pub(crate) pos: u32,
    pub(crate) dispatches: Chain,
    /// Every `attempt_started`: the call's bodies, whatever was rewound.
    pub(crate) attempts: Chain,
    pub(crate) chunks: Chain,
    pub(crate) results: Chain,
    pub(crate) answers: Chain,
    pub(crate) approvals: Chain,
    pub(crate) children: Chain,
    pub(crate) pairings: Chain,
    /// How many bodies started (the length of `attempts`).
    pub(crate) bodies: u32,
    /// How many `approval_decided` denied it (a count, so that "denied" is O(1)).
    pub(crate) denials: u32,
    /// How many `paired` name it, and how many of those a `rewound` voided.
    pub(crate) paired: u32,
    pub(crate) voided: u32,
}

impl CallSlot {
    pub(crate) fn new(reply: u32, pos: u32) -> Self {
        CallSlot {
            reply,
            pos,
            dispatches: Chain::default(),
            attempts: Chain::default(),
            chunks: Chain::default(),
            results: Chain::default(),
            answers: Chain::default(),
            approvals: Chain::default(),
            children: Chain::default(),
            pairings: Chain::default(),
            bodies: 0,
            denials: 0,
            paired: 0,
            voided: 0,
        }
    }
}

/// One call of a reply and every event that named it after the reply.
///
/// An event names a call by id only; it belongs to the latest reply, at or before the event, that
/// holds a call of that id (ids are unique within a reply, not across replies).
#[derive(Debug, Clone, Copy)]
pub struct CallRecord<'a> {
    pub(crate) lists: &'a CallLists,
    pub(crate) slot: &'a CallSlot,
    pub(crate) reply: &'a ReplyRecord,
    pub(crate) call: &'a Call,
}

impl<'a> CallRecord<'a> {
    /// The call as the reply gave it (tool, arguments, kind, saved policy, group, sequential).
    pub fn call(&self) -> &'a Call {
        self.call
    }

    /// The call's id.
    pub fn id(&self) -> &'a CallId {
        &self.call.call
    }

    /// The call's kind.
    pub fn kind(&self) -> CallKind {
        self.call.kind
    }

    /// The step of the reply that holds the call.
    pub fn step(&self) -> StepNo {
        self.reply.step
    }

    /// Where the reply that holds the call is in the log.
    pub fn reply_seq(&self) -> Seq {
        self.reply.seq
    }

    /// The call's dispatch id: the first one minted (it is minted once; see [`crate::verify`]).
    pub fn dispatch(&self) -> Option<&'a DispatchId> {
        self.lists.dispatches.first(self.slot.dispatches).map(|d| &d.dispatch)
    }

    /// Every `dispatch_minted` for the call.
    pub fn dispatches(&self) -> ChainIter<'a, DispatchRecord> {
        self.lists.dispatches.iter(self.slot.dispatches)
    }

    /// How many bodies the call has started: every `attempt_started`, whatever was rewound.
    pub fn bodies(&self) -> u32 {
        self.slot.bodies
    }

    /// Every `attempt_started`, in log order.
    pub fn attempts(&self) -> ChainIter<'a, AttemptRecord> {
        self.lists.attempts.iter(self.slot.attempts)
    }

    /// The attempt number of the last `attempt_started`, if any.
    pub fn last_attempt(&self) -> Option<Attempt> {
        self.lists.attempts.last(self.slot.attempts).map(|a| a.attempt)
    }

    /// Every `output_chunk`, in log order.
    pub fn chunks(&self) -> impl Iterator<Item = Chunk<'a>> + 'a {
        let lists = self.lists;
        lists.chunks.iter(self.slot.chunks).map(move |c| Chunk {
            seq: c.seq,
            attempt: c.attempt,
            text: lists.chunk_text.get(c.text.clone()).unwrap_or(""),
        })
    }

    /// The `output_chunk`s of one attempt, in log order.
    pub fn chunks_of(&self, attempt: Attempt) -> impl Iterator<Item = Chunk<'a>> + 'a {
        self.chunks().filter(move |c| c.attempt == attempt)
    }

    /// The output the call's last started attempt committed: the texts of its `output_chunk`s
    /// joined in log order; `""` where there are none (or no body started).
    pub fn partial(&self) -> String {
        match self.last_attempt() {
            Some(last) => self.chunks_of(last).map(|c| c.text).collect(),
            None => String::new(),
        }
    }

    /// Every `tool_result`.
    pub fn results(&self) -> ChainIter<'a, ResultRecord> {
        self.lists.results.iter(self.slot.results)
    }

    /// Every `client_answer`.
    pub fn answers(&self) -> ChainIter<'a, AnswerRecord> {
        self.lists.answers.iter(self.slot.answers)
    }

    /// Every `approval_decided`.
    pub fn approvals(&self) -> ChainIter<'a, ApprovalRecord> {
        self.lists.approvals.iter(self.slot.approvals)
    }

    /// Where the call's approval stands: denied if any decision denied it.
    pub fn approval(&self) -> ApprovalState {
        if self.slot.denials > 0 {
            ApprovalState::Denied
        } else if self.slot.approvals.is_empty() {
            ApprovalState::Undecided
        } else {
            ApprovalState::Approved
        }
    }

    /// Every `child_attached`.
    pub fn children(&self) -> ChainIter<'a, ChildRecord> {
        self.lists.children.iter(self.slot.children)
    }

    /// The child the call is bound to: the first `child_attached` (the child's start is keyed on
    /// the dispatch id, so it happens once).
    pub fn child(&self) -> Option<&'a SessionId> {
        self.lists.children.first(self.slot.children).map(|c| &c.child)
    }

    /// Every `paired`, voided ones included.
    pub fn pairings(&self) -> ChainIter<'a, PairingRecord> {
        self.lists.pairings.iter(self.slot.pairings)
    }

    /// The `paired`s that still count.
    pub fn counting_pairings(&self) -> impl Iterator<Item = &'a PairingRecord> + 'a {
        self.pairings().filter(|p| p.counts())
    }

    /// Whether an event other than a `paired` resolves the call: a `tool_result`, a
    /// `client_answer`, or a denied approval. These are never voided.
    pub fn is_settled(&self) -> bool {
        !self.slot.results.is_empty() || !self.slot.answers.is_empty() || self.slot.denials > 0
    }

    /// Whether a `paired` of the call still counts.
    pub fn has_counting_pairing(&self) -> bool {
        self.slot.paired > self.slot.voided
    }

    /// Whether the call is resolved: a `tool_result`, a `client_answer`, an `approval_decided`
    /// with `approved: false`, or a `paired` that still counts.
    pub fn is_resolved(&self) -> bool {
        self.is_settled() || self.has_counting_pairing()
    }

    /// What answers the call: the first resolving event in log order that still counts.
    pub fn resolution(&self) -> Option<Resolution<'a>> {
        let candidates = [
            self.results().next().map(Resolution::Result),
            self.answers().next().map(Resolution::ClientAnswer),
            self.approvals().find(|a| !a.approved).map(Resolution::ApprovalDenied),
            self.counting_pairings().next().map(Resolution::Paired),
        ];
        candidates.into_iter().flatten().min_by_key(|r| r.seq())
    }

    /// The reason of the first `paired` that still counts and makes the calls behind it
    /// unrunnable (see [`reason_blocks`]), when `pairings_count`.
    pub fn blocks_by_log(&self, pairings_count: bool) -> Option<PairReason> {
        if !pairings_count {
            return None;
        }
        self.counting_pairings().find(|p| reason_blocks(p.reason)).map(|p| p.reason)
    }
}

/// Whether a pairing of this reason makes the calls behind it unrunnable: its effect is in doubt
/// (`outcome_unknown`, `replay_limit_reached`, `run_stopped`) or never happened (`not_started`).
pub fn reason_blocks(reason: PairReason) -> bool {
    matches!(
        reason,
        PairReason::OutcomeUnknown
            | PairReason::ReplayLimitReached
            | PairReason::NotStarted
            | PairReason::RunStopped
    )
}
