//! stepjournal's cross-crate test suites: backend conformance, crash properties, recovery
//! conformance, golden files. Shared helpers live here; the suites are under `tests/`.
#![allow(missing_docs, reason = "test helpers, documented where they are not plain")]

pub mod arb;
pub mod checks;
pub mod conformance;
pub mod file_fixture;
pub mod media;
pub mod modules;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "postgres")]
pub mod pgbouncer;
pub mod protocol_gen;
pub mod sample;
pub mod sidecar_forge;
pub mod watchdog;
