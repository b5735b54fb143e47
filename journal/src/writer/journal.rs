//! [`Journal`]: the writer over a store, and `begin_run`, the only way a run begins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use stepjournal_backends::{AppendError, JournalStore, StoreError};
use stepjournal_codec::{Entry, Event, Operator, Record, RunOutcome, Seq, SessionId, Stamped};
use stepjournal_recovery::{
    Config, NewRun, Plan, SessionState, ToolRegistry, TranscriptItem, plan, transcript,
};

use super::cancel::CancelSignal;
use super::hub::Counters;
use super::load::Loaded;
use super::owner::{Ownership, Took};
use super::shared::{Inner, OpenStep, Shared, fence_of};
use super::trace::run_span;
use super::wait::block_on;
use super::{BeginError, JournalError, JournalOptions, Run, RunStatus};

/// The session writer: the API a runtime embeds. It makes the save-first protocol the only
/// path: a run begins through an entry ([`begin_run`](Self::begin_run)), a body starts only
/// through the [`Step`](super::Step) a durable reply returned, and every append of a run is a
/// compare-and-set that fences late writers.
///
/// Cheap to clone (`Arc`s and the options); every clone is the same journal, with the same
/// live runs, leases and counters. Share one per store and process.
#[derive(Clone)]
pub struct Journal {
    pub(crate) store: Arc<dyn JournalStore>,
    registry: Arc<dyn ToolRegistry + Send + Sync>,
    pub(crate) options: JournalOptions,
    /// The runs live here, their leases and the keeper; shared by every clone.
    pub(crate) own: Arc<Ownership>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("durability", &self.options.durability)
            .field("config", &self.options.config)
            .field("ids", &self.options.ids)
            .field("clock", &self.options.clock)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// A writer over `store`, deciding recovery with `registry` (the tools as they are now:
    /// [`SchemaRegistry`](crate::registry::SchemaRegistry) checks arguments against JSON
    /// Schemas; [`MemoryRegistry`](stepjournal_recovery::MemoryRegistry) for tests).
    ///
    /// A process runs one journal per store: refused ([`JournalError::StoreInUse`]) while
    /// another journal of this process runs over the same store (the same directory, database
    /// file, or PostgreSQL database and schema, by [`JournalStore::identity`]), whose live runs
    /// this one would take for crashed ones. Share that journal (clones are cheap) instead. A
    /// test standing for several processes in one says so with
    /// [`SeparateProcess`](stepjournal_backends::SeparateProcess) handles.
    pub fn new(
        store: Arc<dyn JournalStore>,
        registry: Arc<dyn ToolRegistry + Send + Sync>,
        options: JournalOptions,
    ) -> Result<Self, JournalError> {
        let identity = store.identity();
        let own = Ownership::new(
            options.owner.clone(),
            options.lease_ttl,
            identity.clone(),
            options.lease_keeper,
        );
        let holder: super::claims::Holder = Arc::downgrade(&own) as _;
        super::claims::claim(&identity, holder)
            .map_err(|store| JournalError::StoreInUse { store })?;
        let journal = Journal { store, registry, options, own };
        journal.start_retention();
        Ok(journal)
    }

    /// The run of `session` begun through this journal and still open, if any.
    pub fn open_run(&self, session: &SessionId) -> Option<Run> {
        self.own.open_run(session)
    }

    /// The owner of the runs this journal begins ([`JournalOptions::owner`]).
    pub fn owner(&self) -> &stepjournal_backends::OwnerId {
        &self.own.owner
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JournalStore> {
        &self.store
    }

    /// Recovery's settings (`max_bodies`).
    pub fn config(&self) -> Config {
        self.options.config
    }

    /// The session folded from its whole log, as recovery sees it.
    pub fn state(&self, session: &SessionId) -> Result<SessionState, StoreError> {
        read_state(&*self.store, session)
    }

    /// [`state`](Self::state) for an async caller: the log is read through
    /// [`JournalStore::read_async`] (a reading thread on the file and SQLite stores, the driver
    /// on PostgreSQL) and folded yielding to the executor every few thousand events, so its
    /// thread never waits on the disk nor folds a long log in one poll.
    ///
    /// **Dropped before it finished**: nothing was written; a read in flight finishes unread.
    pub async fn state_async(&self, session: &SessionId) -> Result<SessionState, StoreError> {
        Ok(Loaded::whole(&*self.store, session).await?.1)
    }

    /// What the model is shown for the session now (see [`stepjournal_recovery::transcript`]).
    ///
    /// A fork ([`fork`](Self::fork)) shows the original's items up to the fork point first
    /// (read from the original, through its own `forked_from` when it is a fork too; their
    /// `seq`s are positions in the original's log), then its own. When the original no longer
    /// holds that step commit (deleted, or trimmed away), the earlier turns are not available
    /// and only the fork's own items are shown: [`SessionState::forked_from`] still says it is
    /// a fork.
    pub fn transcript(&self, session: &SessionId) -> Result<Vec<TranscriptItem>, StoreError> {
        let state = self.state(session)?;
        let mut items = match state.forked_from() {
            Some(fork) => block_on(self.before_fork(fork))?,
            None => Vec::new(),
        };
        items.extend(transcript(&state));
        Ok(items)
    }

    /// [`transcript`](Self::transcript) for an async caller, read and folded as
    /// [`state_async`](Self::state_async) does.
    ///
    /// **Dropped before it finished**: nothing was written; a read in flight finishes unread.
    pub async fn transcript_async(
        &self,
        session: &SessionId,
    ) -> Result<Vec<TranscriptItem>, StoreError> {
        let state = self.state_async(session).await?;
        let mut items = match state.forked_from() {
            Some(fork) => self.before_fork(fork).await?,
            None => Vec::new(),
        };
        items.extend(transcript(&state));
        Ok(items)
    }

    /// Begins a run of `session` through `entry`.
    ///
    /// Reads the session's log, folds it, plans the entry with the registry (FORMAT.md's rules)
    /// and appends the plan's appends (`run_started` first: the fence; then `rewound`, the
    /// pairings, the `step_commit` that closes a redirected or stopped step, the message) as one
    /// compare-and-set batch at the tail it read. On a conflict it reads, folds and plans again,
    /// up to [`JournalOptions::begin_attempts`] times.
    ///
    /// The returned [`Run`] carries the plan: act on its [`Action`](stepjournal_recovery::Action)s
    /// through [`Run::step`] (a recovered step stays open until the runtime commits it).
    ///
    /// `stop` writes no `run_started`: its batch pairs the unresolved calls `run_stopped`,
    /// closes the step and writes `run_ended stopped` for the running run, which fences that
    /// run's writers wherever they are. The returned run has already ended (its
    /// [`status`](Run::status) says so); see also [`Journal::stop`].
    ///
    /// A refused entry (the plan's `validation_error`) returns [`BeginError::Refused`] and writes
    /// nothing.
    pub fn begin_run(&self, session: &SessionId, entry: Entry) -> Result<Run, BeginError> {
        block_on(self.begin_run_async(session, entry))
    }

    /// [`begin_run`](Self::begin_run), awaited: the same reads and compare-and-set append, made
    /// on the completion-based path.
    ///
    /// **Dropped before it finished**: the entry's batch may have landed with no `Run` handed
    /// back; the session then holds a crashed run that the next
    /// [`sessions_to_recover`](Self::sessions_to_recover) lists, and the lease taken for it is
    /// released by the keeper.
    pub async fn begin_run_async(
        &self,
        session: &SessionId,
        entry: Entry,
    ) -> Result<Run, BeginError> {
        self.begin(session, entry, Begin::explicit()).await
    }

    /// [`begin_run`](Self::begin_run) on behalf of `by`: who begins it from outside the
    /// runtime, and why. The entry's `run_started` carries it (`run_started.by`; a stop's
    /// `run_ended`, since a stop begins no run), in place of [`JournalOptions::operator`].
    /// Format version 4: a store writing an older version refuses the entry
    /// ([`BeginError::Append`] with [`EncodeError::NotInVersion`](stepjournal_codec::EncodeError::NotInVersion)).
    pub fn begin_run_as(
        &self,
        session: &SessionId,
        entry: Entry,
        by: Operator,
    ) -> Result<Run, BeginError> {
        block_on(self.begin_run_as_async(session, entry, by))
    }

    /// [`begin_run_as`](Self::begin_run_as), awaited; dropped before it finished, as
    /// [`begin_run_async`](Self::begin_run_async).
    pub async fn begin_run_as_async(
        &self,
        session: &SessionId,
        entry: Entry,
        by: Operator,
    ) -> Result<Run, BeginError> {
        self.begin(session, entry, Begin { by: Some(by), ..Begin::explicit() }).await
    }

    /// Begins a run as `how` says (see [`Begin`]).
    pub(crate) async fn begin(
        &self,
        session: &SessionId,
        entry: Entry,
        how: Begin,
    ) -> Result<Run, BeginError> {
        let Begin { force, at, with, by } = how;
        let by = by.or_else(|| self.options.operator.clone());
        if self.own.is_shutting_down() {
            return Err(BeginError::ShuttingDown { session: session.clone() });
        }
        let ids = &self.options.ids;
        let new_run = NewRun {
            run: ids.run_id(),
            entry: entry.clone(),
            commit_checkpoint: ids.checkpoint_id(),
        };
        let stop = matches!(entry, Entry::Stop);
        // The lease first: a run begins owned. A stop begins no run.
        let leased = if stop {
            false
        } else {
            let took = self.own.take(&self.store, session, &new_run.run, force);
            match took.map_err(|source| BeginError::Lease { session: session.clone(), source })? {
                Took::Held(leased) => leased,
                Took::Refused(lease) => {
                    return Err(BeginError::LeaseHeld { session: session.clone(), lease });
                }
            }
        };
        let run_id = new_run.run.clone();
        // Dropped before the run is handed back, the entry's batch may land with no `Run` to
        // go on through: the session is then a crashed one (listed by `sessions_to_recover`),
        // and the lease is released by the keeper.
        let mut dropped = OrphanIfDropped { own: &self.own, session, run: &run_id, armed: leased };
        let appended = self.append_entry(session, new_run, at, &with, by.as_ref()).await;
        dropped.armed = false;
        match appended {
            Ok(run) => {
                if stop {
                    self.own.stopped(session);
                } else {
                    Counters::count(&self.own.hub.counters.runs_begun);
                    self.own.register(session, &run, leased);
                }
                Ok(run)
            }
            Err(e) => {
                if leased {
                    self.own.release(&*self.store, session, &run_id);
                }
                Err(e)
            }
        }
    }

    /// Reads, folds and plans the entry, and appends the plan's batch (then `with`, in the
    /// same batch) at the tail read, again on each conflict; with `at`, only at that tail (a
    /// conflict, or a log found at another length, is [`BeginError::Changed`]). `by` goes on
    /// the batch's `run_started` (a stop's `run_ended`).
    async fn append_entry(
        &self,
        session: &SessionId,
        new_run: NewRun,
        at: Option<Seq>,
        with: &[Event],
        by: Option<&Operator>,
    ) -> Result<Run, BeginError> {
        let read_error = |source| BeginError::Read { session: session.clone(), source };
        // A batch whose append's outcome was unknown: where it was to land, and its plan. The
        // next read tells whether it landed.
        let mut unknown: Option<(Seq, Plan, AppendError)> = None;
        let mut round = 0;
        loop {
            let read = match &unknown {
                // The unknown batch is checked where it was to land, whatever was written since.
                Some((at, _, _)) => Loaded::read_covering(&*self.store, session, *at).await,
                None => Loaded::read(&*self.store, session, &new_run.entry).await,
            };
            let (mut loaded, mut state) = match read {
                Ok(read) => read,
                // A store that cannot be read cannot tell whether the unknown batch landed.
                Err(e) => {
                    return Err(match unknown.take() {
                        Some((_, _, source)) => {
                            BeginError::Append { session: session.clone(), source }
                        }
                        None => read_error(e),
                    });
                }
            };
            if let Some((at, plan, error)) = unknown.take() {
                let batch: Vec<Event> = plan.appends.iter().chain(with).cloned().collect();
                if holds_at(loaded.from(at), &batch) {
                    return Ok(self.started(session, new_run, plan, with.len(), &loaded, at));
                }
                if round == self.options.begin_attempts {
                    return Err(BeginError::Append { session: session.clone(), source: error });
                }
                // Not landed: plan again over what is there, read as any entry reads.
                let read = Loaded::read(&*self.store, session, &new_run.entry).await;
                (loaded, state) = read.map_err(read_error)?;
            }
            if let Some(read) = at
                && read != loaded.tail()
            {
                let found = loaded.tail();
                return Err(BeginError::Changed { session: session.clone(), read, found });
            }
            if round == self.options.begin_attempts {
                return Err(BeginError::Contended { session: session.clone(), attempts: round });
            }
            round += 1;
            let tail = loaded.tail();
            // A stop of a run that already ended (but suspended) would end it a second time:
            // it writes nothing, whether it finds so now or after another writer's append.
            if matches!(new_run.entry, Entry::Stop)
                && !crate::plant::active(crate::plant::WriterPlant::StopOverEnded)
                && let Some(outcome) = state.last_run_outcome()
                && outcome != RunOutcome::Suspended
            {
                return Err(BeginError::NothingToStop { session: session.clone(), outcome });
            }
            let mut plan = plan(&state, &new_run, &*self.registry, &self.options.config);
            if let Some(error) = plan.error {
                return Err(BeginError::Refused(error));
            }
            if let Some(by) = by {
                sign(&mut plan.appends, by);
            }
            let at = self.options.clock.now();
            let stamped: Vec<Stamped> =
                plan.appends.iter().chain(with).cloned().map(|e| Stamped::at(at, e)).collect();
            let answer =
                self.store.append_async(session, tail, &stamped, self.options.durability).await;
            match answer {
                Ok(_) => {
                    loaded.extend(stamped.into_iter().enumerate().map(|(i, s)| Record {
                        session: session.clone(),
                        seq: tail.add(i as u64),
                        at: s.at,
                        event: s.event,
                    }));
                    return Ok(self.started(session, new_run, plan, with.len(), &loaded, tail));
                }
                Err(AppendError::Conflict { .. }) => {}
                Err(e @ AppendError::OutcomeUnknown { .. }) => unknown = Some((tail, plan, e)),
                Err(source) => {
                    return Err(BeginError::Append { session: session.clone(), source });
                }
            }
        }
    }

    /// Stops `session`'s work: [`begin_run`](Self::begin_run) with [`Entry::Stop`]. Unresolved
    /// calls of the saved step are paired `run_stopped`, the step is closed, and the running
    /// run (in this process or another) is fenced by the `run_ended stopped`: its bodies'
    /// results are refused from now on. Returns the plan that was applied.
    pub fn stop(&self, session: &SessionId) -> Result<Plan, BeginError> {
        block_on(self.stop_async(session))
    }

    /// [`stop`](Self::stop), awaited.
    ///
    /// **Dropped before it finished**: the stop's batch may have landed (the running run is
    /// then fenced, as a stop fences it) or not (nothing was written).
    pub async fn stop_async(&self, session: &SessionId) -> Result<Plan, BeginError> {
        Ok(self.begin_run_async(session, Entry::Stop).await?.plan().clone())
    }

    /// The run whose entry's batch (`plan.appends`, then `with` more events) landed at `at` in
    /// `loaded` (the session's log as read, from its newest snapshot or whole, the batch
    /// included). Events after the batch,
    /// written by other writers before the run could see them, are folded as any append of the
    /// run would fold them: a `run_started` or `run_ended` among them fences the run at once.
    fn started(
        &self,
        session: &SessionId,
        new_run: NewRun,
        plan: Plan,
        with: usize,
        loaded: &Loaded,
        at: Seq,
    ) -> Run {
        let stopped = matches!(new_run.entry, Entry::Stop);
        let end = at.add((plan.appends.len() + with) as u64);
        let start = loaded.start();
        debug_assert!(start.is_some(), "an entry reads from an intact snapshot or the first event");
        let mut state = start.unwrap_or_default();
        let records = loaded.from(state.len().into());
        let mut tail = Seq(state.len());
        for record in records.iter().take_while(|r| r.seq < end) {
            state.apply(&record.event);
            tail = record.seq.next();
        }
        let mut status = if stopped {
            RunStatus::Ended { outcome: RunOutcome::Stopped, error: None }
        } else {
            RunStatus::Open
        };
        for record in records.iter().skip_while(|r| r.seq < end) {
            if let Some(fence) = fence_of(record) {
                if status == RunStatus::Open {
                    status = RunStatus::Fenced(fence);
                }
                break;
            }
            state.apply(&record.event);
            tail = record.seq.next();
        }
        debug_assert_eq!(state.len(), tail.get(), "the state is folded up to the tail");
        // A recovered saved step stays open for the runtime to act on and commit; a redirect or
        // a stop closed it in the entry's batch.
        let step = match state.saved_step() {
            Some(reply) if !stopped => Some(OpenStep {
                number: reply.step,
                checkpoint: reply.checkpoint.clone(),
                plan: plan.calls.iter().map(|c| (c.call.clone(), c.clone())).collect(),
                started: HashMap::new(),
            }),
            _ => None,
        };
        super::trace::event::decided(session, &new_run.run, new_run.entry.kind_str(), &plan);
        let run = if stopped {
            // The stop's `run_ended` names the run it stopped.
            plan.appends
                .iter()
                .find_map(|e| match e {
                    Event::RunEnded(e) => Some(e.run.clone()),
                    _ => None,
                })
                .unwrap_or(new_run.run)
        } else {
            new_run.run
        };
        let shared = Shared {
            store: self.store.clone(),
            session: session.clone(),
            run: run.clone(),
            durability: self.options.durability,
            config: self.options.config,
            ids: self.options.ids.clone(),
            clock: self.options.clock.clone(),
            append_attempts: self.options.append_attempts,
            snapshot_every: self.options.snapshot_every,
            snapshot_after_bytes: self.options.snapshot_after_bytes,
            trim_keep_turns: self.options.trim_keep_turns,
            turn: futures_util::lock::Mutex::new(()),
            view: Mutex::new(Inner { tail, state, status, step }),
            cancel: CancelSignal::new(),
            hub: self.own.hub.clone(),
            span: run_span(session, &run, new_run.entry.kind_str()),
        };
        if shared.view().status != RunStatus::Open {
            shared.cancel.fire();
        }
        Run::new(Arc::new(shared), new_run.entry, plan, at)
    }
}

/// How an entry begins its run.
#[derive(Debug, Default)]
pub(crate) struct Begin {
    /// Replace another owner's live lease (an explicit entry); else a live lease refuses the
    /// entry ([`BeginError::LeaseHeld`]: a recovery, an answer, never fences a live run).
    pub(crate) force: bool,
    /// Decide the entry on the session as it was at this tail, and append it there or not at
    /// all ([`BeginError::Changed`]): a start-up's wake of a session it listed, or an answer
    /// given to a call as its decider saw it, is never made over what another actor wrote
    /// since.
    pub(crate) at: Option<Seq>,
    /// Events appended after the plan's, in the same batch (an answer the wake carries).
    pub(crate) with: Vec<Event>,
    /// Who begins the run from outside the runtime, and why; else the journal's
    /// [`JournalOptions::operator`].
    pub(crate) by: Option<Operator>,
}

/// Puts `by` on the entry's `run_started`, or on a stop's `run_ended` (a stop begins no run):
/// the plan's rules never write it, so the plan is the same with or without it.
fn sign(appends: &mut [Event], by: &Operator) {
    for event in appends {
        match event {
            Event::RunStarted(e) => e.by = Some(by.clone()),
            Event::RunEnded(e) => e.by = Some(by.clone()),
            _ => {}
        }
    }
}

impl Begin {
    /// An entry a runtime asks for: it replaces a live lease, re-reads and re-plans on a
    /// conflict.
    pub(crate) fn explicit() -> Self {
        Begin { force: true, ..Begin::default() }
    }
}

/// Hands the lease of a run whose entry future was dropped to the keeper to release.
struct OrphanIfDropped<'a> {
    own: &'a Ownership,
    session: &'a SessionId,
    run: &'a stepjournal_codec::RunId,
    armed: bool,
}

impl Drop for OrphanIfDropped<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.own.orphan(self.session, self.run);
        }
    }
}

/// Whether `rest` (the records from where `events` were to land) starts with `events`.
fn holds_at(rest: &[Record], events: &[Event]) -> bool {
    rest.len() >= events.len() && rest.iter().zip(events).all(|(r, e)| &r.event == e)
}

/// The session's whole log folded.
fn read_state(store: &dyn JournalStore, session: &SessionId) -> Result<SessionState, StoreError> {
    super::load::fold_log(session, store.read_all(session)?)
}
