//! `NativeRun`: one pass of the runtime over a session, with its entry's plan.

use pyo3::prelude::*;
use stepjournal::codec::{ContinuationId, Seq};
use stepjournal::{DriveOptions, Journal, Run, Tools};

use crate::convert;
use crate::error::thrown;
use crate::step::NativeStep;

/// A run.
#[pyclass(module = "stepjournal._native", frozen)]
#[derive(Clone)]
pub(crate) struct NativeRun {
    run: Run,
    /// The journal it was begun in: the wake after a deadline ([`Self::drive_within`]).
    journal: Journal,
    tools: Tools,
}

impl NativeRun {
    pub(crate) fn new(run: Run, journal: Journal, tools: Tools) -> Self {
        NativeRun { run, journal, tools }
    }
}

/// What [`NativeRun::drive_within`] came to: the run that finished the step and the outcome.
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct NativeDriven {
    run: NativeRun,
    outcome: Option<String>,
}

#[pymethods]
impl NativeDriven {
    /// The run that finished the step: the run driven, or the wake begun after a deadline.
    #[getter]
    fn run(&self) -> NativeRun {
        self.run.clone()
    }

    /// What driving came to as JSON text, or `None` when the run held no open step.
    #[getter]
    fn outcome(&self) -> Option<String> {
        self.outcome.clone()
    }
}

#[pymethods]
impl NativeRun {
    /// The run's id.
    #[getter]
    fn id(&self) -> &str {
        self.run.id().as_str()
    }

    /// The session.
    #[getter]
    fn session_id(&self) -> &str {
        self.run.session().as_str()
    }

    /// The entry's plan (FORMAT.md's plan JSON: each call with its action and rule), as text.
    #[getter]
    fn plan(&self) -> String {
        self.run.plan().to_json()
    }

    /// The run's status as JSON text.
    #[getter]
    fn status(&self) -> String {
        convert::status(&self.run.status())
    }

    /// What the model is shown, up to the run's tail, as a JSON array's text; with `since`,
    /// only the items whose events lie at or after that seq.
    #[pyo3(signature = (since=None))]
    fn transcript<'py>(&self, py: Python<'py>, since: Option<u64>) -> PyResult<Bound<'py, PyAny>> {
        let run = self.run.clone();
        let since = Seq(since.unwrap_or(0));
        crate::bridge::awaitable(py, async move {
            let items = run.transcript_since_async(since).await.map_err(thrown)?;
            Ok(convert::items(&items))
        })
    }

    /// Appends a `snapshot` of the session as the run sees it now: the seq where it landed, or
    /// `None` (nothing written) when the run's view cannot make one.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let run = self.run.clone();
        crate::bridge::awaitable(py, async move {
            let at = run.snapshot_async().await.map_err(thrown)?;
            Ok(at.map(|seq| seq.get()))
        })
    }

    /// Trims the session through this run, keeping its last `keep_turns` turns whole: what was
    /// dropped, as JSON text (`Trim::to_json`).
    fn trim<'py>(&self, py: Python<'py>, keep_turns: usize) -> PyResult<Bound<'py, PyAny>> {
        let run = self.run.clone();
        crate::bridge::awaitable(py, async move {
            let done = run.trim_async(keep_turns).await.map_err(thrown)?;
            Ok(done.to_json().to_string())
        })
    }

    /// Records that a model request was cut off (`model_aborted`) with its partial answer and,
    /// if the provider gave one, the handle to go on with it.
    #[pyo3(signature = (partial, continuation=None))]
    fn model_aborted<'py>(
        &self,
        py: Python<'py>,
        partial: String,
        continuation: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let continuation = continuation.map(ContinuationId::new).transpose().map_err(thrown)?;
        let run = self.run.clone();
        crate::bridge::awaitable(py, async move {
            run.model_aborted_with_async(partial, continuation).await.map_err(thrown)
        })
    }

    /// The step the run has open (a recovered step), if any.
    fn step(&self) -> Option<NativeStep> {
        let step = self.run.step()?;
        Some(NativeStep::new(step, self.tools.clone()))
    }

    /// Commits the model's reply (`{text, calls}` as JSON text): the step, its reply durable.
    fn commit_reply<'py>(&self, py: Python<'py>, reply: String) -> PyResult<Bound<'py, PyAny>> {
        let reply = convert::reply(&self.tools, &reply)?;
        let (run, tools) = (self.run.clone(), self.tools.clone());
        crate::bridge::awaitable(py, async move {
            let step = run.commit_reply_async(reply).await.map_err(thrown)?;
            Ok(NativeStep::new(step, tools))
        })
    }

    /// Drives the step the run has open; the outcome as JSON text, or `None` with none.
    fn drive<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (run, tools) = (self.run.clone(), self.tools.clone());
        crate::bridge::awaitable(py, async move {
            let outcome = run.drive(&tools).await.map_err(thrown)?;
            Ok(outcome.as_ref().map(convert::step_outcome))
        })
    }

    /// Drives the step the run has open as [`Journal::drive_within`] does: a body past its
    /// deadline lets go of the run, and a `wake` begun in the same call decides the call by the
    /// rules and drives the step on, until it is done.
    fn drive_within<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (run, journal, tools) = (self.run.clone(), self.journal.clone(), self.tools.clone());
        crate::bridge::awaitable(py, async move {
            let driven = journal.drive_within(&run, &tools, DriveOptions::new()).await;
            let (run, outcome) = driven.map_err(thrown)?;
            let outcome = outcome.as_ref().map(convert::step_outcome);
            Ok(NativeDriven { run: NativeRun::new(run, journal, tools), outcome })
        })
    }

    /// Ends the run: `completed`, `failed` or `stopped`.
    fn end<'py>(&self, py: Python<'py>, outcome: String) -> PyResult<Bound<'py, PyAny>> {
        let outcome = convert::outcome(&outcome)?;
        let run = self.run.clone();
        crate::bridge::awaitable(py, async move { run.end_async(outcome).await.map_err(thrown) })
    }

    /// Ends the run `failed`, pairing each open call.
    #[pyo3(signature = (error=None))]
    fn fail<'py>(&self, py: Python<'py>, error: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let run = self.run.clone();
        crate::bridge::awaitable(py, async move { run.fail_async(error).await.map_err(thrown) })
    }
}
