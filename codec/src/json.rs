//! The JSON form of events, exactly FORMAT.md's: `{"type": ..., members...}`.
//!
//! Reading ignores unknown members (including `at`, `session` and `seq`) and gives optional
//! members FORMAT.md's defaults; an unknown `type` or a missing required member is an error naming
//! the event's position. Printing gives the same form back, `type` first, on one line.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{PayloadDecoder, PayloadEncoder, decode_payload, encode_payload};
use crate::{Event, EventKind, JsonError, Record, Seq, SessionId, UnixMillis};

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    ty: Option<std::borrow::Cow<'a, str>>,
}

struct FromText<'a>(&'a str);

impl PayloadDecoder for FromText<'_> {
    type Error = serde_json::Error;
    fn decode<T: serde::de::DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0)
    }
}

struct ToText;

impl PayloadEncoder for ToText {
    type Output = Result<String, serde_json::Error>;
    fn encode<T: serde::Serialize>(self, payload: &T) -> Self::Output {
        serde_json::to_string(payload)
    }
}

/// The name of a JSON value's type ("an object", "a string", ...), for error messages.
pub fn type_name(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads one event from its JSON text.
pub fn parse_event(text: &str) -> Result<Event, JsonError> {
    let head: Head<'_> = serde_json::from_str(text)
        .map_err(|source| JsonError::NotJson { position: None, source })?;
    let ty = head.ty.ok_or(JsonError::MissingType { position: None })?;
    let kind = EventKind::from_name(&ty)
        .ok_or_else(|| JsonError::UnknownType { position: None, ty: ty.clone().into_owned() })?;
    decode_payload(kind, FromText(text)).map_err(|source| JsonError::Invalid {
        position: None,
        ty: kind.name(),
        source,
    })
}

/// Reads a scenario's `log`: each element an event; errors name the element's index.
pub fn parse_log(events: &[Box<RawValue>]) -> Result<Vec<Event>, JsonError> {
    events
        .iter()
        .enumerate()
        .map(|(i, raw)| parse_event(raw.get()).map_err(|e| e.at_position(i)))
        .collect()
}

/// Prints an event in its JSON form, on one line, `type` first.
pub fn event_to_json(event: &Event) -> String {
    let mut out = String::with_capacity(64);
    write_event(event, &mut out);
    out.push('}');
    out
}

/// Writes `{"type":"...",members...` without the closing brace, so callers may add members.
fn write_event(event: &Event, out: &mut String) {
    // Every payload struct serializes to a non-empty JSON object of plain members and RawJson
    // text that was checked on the way in, so serde_json cannot fail here; an error would mean a
    // bug in a Serialize impl of this crate, printed rather than hidden.
    let body = encode_payload(event, ToText)
        .unwrap_or_else(|e| format!("{{\"error\":{}}}", serde_json::Value::String(e.to_string())));
    out.push_str("{\"type\":\"");
    out.push_str(event.kind().name());
    out.push('"');
    // body is `{...}`: splice its members after `type`.
    let inner = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or("");
    if !inner.is_empty() {
        out.push(',');
        out.push_str(inner);
    }
}

/// Prints a stored record as one export line: the event's JSON form plus `session`, `seq` and
/// `at`.
pub fn record_to_export_line(record: &Record) -> String {
    let mut out = String::with_capacity(96);
    write_event(&record.event, &mut out);
    out.push_str(",\"session\":");
    out.push_str(&serde_json::Value::String(record.session.as_str().to_owned()).to_string());
    out.push_str(",\"seq\":");
    out.push_str(&record.seq.get().to_string());
    out.push_str(",\"at\":");
    out.push_str(&record.at.get().to_string());
    out.push('}');
    out
}

#[derive(Deserialize)]
struct ExportPlace {
    session: Option<SessionId>,
    seq: Option<u64>,
    at: Option<u64>,
}

/// Reads one export line back into a record.
pub fn record_from_export_line(text: &str) -> Result<Record, JsonError> {
    let event = parse_event(text)?;
    let place: ExportPlace = serde_json::from_str(text).map_err(|e| JsonError::ExportLine {
        position: None,
        reason: format!("`session`, `seq` or `at` has the wrong shape: {e}"),
    })?;
    let missing = |m: &str| JsonError::ExportLine {
        position: None,
        reason: format!("the line has no `{m}` member"),
    };
    Ok(Record {
        session: place.session.ok_or_else(|| missing("session"))?,
        seq: Seq(place.seq.ok_or_else(|| missing("seq"))?),
        at: UnixMillis(place.at.ok_or_else(|| missing("at"))?),
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallKind, PairReason, Replay};

    #[test]
    fn optional_members_take_their_defaults() {
        let e = parse_event(
            r#"{"type":"reply_committed","step":1,"checkpoint":"cp","calls":[{"call":"c1","tool":"t"}]}"#,
        )
        .unwrap();
        let Event::ReplyCommitted(r) = e else { panic!("wrong type") };
        assert_eq!(r.text, "");
        let c = &r.calls[0];
        assert_eq!(c.args.get(), "{}");
        assert_eq!(c.kind, CallKind::Tool);
        assert_eq!(c.replay, Replay::Unsafe);
        assert_eq!(c.group, None);
        assert!(!c.sequential);
        let e = parse_event(r#"{"type":"paired","call":"c1","reason":"not_started"}"#).unwrap();
        let Event::Paired(p) = e else { panic!("wrong type") };
        assert_eq!(p.reason, PairReason::NotStarted);
        assert_eq!((p.message.as_str(), p.partial.as_str()), ("", ""));
    }

    #[test]
    fn unknown_members_are_ignored_and_at_is_not_part_of_the_event() {
        let a = parse_event(r#"{"type":"message","role":"user","text":"hi","at":5,"x":[1]}"#);
        let b = parse_event(r#"{"type":"message","role":"user","text":"hi"}"#);
        assert_eq!(a.unwrap(), b.unwrap());
    }

    #[test]
    fn unknown_type_and_missing_member_name_the_position() {
        let log: Vec<Box<RawValue>> = serde_json::from_str(
            r#"[{"type":"message","role":"user","text":"a"},{"type":"teleported"}]"#,
        )
        .unwrap();
        let err = parse_log(&log).unwrap_err().to_string();
        assert!(err.contains("event 1") && err.contains("teleported"), "{err}");
        let log: Vec<Box<RawValue>> =
            serde_json::from_str(r#"[{"type":"run_started","entry":{"kind":"wake"}}]"#).unwrap();
        let err = parse_log(&log).unwrap_err().to_string();
        assert!(err.contains("event 0") && err.contains("`run`"), "{err}");
    }

    #[test]
    fn printing_gives_the_form_back() {
        let text = r#"{"type":"reply_committed","step":2,"checkpoint":"cp-2","text":"ok","calls":[{"call":"c1","tool":"t","args":{"b":1,"a":[2.50]},"kind":"remote_agent","replay":"safe","group":"g","sequential":true}]}"#;
        assert_eq!(event_to_json(&parse_event(text).unwrap()), text);
        let text = r#"{"type":"run_started","run":"r1","entry":{"kind":"retry","checkpoint":"cp","message":"m"}}"#;
        assert_eq!(event_to_json(&parse_event(text).unwrap()), text);
    }

    #[test]
    fn export_lines_round_trip_with_session_seq_and_at() {
        let line = r#"{"type":"attempt_started","call":"c1","attempt":2,"session":"s-1","seq":7,"at":1700000000000}"#;
        let record = record_from_export_line(line).unwrap();
        assert_eq!(record.seq, Seq(7));
        assert_eq!(record_to_export_line(&record), line);
        let err = record_from_export_line(r#"{"type":"attempt_started","call":"c1","attempt":2}"#)
            .unwrap_err();
        assert!(err.to_string().contains("session"), "{err}");
    }
}
