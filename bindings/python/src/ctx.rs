//! `NativeCallCtx`: a running call's context as Python sees it (`ctx.session_id`,
//! `ctx.dispatch_id`, `ctx.attempt`, `ctx.idempotency_key`, `await ctx.output(text)`); the package
//! wraps it with an `asyncio.Event` set when the run's cancel signal fires.

use pyo3::prelude::*;
use stepjournal::CallCtx;

use crate::error::thrown;

/// A running call's context.
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct NativeCallCtx {
    pub(crate) ctx: CallCtx,
    /// Names the body to the abort callback: its event is set when the run's cancel signal
    /// fires.
    pub(crate) token: u64,
}

#[pymethods]
impl NativeCallCtx {
    /// The session.
    #[getter]
    fn session_id(&self) -> &str {
        self.ctx.session().as_str()
    }

    /// The call's id in the reply.
    #[getter]
    fn call_id(&self) -> &str {
        self.ctx.call().as_str()
    }

    /// The tool called.
    #[getter]
    fn tool(&self) -> &str {
        self.ctx.tool().as_str()
    }

    /// The call's dispatch id: the same on every attempt, in every run.
    #[getter]
    fn dispatch_id(&self) -> &str {
        self.ctx.dispatch().as_str()
    }

    /// This body's attempt: 1, 2, ...
    #[getter]
    fn attempt(&self) -> u32 {
        self.ctx.attempt().get()
    }

    /// `session:dispatch`, the key to hand an external service.
    #[getter]
    fn idempotency_key(&self) -> &str {
        self.ctx.idempotency_key()
    }

    /// The body's token for the abort callback.
    #[getter]
    fn token(&self) -> u64 {
        self.token
    }

    /// Whether the run's cancel signal has fired.
    #[getter]
    fn cancelled(&self) -> bool {
        self.ctx.is_cancelled()
    }

    /// Gives output the tool produced while running (committed at most once per output
    /// interval; what is pending is committed before the result). An awaitable.
    fn output<'py>(&self, py: Python<'py>, text: String) -> PyResult<Bound<'py, PyAny>> {
        let ctx = self.ctx.clone();
        crate::bridge::awaitable(py, async move { ctx.output(text).await.map_err(thrown) })
    }
}
