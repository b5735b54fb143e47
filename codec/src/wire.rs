//! An event's payload in each record format version.
//!
//! postcard has no field tags: a payload is its members in order. Version 2 adds one member at
//! the end of three kinds' payloads (`paired.rule`, `reply_committed.metadata`,
//! `tool_result.metadata`); every other kind is the same in both versions. Version 3 adds the
//! `snapshot` kind and lays every other kind out as version 2 does; version 4 lays out every kind
//! version 3 has as version 3 does and adds the kinds and members it introduced: one member at
//! the end of three kinds' payloads (`run_started.by`, `run_ended.by`,
//! `model_aborted.continuation`) and the `forked_from` kind; version 5 lays every kind out as
//! version 4 does and adds the `trimmed` kind. A kind is never written in a version older than the one that
//! introduced it ([`EventKind::since`]); an event carrying a member its version cannot hold is
//! refused ([`EncodeError::NotInVersion`]), one without it is written. The kinds that gained a
//! member are written and read here as tuples of their members (postcard lays a tuple out exactly
//! as a struct with the same members), one tuple per version; the rest through the payload
//! structs.

use crate::event::{PayloadDecoder, PayloadEncoder, decode_payload, encode_payload};
use crate::{
    Attempt, Call, CallId, CheckpointId, ContinuationId, EncodeError, Entry, Event, EventKind,
    ModelAborted, Operator, PairReason, Paired, RawJson, ReplyCommitted, RunEnded, RunId,
    RunOutcome, RunStarted, StepNo, ToolResult,
};

/// A record format version: what a record's `version` byte says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum FormatVersion {
    /// Version 1: the first format. Readers of version 1 refuse version-2 records.
    V1 = 1,
    /// Version 2: `paired.rule`, `reply_committed.metadata`, `tool_result.metadata`. Readers
    /// of version 2 refuse version-3 records.
    V2 = 2,
    /// Version 3: the `snapshot` event. Every other kind is laid out as in version 2. Readers
    /// of version 3 refuse version-4 records.
    V3 = 3,
    /// Version 4: lays every kind out as version 3 does, with the kinds and members version 4
    /// introduced: `run_started.by`, `run_ended.by`, `model_aborted.continuation`,
    /// `forked_from`. Readers of version 4 refuse version-5 records.
    V4 = 4,
    /// Version 5 (written by default): lays every kind out as version 4 does, and adds the
    /// `trimmed` kind.
    #[default]
    V5 = 5,
}

impl FormatVersion {
    /// The newest version this build reads: a record of a higher version was written by a newer
    /// stepjournal ([`DecodeError::NewerVersion`](crate::DecodeError::NewerVersion)).
    pub const NEWEST: FormatVersion = FormatVersion::V5;

    /// The version's byte in a record.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The version a record's byte names, if this build reads it.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(FormatVersion::V1),
            2 => Some(FormatVersion::V2),
            3 => Some(FormatVersion::V3),
            4 => Some(FormatVersion::V4),
            5 => Some(FormatVersion::V5),
            _ => None,
        }
    }
}

/// Hands `event`'s payload, as `version` lays it out, to `encoder`.
pub(crate) fn encode<E: PayloadEncoder>(
    event: &Event,
    version: FormatVersion,
    encoder: E,
) -> Result<E::Output, EncodeError> {
    use FormatVersion::{V1, V2, V3, V4, V5};
    let kind = event.kind();
    if kind.since() > version {
        return Err(EncodeError::KindNotInVersion {
            kind: kind.name(),
            version: version.code(),
            since: kind.since().code(),
        });
    }
    let not_in = |member| EncodeError::NotInVersion {
        kind: event.kind().name(),
        member,
        version: version.code(),
    };
    Ok(match (event, version) {
        (Event::RunStarted(r), V1 | V2 | V3) => {
            if r.by.is_some() {
                return Err(not_in("by"));
            }
            encoder.encode(&(&r.run, &r.entry))
        }
        (Event::RunStarted(r), V4 | V5) => encoder.encode(&(&r.run, &r.entry, by_wire(&r.by))),
        (Event::RunEnded(r), V1 | V2 | V3) => {
            if r.by.is_some() {
                return Err(not_in("by"));
            }
            encoder.encode(&(&r.run, r.outcome, &r.error))
        }
        (Event::RunEnded(r), V4 | V5) => {
            encoder.encode(&(&r.run, r.outcome, &r.error, by_wire(&r.by)))
        }
        (Event::ModelAborted(m), V1 | V2 | V3) => {
            if m.continuation.is_some() {
                return Err(not_in("continuation"));
            }
            encoder.encode(&(&m.partial,))
        }
        (Event::ModelAborted(m), V4 | V5) => encoder.encode(&(&m.partial, &m.continuation)),
        (Event::Paired(p), V1) => encoder.encode(&(&p.call, p.reason, &p.message, &p.partial)),
        (Event::Paired(p), V2 | V3 | V4 | V5) => {
            encoder.encode(&(&p.call, p.reason, &p.message, &p.partial, &p.rule))
        }
        (Event::ReplyCommitted(r), V1) => {
            if r.metadata.is_some() {
                return Err(not_in("metadata"));
            }
            encoder.encode(&(r.step, &r.checkpoint, &r.text, &r.calls))
        }
        (Event::ReplyCommitted(r), V2 | V3 | V4 | V5) => {
            encoder.encode(&(r.step, &r.checkpoint, &r.text, &r.calls, &r.metadata))
        }
        (Event::ToolResult(t), V1) => {
            if t.metadata.is_some() {
                return Err(not_in("metadata"));
            }
            encoder.encode(&(&t.call, t.attempt, &t.output, t.is_error))
        }
        (Event::ToolResult(t), V2 | V3 | V4 | V5) => {
            encoder.encode(&(&t.call, t.attempt, &t.output, t.is_error, &t.metadata))
        }
        _ => encode_payload(event, encoder),
    })
}

/// Decodes a payload of `kind` as `version` lays it out.
pub(crate) fn decode<D: PayloadDecoder>(
    kind: EventKind,
    version: FormatVersion,
    decoder: D,
) -> Result<Event, D::Error> {
    use FormatVersion::{V1, V2, V3, V4, V5};
    Ok(match (kind, version) {
        (EventKind::RunStarted, V1 | V2 | V3) => {
            let (run, entry) = decoder.decode::<(RunId, Entry)>()?;
            Event::RunStarted(RunStarted { run, entry, by: None })
        }
        (EventKind::RunStarted, V4 | V5) => {
            let (run, entry, by) = decoder.decode::<(RunId, Entry, Option<ByWire>)>()?;
            Event::RunStarted(RunStarted { run, entry, by: by_stored(by) })
        }
        (EventKind::RunEnded, V1 | V2 | V3) => {
            let (run, outcome, error) = decoder.decode::<(RunId, RunOutcome, Option<String>)>()?;
            Event::RunEnded(RunEnded { run, outcome, error, by: None })
        }
        (EventKind::RunEnded, V4 | V5) => {
            let (run, outcome, error, by) =
                decoder.decode::<(RunId, RunOutcome, Option<String>, Option<ByWire>)>()?;
            Event::RunEnded(RunEnded { run, outcome, error, by: by_stored(by) })
        }
        (EventKind::ModelAborted, V1 | V2 | V3) => {
            let (partial,) = decoder.decode::<(String,)>()?;
            Event::ModelAborted(ModelAborted { partial, continuation: None })
        }
        (EventKind::ModelAborted, V4 | V5) => {
            let (partial, continuation) = decoder.decode::<(String, Option<ContinuationId>)>()?;
            Event::ModelAborted(ModelAborted { partial, continuation })
        }
        (EventKind::Paired, V1) => {
            let (call, reason, message, partial) =
                decoder.decode::<(CallId, PairReason, String, String)>()?;
            Event::Paired(Paired { call, reason, message, partial, rule: None })
        }
        (EventKind::Paired, V2 | V3 | V4 | V5) => {
            let (call, reason, message, partial, rule) =
                decoder.decode::<(CallId, PairReason, String, String, Option<String>)>()?;
            Event::Paired(Paired { call, reason, message, partial, rule })
        }
        (EventKind::ReplyCommitted, V1) => {
            let (step, checkpoint, text, calls) =
                decoder.decode::<(StepNo, CheckpointId, String, Vec<Call>)>()?;
            Event::ReplyCommitted(ReplyCommitted { step, checkpoint, text, calls, metadata: None })
        }
        (EventKind::ReplyCommitted, V2 | V3 | V4 | V5) => {
            let (step, checkpoint, text, calls, metadata) =
                decoder.decode::<(StepNo, CheckpointId, String, Vec<Call>, Option<RawJson>)>()?;
            Event::ReplyCommitted(ReplyCommitted { step, checkpoint, text, calls, metadata })
        }
        (EventKind::ToolResult, V1) => {
            let (call, attempt, output, is_error) =
                decoder.decode::<(CallId, Attempt, RawJson, bool)>()?;
            Event::ToolResult(ToolResult { call, attempt, output, is_error, metadata: None })
        }
        (EventKind::ToolResult, V2 | V3 | V4 | V5) => {
            let (call, attempt, output, is_error, metadata) =
                decoder.decode::<(CallId, Attempt, RawJson, bool, Option<RawJson>)>()?;
            Event::ToolResult(ToolResult { call, attempt, output, is_error, metadata })
        }
        _ => decode_payload(kind, decoder)?,
    })
}

/// An operator's binary form: `(name, reason)`, each optional (see [`Operator::wire`]).
type ByWire = (Option<String>, Option<String>);

fn by_wire(by: &Option<Operator>) -> Option<(Option<&str>, Option<&str>)> {
    by.as_ref().map(Operator::wire)
}

fn by_stored(by: Option<ByWire>) -> Option<Operator> {
    by.map(|(name, reason)| Operator::from_stored(name, reason))
}

impl EventKind {
    /// The first record format version that holds this type.
    pub fn since(self) -> FormatVersion {
        match self {
            EventKind::Snapshot => FormatVersion::V3,
            EventKind::ForkedFrom => FormatVersion::V4,
            EventKind::Trimmed => FormatVersion::V5,
            _ => FormatVersion::V1,
        }
    }

    /// Whether the type changes no plan: a reader that folds the whole log skips it
    /// (`snapshot`, `forked_from`, `trimmed`; the exceptions, a fork's opening snapshot and a
    /// trimmed log's first snapshot, are in `docs/recovery.md`).
    pub fn changes_no_plan(self) -> bool {
        matches!(self, EventKind::Snapshot | EventKind::ForkedFrom | EventKind::Trimmed)
    }
}

#[cfg(test)]
mod tests {
    use crate::json::{event_to_json, parse_event};
    use crate::record::{decode, encode};
    use crate::{Event, ForkedFrom, Limits, Record, Seq, SessionId, UnixMillis};

    use super::*;

    fn forked() -> Record {
        Record {
            session: SessionId::new("s-fork").unwrap(),
            seq: Seq(0),
            at: UnixMillis(7),
            event: Event::ForkedFrom(ForkedFrom {
                original: SessionId::new("s-1").unwrap(),
                commit_seq: Seq(41),
                checkpoint: "cp-10-commit".into(),
            }),
        }
    }

    #[test]
    fn forked_from_is_written_from_version_4_and_its_forms_round_trip() {
        let record = forked();
        let bytes = encode(&record, &Limits::default()).unwrap();
        assert_eq!(decode(&bytes, &Limits::default()).unwrap().0, record);
        let json = event_to_json(&record.event);
        assert_eq!(
            json,
            r#"{"type":"forked_from","original":"s-1","commit_seq":41,"checkpoint":"cp-10-commit"}"#
        );
        assert_eq!(parse_event(&json).unwrap(), record.event);
        let v3 = Limits { write_version: FormatVersion::V3, ..Limits::default() };
        let e = encode(&record, &v3).unwrap_err();
        assert!(e.to_string().contains("needs version 4"), "{e}");
        assert_eq!(EventKind::ForkedFrom.code(), 18);
        assert!(EventKind::ForkedFrom.changes_no_plan());
    }
}
