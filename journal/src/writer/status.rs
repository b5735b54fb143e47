//! Where a run stands ([`RunStatus`]), what fenced it ([`Fence`]), and how one call is behind
//! another ([`Order`]): the writer's state as a runtime reads it.

use std::fmt;

use std::time::Duration;

use stepjournal_codec::{CallId, RunId, RunOutcome, Seq};
use stepjournal_recovery::order::Lane;

/// What fenced a run: an event another writer appended after the run's last append.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fence {
    /// Another run began (any entry but `stop`): it owns the session now.
    RunStarted {
        /// Where its `run_started` is.
        seq: Seq,
        /// The new run.
        run: RunId,
        /// The entry it began through (`wake`, `resume`, `retry`, `new_turn`).
        entry: &'static str,
    },
    /// A `run_ended` this run did not write: a `stop` issued elsewhere, or another writer ended
    /// the run.
    RunEnded {
        /// Where the `run_ended` is.
        seq: Seq,
        /// The run it names.
        run: RunId,
        /// The outcome it gives.
        outcome: RunOutcome,
    },
    /// The session's log is shorter than the run last saw it: it was deleted.
    LogShrank {
        /// The tail the run had seen.
        expected: Seq,
        /// The tail now.
        actual: Seq,
    },
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fence::RunStarted { seq, run, entry } => {
                write!(f, "run `{run}` began through `{entry}` at seq {seq}")
            }
            Fence::RunEnded { seq, run, outcome } => write!(
                f,
                "a `run_ended` {} naming run `{run}` was written elsewhere at seq {seq}",
                outcome.as_str()
            ),
            Fence::LogShrank { expected, actual } => write!(
                f,
                "the session's log ends at seq {actual}, before the run's last append ended at \
                 {expected} (the session was deleted)"
            ),
        }
    }
}

/// Why this process let go of a run it had not ended ([`RunStatus::Interrupted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Interruption {
    /// A future of the run was dropped (a timeout, a `select!`, a cancelled request) while it
    /// was writing: the batch it had handed to the store may have landed, so the run no longer
    /// knows where its session stands.
    FutureDropped {
        /// What the future was doing: the operation (`commit_reply`, `drive`, ...).
        during: &'static str,
    },
    /// [`Journal::shutdown`](crate::Journal::shutdown) reached its deadline with the run open.
    ShutDown,
    /// A body overran its deadline ([`DriveOptions::deadline`](crate::DriveOptions::deadline)):
    /// the run was let go as if it had crashed, and the late body's result is refused.
    Deadline {
        /// The call whose body overran.
        call: CallId,
        /// The deadline it had.
        after: Duration,
    },
    /// A body's host could not say what the body came to: it went away with the body still
    /// running (an embedding's event loop shut down, its thread died), so whether its effect
    /// happened is unknown ([`CallCtx::let_go_of_run`](crate::CallCtx::let_go_of_run)). The run
    /// was let go as if it had crashed: nothing more of the call is recorded, and the wake that
    /// follows applies the rules (an unsafe call is `outcome_unknown`).
    BodyLost {
        /// The call whose body was lost.
        call: CallId,
        /// What the host said.
        why: String,
    },
}

impl fmt::Display for Interruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Interruption::FutureDropped { during } => write!(
                f,
                "a future of the run was dropped during `{during}`: what it was writing may have landed"
            ),
            Interruption::ShutDown => f.write_str("the journal shut down with the run open"),
            Interruption::Deadline { call, after } => {
                write!(f, "the body of call `{call}` overran its deadline of {after:?}")
            }
            Interruption::BodyLost { call, why } => {
                write!(f, "the body of call `{call}` was lost before it settled: {why}")
            }
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunStatus {
    /// The run may append.
    Open,
    /// The run wrote its `run_ended` (or, for `stop`, the entry wrote it).
    Ended {
        /// How it ended.
        outcome: RunOutcome,
        /// The error its `run_ended` names, if any.
        error: Option<String>,
    },
    /// Another writer fenced the run: a newer run owns the session.
    Fenced(Fence),
    /// A store failure left the run unable to write anything, not even its `run_ended`.
    Broken {
        /// The failure.
        error: String,
    },
    /// This process let go of the run without ending it: a future of the run was dropped while
    /// it wrote, the journal shut down, or a body overran its deadline. It writes nothing more;
    /// a new entry (`wake`) goes on from what landed, by FORMAT.md's rules, as after a crash.
    Interrupted(Interruption),
}

impl RunStatus {
    /// The status as the bindings hand it to a runtime: `{state: "open"}`,
    /// `{state: "ended", outcome, error}`, `{state: "fenced", by}` (what fenced it, in words),
    /// `{state: "broken", error}` or `{state: "interrupted", why}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            RunStatus::Open => serde_json::json!({"state": "open"}),
            RunStatus::Ended { outcome, error } => {
                serde_json::json!({"state": "ended", "outcome": outcome.as_str(), "error": error})
            }
            RunStatus::Fenced(by) => serde_json::json!({"state": "fenced", "by": by.to_string()}),
            RunStatus::Broken { error } => serde_json::json!({"state": "broken", "error": error}),
            RunStatus::Interrupted(why) => {
                serde_json::json!({"state": "interrupted", "why": why.to_string()})
            }
        }
    }
}

/// How a call is behind another: the owned form of recovery's [`Lane`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Order {
    /// Both calls are in this concurrency group.
    Group(String),
    /// Both calls are in the reply's sequential chain.
    Sequential,
}

impl Order {
    /// The lane of the reply this order is, as recovery's order rule names it.
    pub fn lane(&self) -> Lane<'_> {
        match self {
            Order::Group(group) => Lane::Group(group),
            Order::Sequential => Lane::Sequential,
        }
    }
}

impl From<Lane<'_>> for Order {
    fn from(lane: Lane<'_>) -> Self {
        match lane {
            Lane::Group(group) => Order::Group(group.to_owned()),
            Lane::Sequential => Order::Sequential,
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.lane().fmt(f)
    }
}
