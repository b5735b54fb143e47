//! JSON in and out of the native module: entries, replies, outcomes, step outcomes and
//! transcripts. JavaScript hands JSON text across and parses what comes back, so every value
//! crosses the boundary in FORMAT.md's JSON forms.

use serde::Deserialize;
use serde_json::{Value, json};
use stepjournal::RunStatus;
use stepjournal::StepOutcome;
use stepjournal::Tools;
use stepjournal::codec::{Entry, RawJson, RunOutcome, SessionId};
use stepjournal::recovery::TranscriptItem;
use stepjournal::writer::Reply;

use crate::error::{coded, thrown};
use stepjournal::ErrorCode;

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

/// FORMAT.md's entry JSON (`{"kind": "wake"}`, `{"kind": "new_turn", "message": ...}`, ...),
/// with the seeds' `checkpointId` for `checkpoint`. A member the entry does not carry is refused,
/// never dropped: `{"kind": "retry", "checkpointId": ...}` read without its checkpoint would
/// retry from the last step instead.
pub(crate) fn entry(text: &str) -> napi::Result<Entry> {
    let invalid = |why: String| coded(ErrorCode::InvalidEntry, why);
    let mut given: serde_json::Map<String, Value> = serde_json::from_str(text).map_err(|e| {
        invalid(format!("`{}` is not FORMAT.md's entry JSON: {}", clip(text), clip(&e.to_string())))
    })?;
    if let Some(id) = given.remove("checkpointId") {
        if given.contains_key("checkpoint") {
            return Err(invalid("the entry names both `checkpoint` and `checkpointId`".into()));
        }
        given.insert("checkpoint".into(), id);
    }
    let parsed: Entry = serde_json::from_value(Value::Object(given.clone())).map_err(|e| {
        invalid(format!("`{}` is not FORMAT.md's entry JSON: {}", clip(text), clip(&e.to_string())))
    })?;
    let carried = serde_json::to_value(&parsed).map_err(|e| invalid(e.to_string()))?;
    let dropped = given.iter().find(|(k, v)| !v.is_null() && carried.get(k.as_str()).is_none());
    if let Some((extra, _)) = dropped {
        let kept: Vec<&str> =
            carried.as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
        return Err(invalid(format!(
            "this entry does not carry `{extra}` (read as {carried}, with {})",
            kept.join(", ")
        )));
    }
    Ok(parsed)
}

/// A session id to write under, checked by the library's rule (not empty, at most 1,024 bytes, no
/// control characters): a bad one is `invalid_id`, its message naming the fault, not the id.
pub(crate) fn session(text: &str) -> napi::Result<SessionId> {
    SessionId::new(text).map_err(thrown)
}

/// At most the first 200 characters of `text`, for a message.
pub(crate) fn clip(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// The reply, each call checked against `tools` (kind and policy from the registry).
pub(crate) fn reply(tools: &Tools, text: &str) -> napi::Result<Reply> {
    let given: ReplyIn = serde_json::from_str(text).map_err(|e| {
        coded(ErrorCode::InvalidReply, format!("the reply is not `{{text, calls}}`: {e}"))
    })?;
    let mut calls = Vec::with_capacity(given.calls.len());
    for c in given.calls {
        let args = c.args.unwrap_or_else(|| json!({}));
        let mut call = tools.call(c.call, c.tool, args).map_err(thrown)?;
        if let Some(group) = c.group {
            call = call.in_group(group);
        }
        if c.sequential {
            call = call.in_sequence();
        }
        calls.push(call);
    }
    let mut reply = tools.reply(given.text, calls).map_err(thrown)?;
    if let Some(metadata) = given.metadata {
        let metadata = RawJson::from_raw(&metadata)
            .map_err(|e| coded(ErrorCode::InvalidReply, format!("the reply's metadata: {e}")))?;
        reply = reply.metadata(metadata);
    }
    Ok(reply)
}

/// A run outcome by name: `completed`, `failed`, `stopped`.
pub(crate) fn outcome(name: &str) -> napi::Result<RunOutcome> {
    RunOutcome::from_name(name).ok_or_else(|| {
        coded(
            ErrorCode::InvalidOutcome,
            format!("`{name}` is not a run outcome: give completed, failed or stopped"),
        )
    })
}

/// Transcript items as a JSON array's text.
pub(crate) fn items(items: &[TranscriptItem]) -> String {
    TranscriptItem::list_to_json(items).to_string()
}

/// What driving a step came to, as JSON text ([`StepOutcome::to_json`]).
pub(crate) fn step_outcome(outcome: &StepOutcome) -> String {
    outcome.to_json().to_string()
}

/// A run's status as JSON text ([`RunStatus::to_json`]).
pub(crate) fn status(status: &RunStatus) -> String {
    status.to_json().to_string()
}
