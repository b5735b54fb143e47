//! `NativeStep`: an open step whose reply is durable.

use napi_derive::napi;
use stepjournal::{Step, Tools};

use crate::convert;
use crate::error::thrown;

/// A step.
#[napi]
#[derive(Debug)]
pub struct NativeStep {
    step: Step,
    tools: Tools,
}

impl NativeStep {
    pub(crate) fn new(step: Step, tools: Tools) -> Self {
        NativeStep { step, tools }
    }
}

#[napi]
impl NativeStep {
    /// The step's number.
    #[napi(getter)]
    pub fn number(&self) -> u32 {
        u32::try_from(self.step.number().get()).unwrap_or(u32::MAX)
    }

    /// The session.
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.step.session().as_str().to_owned()
    }

    /// The step's reply checkpoint.
    #[napi(getter)]
    pub fn checkpoint(&self) -> String {
        self.step.checkpoint().as_str().to_owned()
    }

    /// Whether the step is still open.
    #[napi(getter)]
    pub fn is_open(&self) -> bool {
        self.step.is_open()
    }

    /// The calls not answered yet.
    #[napi]
    pub fn open_calls(&self) -> Vec<String> {
        self.step.open_calls().iter().map(|c| c.as_str().to_owned()).collect()
    }

    /// Runs the step by the rules with the journal's tools; the outcome as JSON text.
    #[napi]
    pub async fn drive(&self) -> napi::Result<String> {
        let outcome = self.step.drive(&self.tools).await.map_err(thrown)?;
        Ok(convert::step_outcome(&outcome))
    }
}
