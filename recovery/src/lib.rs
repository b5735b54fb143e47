//! stepjournal's recovery: a pure fold over a session's events that yields a plan.
//!
//! - [`fold`] (or [`SessionState::apply`], one event at a time) builds a [`SessionState`].
//! - [`plan`] decides what an entry (wake, resume, retry, new turn, stop) does: what it appends
//!   and what becomes of every call of the saved step, each decision naming the rule that made it
//!   (the explain trail, ids in [`rules`]).
//! - [`transcript`] is what the model is shown; [`verify`] checks a log's protocol invariants.
//!
//! The rules are `FORMAT.md`'s exactly; `docs/recovery.md` states them. Nothing here does I/O,
//! reads a clock or draws randomness: the same log, entry, registry and settings give the same
//! plan.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)
)]

mod config;
mod plan;
mod registry;
pub mod rules;
mod state;
mod transcript;
mod verify;

#[cfg(test)]
mod testlog;

pub use config::{Config, ConfigError};
pub use plan::{Action, CallPlan, NewRun, Plan, Rule, ValidationError, plan};
pub use registry::{ArgsCheck, MemoryRegistry, ToolRegistry};
pub use state::{
    AbortRecord, AnswerRecord, ApprovalRecord, ApprovalState, AttemptRecord, CallRecord, ChainIter,
    ChildRecord, Chunk, CommitRecord, DispatchRecord, MessageRecord, PairingRecord, ReplyRecord,
    Resolution, ResultRecord, RewindRecord, RunEndRecord, RunRecord, SessionState,
    SuspensionRecord, fold, fold_owned, reason_blocks,
};
pub use transcript::{TranscriptItem, transcript};
pub use verify::{Finding, Problem, verify};
