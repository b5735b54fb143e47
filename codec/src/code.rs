//! The stable codes of every error the engine reports: [`ErrorCode`], and for the protocol's
//! refusals [`RefusalCode`]. Each crate maps its own errors to them ([`Coded`]) by an exhaustive
//! match, so a new error variant cannot go without a code; the bindings show them (the Node
//! package's `StepjournalError.code`) and test their own types against [`ErrorCode::ALL`] and
//! [`RefusalCode::ALL`]. A code, once published, keeps its text.
//!
//! They live here, in the lowest crate, because every crate's errors need them and the codes are
//! a form of their own: the names a program matches on, as the JSON form is the events'.

/// Defines a fieldless enum of codes with its text and the list of all of them, so that the
/// list cannot leave a code out.
macro_rules! codes {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every code, in the order they are declared.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The code's text (lower case, words joined by `_`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The code whose text is `text`.
            pub fn from_text(text: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|c| c.as_str() == text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

codes! {
    /// What kind of failure an error is: the code a program matches on.
    pub enum ErrorCode {
        /// The session's tail moved: nothing was written (a lost compare-and-set, or other
        /// writers kept appending).
        Conflict = "conflict",
        /// The store cannot tell whether an append landed: read the session before writing again.
        OutcomeUnknown = "outcome_unknown",
        /// An event could not be encoded (larger than the record limit, for example): nothing was
        /// written.
        Encode = "encode",
        /// The store failed (an I/O or database error).
        Store = "store",
        /// Stored bytes are damaged.
        Corrupt = "corrupt",
        /// Stored bytes are of a format version newer than this build reads: a newer
        /// stepjournal reads them; nothing was cut or removed.
        NewerFormat = "newer_format",
        /// An earlier write or sync failed: the store refuses everything until it is reopened.
        Poisoned = "poisoned",
        /// The store was opened read-only.
        ReadOnly = "read_only",
        /// The store was closed: open it again to use it.
        Closed = "closed",
        /// The store answered against its own contract (a read that skipped sequence numbers).
        StoreContract = "store_contract",
        /// The store's URL cannot be opened by this build.
        InvalidUrl = "invalid_url",
        /// Another process holds the journal's writer lock.
        Locked = "locked",
        /// What was found where a store was to be opened or created is not one.
        NotAJournal = "not_a_journal",
        /// Options (of a store, of recovery) are inconsistent.
        InvalidOptions = "invalid_options",
        /// Recovery refused the entry (FORMAT.md's `validation_error`): nothing was written.
        ValidationError = "validation_error",
        /// The journal is shutting down and takes no new work.
        ShuttingDown = "shutting_down",
        /// Another journal of this process runs over the same store.
        StoreInUse = "store_in_use",
        /// Another owner's run holds a live lease on the session.
        LeaseHeld = "lease_held",
        /// A newer run (or a stop issued elsewhere) owns the session: this run writes nothing more.
        Fenced = "fenced",
        /// The run has ended.
        Ended = "ended",
        /// A store failure left the run unable to write.
        Broken = "broken",
        /// This process let go of the run (a future dropped while writing, a shutdown, a body
        /// past its deadline): a new entry goes on.
        Interrupted = "interrupted",
        /// A body overran its deadline: the run was let go, a `wake` goes on.
        Deadline = "deadline",
        /// The protocol forbids the write now; [`RefusalCode`] says which rule.
        Refused = "refused",
        /// A recovery conformance scenario is not FORMAT.md's shape.
        MalformedScenario = "malformed_scenario",
        /// An id breaks the rule for ids (empty, too long, or holding a control character).
        InvalidId = "invalid_id",
        /// A text is not FORMAT.md's JSON form of an event.
        InvalidJson = "invalid_json",
        /// An entry given as JSON is not FORMAT.md's entry.
        InvalidEntry = "invalid_entry",
        /// A reply given by a binding is not `{text, calls}` of known tools.
        InvalidReply = "invalid_reply",
        /// A tool's definition (its name, replay policy or input schema) is not acceptable.
        InvalidTool = "invalid_tool",
        /// An answer given from outside (a client's output) is not JSON.
        InvalidAnswer = "invalid_answer",
        /// A run outcome given by name is not one of `completed`, `failed`, `stopped`.
        InvalidOutcome = "invalid_outcome",
        /// The call's work was cancelled: its run can no longer write (fenced, or shut down).
        Cancelled = "cancelled",
    }
}

codes! {
    /// Which protocol rule refused a write ([`ErrorCode::Refused`]).
    pub enum RefusalCode {
        /// A reply names one call id twice.
        RepeatedCall = "repeated_call",
        /// A step is still open.
        StepOpen = "step_open",
        /// The step is no longer open.
        StepClosed = "step_closed",
        /// The call is not one of the step's.
        UnknownCall = "unknown_call",
        /// The call is already resolved.
        Resolved = "resolved",
        /// The entry's plan paired the call: it must not run.
        PairedByPlan = "paired_by_plan",
        /// The client executes this call.
        ClientCall = "client_call",
        /// The call waits for its approval.
        AwaitingApproval = "awaiting_approval",
        /// The call already started a body in this run.
        BodyStarted = "body_started",
        /// The call has started `max_bodies` bodies.
        MaxBodies = "max_bodies",
        /// The call has no child to re-attach to.
        NoChild = "no_child",
        /// The call has a child but no body started to re-attach under.
        NoBodyStarted = "no_body_started",
        /// The call is behind an unresolved call of its group or chain.
        Behind = "behind",
        /// The call is behind a call whose effect is in doubt or never happened.
        BehindBlocked = "behind_blocked",
        /// The plan's attempt is not the log's next.
        AttemptMismatch = "attempt_mismatch",
        /// The operation does not fit the call's kind.
        WrongKind = "wrong_kind",
        /// The approval was already decided.
        AlreadyDecided = "already_decided",
        /// The call is already bound to a child.
        ChildAttached = "child_attached",
        /// The call may have run: it cannot be answered `not_started`.
        MayHaveRun = "may_have_run",
        /// A suspension named no call.
        NothingToAwait = "nothing_to_await",
        /// A suspension named a call that cannot be waited for.
        NotAwaitable = "not_awaitable",
        /// Bodies of the run have no result yet.
        BodiesRunning = "bodies_running",
        /// Calls of the step are unresolved.
        OpenCalls = "open_calls",
        /// The reply names a tool that is not registered.
        UnknownTool = "unknown_tool",
        /// A call's arguments fail its tool's input schema.
        InvalidArguments = "invalid_arguments",
        /// A run suspends through `Step::suspend`, not `end(suspended)`.
        UseSuspend = "use_suspend",
        /// No call of the session's saved step waits for this answer.
        NotWaiting = "not_waiting",
    }
}

/// An error with a stable code: every error type of the engine implements it.
pub trait Coded {
    /// What kind of failure this is.
    fn code(&self) -> ErrorCode;

    /// For [`ErrorCode::Refused`]: which rule refused.
    fn refusal(&self) -> Option<RefusalCode> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_has_its_own_text_of_lower_case_words() {
        let texts: Vec<&str> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .chain(RefusalCode::ALL.iter().map(|c| c.as_str()))
            .collect();
        let errors: HashSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        let refusals: HashSet<&str> = RefusalCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(errors.len(), ErrorCode::ALL.len(), "error codes are distinct");
        assert_eq!(refusals.len(), RefusalCode::ALL.len(), "refusal codes are distinct");
        for t in texts {
            assert!(!t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{t}");
        }
    }

    #[test]
    fn a_code_is_found_again_by_its_text() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_text(c.as_str()), Some(c));
        }
        for &c in RefusalCode::ALL {
            assert_eq!(RefusalCode::from_text(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::from_text("no_such_code"), None);
    }
}
