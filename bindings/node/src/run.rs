//! `NativeRun`: one pass of the runtime over a session, with its entry's plan.

use napi_derive::napi;
use stepjournal::codec::{ContinuationId, Seq};
use stepjournal::{DriveOptions, Journal, Run, Tools};

use crate::convert;
use crate::error::thrown;
use crate::step::NativeStep;

/// A run.
#[napi]
#[derive(Debug, Clone)]
pub struct NativeRun {
    run: Run,
    /// The journal it was begun in: the wake after a deadline ([`Self::drive_within`]).
    journal: Journal,
    tools: Tools,
}

impl NativeRun {
    pub(crate) fn new(run: Run, journal: Journal, tools: Tools) -> Self {
        NativeRun { run, journal, tools }
    }
}

/// What [`NativeRun::drive_within`] came to: the run that finished the step and the outcome.
#[napi]
#[derive(Debug)]
pub struct NativeDriven {
    run: NativeRun,
    outcome: Option<String>,
}

#[napi]
impl NativeDriven {
    /// The run that finished the step: the run driven, or the wake begun after a deadline.
    #[napi(getter)]
    pub fn run(&self) -> NativeRun {
        self.run.clone()
    }

    /// What driving came to as JSON text, or `null` when the run held no open step.
    #[napi(getter)]
    pub fn outcome(&self) -> Option<String> {
        self.outcome.clone()
    }
}

#[napi]
impl NativeRun {
    /// The run's id.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.run.id().as_str().to_owned()
    }

    /// The session.
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.run.session().as_str().to_owned()
    }

    /// The entry's plan (FORMAT.md's plan JSON: each call with its action and rule), as text.
    #[napi(getter)]
    pub fn plan(&self) -> String {
        self.run.plan().to_json()
    }

    /// The run's status as JSON text.
    #[napi(getter)]
    pub fn status(&self) -> String {
        convert::status(&self.run.status())
    }

    /// What the model is shown, up to the run's tail, as a JSON array's text; with `since`,
    /// only the items whose events lie at or after that seq (what is new since a turn).
    #[napi]
    pub async fn transcript(&self, since: Option<i64>) -> napi::Result<String> {
        let since = Seq(since.and_then(|s| u64::try_from(s).ok()).unwrap_or(0));
        let items = self.run.transcript_since_async(since).await.map_err(thrown)?;
        Ok(convert::items(&items))
    }

    /// Appends a `snapshot` of the session as the run sees it now: the seq where it landed, or
    /// `null` (nothing written) when the run's view cannot make one. Refused while a step is
    /// open (`step_open`).
    #[napi]
    pub async fn snapshot(&self) -> napi::Result<Option<f64>> {
        let at = self.run.snapshot_async().await.map_err(thrown)?;
        // A JavaScript number, as every seq in the JSON the module gives (a transcript item's).
        Ok(at.map(|seq| seq.get() as f64))
    }

    /// Trims the session through this run, keeping its last `keep_turns` turns whole: what was
    /// dropped, as `{trimmed, before, from, at, turns}` or `{trimmed: false, why}`, as JSON text.
    #[napi]
    pub async fn trim(&self, keep_turns: u32) -> napi::Result<String> {
        let keep = usize::try_from(keep_turns).unwrap_or(usize::MAX);
        let done = self.run.trim_async(keep).await.map_err(thrown)?;
        Ok(done.to_json().to_string())
    }

    /// Records that a model request was cut off (`model_aborted`) with its partial answer and,
    /// if the provider gave one, the handle to go on with it (`continuation`: checked as ids
    /// are, `invalid_id` otherwise). Refused while a step is open (`step_open`).
    #[napi]
    pub async fn model_aborted(
        &self,
        partial: String,
        continuation: Option<String>,
    ) -> napi::Result<()> {
        let continuation = continuation.map(ContinuationId::new).transpose().map_err(thrown)?;
        self.run.model_aborted_with_async(partial, continuation).await.map_err(thrown)
    }

    /// The step the run has open (a recovered step), if any.
    #[napi]
    pub fn step(&self) -> Option<NativeStep> {
        let step = self.run.step()?;
        Some(NativeStep::new(step, self.tools.clone()))
    }

    /// Commits the model's reply (`{text, calls}` as JSON text): the step, its reply durable.
    #[napi]
    pub async fn commit_reply(&self, reply: String) -> napi::Result<NativeStep> {
        let reply = convert::reply(&self.tools, &reply)?;
        let step = self.run.commit_reply_async(reply).await.map_err(thrown)?;
        Ok(NativeStep::new(step, self.tools.clone()))
    }

    /// Drives the step the run has open; the outcome as JSON text, or `null` with none.
    #[napi]
    pub async fn drive(&self) -> napi::Result<Option<String>> {
        let outcome = self.run.drive(&self.tools).await.map_err(thrown)?;
        Ok(outcome.as_ref().map(convert::step_outcome))
    }

    /// Drives the step the run has open as [`Journal::drive_within`] does: a body past its
    /// deadline (its tool's `timeoutMs`) lets go of the run, and a `wake` begun in the same call
    /// decides the call by the rules and drives the step on, until it is done.
    #[napi]
    pub async fn drive_within(&self) -> napi::Result<NativeDriven> {
        let driven = self.journal.drive_within(&self.run, &self.tools, DriveOptions::new()).await;
        let (run, outcome) = driven.map_err(thrown)?;
        let outcome = outcome.as_ref().map(convert::step_outcome);
        Ok(NativeDriven {
            run: NativeRun::new(run, self.journal.clone(), self.tools.clone()),
            outcome,
        })
    }

    /// Ends the run: `completed`, `failed` or `stopped`.
    #[napi]
    pub async fn end(&self, outcome: String) -> napi::Result<()> {
        let outcome = convert::outcome(&outcome)?;
        self.run.end_async(outcome).await.map_err(thrown)
    }

    /// Ends the run `failed`, pairing each open call.
    #[napi]
    pub async fn fail(&self, error: Option<String>) -> napi::Result<()> {
        self.run.fail_async(error).await.map_err(thrown)
    }
}
