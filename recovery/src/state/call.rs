//! Everything the log says about one call of a reply.

use stepjournal_codec::{
    Attempt, Call, CallId, CallKind, DispatchId, PairReason, Seq, SessionId, StepNo,
};

use super::records::{
    AnswerRecord, ApprovalRecord, AttemptRecord, ChildRecord, ChunkRecord, DispatchRecord,
    PairingRecord, ResultRecord,
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

/// One call of a reply and every event that named it after the reply.
///
/// An event names a call by id only; it belongs to the latest reply, at or before the event, that
/// holds a call of that id (ids are unique within a reply, not across replies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    pub(crate) call: Call,
    pub(crate) step: StepNo,
    pub(crate) reply_seq: Seq,
    pub(crate) dispatches: Vec<DispatchRecord>,
    /// Every `attempt_started`, in log order: the call's bodies, whatever was rewound.
    pub(crate) attempts: Vec<AttemptRecord>,
    pub(crate) chunks: Vec<ChunkRecord>,
    pub(crate) results: Vec<ResultRecord>,
    pub(crate) answers: Vec<AnswerRecord>,
    pub(crate) approvals: Vec<ApprovalRecord>,
    pub(crate) children: Vec<ChildRecord>,
    pub(crate) pairings: Vec<PairingRecord>,
}

impl CallRecord {
    pub(crate) fn new(call: Call, step: StepNo, reply_seq: Seq) -> Self {
        CallRecord {
            call,
            step,
            reply_seq,
            dispatches: Vec::new(),
            attempts: Vec::new(),
            chunks: Vec::new(),
            results: Vec::new(),
            answers: Vec::new(),
            approvals: Vec::new(),
            children: Vec::new(),
            pairings: Vec::new(),
        }
    }

    /// The call as the reply gave it (tool, arguments, kind, saved policy, group, sequential).
    pub fn call(&self) -> &Call {
        &self.call
    }

    /// The call's id.
    pub fn id(&self) -> &CallId {
        &self.call.call
    }

    /// The call's kind.
    pub fn kind(&self) -> CallKind {
        self.call.kind
    }

    /// The step of the reply that holds the call.
    pub fn step(&self) -> StepNo {
        self.step
    }

    /// Where the reply that holds the call is in the log.
    pub fn reply_seq(&self) -> Seq {
        self.reply_seq
    }

    /// The call's dispatch id: the first one minted (it is minted once; see [`crate::verify`]).
    pub fn dispatch(&self) -> Option<&DispatchId> {
        self.dispatches.first().map(|d| &d.dispatch)
    }

    /// Every `dispatch_minted` for the call.
    pub fn dispatches(&self) -> &[DispatchRecord] {
        &self.dispatches
    }

    /// How many bodies the call has started: every `attempt_started`, whatever was rewound.
    pub fn bodies(&self) -> u32 {
        u32::try_from(self.attempts.len()).unwrap_or(u32::MAX)
    }

    /// Every `attempt_started`, in log order.
    pub fn attempts(&self) -> &[AttemptRecord] {
        &self.attempts
    }

    /// The attempt number of the last `attempt_started`, if any.
    pub fn last_attempt(&self) -> Option<Attempt> {
        self.attempts.last().map(|a| a.attempt)
    }

    /// Every `output_chunk`, in log order.
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// The `output_chunk`s of one attempt, in log order.
    pub fn chunks_of(&self, attempt: Attempt) -> impl Iterator<Item = &ChunkRecord> + '_ {
        self.chunks.iter().filter(move |c| c.attempt == attempt)
    }

    /// The output the call's last started attempt committed: the texts of its `output_chunk`s
    /// joined in log order; `""` where there are none (or no body started).
    pub fn partial(&self) -> String {
        match self.last_attempt() {
            Some(last) => self.chunks_of(last).map(|c| c.text.as_str()).collect(),
            None => String::new(),
        }
    }

    /// Every `tool_result`.
    pub fn results(&self) -> &[ResultRecord] {
        &self.results
    }

    /// Every `client_answer`.
    pub fn answers(&self) -> &[AnswerRecord] {
        &self.answers
    }

    /// Every `approval_decided`.
    pub fn approvals(&self) -> &[ApprovalRecord] {
        &self.approvals
    }

    /// Where the call's approval stands: denied if any decision denied it.
    pub fn approval(&self) -> ApprovalState {
        if self.approvals.iter().any(|a| !a.approved) {
            ApprovalState::Denied
        } else if self.approvals.is_empty() {
            ApprovalState::Undecided
        } else {
            ApprovalState::Approved
        }
    }

    /// Every `child_attached`.
    pub fn children(&self) -> &[ChildRecord] {
        &self.children
    }

    /// The child the call is bound to: the first `child_attached` (the child's start is keyed on
    /// the dispatch id, so it happens once).
    pub fn child(&self) -> Option<&SessionId> {
        self.children.first().map(|c| &c.child)
    }

    /// Every `paired`, voided ones included.
    pub fn pairings(&self) -> &[PairingRecord] {
        &self.pairings
    }

    /// The `paired`s that still count.
    pub fn counting_pairings(&self) -> impl Iterator<Item = &PairingRecord> + '_ {
        self.pairings.iter().filter(|p| p.counts())
    }

    /// Whether an event other than a `paired` resolves the call: a `tool_result`, a
    /// `client_answer`, or a denied approval. These are never voided.
    pub fn is_settled(&self) -> bool {
        !self.results.is_empty()
            || !self.answers.is_empty()
            || self.approval() == ApprovalState::Denied
    }

    /// Whether the call is resolved: a `tool_result`, a `client_answer`, an `approval_decided`
    /// with `approved: false`, or a `paired` that still counts.
    pub fn is_resolved(&self) -> bool {
        self.is_settled() || self.pairings.iter().any(|p| p.counts())
    }

    /// What answers the call: the first resolving event in log order that still counts.
    pub fn resolution(&self) -> Option<Resolution<'_>> {
        let candidates = [
            self.results.first().map(Resolution::Result),
            self.answers.first().map(Resolution::ClientAnswer),
            self.approvals.iter().find(|a| !a.approved).map(Resolution::ApprovalDenied),
            self.counting_pairings().next().map(Resolution::Paired),
        ];
        candidates.into_iter().flatten().min_by_key(|r| r.seq())
    }

    /// Whether the call blocks the calls behind it under the order rules, counting only what
    /// the log holds: a denied approval, or a `paired` that still counts whose reason says the
    /// effect is in doubt or never happened.
    pub fn blocks_by_log(&self, pairings_count: bool) -> Option<PairReason> {
        if pairings_count
            && let Some(p) = self.counting_pairings().find(|p| reason_blocks(p.reason))
        {
            return Some(p.reason);
        }
        None
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
