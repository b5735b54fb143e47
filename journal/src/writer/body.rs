//! [`Body`]: one started attempt of a call, from `attempt_started` to its `tool_result`.

use std::sync::Arc;

use stepjournal_codec::{Attempt, CallId, DispatchId, Event, OutputChunk, RawJson, ToolResult};

use super::shared::Shared;
use super::{Refusal, WriteError};

/// One body of a call: its `attempt_started` is durable. Made only by
/// [`Step::start_body`](super::Step::start_body), which starts a new attempt, and
/// [`Step::reattach`](super::Step::reattach), which goes on with the last started one (a remote
/// sub-agent's or companion's child).
///
/// Hand the tool the [`dispatch`](Self::dispatch) id (the same on every attempt of the call,
/// in every run) or the [`idempotency_key`](Self::idempotency_key) (`session:dispatch`) to key
/// external effects on. The body commits output as it goes ([`output_chunk`](Self::output_chunk))
/// and ends with [`finish`](Self::finish) (`tool_result`).
///
/// A `Body` is `Send`: run it on another thread; its appends are serialized with the run's.
/// When a newer run has entered the session (or it was stopped) since, its appends fail with
/// [`WriteError::Fenced`] and nothing of it lands: stop the tool's work. Dropping a body without
/// finishing writes nothing: the call stays open, and recovery decides it (run again if safe,
/// else `outcome_unknown`) once the run ends `failed` or is lost.
#[derive(Debug)]
#[must_use = "a body that is dropped leaves its call without a result"]
pub struct Body {
    shared: Arc<Shared>,
    call: CallId,
    dispatch: DispatchId,
    attempt: Attempt,
    key: String,
}

impl Body {
    pub(crate) fn new(
        shared: Arc<Shared>,
        call: CallId,
        dispatch: DispatchId,
        attempt: Attempt,
    ) -> Self {
        let key = format!("{}:{}", shared.session, dispatch);
        Body { shared, call, dispatch, attempt, key }
    }

    /// The call.
    pub fn call(&self) -> &CallId {
        &self.call
    }

    /// The call's dispatch id: the same on every attempt and every entry.
    pub fn dispatch(&self) -> &DispatchId {
        &self.dispatch
    }

    /// This body's attempt: 1, 2, ... (bodies started before it + 1).
    pub fn attempt(&self) -> Attempt {
        self.attempt
    }

    /// The idempotency key to hand an external service: `session:dispatch`.
    pub fn idempotency_key(&self) -> &str {
        &self.key
    }

    /// Commits output the body produced while running (`output_chunk`), durably. If the run is
    /// lost, recovery hands the chunks of the last attempt to the model as the call's
    /// `partial` output.
    pub fn output_chunk(&self, text: impl Into<String>) -> Result<(), WriteError> {
        let text = text.into();
        self.append(|call, attempt| {
            Event::OutputChunk(OutputChunk { call, attempt, text: text.clone() })
        })
    }

    /// Ends the body with its result (`tool_result`), durably; `is_error` when the tool
    /// reported an error. Refused if the call was resolved meanwhile ([`Refusal::Resolved`]).
    pub fn finish(self, output: RawJson, is_error: bool) -> Result<(), WriteError> {
        self.append(|call, attempt| {
            Event::ToolResult(ToolResult {
                call,
                attempt,
                output: output.clone(),
                is_error,
                metadata: None,
            })
        })
    }

    fn append(&self, event: impl Fn(CallId, Attempt) -> Event) -> Result<(), WriteError> {
        let mut inner = self.shared.lock();
        self.shared.append(&mut inner, |inner| {
            if inner.state.call(&self.call).is_some_and(|r| r.is_resolved()) {
                return Err(Refusal::Resolved { call: self.call.clone() });
            }
            Ok((vec![event(self.call.clone(), self.attempt)], ()))
        })
    }
}
