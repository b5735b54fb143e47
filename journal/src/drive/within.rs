//! [`Journal::drive_within`]: a run's step driven with its deadlines, a body that overran
//! recovered by a `wake` in the same call.

use stepjournal_codec::Entry;

use super::{DriveError, DriveOptions, StepOutcome};
use crate::tools::Tools;
use crate::writer::{Journal, Run};

impl Journal {
    /// Drives the step `run` has open ([`Run::drive_with`]) and, when a body overruns its
    /// deadline ([`DriveOptions::deadline`], [`Tools::deadline`](crate::Tools::deadline)),
    /// begins the `wake` that recovers the step and drives that, until the step is done: so a
    /// runtime bounds a hung tool in one call, without dropping `drive`. The wake fences the
    /// late body (its result is refused) and decides each call by FORMAT.md's rules: an unsafe
    /// call whose body started is answered `outcome_unknown`, a safe one runs again under the
    /// same dispatch id while `max_bodies` allows, then `replay_limit_reached`; so the loop
    /// ends. Returns the run that finished the step (`run` itself when no deadline was
    /// overrun) and what driving it came to (`None`: the run holds no open step).
    ///
    /// **Dropped before it finished**: as [`Run::drive`] dropped, the run driving the step is
    /// let go; a wake that had begun after a deadline may have landed (a crashed run the next
    /// start recovers).
    pub async fn drive_within(
        &self,
        run: &Run,
        tools: &Tools,
        options: DriveOptions,
    ) -> Result<(Run, Option<StepOutcome>), DriveError> {
        let mut run = run.clone();
        // Each wake after a deadline starts a new attempt of the overrunning call or pairs it,
        // and a call has at most `max_bodies`: the bound is never reached by the rules.
        let bound = u64::from(self.config().max_bodies()).saturating_add(2);
        for _ in 0..bound {
            match run.drive_with(tools, options).await {
                Err(DriveError::Deadline { session, .. }) => {
                    run = self
                        .begin_run_async(&session, Entry::Wake)
                        .await
                        .map_err(|e| DriveError::Wake { session, source: Box::new(e) })?;
                }
                driven => return driven.map(|outcome| (run, outcome)),
            }
        }
        run.drive_with(tools, options).await.map(|outcome| (run, outcome))
    }
}
