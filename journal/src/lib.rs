//! stepjournal: a storage and recovery engine for AI-agent runtimes.
//!
//! - [`registry`]: the tool registry as JSON Schemas, for recovery's argument checks.
//! - [`scenario`]: FORMAT.md's recovery conformance scenarios: read, plan, check.
//! - [`sim`]: the crash simulator: a scripted session through the writer, faults injected at
//!   every append and inside bodies, invariants checked after each.
//! - [`writer`]: the session writer a runtime embeds ([`Journal`], [`Run`], [`Step`], [`Body`]).
//! - [`cli`] (feature `cli`, on by default): the `stepjournal` command's subcommands, each a
//!   library function.
//!
//! The recovery fold itself is [`stepjournal_recovery`], re-exported as [`recovery`].
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod registry;
pub mod scenario;
pub mod sim;
pub mod writer;

pub use stepjournal_backends as backends;
pub use stepjournal_codec as codec;
pub use stepjournal_recovery as recovery;
pub use writer::{Body, Journal, JournalOptions, Reply, Run, Step};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
