//! [`Body`]: one started attempt of a call, from `attempt_started` to its `tool_result`.

use std::sync::Arc;

use stepjournal_codec::{Attempt, CallId, DispatchId, Event, OutputChunk, RawJson, ToolResult};

use super::shared::Shared;
use super::trace::{Span, body_span};
use super::wait::block_on;
use super::{CancelSignal, Refusal, WriteError};

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
    /// Which body it is: shared with its twin (small to move, cheap to hand to the tool).
    me: Arc<Which>,
}

/// A body's identity.
#[derive(Debug)]
struct Which {
    call: CallId,
    dispatch: DispatchId,
    attempt: Attempt,
    key: String,
    span: Span,
}

impl Body {
    pub(crate) fn new(
        shared: Arc<Shared>,
        call: CallId,
        dispatch: DispatchId,
        attempt: Attempt,
    ) -> Self {
        let key = format!("{}:{}", shared.session, dispatch);
        let span = body_span(&shared.span, &shared.session, &call, &dispatch, attempt);
        Body { shared, me: Arc::new(Which { call, dispatch, attempt, key, span }) }
    }

    /// The call.
    pub fn call(&self) -> &CallId {
        &self.me.call
    }

    /// The call's dispatch id: the same on every attempt and every entry.
    pub fn dispatch(&self) -> &DispatchId {
        &self.me.dispatch
    }

    /// This body's attempt: 1, 2, ... (bodies started before it + 1).
    pub fn attempt(&self) -> Attempt {
        self.me.attempt
    }

    /// The run's cancel signal: fires once the run can no longer write (a newer run or a stop
    /// fenced it, it ended): this body's writes are refused from then on, so stop the work.
    pub fn signal(&self) -> CancelSignal {
        self.shared.cancel.clone()
    }

    /// Lets go of the body's run in this process: the body was lost before it settled (see
    /// [`Interruption::BodyLost`](super::Interruption::BodyLost)).
    pub(crate) fn lose(&self, why: String) {
        let call = self.me.call.clone();
        self.shared.interrupt(super::Interruption::BodyLost { call, why });
    }

    /// The body's span (`body`, carrying the session, the call, its dispatch id and attempt;
    /// nothing without the `tracing` feature): run the tool's work in it.
    pub fn span(&self) -> &Span {
        &self.me.span
    }

    /// The session.
    pub fn session(&self) -> &stepjournal_codec::SessionId {
        &self.shared.session
    }

    /// A second handle on this body, for output written while the first finishes it (the tool
    /// executor's `CallCtx`).
    pub(crate) fn twin(&self) -> Body {
        Body { shared: self.shared.clone(), me: self.me.clone() }
    }

    /// The run's error if it can no longer write (ended, fenced, broken, let go).
    pub(crate) fn can_write(&self) -> Result<(), WriteError> {
        let inner = self.shared.view();
        self.shared.writable(&inner)
    }

    /// The clock the run stamps its appends with.
    pub(crate) fn clock(&self) -> &std::sync::Arc<dyn super::Clock> {
        &self.shared.clock
    }

    /// The idempotency key to hand an external service: `session:dispatch`.
    pub fn idempotency_key(&self) -> &str {
        &self.me.key
    }

    /// Commits output the body produced while running (`output_chunk`), durably. If the run is
    /// lost, recovery hands the chunks of the last attempt to the model as the call's
    /// `partial` output.
    pub fn output_chunk(&self, text: impl Into<String>) -> Result<(), WriteError> {
        block_on(self.output_chunk_async(text))
    }

    /// [`output_chunk`](Self::output_chunk), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn output_chunk_async(&self, text: impl Into<String>) -> Result<(), WriteError> {
        let text = text.into();
        self.append(|call, attempt| {
            Event::OutputChunk(OutputChunk { call, attempt, text: text.clone() })
        })
        .await
    }

    /// Ends the body with its result (`tool_result`), durably; `is_error` when the tool
    /// reported an error. Refused if the call was resolved meanwhile ([`Refusal::Resolved`]).
    ///
    /// When the result is not recorded (refused, too large to encode, the store failed), the
    /// body comes back in the [`FinishError`], so the runtime can still record an error result
    /// through it (a run that was fenced or ended refuses that too).
    pub fn finish(self, output: RawJson, is_error: bool) -> Result<(), FinishError> {
        block_on(self.finish_async(output, is_error))
    }

    /// [`finish`](Self::finish), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn finish_async(self, output: RawJson, is_error: bool) -> Result<(), FinishError> {
        let written = self
            .append(|call, attempt| {
                Event::ToolResult(ToolResult {
                    call,
                    attempt,
                    output: output.clone(),
                    is_error,
                    metadata: None,
                })
            })
            .await;
        written.map_err(|error| FinishError { body: self, error: Box::new(error) })
    }

    /// [`finish`](Self::finish) with a size limit: an output whose JSON text is over
    /// `max_bytes` is not kept whole; a result saying so is recorded instead, holding the first
    /// `max_bytes` of the text ([`cut_output`]), marked an error only when the tool's result
    /// was one (the tool ran and did its work; the model learns its output was cut).
    pub fn finish_capped(
        self,
        output: RawJson,
        is_error: bool,
        max_bytes: usize,
    ) -> Result<Recorded, FinishError> {
        block_on(self.finish_capped_async(output, is_error, max_bytes))
    }

    /// [`finish_capped`](Self::finish_capped), awaited.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn finish_capped_async(
        self,
        output: RawJson,
        is_error: bool,
        max_bytes: usize,
    ) -> Result<Recorded, FinishError> {
        let bytes = output.get().len();
        if bytes <= max_bytes {
            return self.finish_async(output, is_error).await.map(|()| Recorded::Output);
        }
        let output = cut_output(&output, max_bytes);
        self.finish_async(output, is_error).await.map(|()| Recorded::OverLimit { bytes, max_bytes })
    }

    async fn append(&self, event: impl Fn(CallId, Attempt) -> Event) -> Result<(), WriteError> {
        let mut writer = self.shared.write().await;
        writer
            .append(|inner| {
                if inner.state.call(&self.me.call).is_some_and(|r| r.is_resolved()) {
                    return Err(Refusal::Resolved { call: self.me.call.clone() });
                }
                Ok((vec![event(self.me.call.clone(), self.me.attempt)], ()))
            })
            .await
    }
}

/// What is recorded in place of an output whose JSON text is over `max_bytes`: an object saying
/// so, with the text's length and its first `max_bytes` bytes (cut at a character boundary) as a
/// string:
/// `{"output_cut": "the tool's output was N bytes, over the limit of M bytes: its first M bytes are in head", "bytes": N, "head": "..."}`.
pub fn cut_output(output: &RawJson, max_bytes: usize) -> RawJson {
    let text = output.get();
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let said = serde_json::json!({
        "output_cut": format!(
            "the tool's output was {} bytes, over the limit of {max_bytes} bytes: its first {end} \
             bytes are in head",
            text.len()
        ),
        "bytes": text.len(),
        "head": text.get(..end).unwrap_or_default(),
    });
    RawJson::from_value(&said).unwrap_or_else(|_| RawJson::null())
}

/// Why [`Body::finish`](super::Body::finish) recorded no result, with the body handed back:
/// the call stays open, and the runtime can still record a result through it (an error result
/// saying what went wrong, one that fits under the size limit).
#[derive(Debug, thiserror::Error)]
#[error("the result of call `{}` (attempt {}) was not recorded: {error}", .body.call(), .body.attempt())]
pub struct FinishError {
    /// The body, to finish again.
    pub body: Body,
    /// Why the result was not recorded (boxed: the body is carried back beside it).
    #[source]
    pub error: Box<WriteError>,
}

impl From<FinishError> for WriteError {
    /// The error alone (the body is dropped: its call stays open for recovery to decide).
    fn from(e: FinishError) -> Self {
        *e.error
    }
}

/// What [`Body::finish_capped`](super::Body::finish_capped) recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recorded {
    /// The output, as given.
    Output,
    /// A result saying the output was over the limit, with its head ([`cut_output`]).
    OverLimit {
        /// The output's size, in bytes of JSON text.
        bytes: usize,
        /// The limit it was over.
        max_bytes: usize,
    },
}
