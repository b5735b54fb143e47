//! The codec's errors: one type per surface.

use crate::{Coded, ErrorCode, IdError};

/// Bytes that are not a valid record or batch. Every variant says what was wrong; the reader that
/// found it adds where (file, offset, session, seq).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end before the record or frame does.
    #[error("truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the frame says it has (or the fixed header needs).
        needed: u64,
        /// Bytes there were.
        available: u64,
    },
    /// The stored checksum does not match the bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The checksum in the bytes.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// Bytes of a format version newer than this build reads (a segment header or a record):
    /// written by a newer stepjournal, which reads them. Never damage: no repair mode cuts or
    /// removes them.
    #[error(
        "{part} format version {version} is newer than this build reads (up to {newest}): a \
         newer stepjournal reads it"
    )]
    NewerVersion {
        /// What carries the version.
        part: FormatPart,
        /// The version the bytes name.
        version: u16,
        /// The newest version of that part this build reads.
        newest: u16,
    },
    /// The record's format version is not one this build knows, nor newer than those it knows
    /// (version 0): damage.
    #[error("unknown record format version {version}")]
    UnknownVersion {
        /// The version byte.
        version: u8,
    },
    /// The record's event kind code is not one this build knows. It is never skipped: an event a
    /// reader does not know could be the one that resolves a call.
    #[error("unknown event kind code {code}")]
    UnknownKind {
        /// The kind byte.
        code: u8,
    },
    /// A length field is larger than the configured maximum.
    #[error("length {len} exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The length the bytes claim.
        len: u64,
        /// The maximum allowed.
        max: u64,
    },
    /// The checksum matched but the contents are not a valid record.
    #[error("malformed: {reason}")]
    Malformed {
        /// What was wrong.
        reason: String,
    },
}

/// What carries a format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FormatPart {
    /// A segment file's header (the file backend).
    Segment,
    /// A record (one event).
    Record,
}

impl std::fmt::Display for FormatPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FormatPart::Segment => "segment",
            FormatPart::Record => "record",
        })
    }
}

/// An event that cannot be written in the binary form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded record would exceed the maximum record size; it is refused, never split.
    #[error("a {kind} record of {len} bytes exceeds the maximum record size of {max} bytes")]
    RecordTooLarge {
        /// The event's type.
        kind: &'static str,
        /// Its encoded size.
        len: u64,
        /// The maximum.
        max: u64,
    },
    /// The event carries a member the format version being written cannot hold (metadata in a
    /// version-1 record); nothing is written.
    #[error("a {kind} event with `{member}` cannot be written in format version {version}")]
    NotInVersion {
        /// The event's type.
        kind: &'static str,
        /// The member.
        member: &'static str,
        /// The version being written.
        version: u8,
    },
    /// The event's type is newer than the format version being written (a `snapshot` in a
    /// version-2 record); nothing is written.
    #[error(
        "a {kind} event cannot be written in format version {version}: it needs version {since}"
    )]
    KindNotInVersion {
        /// The event's type.
        kind: &'static str,
        /// The version being written.
        version: u8,
        /// The first version that holds it.
        since: u8,
    },
    /// The batch holds no event. An events frame holds at least one record (a reader refuses
    /// an empty one), so none is written.
    #[error("a batch must hold at least one event; an empty one is not written")]
    EmptyBatch,
    /// The batch would exceed the maximum batch size.
    #[error("a batch of {len} bytes exceeds the maximum batch size of {max} bytes")]
    BatchTooLarge {
        /// Its encoded size.
        len: u64,
        /// The maximum.
        max: u64,
    },
    /// The session id cannot be written.
    #[error("invalid session id: {0}")]
    Session(#[from] IdError),
    /// A run id the event names breaks the id rule ([`RunId::validate`](crate::RunId::validate)).
    #[error("invalid run id: {0}")]
    Run(IdError),
    /// A member of the event breaks its rule: an operator's name or reason
    /// ([`Operator::validate`](crate::Operator::validate)), a continuation handle
    /// ([`ContinuationId::validate`](crate::ContinuationId::validate)).
    #[error("a {kind} event cannot be written: {source}")]
    Member {
        /// The event's type.
        kind: &'static str,
        /// What is wrong with the member.
        source: IdError,
    },
    /// A `trimmed` event's `before` is not a seq the session holds before the batch (the
    /// first seq a trim keeps must already be in the log); nothing is written.
    #[error(
        "a trimmed event must keep a seq the session already holds: its `before` is {before}, \
         but the batch starts at seq {first}"
    )]
    TrimPoint {
        /// The event's `before`.
        before: u64,
        /// The batch's first seq.
        first: u64,
    },
    /// The payload could not be serialized.
    #[error("cannot encode a {kind} payload: {reason}")]
    Payload {
        /// The event's type.
        kind: &'static str,
        /// What failed.
        reason: String,
    },
}

/// An event in the JSON form that cannot be read. `position` is the event's index in the log or
/// the line number of an export, where the caller knows it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not a JSON object.
    #[error("{}not a JSON object: {source}", at(*.position))]
    NotJson {
        /// Where.
        position: Option<usize>,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The object has no string `type`.
    #[error("{}the event has no `type` member", at(*.position))]
    MissingType {
        /// Where.
        position: Option<usize>,
    },
    /// The `type` names no known event.
    #[error("{}unknown event type `{ty}`", at(*.position))]
    UnknownType {
        /// Where.
        position: Option<usize>,
        /// The type given.
        ty: String,
    },
    /// A member is missing or has the wrong shape.
    #[error("{}invalid `{ty}` event: {source}", at(*.position))]
    Invalid {
        /// Where.
        position: Option<usize>,
        /// The event's type.
        ty: &'static str,
        /// The parser's error, naming the member.
        #[source]
        source: serde_json::Error,
    },
    /// An export line lacks `session`, `seq` or `at`, or has them in the wrong shape.
    #[error("{}export line: {reason}", at(*.position))]
    ExportLine {
        /// Where.
        position: Option<usize>,
        /// What was wrong.
        reason: String,
    },
}

fn at(position: Option<usize>) -> String {
    match position {
        Some(p) => format!("event {p}: "),
        None => String::new(),
    }
}

impl JsonError {
    /// The same error, placed at `position` (an index in a log, a line number).
    pub fn at_position(mut self, p: usize) -> Self {
        match &mut self {
            JsonError::NotJson { position, .. }
            | JsonError::MissingType { position }
            | JsonError::UnknownType { position, .. }
            | JsonError::Invalid { position, .. }
            | JsonError::ExportLine { position, .. } => *position = Some(p),
        }
        self
    }
}

impl Coded for DecodeError {
    fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Truncated { .. }
            | DecodeError::ChecksumMismatch { .. }
            | DecodeError::UnknownVersion { .. }
            | DecodeError::UnknownKind { .. }
            | DecodeError::TooLarge { .. }
            | DecodeError::Malformed { .. } => ErrorCode::Corrupt,
            DecodeError::NewerVersion { .. } => ErrorCode::NewerFormat,
        }
    }
}

impl Coded for EncodeError {
    fn code(&self) -> ErrorCode {
        match self {
            EncodeError::RecordTooLarge { .. }
            | EncodeError::NotInVersion { .. }
            | EncodeError::KindNotInVersion { .. }
            | EncodeError::EmptyBatch
            | EncodeError::BatchTooLarge { .. }
            | EncodeError::TrimPoint { .. }
            | EncodeError::Payload { .. } => ErrorCode::Encode,
            EncodeError::Session(e) | EncodeError::Run(e) => e.code(),
            EncodeError::Member { source, .. } => source.code(),
        }
    }
}

impl Coded for JsonError {
    fn code(&self) -> ErrorCode {
        match self {
            JsonError::NotJson { .. }
            | JsonError::MissingType { .. }
            | JsonError::UnknownType { .. }
            | JsonError::Invalid { .. }
            | JsonError::ExportLine { .. } => ErrorCode::InvalidJson,
        }
    }
}
