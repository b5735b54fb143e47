//! [`DriveOptions`]: how `drive` runs a step.

use std::time::Duration;

use stepjournal_codec::ToolName;

use crate::tools::Tools;

/// How [`Step::drive_with`](crate::Step::drive_with) runs a step.
///
/// | setting | default |
/// |---|---|
/// | [`concurrency`](Self::concurrency) | 16 calls at once |
/// | [`output_interval`](Self::output_interval) | 100 ms between two committed outputs of a call |
/// | [`max_output_bytes`](Self::max_output_bytes) | none (the store's record limit still holds) |
/// | [`deadline`](Self::deadline) | none: a body runs as long as it takes |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriveOptions {
    pub(super) concurrency: usize,
    pub(super) output_interval: Duration,
    pub(super) max_output_bytes: Option<usize>,
    deadline: Option<Duration>,
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            concurrency: 16,
            output_interval: Duration::from_millis(100),
            max_output_bytes: None,
            deadline: None,
        }
    }
}

impl DriveOptions {
    /// The defaults (see the table above).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most this many calls run at once (at least 1; 0 is taken as 1). Default 16.
    pub fn concurrency(mut self, calls: usize) -> Self {
        self.concurrency = calls.max(1);
        self
    }

    /// A call's output ([`CallCtx::output`](crate::tools::CallCtx::output)) is committed at
    /// most once per this interval, by the journal's clock. Default 100 ms.
    pub fn output_interval(mut self, interval: Duration) -> Self {
        self.output_interval = interval;
        self
    }

    /// A result whose JSON text is over this many bytes is recorded as an error result saying
    /// so ([`Body::finish_capped`](crate::Body::finish_capped)). Default none.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = Some(bytes);
        self
    }

    /// Every call's body whose tool has no deadline of its own
    /// ([`Tools::deadline`](crate::Tools::deadline)) is given this long, from when its
    /// carrying out begins. A body past its deadline is treated as a crash of the run, chosen:
    /// the run is let go ([`Interruption::Deadline`](crate::Interruption::Deadline)), its
    /// signal fires, the bodies still running are dropped, and `drive` returns
    /// [`DriveError::Deadline`](super::DriveError::Deadline). The `wake` that follows decides each call by FORMAT.md's rules
    /// (an unsafe call whose body started is `outcome_unknown`, a safe one may run again within
    /// `max_bodies`) and fences the late body, whose result is refused;
    /// [`Journal::drive_within`](crate::Journal::drive_within) begins that wake and drives it.
    /// Default none.
    pub fn deadline(mut self, after: Duration) -> Self {
        self.deadline = Some(after);
        self
    }

    /// The deadline of a body of `tool` in `tools`: its tool's own, else this one's.
    pub(crate) fn deadline_of(&self, tools: &Tools, tool: &ToolName) -> Option<Duration> {
        tools.deadline_of(tool).or(self.deadline)
    }
}
