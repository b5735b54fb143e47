//! The ledger: what happened outside the journal, in the order it happened.

use std::sync::{Arc, Mutex, MutexGuard};

use stepjournal_codec::{Attempt, CallId, DispatchId, SessionId, StepNo};

/// One thing that happened outside the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerEntry {
    /// A body started: [`Step::start_body`](stepjournal::Step::start_body) returned, so its
    /// `attempt_started` was acknowledged.
    BodyStarted {
        /// The step of the call's reply.
        step: StepNo,
        /// The call.
        call: CallId,
        /// The dispatch id the body was handed.
        dispatch: DispatchId,
        /// Its attempt.
        attempt: Attempt,
    },
    /// A tool's external effect (an email sent, a row written), keyed on the dispatch id.
    Effect {
        /// The step of the call's reply.
        step: StepNo,
        /// The call.
        call: CallId,
        /// The dispatch id the effect was keyed on.
        dispatch: DispatchId,
        /// The attempt of the body that performed it.
        attempt: Attempt,
        /// What the tool did.
        what: String,
        /// Performed by a body whose run had been abandoned (it kept running after a newer run
        /// took the session over).
        late: bool,
    },
    /// A body's tool returned its result: the executor records it next (`tool_result`).
    BodyEnded {
        /// The step of the call's reply.
        step: StepNo,
        /// The call.
        call: CallId,
        /// The dispatch id the body was handed.
        dispatch: DispatchId,
        /// Its attempt.
        attempt: Attempt,
    },
    /// A remote sub-agent's child was asked to start, keyed on the dispatch id (the remote
    /// side starts one child per dispatch id, however often it is asked).
    ChildStarted {
        /// The step of the call's reply.
        step: StepNo,
        /// The call.
        call: CallId,
        /// The dispatch id the start was keyed on.
        dispatch: DispatchId,
        /// The child's session.
        child: SessionId,
    },
    /// An entry (a redirect or a stop) closed a step: nothing of it may start afterwards.
    StepClosed {
        /// The step.
        step: StepNo,
        /// The entry's kind (`new_turn`, `resume`, `retry`, `stop`).
        entry: &'static str,
    },
}

impl LedgerEntry {
    /// The call the entry is about, with its step (none for [`LedgerEntry::StepClosed`]).
    pub fn call(&self) -> Option<(StepNo, &CallId)> {
        match self {
            LedgerEntry::BodyStarted { step, call, .. }
            | LedgerEntry::BodyEnded { step, call, .. }
            | LedgerEntry::Effect { step, call, .. }
            | LedgerEntry::ChildStarted { step, call, .. } => Some((*step, call)),
            LedgerEntry::StepClosed { .. } => None,
        }
    }

    /// The dispatch id the entry was keyed on, if any.
    pub fn dispatch(&self) -> Option<&DispatchId> {
        match self {
            LedgerEntry::BodyStarted { dispatch, .. }
            | LedgerEntry::BodyEnded { dispatch, .. }
            | LedgerEntry::Effect { dispatch, .. }
            | LedgerEntry::ChildStarted { dispatch, .. } => Some(dispatch),
            LedgerEntry::StepClosed { .. } => None,
        }
    }
}

/// The record of external effects, kept outside the journal (it survives every simulated
/// crash, as the outside world does). Cloning gives another handle to the same ledger.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Arc<Mutex<Vec<LedgerEntry>>>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<LedgerEntry>> {
        // A push cannot leave the list half-changed.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `entry` after every entry recorded so far.
    pub fn record(&self, entry: LedgerEntry) {
        self.lock().push(entry);
    }

    /// Every entry, in the order recorded.
    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.lock().clone()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}
