//! What the model is shown after recovery, in order.

mod json;

use stepjournal_codec::{Call, CallId, ContinuationId, PairReason, RawJson, Seq, StepNo};

use crate::SessionState;
use crate::state::ReplyRecord;
use crate::state::Resolution;

/// One item of what the model is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranscriptItem {
    /// A user message.
    Message {
        /// Where it is in the log.
        seq: Seq,
        /// Its text.
        text: String,
    },
    /// A model reply with its calls.
    Reply {
        /// Where it is in the log.
        seq: Seq,
        /// The step it opened.
        step: StepNo,
        /// Its text.
        text: String,
        /// Its calls, in order.
        calls: Vec<Call>,
    },
    /// A call's result.
    ToolResult {
        /// Where the result is in the log.
        seq: Seq,
        /// The call.
        call: CallId,
        /// The result.
        output: RawJson,
        /// Whether the tool reported an error.
        is_error: bool,
    },
    /// A client-executed call's answer.
    ClientAnswer {
        /// Where the answer is in the log.
        seq: Seq,
        /// The call.
        call: CallId,
        /// The answer.
        output: RawJson,
    },
    /// An approval-gated call whose approval was denied.
    ApprovalDenied {
        /// Where the decision is in the log.
        seq: Seq,
        /// The call.
        call: CallId,
    },
    /// A call answered without a result, by a pairing that still counts.
    Paired {
        /// Where the pairing is in the log.
        seq: Seq,
        /// The call.
        call: CallId,
        /// Why.
        reason: PairReason,
        /// The message the model reads.
        message: String,
        /// The output committed before the call was cut off.
        partial: String,
    },
    /// The session's earlier history was trimmed (`trimmed`): `turns` turns before the first
    /// item shown are not in the log any more. Shown first, once.
    Trimmed {
        /// Where the (last) `trimmed` event is in the log.
        seq: Seq,
        /// How many turns were dropped, over every trim of the session.
        turns: u64,
    },
    /// A model answer that was cut off: kept, and marked aborted.
    Aborted {
        /// Where it is in the log.
        seq: Seq,
        /// The partial answer.
        partial: String,
        /// The provider's handle to go on with the answer (`model_aborted.continuation`), if
        /// the run recorded one: a runtime recovering the session resumes the answer through
        /// it rather than asks the model again.
        continuation: Option<ContinuationId>,
    },
}

impl TranscriptItem {
    /// Where the item's event is in the log (for a reply, the `reply_committed`; for an
    /// answer, the event that answered).
    pub fn seq(&self) -> Seq {
        match self {
            TranscriptItem::Message { seq, .. }
            | TranscriptItem::Reply { seq, .. }
            | TranscriptItem::ToolResult { seq, .. }
            | TranscriptItem::ClientAnswer { seq, .. }
            | TranscriptItem::ApprovalDenied { seq, .. }
            | TranscriptItem::Paired { seq, .. }
            | TranscriptItem::Trimmed { seq, .. }
            | TranscriptItem::Aborted { seq, .. } => *seq,
        }
    }
}

/// The answers the model is shown for `reply`'s calls, in reply order: each call's result,
/// client answer, denial or counting pairing (a call with nothing that resolves it shows
/// nothing). The items [`transcript`] shows after the reply.
pub fn answers_of(state: &SessionState, reply: &ReplyRecord) -> Vec<TranscriptItem> {
    let mut items = Vec::new();
    for record in state.calls_of(reply) {
        let call = record.id().clone();
        match record.resolution() {
            Some(Resolution::Result(r)) => items.push(TranscriptItem::ToolResult {
                seq: r.seq,
                call,
                output: r.output.clone(),
                is_error: r.is_error,
            }),
            Some(Resolution::ClientAnswer(a)) => items.push(TranscriptItem::ClientAnswer {
                seq: a.seq,
                call,
                output: a.output.clone(),
            }),
            Some(Resolution::ApprovalDenied(a)) => {
                items.push(TranscriptItem::ApprovalDenied { seq: a.seq, call })
            }
            Some(Resolution::Paired(p)) => items.push(TranscriptItem::Paired {
                seq: p.seq,
                call,
                reason: p.reason,
                message: p.message.clone(),
                partial: p.partial.clone(),
            }),
            None => {}
        }
    }
    items
}

/// What the model is shown, in log order: messages, replies (each followed by its calls' results
/// or pairings, in reply order), and aborted model answers marked aborted. Voided pairings are
/// dropped; a call with nothing that resolves it yet shows nothing. A state folded from a
/// snapshot (a fork's, whole or not) shows what came after the snapshot: the snapshot's last
/// reply, kept without its text and calls, is not shown.
///
/// A trimmed session's transcript starts with a [`TranscriptItem::Trimmed`] saying how many
/// turns the log no longer holds (when the fold saw its `trimmed`: a fold of the log as the
/// store keeps it does).
pub fn transcript(state: &SessionState) -> Vec<TranscriptItem> {
    let mut items = Vec::new();
    if let Some(t) = state.trimmed() {
        items.push(TranscriptItem::Trimmed { seq: t.seq, turns: t.turns });
    }
    let mut messages = state.messages().iter().peekable();
    let base = state.snapshot_seq();
    let mut replies = state.replies().iter().filter(|r| base.is_none_or(|b| r.seq > b)).peekable();
    let mut aborts = state.aborts().iter().peekable();
    loop {
        let next_message = messages.peek().map(|m| m.seq);
        let next_reply = replies.peek().map(|r| r.seq);
        let next_abort = aborts.peek().map(|a| a.seq);
        let Some(first) = [next_message, next_reply, next_abort].into_iter().flatten().min() else {
            break;
        };
        if next_message == Some(first) {
            if let Some(m) = messages.next() {
                items.push(TranscriptItem::Message { seq: m.seq, text: m.text.clone() });
            }
        } else if next_reply == Some(first) {
            if let Some(reply) = replies.next() {
                let calls = state.calls_of(reply);
                items.push(TranscriptItem::Reply {
                    seq: reply.seq,
                    step: reply.step,
                    text: reply.text.clone(),
                    calls: calls.iter().map(|c| c.call().clone()).collect(),
                });
                items.extend(answers_of(state, reply));
            }
        } else if let Some(a) = aborts.next() {
            items.push(TranscriptItem::Aborted {
                seq: a.seq,
                partial: a.partial.clone(),
                continuation: a.continuation.clone(),
            });
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{Event, ModelAborted, PairReason, RunOutcome};

    use super::*;
    use crate::fold;
    use crate::testlog::*;

    #[test]
    fn transcript_shows_messages_replies_and_answers_in_reply_order_without_voided_pairings() {
        let log = Log::new()
            .push(Event::ModelAborted(ModelAborted {
                partial: "I will".into(),
                continuation: None,
            }))
            .reply(1, "cp-1", vec![call("c1", "safe_tool").safe(), call("c2", "unsafe_tool")])
            .bodies("c1", 1)
            .bodies("c2", 1)
            .paired("c2", PairReason::OutcomeUnknown)
            .paired("c1", PairReason::OutcomeUnknown)
            .ended("r1", RunOutcome::Failed)
            .run("r2", retry())
            .rewound("cp-1")
            .paired("c2", PairReason::OutcomeUnknown)
            .attempt("c1", 2)
            .result("c1", 2);
        let items = transcript(&fold(&log.events));
        let shape: Vec<String> = items
            .iter()
            .map(|i| match i {
                TranscriptItem::Message { text, .. } => format!("message {text}"),
                TranscriptItem::Aborted { partial, .. } => format!("aborted {partial}"),
                TranscriptItem::Reply { calls, .. } => format!("reply {}", calls.len()),
                TranscriptItem::ToolResult { call, .. } => format!("result {call}"),
                TranscriptItem::Paired { call, seq, .. } => format!("paired {call} {seq}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            shape,
            ["message hello", "aborted I will", "reply 2", "result c1", "paired c2 13"]
        );
    }

    #[test]
    fn an_aborted_answer_carries_its_continuation_so_a_runtime_resumes_it() {
        let handle = ContinuationId::new("resp_bg_7").unwrap();
        let log = Log::new()
            .push(Event::ModelAborted(ModelAborted {
                partial: "Half".into(),
                continuation: Some(handle.clone()),
            }))
            .push(Event::ModelAborted(ModelAborted {
                partial: "Other".into(),
                continuation: None,
            }));
        let items = transcript(&fold(&log.events));
        let aborted: Vec<(&str, Option<&ContinuationId>)> = items
            .iter()
            .filter_map(|i| match i {
                TranscriptItem::Aborted { partial, continuation, .. } => {
                    Some((partial.as_str(), continuation.as_ref()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(aborted, [("Half", Some(&handle)), ("Other", None)]);
        let json = TranscriptItem::list_to_json(&items);
        let aborted: Vec<&serde_json::Value> =
            json.as_array().unwrap().iter().filter(|i| i["type"] == "aborted").collect();
        assert_eq!(aborted[0]["continuation"], "resp_bg_7");
        assert!(aborted[1].get("continuation").is_none(), "absent, not null: {}", aborted[1]);
    }
}
