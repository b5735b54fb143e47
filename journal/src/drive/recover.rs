//! A runtime's start-up: every session to recover woken, its recovered step driven, the run
//! handed to the runtime to go on with.

use std::future::Future;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use stepjournal_backends::{Lease, StoreError};
use stepjournal_codec::{CallId, Coded, Entry, ErrorCode, RefusalCode, Seq, SessionId};

use super::{DriveError, DriveOptions, StepOutcome};
use crate::tools::Tools;
use crate::writer::{Begin, BeginError, Journal, Run, Wait};

/// How [`Journal::recover_all`] goes.
///
/// | setting | default |
/// |---|---|
/// | [`concurrency`](Self::concurrency) | 8 sessions at once |
/// | [`drive`](Self::drive) | [`DriveOptions::default`] |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoverOptions {
    concurrency: usize,
    drive: DriveOptions,
}

impl Default for RecoverOptions {
    fn default() -> Self {
        RecoverOptions { concurrency: 8, drive: DriveOptions::default() }
    }
}

impl RecoverOptions {
    /// The defaults (see the table above).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most this many sessions are recovered at once (at least 1). Default 8.
    pub fn concurrency(mut self, sessions: usize) -> Self {
        self.concurrency = sessions.max(1);
        self
    }

    /// How each recovered step is driven.
    pub fn drive(mut self, options: DriveOptions) -> Self {
        self.drive = options;
        self
    }
}

/// Why one session was not recovered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverFailure {
    /// Its `wake` did not begin.
    #[error(transparent)]
    Begin(BeginError),
    /// Its recovered step could not be driven to its end.
    #[error(transparent)]
    Drive(DriveError),
}

impl Coded for RecoverFailure {
    fn code(&self) -> ErrorCode {
        match self {
            RecoverFailure::Begin(e) => e.code(),
            RecoverFailure::Drive(e) => e.code(),
        }
    }

    fn refusal(&self) -> Option<RefusalCode> {
        match self {
            RecoverFailure::Begin(_) => None,
            RecoverFailure::Drive(e) => e.refusal(),
        }
    }
}

/// What [`Journal::recover_all`] did, session by session.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Recovered {
    /// The sessions woken and handed to the runtime, in the order they finished.
    pub recovered: Vec<SessionId>,
    /// The sessions another owner's run holds a live lease on: left to it.
    pub skipped: Vec<(SessionId, Lease)>,
    /// The sessions another actor wrote to after they were listed (another runtime recovered
    /// them, an answer or a stop landed): nothing was written to them, they are left to it.
    pub changed: Vec<SessionId>,
    /// The sessions suspended on client calls or approvals with no answer yet, with the calls
    /// each waits for, in reply order: route the answers to them
    /// ([`Journal::answer_client`], [`Journal::decide_approval`]). Nothing was written.
    pub waiting: Vec<(SessionId, Vec<CallId>)>,
    /// The sessions that could not be recovered, with why.
    pub failed: Vec<(SessionId, RecoverFailure)>,
}

enum One {
    Recovered(SessionId),
    Skipped(SessionId, Lease),
    Changed(SessionId),
    Failed(SessionId, RecoverFailure),
}

impl Journal {
    /// Recovers every session [`sessions_to_recover`](Journal::sessions_to_recover) lists, at
    /// most [`RecoverOptions::concurrency`] at once: each is woken (`wake`, taking the lease
    /// without forcing it: a session whose run holds a live lease is skipped and reported,
    /// never fenced), its recovered step driven with `tools`, and the run and the step's
    /// outcome (`None` when the run holds no open step) handed to `on_recovered`, which goes on
    /// with the agent loop.
    ///
    /// Each wake is made at the tail the session had when it was listed, or not at all: a
    /// session another actor wrote to meanwhile (a second runtime recovering at the same time,
    /// an answer, a stop) is left to it and reported in [`Recovered::changed`]. So two
    /// runtimes starting together never both wake one session. The sessions suspended on
    /// answers that have not come are reported in [`Recovered::waiting`] with the calls they
    /// wait for.
    ///
    /// **Dropped before it finished**: each wake it had begun is left as a dropped
    /// [`begin_run_async`](Journal::begin_run_async) or [`Step::drive`](crate::Step::drive)
    /// leaves it: a crashed run the next start recovers.
    pub async fn recover_all<F, Fut>(
        &self,
        tools: &Tools,
        options: RecoverOptions,
        on_recovered: F,
    ) -> Result<Recovered, StoreError>
    where
        F: Fn(Run, Option<StepOutcome>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut report = Recovered::default();
        let mut to_wake = Vec::new();
        for listed in self.start_up_async().await? {
            match listed.wait {
                Wait::Wake => to_wake.push((listed.session, listed.tail)),
                Wait::Answers => {
                    let calls = self.awaited(&listed.session).await?;
                    report.waiting.push((listed.session, calls));
                }
            }
        }
        let mut pending = to_wake.into_iter();
        let mut running = FuturesUnordered::new();
        loop {
            while running.len() < options.concurrency {
                let Some((session, tail)) = pending.next() else { break };
                running.push(self.recover_one(tools, options.drive, session, tail, &on_recovered));
            }
            match running.next().await {
                Some(One::Recovered(session)) => report.recovered.push(session),
                Some(One::Skipped(session, lease)) => report.skipped.push((session, lease)),
                Some(One::Changed(session)) => report.changed.push(session),
                Some(One::Failed(session, why)) => report.failed.push((session, why)),
                None => return Ok(report),
            }
        }
    }

    /// The calls a suspended session waits for and that are still unanswered, in reply order.
    async fn awaited(&self, session: &SessionId) -> Result<Vec<CallId>, StoreError> {
        let state = self.state_async(session).await?;
        let Some(suspension) = state.suspensions().last() else { return Ok(Vec::new()) };
        Ok(suspension
            .calls
            .iter()
            .filter(|c| state.call(c).is_some_and(|r| !r.is_resolved()))
            .cloned()
            .collect())
    }

    async fn recover_one<F, Fut>(
        &self,
        tools: &Tools,
        drive: DriveOptions,
        session: SessionId,
        tail: Seq,
        on_recovered: &F,
    ) -> One
    where
        F: Fn(Run, Option<StepOutcome>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut wake = Begin { at: Some(tail), ..Begin::default() };
        if crate::plant::active(crate::plant::WriterPlant::ClaimIgnoresHead) {
            wake.at = None;
        }
        let run = match self.begin(&session, Entry::Wake, wake).await {
            Ok(run) => run,
            Err(BeginError::LeaseHeld { lease, .. }) => return One::Skipped(session, lease),
            Err(BeginError::Changed { .. }) => return One::Changed(session),
            Err(e) => return One::Failed(session, RecoverFailure::Begin(e)),
        };
        match run.drive_with(tools, drive).await {
            Ok(outcome) => {
                on_recovered(run, outcome).await;
                One::Recovered(session)
            }
            Err(e) => One::Failed(session, RecoverFailure::Drive(e)),
        }
    }
}
