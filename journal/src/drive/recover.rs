//! A runtime's start-up: every session to recover woken, its recovered step driven, the run
//! handed to the runtime to go on with.

use std::future::Future;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use stepjournal_backends::{Lease, StoreError};
use stepjournal_codec::{Coded, Entry, ErrorCode, RefusalCode, SessionId};

use super::{DriveError, DriveOptions, StepOutcome};
use crate::tools::Tools;
use crate::writer::{BeginError, Journal, Run};

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
    /// The sessions that could not be recovered, with why.
    pub failed: Vec<(SessionId, RecoverFailure)>,
}

enum One {
    Recovered(SessionId),
    Skipped(SessionId, Lease),
    Failed(SessionId, RecoverFailure),
}

impl Journal {
    /// Recovers every session [`sessions_to_recover`](Journal::sessions_to_recover) lists, at
    /// most [`RecoverOptions::concurrency`] at once: each is woken (`wake`, taking the lease
    /// without forcing it: a session whose run holds a live lease is skipped and reported,
    /// never fenced), its recovered step driven with `tools`, and the run and the step's
    /// outcome (`None` when the run holds no open step) handed to `on_recovered`, which goes on
    /// with the agent loop.
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
        let mut pending = self.sessions_to_recover()?.into_iter();
        let mut running = FuturesUnordered::new();
        let mut report = Recovered::default();
        loop {
            while running.len() < options.concurrency {
                let Some(session) = pending.next() else { break };
                running.push(self.recover_one(tools, options.drive, session, &on_recovered));
            }
            match running.next().await {
                Some(One::Recovered(session)) => report.recovered.push(session),
                Some(One::Skipped(session, lease)) => report.skipped.push((session, lease)),
                Some(One::Failed(session, why)) => report.failed.push((session, why)),
                None => return Ok(report),
            }
        }
    }

    async fn recover_one<F, Fut>(
        &self,
        tools: &Tools,
        drive: DriveOptions,
        session: SessionId,
        on_recovered: &F,
    ) -> One
    where
        F: Fn(Run, Option<StepOutcome>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let run = match self.begin(&session, Entry::Wake, false).await {
            Ok(run) => run,
            Err(BeginError::LeaseHeld { lease, .. }) => return One::Skipped(session, lease),
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
