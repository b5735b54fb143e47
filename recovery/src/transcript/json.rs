//! The JSON form of a transcript item, as the bindings hand it to a runtime: `{type, seq, ...}`,
//! arguments and outputs as JSON values.

use serde_json::{Value, json};
use stepjournal_codec::RawJson;

use super::TranscriptItem;

/// JSON text as a value (a stored value is always JSON; `null` if it is not).
fn value(raw: &RawJson) -> Value {
    raw.to_value().unwrap_or(Value::Null)
}

impl TranscriptItem {
    /// The item as `{type, seq, ...}`: `message` (`text`), `reply` (`step`, `text`, `calls`,
    /// each with `call`, `tool`, `args`, `kind`, `replay`, `group`, `sequential`),
    /// `tool_result` (`call`, `output`, `isError`), `client_answer` (`call`, `output`),
    /// `approval_denied` (`call`), `paired` (`call`, `reason`, `message`, `partial`), `aborted`
    /// (`partial`, and `continuation` when the run recorded one), `trimmed` (`turns`).
    pub fn to_json(&self) -> Value {
        match self {
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
                json!({
                    "type": "reply", "seq": seq.get(), "step": step.get(), "text": text,
                    "calls": calls,
                })
            }
            TranscriptItem::ToolResult { seq, call, output, is_error } => json!({
                "type": "tool_result", "seq": seq.get(), "call": call.as_str(),
                "output": value(output), "isError": is_error,
            }),
            TranscriptItem::ClientAnswer { seq, call, output } => json!({
                "type": "client_answer", "seq": seq.get(), "call": call.as_str(),
                "output": value(output),
            }),
            TranscriptItem::ApprovalDenied { seq, call } => {
                json!({"type": "approval_denied", "seq": seq.get(), "call": call.as_str()})
            }
            TranscriptItem::Paired { seq, call, reason, message, partial } => json!({
                "type": "paired", "seq": seq.get(), "call": call.as_str(),
                "reason": reason.as_str(), "message": message, "partial": partial,
            }),
            TranscriptItem::Trimmed { seq, turns } => {
                json!({"type": "trimmed", "seq": seq.get(), "turns": turns})
            }
            TranscriptItem::Aborted { seq, partial, continuation } => {
                let mut item = json!({"type": "aborted", "seq": seq.get(), "partial": partial});
                if let (Some(c), Some(map)) = (continuation, item.as_object_mut()) {
                    map.insert("continuation".into(), Value::String(c.as_str().to_owned()));
                }
                item
            }
        }
    }

    /// Items as one JSON array.
    pub fn list_to_json(items: &[TranscriptItem]) -> Value {
        Value::Array(items.iter().map(TranscriptItem::to_json).collect())
    }
}
