//! A runtime's start-up and shutdown: the sessions to recover, a graceful shutdown, and the
//! figures a runtime exports as metrics.

use std::pin::pin;
use std::time::Duration;

use futures_util::future::{Either, select};
use stepjournal_backends::{RunHead, RunState, SessionHead, StoreError, StoreMetrics, block_on};
use stepjournal_codec::{RunOutcome, Seq, SessionId};

use super::cancel::CancelSignal;
use super::hub::Counters;
use super::journal::Journal;
use super::yielding::{YIELD_EVERY, yield_now};

/// The writer's figures beside its store's, for a runtime to export as metrics. Counters only
/// grow, from when the journal was made (the store's, from when it was opened).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalMetrics {
    /// The store's figures ([`JournalStore::metrics`](stepjournal_backends::JournalStore::metrics)).
    pub store: StoreMetrics,
    /// Runs begun through this journal (stops not counted).
    pub runs_begun: u64,
    /// Writes refused because their run was fenced.
    pub fenced_writes_refused: u64,
    /// Leases of another owner's live run this journal took over (a forced entry).
    pub leases_taken_over: u64,
    /// Leases of this journal's runs the keeper found taken over.
    pub leases_lost: u64,
}

/// What [`Journal::shutdown`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shutdown {
    /// The sessions whose runs were still open at the deadline: their signals fired and their
    /// leases were released, so the next start recovers them.
    pub abandoned: Vec<SessionId>,
}

impl Journal {
    /// The sessions a runtime's start-up wakes, read from the store's session heads
    /// ([`JournalStore::heads`](stepjournal_backends::JournalStore::heads)) without folding
    /// any session whose head the store keeps:
    ///
    /// - the last run is open and not running: on a store that keeps leases, its lease is
    ///   absent or lapsed, or is this journal's owner's while the run is not live here; on a
    ///   store that keeps none, the run is not live in this journal (the store's directory lock
    ///   or process makes every other open run a crashed one);
    /// - the last run ended `suspended` and an answer it waits for has landed since
    ///   (`answered_while_suspended`); a suspended session with nothing new is not listed:
    ///   waking it would only add a run that waits again.
    ///
    /// A run whose handles were all dropped before it ended is a crashed one: at once for the
    /// journal that ran it, and for any other (another process) once its lease is released,
    /// which this journal's keeper does soon after the drop ([`keep_leases`](Self::keep_leases)
    /// does it at once), or has expired.
    ///
    /// A lease is judged by the store's clock as read with the heads
    /// ([`SessionHead::live_lease`](stepjournal_backends::SessionHead::live_lease): the
    /// server's on PostgreSQL, this machine's on SQLite), never by this journal's
    /// [`Clock`](super::Clock), which only stamps events: a journal whose clock runs ahead or
    /// behind lists the same sessions.
    ///
    /// A head the store does not know (`RunState::Unknown`, an older journal) is found by
    /// folding that session's log with the same rule.
    pub fn sessions_to_recover(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self
            .start_up()?
            .into_iter()
            .filter(|l| l.wait == Wait::Wake)
            .map(|l| l.session)
            .collect())
    }

    /// [`sessions_to_recover`](Self::sessions_to_recover) for an async runtime: the heads are
    /// read through [`JournalStore::heads_async`](stepjournal_backends::JournalStore::heads_async)
    /// (a reading thread on the file and SQLite stores, the driver on PostgreSQL) and a session
    /// whose head the store does not know is read the same way and folded yielding, so the
    /// executor thread never waits on the disk.
    ///
    /// **Dropped before it finished**: nothing was written; a read in flight finishes unread.
    pub async fn sessions_to_recover_async(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self
            .start_up_async()
            .await?
            .into_iter()
            .filter(|l| l.wait == Wait::Wake)
            .map(|l| l.session)
            .collect())
    }

    /// The store's [`heads`](stepjournal_backends::JournalStore::heads) as a future (see
    /// [`sessions_to_recover_async`](Self::sessions_to_recover_async)).
    ///
    /// **Dropped before it finished**: nothing was written; the read finishes unread.
    pub async fn heads_async(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.store.heads_async().await
    }

    /// Every session a start-up acts on, from the heads: those to wake (see
    /// [`sessions_to_recover`](Self::sessions_to_recover)) and those suspended with nothing
    /// answered yet, each with the tail its head had.
    pub(crate) fn start_up(&self) -> Result<Vec<Listed>, StoreError> {
        block_on(self.start_up_async())
    }

    /// [`start_up`](Self::start_up) for an async caller: no read on its thread, and a long
    /// fold yields.
    pub(crate) async fn start_up_async(&self) -> Result<Vec<Listed>, StoreError> {
        let mut out = Vec::new();
        for head in self.store.heads_async().await? {
            let known = match head.run {
                RunState::Unknown => {
                    // From the newest snapshot on (a trimmed log holds no earlier run start).
                    let records = self.store.read_from_snapshot_async(&head.session).await?;
                    if records.len() > YIELD_EVERY {
                        yield_now().await;
                    }
                    let folded = RunHead::of_log(&records);
                    let tail = records.last().map_or(head.tail, |r| r.seq.next());
                    (folded.run, folded.answered_while_suspended, tail)
                }
                ref run => (run.clone(), head.answered_while_suspended, head.tail),
            };
            out.extend(self.listed(head, known));
        }
        Ok(out)
    }

    /// Whether a start-up acts on the session of `head`, whose run state, answered flag and
    /// tail are `known`.
    fn listed(&self, head: SessionHead, known: (RunState, bool, Seq)) -> Option<Listed> {
        let (run, answered, tail) = known;
        let wait = match &run {
            RunState::Open { run } => {
                let here = self.own.is_live(&head.session, run);
                let held = live_lease(&head, run).is_some_and(|l| l.owner != self.own.owner);
                (!here && !held).then_some(Wait::Wake)
            }
            RunState::Ended { outcome: RunOutcome::Suspended, .. } => {
                Some(if answered { Wait::Wake } else { Wait::Answers })
            }
            _ => None,
        }?;
        Some(Listed { session: head.session, tail, wait })
    }

    /// Whether [`shutdown`](Self::shutdown) was called: no new run begins.
    pub fn is_shutting_down(&self) -> bool {
        self.own.is_shutting_down()
    }

    /// Shuts the journal down gracefully: from now on no run begins
    /// ([`BeginError::ShuttingDown`](super::BeginError::ShuttingDown)); the runs open here are
    /// given until `deadline` to end (their bodies finish, the runtime ends them); at the
    /// deadline those still open are let go
    /// ([`Interruption::ShutDown`](super::Interruption::ShutDown)): their signals fire, every
    /// later write of theirs is refused (a body finishing afterwards records nothing), their
    /// writes already in flight are waited for, and only then are they reported and their
    /// leases released, so the next start finds them crashed and recovers them. Nothing is
    /// written for them: what they saved stays, and recovery decides the rest. The lease
    /// keeper stops.
    ///
    /// The deadline is measured by a timer thread (this future names no executor).
    ///
    /// **Dropped before it finished**: the journal stays shut to new runs; runs not yet
    /// abandoned stay open here (a later `shutdown` lets go of them).
    pub async fn shutdown(&self, deadline: Duration) -> Shutdown {
        self.own.begin_shutdown();
        let timer = CancelSignal::new();
        if !deadline.is_zero() {
            let fire = timer.clone();
            let spawned =
                std::thread::Builder::new().name("stepjournal-shutdown".into()).spawn(move || {
                    std::thread::sleep(deadline);
                    fire.fire();
                });
            if spawned.is_err() {
                timer.fire();
            }
        } else {
            timer.fire();
        }
        let hub = self.own.hub.clone();
        loop {
            let seen = hub.generation();
            if self.own.open_runs().is_empty() || timer.is_cancelled() {
                break;
            }
            let changed = pin!(hub.changed(seen));
            let late = pin!(timer.cancelled());
            if let Either::Right(_) = select(changed, late).await {
                break;
            }
        }
        // Each run left open is let go (it writes nothing from now on: a body that finishes
        // later records nothing), then its write in flight, if any, is waited for, so that
        // nothing of it lands once shutdown has said it is abandoned; only then is its lease
        // released.
        let open = self.own.abandon_open();
        let mut abandoned = Vec::with_capacity(open.len());
        for (session, run, leased) in open {
            run.settled().await;
            if leased {
                self.own.release_abandoned(&*self.store, &session, &run);
            }
            abandoned.push(session);
        }
        // The leases of the runs that ended are released too.
        let _ = self.own.tend(&*self.store);
        self.own.stop_keeper();
        Shutdown { abandoned }
    }

    /// Closes the journal: [`shutdown`](Self::shutdown) with `deadline` (its runs end or are
    /// let go, their leases released), then the store is closed
    /// ([`JournalStore::close`](stepjournal_backends::JournalStore::close): the file store's
    /// directory lock is released and its threads stop) and this journal's claim on it is let
    /// go: a new journal over the same store may be made at once, in this process or another.
    /// Every later call through this journal, its clones and its runs is refused
    /// ([`StoreError::Closed`]); the retention thread, if any, stops within a second.
    ///
    /// **Dropped before it finished**: as a dropped `shutdown`; the store stays open.
    pub async fn close(&self, deadline: Duration) -> Result<Shutdown, StoreError> {
        let shut = self.shutdown(deadline).await;
        self.store.close()?;
        self.own.release_claim();
        Ok(shut)
    }

    /// Renews the leases of the runs open here now, releases those of runs that ended, and
    /// fires the signal of any run whose lease was taken over. The keeper thread does this
    /// every third of the lease's time to live on stores that keep leases; call it from a
    /// runtime's own timer to do it sooner.
    pub fn keep_leases(&self) -> Result<(), StoreError> {
        self.own.tend(&*self.store)
    }

    /// The store's figures with the writer's own.
    pub fn metrics(&self) -> JournalMetrics {
        let counters = &self.own.hub.counters;
        JournalMetrics {
            store: self.store.metrics(),
            runs_begun: Counters::read(&counters.runs_begun),
            fenced_writes_refused: Counters::read(&counters.fenced_writes_refused),
            leases_taken_over: Counters::read(&counters.leases_taken_over),
            leases_lost: Counters::read(&counters.leases_lost),
        }
    }
}

/// A session a start-up acts on, as its head was read.
#[derive(Debug)]
pub(crate) struct Listed {
    pub(crate) session: SessionId,
    /// Its tail when listed: a wake is made there, or not at all.
    pub(crate) tail: Seq,
    pub(crate) wait: Wait,
}

/// What a listed session waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A wake: its run crashed, or an answer it waited for landed.
    Wake,
    /// Answers from outside: it ended suspended and none has landed.
    Answers,
}

/// The head's lease on `run`, if it is live by the store's clock when the head was read.
fn live_lease<'a>(
    head: &'a SessionHead,
    run: &stepjournal_codec::RunId,
) -> Option<&'a stepjournal_backends::Lease> {
    head.live_lease().filter(|l| &l.run == run)
}
