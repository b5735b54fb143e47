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

    /// The outcome named `name` in the JSON form ([`as_str`](Self::as_str)), if any.
    pub fn from_name(name: &str) -> Option<RunOutcome> {
        [RunOutcome::Completed, RunOutcome::Failed, RunOutcome::Stopped, RunOutcome::Suspended]
            .into_iter()
            .find(|o| o.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_found_by_its_name_and_nothing_else_is() {
        for o in
            [RunOutcome::Completed, RunOutcome::Failed, RunOutcome::Stopped, RunOutcome::Suspended]
        {
            assert_eq!(RunOutcome::from_name(o.as_str()), Some(o));
        }
        assert_eq!(RunOutcome::from_name("Completed"), None);
        assert_eq!(RunOutcome::from_name(""), None);
    }
}
