//! `drive`: one call runs a step by the rules. [`Step::drive`] carries out every call of the
//! step that should run, with the [`Tools`]' handlers, and commits the step (or suspends the
//! run for the client's answers and approvals); [`Run::drive`] does it for the step a
//! recovered run holds.
//!
//! - A new call starts a body (attempt 1); in a recovered step each call is carried out as the
//!   entry's plan says: `run` starts exactly the planned attempt under the same dispatch id,
//!   `reattach` and `start_child` go on with the remote sub-agent's last body (no new
//!   attempt), `reenter_child` re-enters a companion; `keep` and `pair` leave the call alone.
//! - Within a concurrency group, and along the sequential chain, a call starts only once every
//!   call it is behind is resolved (recovery's [`order`](stepjournal_recovery::order) rule, the
//!   one the writer's `start_body` refuses by); a call behind one whose effect is in doubt or
//!   that never ran is answered `not_started`. The other calls run concurrently, at most
//!   [`DriveOptions::concurrency`] at a time, all inside the future `drive` returns (it spawns
//!   nothing: any executor runs it).
//! - A handler's error is recorded as an error result; a handler that panics is caught and
//!   recorded as an error result saying so, never left as a lost call.
//! - Client calls and approval-gated calls with no decision are waited for: once every other
//!   call is done, the run suspends (`suspended`, `run_ended suspended`) and `drive` returns
//!   [`StepOutcome::Suspended`]. [`Journal::answer_client`](crate::Journal::answer_client) and
//!   [`Journal::decide_approval`](crate::Journal::decide_approval) write the answer through a
//!   woken run, which `drive` goes on with.
//! - Otherwise the step is committed and `drive` returns each call's answer for the model (its
//!   result, the client's answer, the denial, or the pairing with its message and partial
//!   output), in the transcript's order.

mod answer;
mod call;
mod error;
mod options;
mod recover;
mod schedule;
mod timer;
mod within;

use std::collections::{HashMap, HashSet};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use stepjournal_codec::{CallId, CheckpointId};
use stepjournal_recovery::{CallPlan, TranscriptItem, answers_of};

use crate::tools::Tools;
use crate::writer::{Interruption, Run, Step, in_span, step_span};
pub use answer::AnswerError;
use call::{Job, Limits, Stopped, carry_out_within};
pub use error::DriveError;
pub use options::DriveOptions;
pub use recover::{RecoverFailure, RecoverOptions, Recovered};
use schedule::round;

/// What driving a step came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepOutcome {
    /// Every call has its answer and the step is committed (`step_commit`).
    Committed {
        /// The step's commit checkpoint.
        checkpoint: CheckpointId,
        /// Each call's answer for the model, in the transcript's order: `ToolResult`,
        /// `ClientAnswer`, `ApprovalDenied` or `Paired` items.
        answers: Vec<TranscriptItem>,
    },
    /// The run suspended to wait for these calls (client answers, approvals), in reply order;
    /// everything that could run has. Answer them through
    /// [`Journal::answer_client`](crate::Journal::answer_client) /
    /// [`Journal::decide_approval`](crate::Journal::decide_approval).
    Suspended {
        /// The calls waited for.
        awaiting: Vec<CallId>,
    },
}

impl StepOutcome {
    /// What driving the step came to, as the bindings hand it to a runtime:
    /// `{status: "committed", checkpoint, answers}` (each answer in
    /// [`TranscriptItem::to_json`]'s form) or `{status: "suspended", awaiting}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            StepOutcome::Committed { checkpoint, answers } => serde_json::json!({
                "status": "committed",
                "checkpoint": checkpoint.as_str(),
                "answers": TranscriptItem::list_to_json(answers),
            }),
            StepOutcome::Suspended { awaiting } => serde_json::json!({
                "status": "suspended",
                "awaiting": awaiting.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            }),
        }
    }
}

/// Lets go of the step's run if the `drive` future is dropped before it finished: the bodies
/// it was running are dropped with it (their results never recorded) and an append it had
/// handed to the store may land, so the run cannot go on; a `wake` recovers the step.
struct LetGoIfDropped<'a> {
    step: &'a Step,
    armed: bool,
}

impl Drop for LetGoIfDropped<'_> {
    fn drop(&mut self) {
        if self.armed && !crate::plant::active(crate::plant::WriterPlant::DroppedAppendUnseen) {
            self.step.interrupt(Interruption::FutureDropped { during: "drive" });
        }
    }
}

impl Step {
    /// Runs the step by the rules with `tools`' handlers and the default [`DriveOptions`] (see
    /// the [module](crate::drive)).
    ///
    /// **Dropped before it finished** (a timeout, a `select!`): the bodies it was running are
    /// dropped with it, their results never recorded, and the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused, never a second attempt in this run; a `wake` recovers the step.
    /// To bound a slow tool, give it a deadline instead ([`DriveOptions::deadline`]).
    pub async fn drive(&self, tools: &Tools) -> Result<StepOutcome, DriveError> {
        self.drive_with(tools, DriveOptions::default()).await
    }

    /// [`drive`](Self::drive) with these options.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn drive_with(
        &self,
        tools: &Tools,
        options: DriveOptions,
    ) -> Result<StepOutcome, DriveError> {
        let span = step_span(self.run_span(), self.session(), self.number());
        let mut dropped = LetGoIfDropped { step: self, armed: true };
        let driven = in_span(self.drive_in_span(tools, options), &span).await;
        dropped.armed = false;
        driven
    }

    async fn drive_in_span(
        &self,
        tools: &Tools,
        options: DriveOptions,
    ) -> Result<StepOutcome, DriveError> {
        let limits = Limits {
            output_interval: options.output_interval,
            max_output_bytes: options.max_output_bytes,
        };
        let number = self.number();
        let step_error = |doing: &'static str| {
            move |source| DriveError::Step {
                session: self.session().clone(),
                step: number,
                doing,
                source,
            }
        };
        // Calls running or carried out by this drive: never scheduled twice.
        let mut busy: HashSet<CallId> = HashSet::new();
        let mut running = FuturesUnordered::new();
        // The entry's decisions never change while the run lasts: read once.
        let plan: HashMap<CallId, CallPlan> = self
            .calls()
            .into_iter()
            .filter_map(|c| self.action(&c.call).map(|p| (c.call, p)))
            .collect();
        let awaiting = loop {
            let next =
                self.with_state(|state| round(state, number, |c| plan.get(c).cloned(), &busy));
            for call in &next.skip {
                self.skip_async(call).await.map_err(|source| DriveError::Call {
                    session: self.session().clone(),
                    step: number,
                    call: call.clone(),
                    doing: "answering a call behind one in doubt `not_started`",
                    source,
                })?;
            }
            let room = options.concurrency.saturating_sub(running.len());
            for (call, how) in next.start.into_iter().take(room) {
                let Some(job) = self.job(&call, how) else { continue };
                busy.insert(call);
                let deadline = options.deadline_of(tools, &job.tool);
                running.push(carry_out_within(self, tools, job, limits, deadline));
            }
            if running.is_empty() {
                if next.skip.is_empty() {
                    break next.awaiting;
                }
                continue;
            }
            match running.next().await {
                Some(Err(Stopped::Failed(failed))) => {
                    return Err(DriveError::Call {
                        session: self.session().clone(),
                        step: number,
                        call: failed.call,
                        doing: failed.doing,
                        source: failed.error,
                    });
                }
                Some(Err(Stopped::Overran { call, after })) => {
                    // The run was let go: the bodies still running are dropped with `running`.
                    return Err(DriveError::Deadline {
                        session: self.session().clone(),
                        step: number,
                        call,
                        after,
                    });
                }
                Some(Ok(())) | None => {}
            }
        };
        drop(running);
        if !awaiting.is_empty() {
            self.suspend_async(&awaiting).await.map_err(step_error("suspending the run"))?;
            return Ok(StepOutcome::Suspended { awaiting });
        }
        // Read before the commit: a commit that carries a snapshot leaves the run's view
        // folded from it, without this step's reply.
        let answers = self.with_state(|state| {
            state.replies().iter().rev().find(|r| r.step == number).map(|r| answers_of(state, r))
        });
        let answers = answers.unwrap_or_default();
        let checkpoint = self.commit_async().await.map_err(step_error("committing the step"))?;
        Ok(StepOutcome::Committed { checkpoint, answers })
    }

    /// What carrying out `call` needs, from the step as the run sees it.
    fn job(&self, call: &CallId, how: schedule::How) -> Option<Job> {
        self.with_state(|state| {
            let record = state.call(call).filter(|r| r.step() == self.number())?;
            Some(Job {
                call: call.clone(),
                tool: record.call().tool.clone(),
                kind: record.kind(),
                args: record.call().args.clone(),
                child: record.child().cloned(),
                how,
            })
        })
    }
}

impl Run {
    /// Drives the step the run has open (the saved step its entry recovered, see
    /// [`Step::drive`]); `None` when it has none.
    ///
    /// **Dropped before it finished**: as [`Step::drive`] dropped.
    pub async fn drive(&self, tools: &Tools) -> Result<Option<StepOutcome>, DriveError> {
        self.drive_with(tools, DriveOptions::default()).await
    }

    /// [`drive`](Self::drive) with these options.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn drive_with(
        &self,
        tools: &Tools,
        options: DriveOptions,
    ) -> Result<Option<StepOutcome>, DriveError> {
        match self.step() {
            Some(step) => step.drive_with(tools, options).await.map(Some),
            None => Ok(None),
        }
    }
}
