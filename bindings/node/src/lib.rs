//! The native half of the `stepjournal` npm package: the runtime API (journal, runs, steps,
//! tools whose bodies are JavaScript) over napi-rs. The package's JavaScript (`index.js`) wraps
//! it: JSON crosses as text, errors become `StepjournalError`s with a code.
//!
//! Every append is awaited on napi-rs's async runtime: the store completes it (the file store's
//! committer thread) and wakes the task, so no libuv worker waits on an append. A tool body is
//! called on the event loop through a thread-safe function; its Promise is awaited here.

mod convert;
mod ctx;
mod error;
mod journal;
mod recover;
mod run;
mod step;
mod tools;

pub use ctx::NativeCallCtx;
pub use error::{Codes, error_codes};
pub use journal::{JournalConfig, NativeJournal, open, plan_scenario};
pub use recover::RecoveredFn;
pub use run::{NativeDriven, NativeRun};
pub use step::NativeStep;
pub use tools::ToolDef;
