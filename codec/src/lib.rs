//! stepjournal's typed events and their two forms.
//!
//! - [`Event`]: every event a session's log can hold, as Rust types with newtype ids.
//! - The JSON form ([`json`]): exactly the form `FORMAT.md` gives, used by scenarios, `export` and
//!   `import`.
//! - The binary form ([`record`], [`batch`]): a checksummed, self-describing record per event, and a
//!   batch frame that lands or is dropped whole. See `docs/format.md` for the byte layout.
//! - The codes of errors ([`ErrorCode`], [`RefusalCode`], [`Coded`]): the stable names every
//!   crate's errors map to, which the bindings show.
//!
//! This crate does no I/O. Its decoders never panic on bad bytes and never allocate from a length
//! field they have not checked against the bytes they were given.
#![deny(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic))]

pub mod batch;
mod call;
mod code;
mod entry;
mod error;
mod event;
mod ids;
pub mod json;
mod operator;
mod outcome;
mod raw;
pub mod record;
mod snapshot;
mod wire;

pub use call::{Call, CallKind, Replay};
pub use code::{Coded, ErrorCode, RefusalCode};
pub use entry::{Entry, ResumeMode};
pub use error::{DecodeError, EncodeError, FormatPart, JsonError};
pub use event::{
    ApprovalDecided, AttemptStarted, ChildAttached, ClientAnswer, DispatchMinted, Event, EventKind,
    ForkedFrom, Message, ModelAborted, OutputChunk, PairReason, Paired, ReplyCommitted, Rewound,
    Role, RunEnded, RunStarted, StepCommit, Suspended, ToolResult, Trimmed,
};
pub use ids::{
    Attempt, CallId, CheckpointId, DispatchId, IdError, RunId, Seq, SessionId, StepNo, ToolName,
    UnixMillis, acts_on_text,
};
pub use operator::{ContinuationId, Operator};
pub use outcome::RunOutcome;
pub use raw::RawJson;
pub use record::{Limits, Record, Stamped};
pub use snapshot::{Snapshot, SnapshotRun, SnapshotRunEnd, SnapshotStep, StepRange};
pub use wire::FormatVersion;
