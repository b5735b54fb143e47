//! Helpers shared by the SQL backends' test files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod actor;
#[cfg(feature = "postgres")]
pub mod cluster;
pub mod exec;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "postgres")]
pub mod pg_faults;
#[cfg(feature = "postgres")]
pub mod proxy;
