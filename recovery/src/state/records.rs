//! What the fold keeps of each event: plain records with the sequence number they came from.

use stepjournal_codec::{
    Attempt, CallId, CheckpointId, DispatchId, Entry, PairReason, RawJson, Role, RunId, RunOutcome,
    Seq, SessionId, StepNo,
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
    /// Range of the reply's calls in the state's call table.
    pub(crate) calls: std::ops::Range<usize>,
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

/// An `output_chunk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRecord {
    /// Where it is in the log.
    pub seq: Seq,
    /// The attempt that wrote it.
    pub attempt: Attempt,
    /// The output.
    pub text: String,
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
