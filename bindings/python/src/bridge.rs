//! Between the engine's threads and Python: the awaitables the native module returns, and every
//! entry into Python from a thread of the tokio runtime, guarded so that none happens once the
//! interpreter has begun to exit.
//!
//! An engine future runs on the runtime; its result is handed to the event loop that awaits it
//! (`loop.call_soon_threadsafe(settle, future, ok, value)`). A thread that is inside Python when
//! the interpreter finalizes is cut off when it next needs the GIL (CPython exits the thread
//! under Rust frames, which aborts the process), so the package's `atexit` hook calls
//! [`finalizing`]: from then on no runtime thread enters Python, and the hook returns once none
//! is inside it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// Set by [`finalizing`]: no thread of the runtime enters Python any more.
static FINALIZING: AtomicBool = AtomicBool::new(false);
/// How many calls of [`with_python`] are under way.
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` attached to the interpreter, unless the interpreter is exiting: then `None`, and
/// nothing of Python is touched.
pub(crate) fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let out = if FINALIZING.load(Ordering::SeqCst) { None } else { Some(Python::attach(f)) };
    INSIDE.fetch_sub(1, Ordering::SeqCst);
    out
}

/// The package's `atexit` hook: from now on no thread of the runtime enters Python; returns once
/// none is inside it (after at most 5 s), the GIL released meanwhile.
#[pyfunction]
pub(crate) fn finalizing(py: Python<'_>) {
    FINALIZING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let until = Instant::now() + Duration::from_secs(5);
        while INSIDE.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// `stepjournal._bridge.settle(future, ok, value)`, looked up once.
static SETTLE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// An asyncio future of the running loop, settled with what `work` comes to, which runs on the
/// runtime (with the loop as its task-local, for the tool bodies it calls) holding no GIL.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
    let event_loop = locals.event_loop(py);
    let future = event_loop.call_method0("create_future")?;
    let target = (event_loop.unbind(), future.clone().unbind());
    let task = pyo3_async_runtimes::tokio::scope(locals, async move {
        let result = work.await;
        let (event_loop, future) = target;
        // A loop already closed, or an interpreter exiting: nobody awaits the result.
        let _ = with_python(move |py| -> PyResult<()> {
            let (ok, value) = match result.and_then(|v| v.into_py_any(py)) {
                Ok(value) => (true, value),
                Err(e) => (false, e.into_value(py).into_any()),
            };
            let settle = SETTLE.import(py, "stepjournal._bridge", "settle")?;
            event_loop
                .bind(py)
                .call_method1("call_soon_threadsafe", (settle, future, ok, value))?;
            Ok(())
        });
    });
    drop(pyo3_async_runtimes::tokio::get_runtime().spawn(task));
    Ok(future)
}
