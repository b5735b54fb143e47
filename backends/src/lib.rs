//! stepjournal's storage: the [`JournalStore`] trait and its backends.
//!
//! - [`memory::MemoryStore`]: in process, [`Durability::Volatile`]; for tests and embedding in tests.
//! - `file`: the embedded default, a segmented shared log with group commit.
//! - `sqlite` (feature `sqlite`) and `postgres` (feature `postgres`).
//!
//! Stores are opened from a URL with [`open_url`]: `file:PATH`, `sqlite:PATH`,
//! `postgres://...` or `postgresql://...`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)
)]

mod ack;
mod completion;
mod error;
pub mod file;
pub mod head;
mod identity;
pub mod lease;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
mod readers;
mod redact;
mod separate;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod store;
mod trim;
mod url;

pub use ack::{AppendAck, Durability};
pub use completion::{AppendFuture, Completer, StoreFuture, block_on};
pub use error::{AppendError, OpenError, StoreError};
pub use head::{Lease, LeaseTaken, OwnerId, RunHead, RunState, SessionHead, StoreMetrics};
pub use identity::StoreIdentity;
pub use separate::SeparateProcess;
pub use store::{DeleteAt, JournalStore, from_last_snapshot};
pub use trim::trim_point;
pub use url::{OpenOptions, StoreUrl, open_url};
