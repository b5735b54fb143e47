//! The typed events of a session's log (FORMAT.md's table), one struct per type.

use serde::{Deserialize, Serialize};

use crate::{
    Attempt, Call, CallId, CheckpointId, ContinuationId, DispatchId, Entry, Operator, RawJson,
    RunId, RunOutcome, Seq, SessionId, Snapshot, StepNo,
};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user.
    User,
}

/// Why a call was answered without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairReason {
    /// A body may have run; its effect is unknown.
    OutcomeUnknown,
    /// A safe tool already ran `max_bodies` times.
    ReplayLimitReached,
    /// No body ran.
    NotStarted,
    /// The run was stopped before the tool finished.
    RunStopped,
}

impl PairReason {
    /// The reason's name in the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            PairReason::OutcomeUnknown => "outcome_unknown",
            PairReason::ReplayLimitReached => "replay_limit_reached",
            PairReason::NotStarted => "not_started",
            PairReason::RunStopped => "run_stopped",
        }
    }

    /// The message the model reads for this reason, exactly as FORMAT.md gives it.
    pub fn model_message(self) -> &'static str {
        match self {
            PairReason::OutcomeUnknown => {
                "The tool may have run. Check whether it took effect before repeating it."
            }
            PairReason::ReplayLimitReached => {
                "The tool already ran the most times allowed. It will not be run again automatically."
            }
            PairReason::NotStarted => "The tool did not run.",
            PairReason::RunStopped => "The run was stopped before the tool finished.",
        }
    }
}

/// `run_started`: a run began through `entry`; it fences every writer of earlier runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStarted {
    /// The new run.
    pub run: RunId,
    /// How it entered.
    pub entry: Entry,
    /// Who began it from outside the runtime, and why (an operator's answer or approval at the
    /// command line); none by default. Format version 4 (an older record cannot carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Operator>,
}

/// `message`: a message that opens or redirects a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub text: String,
}

/// `reply_committed`: the model's reply with every call, saved before any body starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyCommitted {
    /// The step the reply opens.
    pub step: StepNo,
    /// The append checkpoint.
    pub checkpoint: CheckpointId,
    /// The reply's text (default `""`).
    #[serde(default)]
    pub text: String,
    /// Every call of the reply, in order.
    pub calls: Vec<Call>,
    /// The model provider's metadata for the reply, opaque (model, usage, reasoning blocks);
    /// none by default. Format version 2 (a version-1 record cannot carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RawJson>,
}

/// `dispatch_minted`: the call's dispatch id, the same on every attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchMinted {
    /// The call.
    pub call: CallId,
    /// Its dispatch id.
    pub dispatch: DispatchId,
}

/// `attempt_started`: a body is about to start; written before the body runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptStarted {
    /// The call.
    pub call: CallId,
    /// The attempt: 1, 2, 3, ...
    pub attempt: Attempt,
}

/// `output_chunk`: output the body committed while running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// The call.
    pub call: CallId,
    /// The attempt that produced it.
    pub attempt: Attempt,
    /// The output.
    pub text: String,
}

/// `tool_result`: the body's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call.
    pub call: CallId,
    /// The attempt that produced it.
    pub attempt: Attempt,
    /// The result, as JSON text.
    pub output: RawJson,
    /// Whether the tool reported an error (default false).
    #[serde(default)]
    pub is_error: bool,
    /// The tool's metadata for the result, opaque; none by default. Format version 2 (a
    /// version-1 record cannot carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RawJson>,
}

/// `approval_decided`: the answer to an approval-gated call; `false` resolves the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecided {
    /// The call.
    pub call: CallId,
    /// The decision.
    pub approved: bool,
}

/// `client_answer`: the client's answer to a client-executed call; resolves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientAnswer {
    /// The call.
    pub call: CallId,
    /// The answer, as JSON text.
    pub output: RawJson,
}

/// `child_attached`: a remote sub-agent was started for the call under its dispatch id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildAttached {
    /// The call.
    pub call: CallId,
    /// The child's session.
    pub child: SessionId,
}

/// `paired`: the call is answered without a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paired {
    /// The call.
    pub call: CallId,
    /// Why.
    pub reason: PairReason,
    /// The message the model reads (default `""`).
    #[serde(default)]
    pub message: String,
    /// The output the call's last attempt committed (default `""`).
    #[serde(default)]
    pub partial: String,
    /// The id of the rule that decided the pairing (`recovery.outcome_unknown`, `order.group`,
    /// ...), so the why survives the wake; none by default. Format version 2 (a version-1 record
    /// leaves it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// `suspended`: the run suspended waiting for client or approval answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspended {
    /// The calls it waits for.
    pub calls: Vec<CallId>,
}

/// `step_commit`: the step is complete (the commit checkpoint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCommit {
    /// The step.
    pub step: StepNo,
    /// The commit checkpoint.
    pub checkpoint: CheckpointId,
}

/// `run_ended`: the run ended with an outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnded {
    /// The run.
    pub run: RunId,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error that ended it, if any (default none).
    #[serde(default)]
    pub error: Option<String>,
    /// Who ended it from outside the runtime, and why (an operator's stop at the command line,
    /// which begins no run); none by default. Format version 4 (an older record cannot carry
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Operator>,
}

/// `rewound`: every `paired` and `run_ended` between the reply whose checkpoint is `to` and this
/// event no longer counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewound {
    /// The append checkpoint rewound to.
    pub to: CheckpointId,
}

/// `model_aborted`: a model request was cut off; its partial answer is kept, marked aborted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelAborted {
    /// The partial answer.
    pub partial: String,
    /// The provider's handle to go on with the answer (a background job id), so a runtime
    /// resumes it rather than asks again; none by default. Format version 4 (an older record
    /// cannot carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<ContinuationId>,
}

/// `forked_from` (format version 4): the session was forked from another session at a
/// committed step. Only ever the first event of a session (seq 0), followed by the `snapshot` of
/// the original's state at that step commit: a fold of the whole log starts from that snapshot
/// (the state before it is the original's, not this log's). Changes no plan by itself.
///
/// Its members are not named `session` and `seq`: an export line adds those for the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    /// The original session.
    pub original: SessionId,
    /// Where the fork point is in the original's log: the seq of its `step_commit`.
    pub commit_seq: Seq,
    /// The checkpoint of that `step_commit`.
    pub checkpoint: CheckpointId,
}

/// `trimmed` (format version 5): the session's events before `before` were dropped from its
/// log, in the same atomic step that appended this event. `before` is the seq of a `snapshot`
/// the log keeps: the log now starts at it (or, on the file backend, which drops whole batches,
/// a few events before it, in the batch that holds it), and a fold of the whole log starts from
/// the first intact snapshot it holds. Changes no plan by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trimmed {
    /// The first seq kept: a `snapshot` of the session.
    pub before: Seq,
    /// How many turns (runs begun by a new user message) the dropped part held, counted over
    /// every trim of the session so far: what a transcript says it leaves out.
    pub turns: u64,
}

macro_rules! events {
    ($($variant:ident($ty:ty) = $code:literal, $name:literal;)*) => {
        /// One event of a session's log.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Event {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant($ty),
            )*
        }

        /// The type of an event, with its stable code in the binary form.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum EventKind {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant = $code,
            )*
        }

        impl EventKind {
            /// Every kind, in code order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant),*];

            /// How many kinds there are: the length of [`EventKind::ALL`], for tables with a
            /// slot per kind (see [`EventKind::index`]).
            pub const COUNT: usize = Self::ALL.len();

            /// The kind's place in [`EventKind::ALL`], below [`EventKind::COUNT`]: its code
            /// less one (the codes are 1, 2, ... in order).
            pub fn index(self) -> usize {
                usize::from(self.code()).saturating_sub(1)
            }

            /// The kind's `type` in the JSON form.
            pub fn name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }

            /// The kind with this `type` name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }

            /// The kind's code in the binary form.
            pub fn code(self) -> u8 {
                self as u8
            }

            /// The kind with this binary code.
            pub fn from_code(code: u8) -> Option<Self> {
                match code {
                    $($code => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }

        impl Event {
            /// The event's type.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(Event::$variant(_) => EventKind::$variant,)*
                }
            }
        }

        $(
            impl From<$ty> for Event {
                fn from(e: $ty) -> Self {
                    Event::$variant(e)
                }
            }
        )*

        /// Hands the event's payload struct to `encoder`, whatever its type.
        pub(crate) fn encode_payload<E: PayloadEncoder>(event: &Event, encoder: E) -> E::Output {
            match event {
                $(Event::$variant(p) => encoder.encode(p),)*
            }
        }

        /// Decodes the payload struct of `kind` through `decoder` and wraps it as an event.
        pub(crate) fn decode_payload<D: PayloadDecoder>(
            kind: EventKind,
            decoder: D,
        ) -> Result<Event, D::Error> {
            match kind {
                $(EventKind::$variant => decoder.decode::<$ty>().map(Event::$variant),)*
            }
        }
    };
}

events! {
    RunStarted(RunStarted) = 1, "run_started";
    Message(Message) = 2, "message";
    ReplyCommitted(ReplyCommitted) = 3, "reply_committed";
    DispatchMinted(DispatchMinted) = 4, "dispatch_minted";
    AttemptStarted(AttemptStarted) = 5, "attempt_started";
    OutputChunk(OutputChunk) = 6, "output_chunk";
    ToolResult(ToolResult) = 7, "tool_result";
    ApprovalDecided(ApprovalDecided) = 8, "approval_decided";
    ClientAnswer(ClientAnswer) = 9, "client_answer";
    ChildAttached(ChildAttached) = 10, "child_attached";
    Paired(Paired) = 11, "paired";
    Suspended(Suspended) = 12, "suspended";
    StepCommit(StepCommit) = 13, "step_commit";
    RunEnded(RunEnded) = 14, "run_ended";
    Rewound(Rewound) = 15, "rewound";
    ModelAborted(ModelAborted) = 16, "model_aborted";
    // Boxed: the largest payload, and the rarest, would otherwise size every event.
    Snapshot(Box<Snapshot>) = 17, "snapshot";
    ForkedFrom(ForkedFrom) = 18, "forked_from";
    Trimmed(Trimmed) = 19, "trimmed";
}

impl From<Snapshot> for Event {
    fn from(e: Snapshot) -> Self {
        Event::Snapshot(Box::new(e))
    }
}

/// Something that can take any payload struct (postcard, JSON).
pub(crate) trait PayloadEncoder {
    type Output;
    fn encode<T: Serialize>(self, payload: &T) -> Self::Output;
}

/// Something that can produce any payload struct (a postcard slice, a JSON text).
pub(crate) trait PayloadDecoder {
    type Error;
    fn decode<T: serde::de::DeserializeOwned>(self) -> Result<T, Self::Error>;
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_slot_below_count_in_code_order() {
        for (i, kind) in EventKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind}");
            assert_eq!(EventKind::from_code(kind.code()), Some(*kind));
        }
        assert!(EventKind::ALL.iter().all(|k| k.index() < EventKind::COUNT));
    }
}
