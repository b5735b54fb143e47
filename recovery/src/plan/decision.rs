//! What becomes of one call of the saved step: its [`Action`] and the [`Rule`] that decided it.

use stepjournal_codec::{Attempt, CallId, DispatchId, PairReason, SessionId, ToolName};

/// What becomes of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Resolved: it keeps its result, answer, denial or pairing.
    Keep,
    /// Start a body: same dispatch id on every attempt. `dispatch` is `None` only when the log
    /// holds no `dispatch_minted` for the call; the writer mints one before the body starts.
    Run {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
        /// The attempt the body starts as: bodies started so far + 1.
        attempt: Attempt,
    },
    /// Answered without a result: a `paired` is among the appends.
    Pair {
        /// Why.
        reason: PairReason,
    },
    /// Left to the client's answer or the approval.
    Await,
    /// Re-attach to the remote child.
    Reattach {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
        /// The child's session.
        child: SessionId,
    },
    /// Start the remote child, keyed on the dispatch id (so it happens once).
    StartChild {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
    },
    /// Re-enter the persistent companion's child phase.
    ReenterChild {
        /// The call's dispatch id.
        dispatch: Option<DispatchId>,
    },
}

impl Action {
    /// The action's name in the plan's JSON form.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Run { .. } => "run",
            Action::Pair { .. } => "pair",
            Action::Await => "await",
            Action::Reattach { .. } => "reattach",
            Action::StartChild { .. } => "start_child",
            Action::ReenterChild { .. } => "reenter_child",
        }
    }

    /// Whether the action starts or resumes work outside the log (a body or a child).
    pub fn starts_work(&self) -> bool {
        matches!(
            self,
            Action::Run { .. }
                | Action::Reattach { .. }
                | Action::StartChild { .. }
                | Action::ReenterChild { .. }
        )
    }
}

/// The rule that decided a call: a stable id from [`crate::rules`] and a sentence for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule's stable id, such as `order.group`.
    pub id: &'static str,
    /// Why it applied to this call.
    pub why: String,
}

/// One call's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    /// The call.
    pub call: CallId,
    /// The tool it calls (as the reply saved it): what a runtime looks its handler up by.
    pub tool: ToolName,
    /// What becomes of it.
    pub action: Action,
    /// The rule that decided.
    pub rule: Rule,
}
