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

/// Events (feature `tracing`, target `stepjournal`): what an operator looks for after an
/// incident. Each carries the session and the run; without the feature they cost nothing.
pub(crate) mod event {
    use stepjournal_codec::{RunId, SessionId};
    use stepjournal_recovery::Plan;

    use super::super::{Fence, Interruption, Refusal};

    /// A write of `run` was refused because a newer run or a stop fenced it.
    pub(crate) fn fenced(session: &SessionId, run: &RunId, by: &Fence) {
        #[cfg(feature = "tracing")]
        tracing::warn!(target: "stepjournal", %session, %run, by = %by, "write fenced");
        #[cfg(not(feature = "tracing"))]
        let _ = (session, run, by);
    }

    /// The protocol refused a write of `run`.
    pub(crate) fn refused(session: &SessionId, run: &RunId, refusal: &Refusal) {
        #[cfg(feature = "tracing")]
        tracing::info!(
            target: "stepjournal",
            %session,
            %run,
            refusal = refusal.refusal_code().as_str(),
            reason = %refusal,
            "write refused"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = (session, run, refusal);
    }

    /// This process let go of `run`.
    pub(crate) fn interrupted(session: &SessionId, run: &RunId, why: &Interruption) {
        #[cfg(feature = "tracing")]
        tracing::warn!(target: "stepjournal", %session, %run, why = %why, "run let go");
        #[cfg(not(feature = "tracing"))]
        let _ = (session, run, why);
    }

    /// The store failed under `run`; `poisoned`: it refuses everything until reopened.
    pub(crate) fn store_failed(session: &SessionId, run: &RunId, error: &str, poisoned: bool) {
        #[cfg(feature = "tracing")]
        if poisoned {
            tracing::error!(target: "stepjournal", %session, %run, error, "store poisoned");
        } else {
            tracing::error!(target: "stepjournal", %session, %run, error, "store failed");
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (session, run, error, poisoned);
    }

    /// The entry that began `run` decided each call of the saved step so (one event a call).
    pub(crate) fn decided(session: &SessionId, run: &RunId, entry: &'static str, plan: &Plan) {
        #[cfg(feature = "tracing")]
        for call in &plan.calls {
            tracing::info!(
                target: "stepjournal",
                %session,
                %run,
                entry,
                call = %call.call,
                action = call.action.name(),
                rule = call.rule.id,
                "recovery decided"
            );
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (session, run, entry, plan);
    }
}
