//! stepjournal: a storage and recovery engine for AI-agent runtimes.
//!
//! This crate is the facade a runtime embeds:
//!
//! - [`writer`]: the session writer ([`Journal`], [`Run`], [`Step`], [`Body`]), which makes the
//!   save-first protocol the only path.
//! - [`registry`] (feature `schema`): the tool registry as JSON Schemas, for recovery's argument
//!   checks.
//! - [`scenario`] (feature `schema`): FORMAT.md's recovery conformance scenarios: reading one,
//!   planning it, checking a plan against its `expect` (what `stepjournal plan --scenario` runs).
//! - [`codec`], [`recovery`] and [`backends`]: the typed events, the pure recovery fold and the
//!   stores, re-exported.
//!
//! Every error of the facade is here at the top ([`BeginError`], [`WriteError`], [`Refusal`],
//! [`DriveError`], [`AnswerError`], ...), each converts into the one [`Error`], and each has a
//! stable [`ErrorCode`] ([`Coded`]): what the bindings show.
//!
//! The crash simulator and the exhaustive explorer are in `stepjournal-sim` (never linked by a
//! production build); the `stepjournal` command is `stepjournal-cli`.
//!
//! # Features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `schema` | on | [`registry::SchemaRegistry`]: tool arguments checked against JSON Schemas (the `jsonschema` crate). Without it, supply your own [`recovery::ToolRegistry`]. |
//! | `sqlite` | off | the SQLite backend (`rusqlite`, bundled: no system library needed) |
//! | `postgres` | off | the PostgreSQL backend (`postgres`) |
//! | `tracing` | off | `tracing` spans: `run` (session, run, entry), `step` (session, step) around [`Step::drive`], `body` (session, call, dispatch, attempt) around each handler |
//!
//! The memory and file backends are always there.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

pub mod drive;
mod error;
mod plant;
#[cfg(feature = "schema")]
pub mod registry;
#[cfg(feature = "schema")]
pub mod scenario;
pub mod tools;
pub mod writer;

pub use drive::{
    AnswerError, DriveError, DriveOptions, RecoverFailure, RecoverOptions, Recovered, StepOutcome,
};
pub use error::{Error, Result};
#[cfg(feature = "schema")]
pub use registry::RegistryError;
#[cfg(feature = "schema")]
pub use scenario::ScenarioError;
pub use stepjournal_backends as backends;
pub use stepjournal_codec as codec;
pub use stepjournal_codec::{Coded, ErrorCode, RefusalCode};
pub use stepjournal_recovery as recovery;
pub use tools::{CallCtx, ToolError, Tools};
pub use writer::body::{FinishError, Recorded, cut_output};
pub use writer::error::{AfterFailure, BeginError, JournalError, Refusal, WriteError};
pub use writer::status::{Fence, Interruption, Order, RunStatus};
pub use writer::{
    Body, ForkError, Journal, JournalOptions, Reply, Retained, Run, Step, Trim, TrimError,
};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
