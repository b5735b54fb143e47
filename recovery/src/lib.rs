//! stepjournal's recovery: a pure fold over a session's events that yields a plan.
//!
//! - [`fold`] (or [`SessionState::apply`], one event at a time) builds a [`SessionState`].
//! - [`plan`] decides what an entry (wake, resume, retry, new turn, stop) does: what it appends
//!   and what becomes of every call of the saved step, each decision naming the rule that made it
//!   (the explain trail, ids in [`rules`]).
//! - [`transcript`] is what the model is shown; [`verify`] checks a log's protocol invariants.
//! - [`order`] is the order rule (a call behind its group and the sequential chain), which the
//!   plan decides by and the writer refuses by.
//!
//! The rules are `FORMAT.md`'s exactly; `docs/recovery.md` states them. Nothing here does I/O,
//! reads a clock or draws randomness: the same log, entry, registry and settings give the same
//! plan.
//!
//! ```
//! use stepjournal_codec::json::parse_event;
//! use stepjournal_codec::{CheckpointId, Entry, Replay, RunId};
//! use stepjournal_recovery::{Action, Config, MemoryRegistry, NewRun, fold, plan, rules};
//!
//! let log = [
//!     r#"{"type":"reply_committed","step":1,"checkpoint":"cp-1","calls":[{"call":"c1","tool":"set_preference","replay":"safe"}]}"#,
//!     r#"{"type":"dispatch_minted","call":"c1","dispatch":"d1"}"#,
//!     r#"{"type":"attempt_started","call":"c1","attempt":1}"#,
//! ];
//! let events: Vec<_> = log.iter().map(|e| parse_event(e).unwrap()).collect();
//! let registry = MemoryRegistry::new().with_tool("set_preference", Replay::Safe);
//! let new_run = NewRun {
//!     run: RunId::new("r2"),
//!     entry: Entry::Wake,
//!     commit_checkpoint: CheckpointId::new("cp-1-commit"),
//! };
//! let plan = plan(&fold(&events), &new_run, &registry, &Config::default());
//! let c1 = &plan.calls[0];
//! assert!(matches!(c1.action, Action::Run { attempt, .. } if attempt.get() == 2));
//! assert_eq!(c1.rule.id, rules::SAFE_REPLAY);
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)
)]

mod agree;
mod config;
mod fork_agree;
pub mod order;
mod plan;
#[cfg(feature = "plant")]
pub mod plant;
mod registry;
pub mod rules;
mod state;
mod transcript;
mod trim_agree;
mod verify;

#[cfg(test)]
mod testlog;

pub use agree::{Agreement, snapshots_agree};
pub use config::{Config, ConfigError};
pub use fork_agree::forks_agree;
pub use plan::{Action, CallPlan, NewRun, Plan, Rule, ValidationError, plan};
pub use registry::{ArgsCheck, MemoryRegistry, ToolRegistry};
pub use state::{
    AbortRecord, AnswerRecord, ApprovalRecord, ApprovalState, AttemptRecord, CallRecord, ChainIter,
    ChildRecord, Chunk, CommitRecord, DispatchRecord, MessageRecord, NoStart, PairingRecord,
    ReplyRecord, Resolution, ResultRecord, RewindRecord, RunEndRecord, RunRecord, SessionState,
    SuspensionRecord, TrimRecord, fold, fold_owned, reason_blocks, trim_point,
};
pub use transcript::{TranscriptItem, answers_of, transcript};
pub use trim_agree::trims_agree;
pub use verify::{Finding, Problem, verify, verify_log};
