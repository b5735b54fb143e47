//! The native half of the Python package `stepjournal`: the runtime API (journal, runs, steps,
//! tools whose bodies are Python coroutines) over PyO3. The package's Python (`stepjournal/`)
//! wraps it: JSON crosses as text, errors are raised as the package's `StepjournalError`
//! subclasses, one per code.
//!
//! Every engine call that can wait (an append, a drive, a recovery) is a future on
//! pyo3-async-runtimes' tokio runtime, handed to Python as an asyncio future of the calling loop:
//! the store completes the append (the file store's committer thread) and wakes the task, which
//! holds no GIL while it waits and no thread per waiter. A tool body is a coroutine started as a
//! task of the caller's loop. What the runtime's threads hand to Python goes through the loop's
//! inbox ([`bridge`]), never through the GIL.

mod bridge;
mod convert;
mod ctx;
mod error;
mod journal;
mod recover;
mod run;
mod step;
mod tools;

use pyo3::prelude::*;

/// The module `stepjournal._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<journal::NativeJournal>()?;
    m.add_class::<run::NativeRun>()?;
    m.add_class::<run::NativeDriven>()?;
    m.add_class::<step::NativeStep>()?;
    m.add_class::<ctx::NativeCallCtx>()?;
    m.add_class::<bridge::Inbox>()?;
    m.add_class::<bridge::Reply>()?;
    m.add_function(wrap_pyfunction!(journal::open, m)?)?;
    m.add_function(wrap_pyfunction!(journal::plan_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(error::error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(bridge::finalizing, m)?)?;
    Ok(())
}
