//! What a simulation hands back: the [`Report`], and the [`ScriptError`] of a script it cannot
//! run.

use std::fmt::Write as _;

use stepjournal_codec::{CallId, Record, RunOutcome, SessionId, ToolName};

use super::ledger::LedgerEntry;
use super::violation::Violation;

/// A script the simulator cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// Two calls of the script share an id (they must be unique across the session).
    #[error("the script uses call id `{call}` twice; call ids must be unique across the script")]
    RepeatedCall {
        /// The id.
        call: CallId,
    },
    /// A call names a tool the tool set does not have.
    #[error("call `{call}` names tool `{tool}`, which the tool set does not have")]
    UnknownTool {
        /// The call.
        call: CallId,
        /// The tool.
        tool: ToolName,
    },
}

/// What a simulation found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The medium's name.
    pub medium: String,
    /// The simulated session.
    pub session: SessionId,
    /// Every invariant broken (empty: none).
    pub violations: Vec<Violation>,
    /// How many faults fired.
    pub faults_fired: u32,
    /// How many runs were begun (entries made).
    pub runs: u32,
    /// How the session ended: `completed` or `stopped`; `None` if it did not end.
    pub outcome: Option<RunOutcome>,
    /// What happened, in order: each run's entry, each fault, each late write's refusal.
    pub trace: Vec<String>,
    /// The session's log, read back after a clean restart at the end.
    pub log: Vec<Record>,
    /// The ledger.
    pub ledger: Vec<LedgerEntry>,
}

impl Report {
    /// Whether no invariant was broken and the session ended.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty() && self.outcome.is_some()
    }

    /// The violations, the trace and the log, for a failure message.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let ended = self.outcome.map_or("did not end", RunOutcome::as_str);
        let _ = writeln!(
            out,
            "simulation on {}: {} violation(s), {} fault(s) fired, {} run(s), session {ended}",
            self.medium,
            self.violations.len(),
            self.faults_fired,
            self.runs
        );
        for v in &self.violations {
            let _ = writeln!(out, "  violation: {v}");
        }
        let _ = writeln!(out, "trace:");
        for line in &self.trace {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(out, "log:");
        for record in &self.log {
            let json = stepjournal_codec::json::event_to_json(&record.event);
            let _ = writeln!(out, "  {:>3} {json}", record.seq);
        }
        out
    }
}
