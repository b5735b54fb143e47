//! The simulation loop: runs the script through the writer, fires the case's faults, enters the
//! session again after each, and checks the invariants after every fault and at the end.

use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stepjournal::writer::{Clock, FixedClock, SequentialIds, SteppingClock};
use stepjournal::{BeginError, RunStatus};
use stepjournal::{Journal, JournalOptions, Reply, Run};
use stepjournal_codec::{Call, Entry, Event, ResumeMode, RunOutcome, SessionId, UnixMillis};
use stepjournal_recovery::{SessionState, ToolRegistry};

use super::check::{History, check};
use super::executor::Executor;
use super::fault::{AppendFault, BodyFault, Case, Reentry};
use super::flow::{Fired, Flow, Halt, World, Zombie};
use super::ledger::LedgerEntry;
use super::medium::Medium;
use super::probe::{Knobs, Snapshot, Tail};
use super::report::{Report, ScriptError};
use super::run::StepRunner;
use super::script::{Script, ScriptCall};
use super::store::{AckLog, FaultStore};
use super::tools::ToolSet;
use super::violation::Violation;

/// The time of a simulation's first append: 2023-11-14T22:13:20Z.
const START: UnixMillis = UnixMillis(1_700_000_000_000);

/// How a run of the simulation ended, short of a fault.
pub(crate) enum End {
    /// The session is over (completed or stopped).
    Over(RunOutcome),
    /// The run suspended for client answers or approvals: a `wake` follows.
    Suspended,
    /// A call could not be finished (a remote sub-agent whose child was never attached, with no
    /// body left to start it through): the run failed, and a redirect follows.
    Stuck,
}

/// One simulation's state across the runs, crashes and reopenings.
pub(crate) struct Sim<'a> {
    pub(crate) world: World<'a>,
    medium: &'a mut dyn Medium,
    pub(crate) session: SessionId,
    pub(crate) registry: Arc<dyn ToolRegistry + Send + Sync>,
    ids: Arc<SequentialIds>,
    /// Every run's time: it moves on by 1 ms per append from the same start (or stays at the
    /// start, when the knobs fix it), so the same simulation writes the same bytes.
    clock: Arc<dyn Clock>,
    /// What a search set on this simulation.
    knobs: Knobs<'a>,
    acked: AckLog,
    /// How many runs were begun (at most the bound `runs_until_over` sets).
    pub(crate) runs: u32,
    /// Set when the steps are run by the tool executor (`drive`) instead of step by step.
    pub(crate) executor: Option<Executor>,
}

impl<'a> Sim<'a> {
    pub(crate) fn new(
        script: &'a Script,
        tools: &'a ToolSet,
        case: &'a Case,
        medium: &'a mut dyn Medium,
        through_drive: bool,
        knobs: Knobs<'a>,
    ) -> Result<Self, ScriptError> {
        if let Some(call) = script.repeated_call() {
            return Err(ScriptError::RepeatedCall { call: call.clone() });
        }
        for call in script.steps.iter().flat_map(|s| &s.calls) {
            if tools.get(call.tool.as_str()).is_none() {
                return Err(ScriptError::UnknownTool {
                    call: call.id.clone(),
                    tool: call.tool.clone(),
                });
            }
        }
        let world = World::new(script, tools, case);
        let executor = through_drive.then(|| Executor::new(script, tools, &world));
        let clock: Arc<dyn Clock> = if knobs.fixed_clock {
            Arc::new(FixedClock::new(START))
        } else {
            Arc::new(SteppingClock::new(START, Duration::from_millis(1)))
        };
        let registry = match &knobs.registry {
            Some(registry) => registry.clone(),
            None => Arc::new(tools.registry()),
        };
        Ok(Sim {
            world,
            medium,
            // A constant id that keeps the session-id rule.
            session: SessionId::from_stored("sim-session"),
            registry,
            ids: Arc::new(SequentialIds::new()),
            clock,
            knobs,
            acked: Arc::new(Mutex::new(Vec::new())),
            runs: 0,
            executor,
        })
    }

    /// Runs the simulation to its end and reports.
    pub(crate) fn run(mut self) -> Report {
        self.world.arm_next();
        let outcome = if self.open_store() { self.runs_until_over() } else { None };
        if let Some(probe) = self.knobs.probe.as_mut() {
            let appends = self.world.store().map_or(0, |s| s.appends_since_armed());
            probe.ended(Tail { appends, bodies: self.world.faults.bodies_since() });
        }
        // A clean restart: every handle dropped, the store opened again, the log read back.
        self.world.close();
        let log = match self.medium.open() {
            Ok(store) => match store.read_all(&self.session) {
                Ok(log) => Some(log),
                Err(e) => {
                    self.world.notes.unexpected(format!("reading the log back at the end: {e}"));
                    None
                }
            },
            Err(e) => {
                let medium = self.medium.name();
                self.world.notes.violate(Violation::Reopen { medium, error: e.to_string() });
                None
            }
        };
        let log = log.unwrap_or_default();
        self.check_log(&log, outcome.is_some());
        let faults_fired = self.world.faults.fired();
        let ledger = self.world.ledger.entries();
        let (violations, trace) = self.world.notes.into_report_parts();
        Report {
            medium: self.medium.name(),
            session: self.session,
            violations,
            faults_fired,
            runs: self.runs,
            outcome,
            trace,
            log,
            ledger,
        }
    }

    fn runs_until_over(&mut self) -> Option<RunOutcome> {
        let (script, case) = (self.world.script, self.world.case);
        let bound = 4 * (case.faults.len() + script.steps.len()) as u32 + 8;
        let mut entry = Entry::NewTurn { message: script.message.clone() };
        let mut zombie = None;
        loop {
            if self.runs >= bound {
                let why = format!("it was still going after {bound} runs");
                self.world.notes.violate(Violation::NotEnded { why });
                return None;
            }
            self.runs += 1;
            let ran = if self.executor.is_some() {
                self.drive_through_executor(entry)
            } else {
                self.drive(entry, zombie.take())
            };
            match ran {
                Ok(End::Over(outcome)) => return Some(outcome),
                Ok(End::Suspended) => entry = Entry::Wake,
                Ok(End::Stuck) => {
                    entry = Entry::Resume(ResumeMode::WithMessage {
                        message: "Let us leave that sub-agent and go on.".to_owned(),
                    });
                }
                Err(Halt::Broken) => return None,
                // Over if its last run completed or was stopped; after one that failed the
                // runtime goes on as after any failed run, with a retry.
                Err(Halt::NothingToStop(outcome)) => {
                    if matches!(outcome, RunOutcome::Completed | RunOutcome::Stopped) {
                        return Some(outcome);
                    }
                    entry = Entry::Retry { checkpoint: None, message: None };
                }
                Err(Halt::Fault(fired)) => {
                    let Some(fault) = self.world.faults.fire() else {
                        self.world.notes.unexpected("a fault fired with none armed".to_owned());
                        return None;
                    };
                    let n = self.world.faults.fired();
                    self.world.notes.trace(format!("fault {n}: {}", fired.describe()));
                    let reopened = match &fired {
                        Fired::Append(AppendFault::Crash(_)) | Fired::Body(BodyFault::Crash, _) => {
                            self.crash(fault.seed)
                        }
                        Fired::Append(AppendFault::Fail { poisoned: true }) => {
                            self.world.close();
                            self.open_store()
                        }
                        _ => true,
                    };
                    if !reopened {
                        return None;
                    }
                    if let Fired::Body(BodyFault::Abandon, z) = fired {
                        zombie = z;
                    }
                    let log = self.read_log();
                    self.check_log(&log, false);
                    self.world.arm_next();
                    entry = self.entry_for(fault.then);
                    self.entered(&log, &entry, zombie.as_deref());
                }
            }
        }
    }

    /// The process died: every handle is dropped, the medium crashes, the store is opened on
    /// what it left. Returns whether it opened.
    fn crash(&mut self, seed: u64) -> bool {
        if let Some(store) = self.world.close() {
            store.kill();
        }
        self.medium.crash(seed);
        self.open_store()
    }

    fn open_store(&mut self) -> bool {
        match self.medium.open() {
            Ok(inner) => {
                let store = FaultStore::new(inner, self.acked.clone(), self.medium.tear_hook());
                self.world.open(store);
                true
            }
            Err(e) => {
                let medium = self.medium.name();
                self.world.notes.violate(Violation::Reopen { medium, error: e.to_string() });
                false
            }
        }
    }

    pub(crate) fn halt(&mut self, doing: impl Display, error: impl Display) -> Halt {
        self.world.halt(doing, error)
    }

    fn read_log(&mut self) -> Vec<stepjournal_codec::Record> {
        let read = match self.world.store() {
            Some(store) => store.inner().read_all(&self.session),
            None => return Vec::new(),
        };
        read.unwrap_or_else(|e| {
            self.world.notes.unexpected(format!("reading the log: {e}"));
            Vec::new()
        })
    }

    fn check_log(&mut self, log: &[stepjournal_codec::Record], ended: bool) {
        let history = History {
            session: self.session.clone(),
            log: log.to_vec(),
            ledger: self.world.ledger.entries(),
            acked: self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            fenced: self.world.notes.fenced_writes().to_vec(),
            config: self.world.case.config,
            ended,
        };
        for violation in check(&history) {
            self.world.notes.violate(violation);
        }
    }

    /// Tells the probe, if any, the state the session is entered again in.
    fn entered(
        &mut self,
        log: &[stepjournal_codec::Record],
        entry: &Entry,
        zombie: Option<&Zombie>,
    ) {
        let Some(probe) = self.knobs.probe.as_mut() else { return };
        let late = match (zombie, &self.executor) {
            (Some(z), _) => Some((z.call.id.clone(), z.body.attempt().get())),
            (None, Some(executor)) => executor.late_body_of(),
            (None, None) => None,
        };
        let ledger = self.world.ledger.entries();
        let acked = self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
        probe.entered(&Snapshot {
            fired: self.world.faults.fired(),
            log,
            entry,
            ledger: &ledger,
            acked: &acked,
            fenced: self.world.notes.fenced_writes(),
            late,
            runs: self.runs,
        });
    }

    /// The entry `reentry` names, with what it needs from the session as it is now.
    fn entry_for(&mut self, reentry: Reentry) -> Entry {
        let state = self.read_log().into_iter().fold(SessionState::default(), |mut s, r| {
            s.apply(&r.event);
            s
        });
        if state.messages().is_empty() {
            // The opening message never landed: the session begins again.
            return Entry::NewTurn { message: self.world.script.message.clone() };
        }
        let n = self.world.faults.fired();
        // The checkpoint an entry may name: the saved step's append checkpoint, else the last
        // commit's.
        let checkpoint = state
            .saved_step()
            .map(|r| r.checkpoint.clone())
            .or_else(|| state.last_commit().map(|c| c.checkpoint.clone()));
        match reentry {
            Reentry::Wake => Entry::Wake,
            Reentry::Continue => Entry::Resume(ResumeMode::Continue),
            Reentry::FromCheckpoint => match checkpoint {
                Some(checkpoint) => Entry::Resume(ResumeMode::FromCheckpoint { checkpoint }),
                None => Entry::Wake,
            },
            Reentry::RetryFromCheckpoint => {
                Entry::Retry { checkpoint, message: Some(format!("Try again from there ({n}).")) }
            }
            Reentry::Retry => Entry::Retry { checkpoint: None, message: None },
            Reentry::RetryWithMessage => {
                Entry::Retry { checkpoint: None, message: Some(format!("Try again ({n}).")) }
            }
            Reentry::WithMessage => Entry::Resume(ResumeMode::WithMessage {
                message: format!("Do something else ({n})."),
            }),
            Reentry::NewTurn => Entry::NewTurn { message: format!("A new request ({n}).") },
            Reentry::Stop => Entry::Stop,
        }
    }

    /// The writer's options. A snapshot with every step commit: every later entry of an
    /// execution with a committed step folds from a snapshot the writer wrote (and `verify`
    /// checks each is the fold of the log before it).
    pub(crate) fn options(&self) -> JournalOptions {
        JournalOptions::new()
            .snapshot_every(1)
            .ids(self.ids.clone())
            .clock(self.clock.clone())
            .recovery(self.knobs.writer_config.unwrap_or(self.world.case.config))
    }

    /// One run: the entry, the zombie's late writes, the recovered step, then the script's next
    /// replies until the session is over.
    fn drive(&mut self, entry: Entry, zombie: Option<Box<Zombie>>) -> Result<End, Halt> {
        let Some(store) = self.world.store().cloned() else {
            self.world.notes.unexpected("no store is open".to_owned());
            return Err(Halt::Broken);
        };
        let journal = Journal::new(store.clone(), self.registry.clone(), self.options())
            .map_err(|e| self.halt("making the journal", e))?;
        let run = self.begin(&journal, &store, entry)?;
        if let Some(zombie) = zombie {
            StepRunner::new(&mut self.world).late_writes(*zombie)?;
        }
        if let RunStatus::Ended { outcome: RunOutcome::Stopped, .. } = run.status() {
            return Ok(End::Over(RunOutcome::Stopped));
        }
        if let Some(step) = run.step() {
            match StepRunner::new(&mut self.world).act(&run, &step, true)? {
                Flow::Next => {}
                Flow::Suspended => return Ok(End::Suspended),
                Flow::Stuck => return self.stuck(&run),
            }
            step.commit()
                .map_err(|e| self.halt(format!("committing step {}", step.number()), e))?;
        }
        loop {
            // Replies so far: the last one's step (the writer numbers steps 1, 2, ...; the
            // run's view may start at a snapshot, so its replies are not all of them).
            let next = run.with_state(|s| s.last_reply().map_or(0, |r| r.step.get() as usize));
            let Some(spec) = self.world.script.steps.get(next) else {
                run.end(RunOutcome::Completed).map_err(|e| self.halt("ending the run", e))?;
                return Ok(End::Over(RunOutcome::Completed));
            };
            let mut reply = Reply::new(spec.text.clone());
            for call in &spec.calls {
                reply = reply.call(self.call_of(call));
            }
            let step = run
                .commit_reply(reply)
                .map_err(|e| self.halt(format!("committing reply {}", next + 1), e))?;
            match StepRunner::new(&mut self.world).act(&run, &step, false)? {
                Flow::Next => {}
                Flow::Suspended => return Ok(End::Suspended),
                Flow::Stuck => return self.stuck(&run),
            }
            step.commit()
                .map_err(|e| self.halt(format!("committing step {}", step.number()), e))?;
        }
    }

    pub(crate) fn stuck(&mut self, run: &Run) -> Result<End, Halt> {
        let why = "a remote sub-agent whose child was never attached has no body left \
                   (max_bodies) to start it through";
        self.world
            .notes
            .trace(format!("run {}: {why}; the run fails, a redirect follows", run.id()));
        run.fail(Some(why.to_owned())).map_err(|e| self.halt("failing the run", e))?;
        Ok(End::Stuck)
    }

    /// The call as the model makes it: its policy is the tool's.
    pub(crate) fn call_of(&self, call: &ScriptCall) -> Call {
        let replay = self.world.tools.get(call.tool.as_str()).map(|t| t.replay).unwrap_or_default();
        Call {
            call: call.id.clone(),
            tool: call.tool.clone(),
            args: call.args.clone(),
            kind: call.kind,
            replay,
            group: call.group.clone(),
            sequential: call.sequential,
        }
    }

    /// Begins a run through `entry`; a refused `retry` wakes instead.
    pub(crate) fn begin(
        &mut self,
        journal: &Journal,
        store: &FaultStore,
        entry: Entry,
    ) -> Result<Run, Halt> {
        let kind = entry.kind_str();
        let before = store.inner().tail(&self.session).ok();
        match journal.begin_run(&self.session, entry.clone()) {
            Ok(run) => {
                self.world.notes.trace(format!("run {} begins: {kind}", run.id()));
                if let Some(Event::StepCommit(commit)) =
                    run.plan().appends.iter().find(|e| matches!(e, Event::StepCommit(_)))
                {
                    self.world
                        .ledger
                        .record(LedgerEntry::StepClosed { step: commit.step, entry: kind });
                    let by = if kind == "stop" { "a stop" } else { "a redirect" };
                    self.world.notes.trace(format!("step {} closed by {by} ({kind})", commit.step));
                }
                Ok(run)
            }
            Err(BeginError::Refused(refusal)) => {
                let after = store.inner().tail(&self.session).ok();
                if let (Some(before), Some(after)) = (before, after)
                    && before != after
                {
                    self.world.notes.violate(Violation::RefusedEntryWrote {
                        entry: kind,
                        before,
                        after,
                    });
                }
                if !matches!(entry, Entry::Retry { checkpoint: None, message: None }) {
                    self.world.notes.unexpected(format!("a `{kind}` entry was refused: {refusal}"));
                    return Err(Halt::Broken);
                }
                self.world.notes.trace(format!("retry refused ({refusal}); a wake instead"));
                self.begin(journal, store, Entry::Wake)
            }
            Err(BeginError::NothingToStop { outcome, .. }) => {
                let ended = outcome.as_str();
                self.world
                    .notes
                    .trace(format!("stop: the last run ended {ended}, nothing to stop"));
                Err(Halt::NothingToStop(outcome))
            }
            Err(e) => Err(self.halt(format!("begin_run({kind})"), e)),
        }
    }
}
