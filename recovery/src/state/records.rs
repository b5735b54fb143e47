//! What the fold keeps of each event: plain records with the sequence number they came from.

use stepjournal_codec::{
    Attempt, Call, CallId, CheckpointId, ContinuationId, DispatchId, Entry, PairReason, RawJson,
    Role, RunId, RunOutcome, Seq, SessionId, StepNo,
};

/// A `run_started`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The run.
    pub run: RunId,
    /// The entry it began through.
    pub entry: Entry,
}

/// A `run_ended`, with whether a later `rewound` voided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEndRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The run.
    pub run: RunId,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error it names, if any.
    pub error: Option<String>,
    /// The `rewound` that voided it, if one did.
    pub voided_by: Option<Seq>,
}

impl RunEndRecord {
    /// Whether it still counts (no `rewound` voided it).
    pub fn counts(&self) -> bool {
        self.voided_by.is_none()
    }
}

/// A `reply_committed`. Its calls are [`crate::SessionState::calls_of`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The step it opens.
    pub step: StepNo,
    /// Its append checkpoint.
    pub checkpoint: CheckpointId,
    /// The reply's text.
    pub text: String,
    /// The first call id the reply names twice, if any (the writer refuses such a reply).
    pub repeated_call: Option<CallId>,
    /// The reply's calls, in order.
    pub(crate) calls: Vec<Call>,
    /// Where the reply's first call is in the state's call table.
    pub(crate) first: usize,
}

impl ReplyRecord {
    /// The reply's calls, in order, as the model gave them.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }
}

/// A `dispatch_minted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The dispatch id.
    pub dispatch: DispatchId,
}

/// An `attempt_started`: one body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The attempt number the event gives.
    pub attempt: Attempt,
}

/// An `output_chunk`, its text borrowed from the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Where it is in the log.
    pub seq: Seq,
    /// The attempt that wrote it.
    pub attempt: Attempt,
    /// The output.
    pub text: &'a str,
}

/// An `output_chunk` as kept: its text is a range of the state's chunk text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkSlot {
    pub(crate) seq: Seq,
    pub(crate) attempt: Attempt,
    pub(crate) text: std::ops::Range<usize>,
}

/// A `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The attempt that produced it.
    pub attempt: Attempt,
    /// The result.
    pub output: RawJson,
    /// Whether the tool reported an error.
    pub is_error: bool,
}

/// A `client_answer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The client's answer.
    pub output: RawJson,
}

/// An `approval_decided`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The decision.
    pub approved: bool,
}

/// A `child_attached`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The child's session.
    pub child: SessionId,
}

/// A `paired`, with whether a later `rewound` voided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// Why the call was paired.
    pub reason: PairReason,
    /// The message the model reads.
    pub message: String,
    /// The output the call's last attempt had committed.
    pub partial: String,
    /// The `rewound` that voided it, if one did.
    pub voided_by: Option<Seq>,
}

impl PairingRecord {
    /// Whether it still counts (no `rewound` voided it).
    pub fn counts(&self) -> bool {
        self.voided_by.is_none()
    }
}

/// A `step_commit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The step.
    pub step: StepNo,
    /// The commit checkpoint.
    pub checkpoint: CheckpointId,
}

/// A `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub text: String,
}

/// A `model_aborted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The partial answer, kept and marked aborted.
    pub partial: String,
    /// The provider's handle to go on with the answer, if the run recorded one.
    pub continuation: Option<ContinuationId>,
}

/// A `rewound`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The checkpoint it names.
    pub to: CheckpointId,
    /// The reply whose append checkpoint `to` is (the latest one before the rewind), or `None`
    /// when `to` names no reply: then nothing was voided.
    pub reply: Option<Seq>,
}

/// A `suspended`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspensionRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The calls the run waits for.
    pub calls: Vec<CallId>,
}

/// The records the events naming calls left, one shared list per event type, each call's
/// chained through its [`CallSlot`](super::call::CallSlot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CallLists {
    pub(crate) dispatches: List<DispatchRecord>,
    pub(crate) attempts: List<AttemptRecord>,
    pub(crate) chunks: List<ChunkSlot>,
    /// The texts of every `output_chunk`, end to end; a chunk keeps its range.
    pub(crate) chunk_text: String,
    pub(crate) results: List<ResultRecord>,
    pub(crate) answers: List<AnswerRecord>,
    pub(crate) approvals: List<ApprovalRecord>,
    pub(crate) children: List<ChildRecord>,
    /// Every `paired` in log order (a `rewound` walks it backwards).
    pub(crate) pairings: List<PairingRecord>,
}

/// No record: the end of a chain.
pub(crate) const NONE: u32 = u32::MAX;

/// The records of one call in a shared list, oldest first, linked through [`Linked::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl Chain {
    pub(crate) fn is_empty(self) -> bool {
        self.head == NONE
    }
}

impl Default for Chain {
    fn default() -> Self {
        Chain { head: NONE, tail: NONE }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Linked<T> {
    pub(crate) item: T,
    pub(crate) next: u32,
}

/// Records of one type for every call, in log order; each call's are chained. One allocation
/// grows for all calls instead of one per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct List<T> {
    pub(crate) items: Vec<Linked<T>>,
}

impl<T> Default for List<T> {
    fn default() -> Self {
        List { items: Vec::new() }
    }
}

impl<T> List<T> {
    /// Appends `item` to `chain`; returns whether it was kept (a list holds fewer than
    /// `u32::MAX` records: one more is dropped).
    pub(crate) fn push(&mut self, chain: &mut Chain, item: T) -> bool {
        let Ok(at) = u32::try_from(self.items.len()) else {
            return false;
        };
        if at == NONE {
            return false;
        }
        self.items.push(Linked { item, next: NONE });
        if let Some(prev) = self.items.get_mut(chain.tail as usize) {
            prev.next = at;
        } else {
            chain.head = at;
        }
        chain.tail = at;
        debug_assert!(
            chain.head <= chain.tail,
            "a chain runs from its oldest record to its newest"
        );
        true
    }

    pub(crate) fn iter(&self, chain: Chain) -> ChainIter<'_, T> {
        ChainIter { list: self, at: chain.head }
    }

    pub(crate) fn last(&self, chain: Chain) -> Option<&T> {
        self.items.get(chain.tail as usize).map(|l| &l.item)
    }

    pub(crate) fn first(&self, chain: Chain) -> Option<&T> {
        self.items.get(chain.head as usize).map(|l| &l.item)
    }
}

/// The records of one call, oldest first.
#[derive(Debug, Clone)]
pub struct ChainIter<'a, T> {
    list: &'a List<T>,
    at: u32,
}

impl<'a, T> Iterator for ChainIter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        let linked = self.list.items.get(self.at as usize)?;
        self.at = linked.next;
        Some(&linked.item)
    }
}
