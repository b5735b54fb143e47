//! JSON in and out of the native module: entries, replies, outcomes, step outcomes and
//! transcripts. JavaScript hands JSON text across and parses what comes back, so every value
//! crosses the boundary in FORMAT.md's JSON forms.

use serde::Deserialize;
use serde_json::{Value, json};
use stepjournal::StepOutcome;
use stepjournal::Tools;
use stepjournal::codec::{Entry, RawJson, RunOutcome};
use stepjournal::recovery::TranscriptItem;
use stepjournal::writer::{Reply, RunStatus};

use crate::error::{Coded, coded};

/// A reply as JavaScript gives it: `{text, calls: [{call, tool, args, group?, sequential?}]}`.
#[derive(Debug, Deserialize)]
struct ReplyIn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    calls: Vec<CallIn>,
    #[serde(default)]
    metadata: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Debug, Deserialize)]
struct CallIn {
    call: String,
    tool: String,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    sequential: bool,
}

/// FORMAT.md's entry JSON (`{"kind": "wake"}`, `{"kind": "new_turn", "message": ...}`, ...).
pub(crate) fn entry(text: &str) -> napi::Result<Entry> {
    serde_json::from_str(text)
        .map_err(|e| coded("invalid_entry", format!("`{text}` is not FORMAT.md's entry JSON: {e}")))
}

/// The reply, each call checked against `tools` (kind and policy from the registry).
pub(crate) fn reply(tools: &Tools, text: &str) -> napi::Result<Reply> {
    let given: ReplyIn = serde_json::from_str(text)
        .map_err(|e| coded("invalid_reply", format!("the reply is not `{{text, calls}}`: {e}")))?;
    let mut calls = Vec::with_capacity(given.calls.len());
    for c in given.calls {
        let args = c.args.unwrap_or_else(|| json!({}));
        let mut call = tools.call(c.call, c.tool, args).map_err(|r| r.thrown())?;
        if let Some(group) = c.group {
            call = call.in_group(group);
        }
        if c.sequential {
            call = call.in_sequence();
        }
        calls.push(call);
    }
    let mut reply = tools.reply(given.text, calls).map_err(|r| r.thrown())?;
    if let Some(metadata) = given.metadata {
        let metadata = RawJson::from_raw(&metadata)
            .map_err(|e| coded("invalid_reply", format!("the reply's metadata: {e}")))?;
        reply = reply.metadata(metadata);
    }
    Ok(reply)
}

/// A run outcome by name: `completed`, `failed`, `stopped`.
pub(crate) fn outcome(name: &str) -> napi::Result<RunOutcome> {
    match name {
        "completed" => Ok(RunOutcome::Completed),
        "failed" => Ok(RunOutcome::Failed),
        "stopped" => Ok(RunOutcome::Stopped),
        "suspended" => Ok(RunOutcome::Suspended),
        other => Err(coded(
            "invalid_outcome",
            format!("`{other}` is not a run outcome: give completed, failed or stopped"),
        )),
    }
}

/// JSON text as a value (a stored value is always JSON; `null` if it is not).
fn value(raw: &RawJson) -> Value {
    raw.to_value().unwrap_or(Value::Null)
}

/// One transcript item as `{type, ...}`.
pub(crate) fn item(item: &TranscriptItem) -> Value {
    match item {
        TranscriptItem::Message { seq, text } => {
            json!({"type": "message", "seq": seq.get(), "text": text})
        }
        TranscriptItem::Reply { seq, step, text, calls } => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "call": c.call.as_str(),
                        "tool": c.tool.as_str(),
                        "args": value(&c.args),
                        "kind": c.kind.as_str(),
                        "replay": c.replay.as_str(),
                        "group": c.group,
                        "sequential": c.sequential,
                    })
                })
                .collect();
            json!({"type": "reply", "seq": seq.get(), "step": step.get(), "text": text, "calls": calls})
        }
        TranscriptItem::ToolResult { seq, call, output, is_error } => json!({
            "type": "tool_result", "seq": seq.get(), "call": call.as_str(),
            "output": value(output), "isError": is_error,
        }),
        TranscriptItem::ClientAnswer { seq, call, output } => json!({
            "type": "client_answer", "seq": seq.get(), "call": call.as_str(), "output": value(output),
        }),
        TranscriptItem::ApprovalDenied { seq, call } => {
            json!({"type": "approval_denied", "seq": seq.get(), "call": call.as_str()})
        }
        TranscriptItem::Paired { seq, call, reason, message, partial } => json!({
            "type": "paired", "seq": seq.get(), "call": call.as_str(), "reason": reason.as_str(),
            "message": message, "partial": partial,
        }),
        TranscriptItem::Aborted { seq, partial } => {
            json!({"type": "aborted", "seq": seq.get(), "partial": partial})
        }
        #[allow(unreachable_patterns)]
        _ => json!({"type": "unknown"}),
    }
}

/// Transcript items as a JSON array's text.
pub(crate) fn items(items: &[TranscriptItem]) -> String {
    Value::Array(items.iter().map(item).collect()).to_string()
}

/// What driving a step came to, as JSON text: `{status: "committed", checkpoint, answers}` or
/// `{status: "suspended", awaiting}`.
pub(crate) fn step_outcome(outcome: &StepOutcome) -> String {
    match outcome {
        StepOutcome::Committed { checkpoint, answers } => json!({
            "status": "committed",
            "checkpoint": checkpoint.as_str(),
            "answers": answers.iter().map(item).collect::<Vec<_>>(),
        }),
        StepOutcome::Suspended { awaiting } => json!({
            "status": "suspended",
            "awaiting": awaiting.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        }),
        #[allow(unreachable_patterns)]
        _ => json!({"status": "unknown"}),
    }
    .to_string()
}

/// A run's status as JSON text: `{state: "open" | "ended" | "fenced" | "broken", ...}`.
pub(crate) fn status(status: &RunStatus) -> String {
    match status {
        RunStatus::Open => json!({"state": "open"}),
        RunStatus::Ended { outcome, error } => {
            json!({"state": "ended", "outcome": outcome.as_str(), "error": error})
        }
        RunStatus::Fenced(by) => json!({"state": "fenced", "by": by.to_string()}),
        RunStatus::Broken { error } => json!({"state": "broken", "error": error}),
        #[allow(unreachable_patterns)]
        _ => json!({"state": "unknown"}),
    }
    .to_string()
}
