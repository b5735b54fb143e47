//! The writer's errors: why an entry did not begin a run, why an append of a run was not made.
//!
//! `docs/embedding.md` says what each means and what a runtime does about it.

use std::fmt;

use stepjournal_backends::{AppendError, Lease, StoreError, StoreIdentity};
use stepjournal_codec::{
    Attempt, CallId, CallKind, Coded, ErrorCode, PairReason, RefusalCode, RunId, RunOutcome, Seq,
    SessionId, StepNo, ToolName,
};
use stepjournal_recovery::ValidationError;

use super::status::{Fence, Interruption, Order};

/// Why [`Journal::new`](super::Journal::new) made no journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Another journal of this process runs over the same store: it would take that one's live
    /// runs for crashed ones. Share that journal (clones are cheap), or drop it first.
    #[error(
        "another journal of this process runs over {store}: share that one (a Journal is \
         cheap to clone) or drop it first"
    )]
    StoreInUse {
        /// The store.
        store: StoreIdentity,
    },
}

impl Coded for JournalError {
    fn code(&self) -> ErrorCode {
        match self {
            JournalError::StoreInUse { .. } => ErrorCode::StoreInUse,
        }
    }
}

/// Why [`Journal::begin_run`](super::Journal::begin_run) began no run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BeginError {
    /// Recovery refused the entry (the plan's `validation_error`); nothing was written. Fix the
    /// entry as the message says (a `retry` needs a failed last run; a checkpoint must be
    /// enterable) or choose another.
    #[error("the entry is refused and nothing was written: {0}")]
    Refused(#[source] ValidationError),
    /// The session's log could not be read.
    #[error("cannot read session `{session}` to begin a run: {source}")]
    Read {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The entry's batch (`run_started` and the plan's appends) could not be appended: the store
    /// failed, or an event could not be encoded. Nothing of the run was written unless the
    /// store's failure hides it; begin again once the store works (reopen a poisoned store).
    #[error("cannot append the entry's events to session `{session}`: {source}")]
    Append {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: AppendError,
    },
    /// Other writers kept appending to the session between each read and the append, for every
    /// attempt allowed ([`JournalOptions::begin_attempts`](super::JournalOptions::begin_attempts)).
    /// Nothing was written; begin again later.
    #[error(
        "session `{session}` kept changing while the run began ({attempts} attempts); nothing \
         was written: begin again"
    )]
    Contended {
        /// The session.
        session: SessionId,
        /// How many rounds were made.
        attempts: u32,
    },
    /// The session changed after the caller read it (another actor appended: a second runtime
    /// recovered it, an answer landed): an entry decided on what was read is not made over it.
    /// Nothing was written.
    #[error(
        "session `{session}` changed since it was read at seq {read} (it is at seq {found} \
         now): nothing was written"
    )]
    Changed {
        /// The session.
        session: SessionId,
        /// The tail the caller read.
        read: Seq,
        /// The tail found.
        found: Seq,
    },
    /// The journal is shutting down ([`Journal::shutdown`](super::Journal::shutdown)): it takes
    /// no new work. Nothing was written.
    #[error("the journal is shutting down: no run of session `{session}` was begun")]
    ShuttingDown {
        /// The session.
        session: SessionId,
    },
    /// Another owner's run holds a live lease on the session (a recovery never fences a live
    /// run). Nothing was written; it is that owner's to finish, or to recover once its lease
    /// lapses.
    #[error(
        "session `{session}` is run by `{}` (run `{}`, lease live until {} ms): nothing was \
         written", .lease.owner, .lease.run, .lease.expires.get()
    )]
    LeaseHeld {
        /// The session.
        session: SessionId,
        /// The live lease.
        lease: Lease,
    },
    /// A stop found the session's last run already ended `completed`, `failed` or `stopped`
    /// (on its first read, or on reading again after another writer appended): there is
    /// nothing to stop, and nothing was written. (A run that ended `suspended` is stopped: the
    /// stop ends it again.)
    #[error(
        "session `{session}`'s last run ended `{}`: nothing to stop; nothing was written",
        .outcome.as_str()
    )]
    NothingToStop {
        /// The session.
        session: SessionId,
        /// How its last run ended.
        outcome: RunOutcome,
    },
    /// The store failed taking the session's lease. Nothing was written.
    #[error("cannot take the lease of session `{session}`: {source}")]
    Lease {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl BeginError {
    /// The session the entry was for.
    pub fn session(&self) -> Option<&SessionId> {
        match self {
            BeginError::Refused(_) => None,
            BeginError::Read { session, .. }
            | BeginError::Append { session, .. }
            | BeginError::Contended { session, .. }
            | BeginError::ShuttingDown { session }
            | BeginError::LeaseHeld { session, .. }
            | BeginError::NothingToStop { session, .. }
            | BeginError::Changed { session, .. }
            | BeginError::Lease { session, .. } => Some(session),
        }
    }
}

/// What became of a run after a store failure ([`WriteError::Store`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterFailure {
    /// The store still accepted writes: the run paired each open call of its step
    /// (`outcome_unknown` where a body started, `not_started` where none did) and ended
    /// `failed`. Begin a `retry` run (no message) to rewind those pairings and recover the step.
    EndedFailed,
    /// Nothing more could be written (the store is poisoned, or refused the failure's own
    /// write). Reopen the store and begin a `wake` run: recovery covers the step.
    Unwritable,
}

impl fmt::Display for AfterFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AfterFailure::EndedFailed => f.write_str(
                "the run paired its open calls and ended `failed`: begin a `retry` run to recover",
            ),
            AfterFailure::Unwritable => f.write_str(
                "nothing more could be written: reopen the store and begin a `wake` run to recover",
            ),
        }
    }
}

/// Why an append of a run was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The protocol forbids the append now; nothing was written and the run goes on.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A newer run (or a `stop` issued elsewhere) owns the session; nothing was written, and
    /// nothing of this run ever will be. Stop the run's work (its bodies' results are refused)
    /// and drop it.
    #[error(
        "run `{run}` of session `{session}` is fenced, nothing was written: {by}. A newer run \
         owns the session: stop this run's work"
    )]
    Fenced {
        /// The session.
        session: SessionId,
        /// The fenced run.
        run: RunId,
        /// What fenced it.
        by: Fence,
    },
    /// The run has ended; nothing was written.
    #[error("run `{run}` has ended `{}`{}; nothing was written", .outcome.as_str(),
        .error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Ended {
        /// The run.
        run: RunId,
        /// How it ended.
        outcome: RunOutcome,
        /// The error its `run_ended` names, if any.
        error: Option<String>,
    },
    /// An earlier store failure left the run unable to write; nothing was written. Reopen the
    /// store and begin a `wake` run.
    #[error(
        "run `{run}` can no longer write after a store failure ({error}); nothing was written: \
         reopen the store and begin a `wake` run"
    )]
    Broken {
        /// The run.
        run: RunId,
        /// The failure.
        error: String,
    },
    /// This process let go of the run ([`RunStatus::Interrupted`](super::RunStatus)): a future
    /// of it was dropped while writing, the journal shut down, or a body overran its deadline.
    /// Nothing was written, and nothing of this run ever will be: begin a `wake` run, which
    /// goes on from what landed by FORMAT.md's rules.
    #[error(
        "run `{run}` of session `{session}` was let go ({why}); nothing was written: begin a \
         `wake` run to go on"
    )]
    Interrupted {
        /// The session.
        session: SessionId,
        /// The run.
        run: RunId,
        /// Why it was let go.
        why: Interruption,
    },
    /// The store failed on this append (not a conflict). The append did not land, unless
    /// `source` is [`AppendError::OutcomeUnknown`] (then it may have: recovery reads it); `then`
    /// says what became of the run and which entry recovers it.
    #[error("the store failed during run `{run}` of session `{session}` ({source}); {then}")]
    Store {
        /// The session.
        session: SessionId,
        /// The run.
        run: RunId,
        /// The store's error.
        #[source]
        source: AppendError,
        /// What became of the run.
        then: AfterFailure,
    },
    /// An event could not be encoded (larger than the store's record limit, for example);
    /// nothing was written and the run goes on. Send something smaller (a tool's output can be
    /// cut, or replaced by an error result).
    #[error("an event of run `{run}` cannot be stored, nothing was written: {source}")]
    Encode {
        /// The run.
        run: RunId,
        /// The encoder's refusal.
        #[source]
        source: AppendError,
    },
    /// Other writers kept appending events that do not fence the run (client answers written
    /// elsewhere, for example), for every attempt allowed; nothing was written. Try again.
    #[error(
        "session `{session}` kept changing under run `{run}` ({attempts} attempts); nothing \
         was written: try again"
    )]
    Contended {
        /// The session.
        session: SessionId,
        /// The run.
        run: RunId,
        /// How many rounds were made.
        attempts: u32,
    },
}

/// An append the protocol forbids now: nothing was written and the run goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The reply names one call id twice: events could not be told apart. Give each call of a
    /// reply its own id.
    #[error("the reply names call `{call}` twice: call ids must be unique within a reply")]
    RepeatedCall {
        /// The repeated id.
        call: CallId,
    },
    /// A step is open: commit it (or suspend) before the next reply, or before ending the run.
    #[error("step {step} is still open: commit it (or suspend the run) first")]
    StepOpen {
        /// The open step.
        step: StepNo,
    },
    /// The step handle's step is no longer open (it was committed, or the run suspended).
    #[error("step {step} is no longer open")]
    StepClosed {
        /// The step.
        step: StepNo,
    },
    /// The call is not one of the step's calls.
    #[error("call `{call}` is not a call of step {step}")]
    UnknownCall {
        /// The step.
        step: StepNo,
        /// The call named.
        call: CallId,
    },
    /// The call is resolved (a result, a client answer, a denied approval, or a pairing).
    #[error("call `{call}` is already resolved")]
    Resolved {
        /// The call.
        call: CallId,
    },
    /// The entry's plan paired the call: recovery decided it must not run again.
    #[error("call `{call}` was paired `{}` by this run's entry (rule `{rule}`): it must not run",
        .reason.as_str())]
    PairedByPlan {
        /// The call.
        call: CallId,
        /// The pairing's reason.
        reason: PairReason,
        /// The rule that decided.
        rule: &'static str,
    },
    /// A body was asked of a call the client executes: record its answer with
    /// [`Step::client_answer`](super::Step::client_answer).
    #[error("call `{call}` is executed by the client: record its answer, do not start a body")]
    ClientCall {
        /// The call.
        call: CallId,
    },
    /// An approval-gated call's body was asked before its approval: record the decision with
    /// [`Step::approval`](super::Step::approval) first.
    #[error("call `{call}` waits for an approval: record the decision before starting its body")]
    AwaitingApproval {
        /// The call.
        call: CallId,
    },
    /// The call already started (or re-attached to) a body in this run; a run starts at most
    /// one body per call (another attempt is recovery's to decide: end the run `failed` and
    /// `retry`).
    #[error(
        "call `{call}` already started or re-attached a body in this run (attempt {attempt}); \
         another attempt is recovery's to decide"
    )]
    BodyStarted {
        /// The call.
        call: CallId,
        /// The attempt this run started or re-attached to.
        attempt: Attempt,
    },
    /// The call has started `max_bodies` bodies in all. When its child is attached (`child`),
    /// the child still runs: finish the call through [`Step::reattach`](super::Step::reattach),
    /// which starts no body.
    #[error("call `{call}` has started {bodies} bodies; at most {max} are allowed{}",
        .child.as_ref().map(|c| format!(
            ". Its child `{c}` is attached: re-attach to it with `Step::reattach`, which starts \
             no body"
        )).unwrap_or_default())]
    MaxBodies {
        /// The call.
        call: CallId,
        /// Bodies started so far.
        bodies: u32,
        /// `max_bodies`.
        max: u32,
        /// The child the call is bound to, if any.
        child: Option<SessionId>,
    },
    /// A re-attach was asked of a call with no `child_attached`: nothing runs to re-attach to.
    /// Start it with [`Step::start_body`](super::Step::start_body) (a remote sub-agent's child is
    /// started under its dispatch id, then bound with
    /// [`Step::child_attached`](super::Step::child_attached)).
    #[error(
        "call `{call}` has no child attached, so there is nothing to re-attach to: start it \
         with `Step::start_body`"
    )]
    NoChild {
        /// The call.
        call: CallId,
    },
    /// A re-attach was asked of a call whose child is attached but which never started a body
    /// (no `attempt_started`, or none under a minted dispatch id, which the protocol forbids):
    /// there is no attempt to record the child's result under. Start
    /// its first body with [`Step::start_body`](super::Step::start_body) and re-attach to the
    /// child from it.
    #[error(
        "call `{call}` has child `{child}` attached but no body started, so there is no attempt \
         to re-attach under: start its first body with `Step::start_body`"
    )]
    NoBodyStarted {
        /// The call.
        call: CallId,
        /// The child it is bound to.
        child: SessionId,
    },
    /// The call is behind an unresolved call of its group or of the sequential chain: start it
    /// once that call is resolved.
    #[error("call `{call}` is behind call `{ahead}` of {order}, which is not resolved yet")]
    Behind {
        /// The call.
        call: CallId,
        /// The call ahead of it.
        ahead: CallId,
        /// How it is behind.
        order: Order,
    },
    /// The call is behind a call of its group or of the sequential chain whose effect is in
    /// doubt or never happened (paired, or its approval denied): it was written to follow that
    /// effect, so it must not run. Answer it with [`Step::skip`](super::Step::skip).
    #[error("call `{call}` is behind call `{ahead}` of {order}, which {why}: it must not run")]
    BehindBlocked {
        /// The call.
        call: CallId,
        /// The call ahead of it.
        ahead: CallId,
        /// How it is behind.
        order: Order,
        /// What became of the call ahead.
        why: String,
    },
    /// The entry's plan said to run attempt `planned`, but the log's next attempt is `next`.
    #[error("call `{call}`: the plan runs attempt {planned}, but the next attempt is {next}")]
    AttemptMismatch {
        /// The call.
        call: CallId,
        /// The attempt the plan gave.
        planned: Attempt,
        /// Bodies started + 1.
        next: Attempt,
    },
    /// The operation does not fit the call's kind.
    #[error("call `{call}` is of kind `{}`; {what} needs {wanted}", .kind.as_str())]
    WrongKind {
        /// The call.
        call: CallId,
        /// Its kind.
        kind: CallKind,
        /// The operation.
        what: &'static str,
        /// The kinds it needs.
        wanted: &'static str,
    },
    /// The call's approval was already decided.
    #[error("call `{call}`'s approval is already decided")]
    AlreadyDecided {
        /// The call.
        call: CallId,
    },
    /// The call is already bound to a child.
    #[error("call `{call}` is already attached to child `{child}`")]
    ChildAttached {
        /// The call.
        call: CallId,
        /// The child it is bound to.
        child: SessionId,
    },
    /// The call cannot be answered `not_started`: something may have run it.
    #[error("call `{call}` cannot be answered `not_started`: {why}")]
    MayHaveRun {
        /// The call.
        call: CallId,
        /// What may have run it.
        why: &'static str,
    },
    /// A suspension named no call.
    #[error("a suspension must name at least one call to wait for")]
    NothingToAwait,
    /// A suspension named a call that is not waiting for the client or an approval.
    #[error("call `{call}` cannot be waited for: {why}")]
    NotAwaitable {
        /// The call.
        call: CallId,
        /// Why.
        why: &'static str,
    },
    /// The run cannot suspend while bodies it started have no result: their results would be
    /// refused once it ended.
    #[error("step {step} has bodies of this run with no result yet ({}): finish them first",
        join(.calls))]
    BodiesRunning {
        /// The step.
        step: StepNo,
        /// The calls whose bodies run.
        calls: Vec<CallId>,
    },
    /// The step cannot be committed while calls are unresolved.
    #[error("step {step} cannot be committed: calls {} are not resolved", join(.calls))]
    OpenCalls {
        /// The step.
        step: StepNo,
        /// The unresolved calls, in reply order.
        calls: Vec<CallId>,
    },
    /// The model called a tool the registry does not have; the reply was not committed. Tell
    /// the model the tool does not exist and ask again.
    #[error("call `{call}` names tool `{tool}`, which is not registered: the reply is refused")]
    UnknownTool {
        /// The call.
        call: CallId,
        /// The tool it names.
        tool: ToolName,
    },
    /// A call's arguments fail its tool's input schema; the reply was not committed. Tell the
    /// model why and ask again.
    #[error(
        "the arguments of call `{call}` fail tool `{tool}`'s input schema ({reason}): the reply \
         is refused"
    )]
    InvalidArguments {
        /// The call.
        call: CallId,
        /// Its tool.
        tool: ToolName,
        /// What the schema check said.
        reason: String,
    },
    /// `end(suspended)`: a run suspends through [`Step::suspend`](super::Step::suspend), which
    /// names the calls it waits for.
    #[error("a run suspends through `Step::suspend`, naming the calls it waits for")]
    UseSuspend,
}

fn join(calls: &[CallId]) -> String {
    calls.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
}

impl Refusal {
    /// Which rule refused: the code bindings show beside [`ErrorCode::Refused`].
    pub fn refusal_code(&self) -> RefusalCode {
        match self {
            Refusal::RepeatedCall { .. } => RefusalCode::RepeatedCall,
            Refusal::StepOpen { .. } => RefusalCode::StepOpen,
            Refusal::StepClosed { .. } => RefusalCode::StepClosed,
            Refusal::UnknownCall { .. } => RefusalCode::UnknownCall,
            Refusal::Resolved { .. } => RefusalCode::Resolved,
            Refusal::PairedByPlan { .. } => RefusalCode::PairedByPlan,
            Refusal::ClientCall { .. } => RefusalCode::ClientCall,
            Refusal::AwaitingApproval { .. } => RefusalCode::AwaitingApproval,
            Refusal::BodyStarted { .. } => RefusalCode::BodyStarted,
            Refusal::MaxBodies { .. } => RefusalCode::MaxBodies,
            Refusal::NoChild { .. } => RefusalCode::NoChild,
            Refusal::NoBodyStarted { .. } => RefusalCode::NoBodyStarted,
            Refusal::Behind { .. } => RefusalCode::Behind,
            Refusal::BehindBlocked { .. } => RefusalCode::BehindBlocked,
            Refusal::AttemptMismatch { .. } => RefusalCode::AttemptMismatch,
            Refusal::WrongKind { .. } => RefusalCode::WrongKind,
            Refusal::AlreadyDecided { .. } => RefusalCode::AlreadyDecided,
            Refusal::ChildAttached { .. } => RefusalCode::ChildAttached,
            Refusal::MayHaveRun { .. } => RefusalCode::MayHaveRun,
            Refusal::NothingToAwait => RefusalCode::NothingToAwait,
            Refusal::NotAwaitable { .. } => RefusalCode::NotAwaitable,
            Refusal::BodiesRunning { .. } => RefusalCode::BodiesRunning,
            Refusal::OpenCalls { .. } => RefusalCode::OpenCalls,
            Refusal::UnknownTool { .. } => RefusalCode::UnknownTool,
            Refusal::InvalidArguments { .. } => RefusalCode::InvalidArguments,
            Refusal::UseSuspend => RefusalCode::UseSuspend,
        }
    }
}

impl Coded for Refusal {
    fn code(&self) -> ErrorCode {
        ErrorCode::Refused
    }

    fn refusal(&self) -> Option<RefusalCode> {
        Some(self.refusal_code())
    }
}

impl Coded for BeginError {
    fn code(&self) -> ErrorCode {
        match self {
            BeginError::Refused(e) => e.code(),
            BeginError::Read { source, .. } | BeginError::Lease { source, .. } => source.code(),
            BeginError::Append { source, .. } => source.code(),
            BeginError::Contended { .. } => ErrorCode::Conflict,
            BeginError::ShuttingDown { .. } => ErrorCode::ShuttingDown,
            BeginError::LeaseHeld { .. } => ErrorCode::LeaseHeld,
            BeginError::NothingToStop { .. } => ErrorCode::Ended,
            BeginError::Changed { .. } => ErrorCode::Conflict,
        }
    }
}

impl Coded for WriteError {
    fn code(&self) -> ErrorCode {
        match self {
            WriteError::Refused(r) => r.code(),
            WriteError::Fenced { .. } => ErrorCode::Fenced,
            WriteError::Ended { .. } => ErrorCode::Ended,
            WriteError::Broken { .. } => ErrorCode::Broken,
            WriteError::Interrupted { .. } => ErrorCode::Interrupted,
            WriteError::Store { source, .. } | WriteError::Encode { source, .. } => source.code(),
            WriteError::Contended { .. } => ErrorCode::Conflict,
        }
    }

    fn refusal(&self) -> Option<RefusalCode> {
        match self {
            WriteError::Refused(r) => r.refusal(),
            WriteError::Fenced { .. }
            | WriteError::Ended { .. }
            | WriteError::Broken { .. }
            | WriteError::Interrupted { .. }
            | WriteError::Store { .. }
            | WriteError::Encode { .. }
            | WriteError::Contended { .. } => None,
        }
    }
}
