//! [`Violation`]: an invariant a simulation's history breaks, said so a person can act on it.

use stepjournal_codec::{Attempt, CallId, DispatchId, EventKind, Seq, SessionId, StepNo};
use stepjournal_recovery::Finding;

/// An invariant a history breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// An invariant of several actors at once (the explorer's actor search) broken.
    #[error("{rule}: {what}")]
    Actors {
        /// The invariant, in a few words.
        rule: &'static str,
        /// What broke it, and where.
        what: String,
    },
    /// An unsafe call's body started more than once under one dispatch id.
    #[error(
        "unsafe call `{call}` started {bodies} bodies under dispatch id `{dispatch}`: an unsafe \
         call may start one"
    )]
    UnsafeBodyTwice {
        /// The call.
        call: CallId,
        /// The dispatch id.
        dispatch: DispatchId,
        /// How many bodies the ledger shows.
        bodies: usize,
    },
    /// An unsafe call's effect was performed by more than one body.
    #[error(
        "unsafe call `{call}` had its effect performed by attempts {attempts:?} under dispatch \
         id `{dispatch}`: once per call at most"
    )]
    UnsafeEffectTwice {
        /// The call.
        call: CallId,
        /// The dispatch id.
        dispatch: DispatchId,
        /// The attempts that performed it.
        attempts: Vec<Attempt>,
    },
    /// An effect was performed by a body the ledger never saw start (its `attempt_started` was
    /// not acknowledged first).
    #[error(
        "call `{call}` performed an effect as attempt {attempt} before that body started \
         (save first: attempt_started must be durable before the tool runs)"
    )]
    EffectWithoutBody {
        /// The call.
        call: CallId,
        /// The attempt named.
        attempt: Attempt,
    },
    /// One call ran under more than one dispatch id.
    #[error("call `{call}` ran under dispatch ids {dispatches:?}: every attempt must use one")]
    DispatchChanged {
        /// The call.
        call: CallId,
        /// The dispatch ids seen, in the log and the ledger.
        dispatches: Vec<DispatchId>,
    },
    /// A call started more bodies than `max_bodies`.
    #[error("call `{call}` started {bodies} bodies; max_bodies is {max}")]
    TooManyBodies {
        /// The call.
        call: CallId,
        /// How many.
        bodies: u32,
        /// The limit.
        max: u32,
    },
    /// The ledger shows a body of a call no reply in the log holds.
    #[error(
        "a body of call `{call}` (step {step}) ran, but no reply in the log holds the call: a \
         body started before its reply was durable"
    )]
    BodyWithoutReply {
        /// The step.
        step: StepNo,
        /// The call.
        call: CallId,
    },
    /// The ledger shows a body whose `attempt_started` is not in the log.
    #[error("call `{call}` started attempt {attempt}, but its attempt_started is not in the log")]
    BodyNotInLog {
        /// The call.
        call: CallId,
        /// The attempt.
        attempt: Attempt,
    },
    /// A call has more than one answer that counts.
    #[error("call `{call}` has {answers} answers that count; it must have exactly one")]
    AnsweredTwice {
        /// The call.
        call: CallId,
        /// How many.
        answers: usize,
    },
    /// A call has no answer in the transcript where it must have one.
    #[error("call `{call}` of step {step} has no answer in the transcript, {when}")]
    Unanswered {
        /// The call.
        call: CallId,
        /// Its step.
        step: StepNo,
        /// Why it must have one.
        when: &'static str,
    },
    /// An append a store acknowledged is not in the log as it was acknowledged.
    #[error(
        "the acknowledged append at seq {seq} of {session} is lost: it held `{expected}`, the log \
         holds {}",
        match .found {
            None => "nothing there".to_owned(),
            Some(k) if k == .expected => format!("another `{k}` there"),
            Some(k) => format!("`{k}` there"),
        }
    )]
    AckedLost {
        /// The session.
        session: SessionId,
        /// The first position that differs.
        seq: Seq,
        /// The event kind acknowledged there.
        expected: EventKind,
        /// What the log holds there.
        found: Option<EventKind>,
    },
    /// The ledger shows a body started before the body whose result resolved a call it is
    /// behind had ended: they overlapped, which the order rule forbids.
    #[error(
        "call `{call}` started attempt {attempt} before attempt {ahead_attempt} of `{ahead}`, \
         which it is behind and whose result resolved it, had ended (ledger order)"
    )]
    StartedBeforeAheadEnded {
        /// The call.
        call: CallId,
        /// Its attempt.
        attempt: Attempt,
        /// The call it is behind.
        ahead: CallId,
        /// The attempt of `ahead` whose result resolved it.
        ahead_attempt: Attempt,
    },
    /// A body started while a call it is behind was unresolved, or after that call's effect was
    /// put in doubt or denied.
    #[error(
        "call `{call}` started attempt {attempt} at seq {seq} while `{ahead}`, which it is behind \
         ({order}), {why}"
    )]
    OrderBroken {
        /// The call.
        call: CallId,
        /// The attempt it started.
        attempt: Attempt,
        /// Where its `attempt_started` is.
        seq: Seq,
        /// The call it is behind.
        ahead: CallId,
        /// `group NAME` or `the sequential chain`.
        order: String,
        /// What held `ahead`.
        why: String,
    },
    /// A call's body started, or wrote output or a result, after its step was closed.
    #[error("call `{call}` of step {step} wrote `{what}` at seq {seq}, after the step was closed")]
    RanAfterClose {
        /// The call.
        call: CallId,
        /// The step.
        step: StepNo,
        /// Where.
        seq: Seq,
        /// What it wrote.
        what: EventKind,
    },
    /// The ledger shows a body started after an entry (a redirect or a stop) closed its step.
    #[error("call `{call}` started attempt {attempt} after a `{entry}` entry closed step {step}")]
    StartedAfterClose {
        /// The call.
        call: CallId,
        /// The attempt.
        attempt: Attempt,
        /// The step.
        step: StepNo,
        /// The entry that closed it.
        entry: &'static str,
    },
    /// A fenced writer's write was accepted.
    #[error("a fenced body's `{what}` for call `{call}` attempt {attempt} was accepted")]
    FencedWriteAccepted {
        /// The call.
        call: CallId,
        /// The attempt.
        attempt: Attempt,
        /// What it wrote.
        what: EventKind,
    },
    /// A fenced writer's write is in the log.
    #[error(
        "a fenced body's `{what}` for call `{call}` attempt {attempt} is in the log at seq {seq}"
    )]
    FencedWriteLanded {
        /// The call.
        call: CallId,
        /// The attempt.
        attempt: Attempt,
        /// What it wrote.
        what: EventKind,
        /// Where.
        seq: Seq,
    },
    /// `recovery::verify` found a protocol problem in the log.
    #[error("the log breaks the protocol: {0}")]
    Protocol(Finding),
    /// The session was to be over, but is not.
    #[error("the session did not end: {why}")]
    NotEnded {
        /// What is left.
        why: String,
    },
    /// A refused entry wrote something.
    #[error("a refused `{entry}` entry moved the tail from {before} to {after}")]
    RefusedEntryWrote {
        /// The entry's kind.
        entry: &'static str,
        /// The tail before.
        before: Seq,
        /// The tail after.
        after: Seq,
    },
    /// The same log read from another store, or exported and imported, is not the same log,
    /// or gives an entry another plan.
    #[error("the log's copies disagree: {what}")]
    CopiesDiffer {
        /// Which copy, and how.
        what: String,
    },
    /// The store could not be opened again after a crash.
    #[error("the store ({medium}) could not be opened after a crash: {error}")]
    Reopen {
        /// The medium.
        medium: String,
        /// Why.
        error: String,
    },
    /// The writer did something the protocol does not allow it to, or refused what it must
    /// allow; the simulation could not go on.
    #[error("{what}")]
    Unexpected {
        /// What happened, and where.
        what: String,
    },
}
