//! How a run ended: a `run_ended`'s outcome, which a `snapshot` keeps too.

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The run finished its work.
    Completed,
    /// The run failed (a store error after the save, for example).
    Failed,
    /// The run was stopped.
    Stopped,
    /// The run suspended waiting for client or approval answers.
    Suspended,
}

impl RunOutcome {
    /// The outcome's name in the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Stopped => "stopped",
            RunOutcome::Suspended => "suspended",
        }
    }
}
