//! `NativeStep`: an open step whose reply is durable.

use pyo3::prelude::*;
use stepjournal::{Step, Tools};

use crate::convert;
use crate::error::thrown;

/// A step.
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct NativeStep {
    step: Step,
    tools: Tools,
}

impl NativeStep {
    pub(crate) fn new(step: Step, tools: Tools) -> Self {
        NativeStep { step, tools }
    }
}

#[pymethods]
impl NativeStep {
    /// The step's number.
    #[getter]
    fn number(&self) -> u64 {
        self.step.number().get()
    }

    /// The session.
    #[getter]
    fn session_id(&self) -> &str {
        self.step.session().as_str()
    }

    /// The step's reply checkpoint.
    #[getter]
    fn checkpoint(&self) -> &str {
        self.step.checkpoint().as_str()
    }

    /// Whether the step is still open.
    #[getter]
    fn is_open(&self) -> bool {
        self.step.is_open()
    }

    /// The calls not answered yet.
    fn open_calls(&self) -> Vec<String> {
        self.step.open_calls().iter().map(|c| c.as_str().to_owned()).collect()
    }

    /// Runs the step by the rules with the journal's tools; the outcome as JSON text.
    fn drive<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (step, tools) = (self.step.clone(), self.tools.clone());
        crate::bridge::awaitable(py, async move {
            let outcome = step.drive(&tools).await.map_err(thrown)?;
            Ok(convert::step_outcome(&outcome))
        })
    }
}
