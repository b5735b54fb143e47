//! The spans of runs, steps and bodies (feature `tracing`); without the feature, spans that are
//! nothing and cost nothing.

use std::future::Future;

use stepjournal_codec::{Attempt, CallId, DispatchId, RunId, SessionId, StepNo};

/// A span: `tracing::Span` with the feature.
#[cfg(feature = "tracing")]
pub type Span = tracing::Span;

/// A span: nothing, without the `tracing` feature.
#[cfg(not(feature = "tracing"))]
#[derive(Debug, Clone, Default)]
pub struct Span;

/// The span of a run: `run` with its session, its id and the entry it began through.
pub(crate) fn run_span(session: &SessionId, run: &RunId, entry: &'static str) -> Span {
    #[cfg(feature = "tracing")]
    {
        tracing::info_span!("run", session = %session, run = %run, entry = entry)
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = (session, run, entry);
        Span
    }
}

/// The span of a step driven within `run`: `step` with its session and number.
pub(crate) fn step_span(run: &Span, session: &SessionId, step: StepNo) -> Span {
    #[cfg(feature = "tracing")]
    {
        tracing::info_span!(parent: run, "step", session = %session, step = step.get())
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = (run, session, step);
        Span
    }
}

/// The span of a body within `run`: `body` with its session, call, dispatch id and attempt.
pub(crate) fn body_span(
    run: &Span,
    session: &SessionId,
    call: &CallId,
    dispatch: &DispatchId,
    attempt: Attempt,
) -> Span {
    #[cfg(feature = "tracing")]
    {
        tracing::info_span!(
            parent: run,
            "body",
            session = %session,
            call = %call,
            dispatch = %dispatch,
            attempt = attempt.get()
        )
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = (run, session, call, dispatch, attempt);
        Span
    }
}

/// `future`, entered in `span` each time it is polled (with the feature).
pub(crate) fn in_span<F: Future>(future: F, span: &Span) -> impl Future<Output = F::Output> {
    #[cfg(feature = "tracing")]
    {
        tracing::Instrument::instrument(future, span.clone())
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = span;
        future
    }
}
