//! The simulation loop: runs the script through the writer, fires the case's faults, enters the
//! session again after each, and checks the invariants after every fault and at the end.

use std::collections::{HashSet, VecDeque};
use std::fmt::Display;
use std::sync::{Arc, Mutex};

use stepjournal_backends::JournalStore;
use stepjournal_codec::{Call, CallKind, Entry, Event, ResumeMode, RunOutcome, SessionId, StepNo};
use stepjournal_recovery::{ApprovalState, MemoryRegistry, SessionState};

use super::check::{FencedWrite, History, Violation, check};
use super::fault::{AppendFault, BodyFault, Case, Fault, Landing, Recovery, Trigger};
use super::ledger::{Ledger, LedgerEntry};
use super::medium::Medium;
use super::run::{Flow, Halt, Zombie};
use super::script::{Script, ScriptCall};
use super::store::{AckLog, FaultStore};
use super::tools::ToolSet;
use super::{Report, ScriptError};
use stepjournal::writer::{BeginError, RunStatus, SequentialIds};
use stepjournal::{Journal, JournalOptions, Reply, Run};

/// How a run of the simulation ended, short of a fault.
enum End {
    /// The session is over (completed or stopped).
    Over(RunOutcome),
    /// The run suspended for client answers or approvals: a `wake` follows.
    Suspended,
    /// A call could not be finished (a remote sub-agent whose child was never attached, with no
    /// body left to start it through): the run failed, and a redirect follows.
    Stuck,
}

/// One simulation's state across the runs, crashes and reopenings.
pub(super) struct Sim<'a> {
    pub(super) script: &'a Script,
    pub(super) tools: &'a ToolSet,
    pub(super) case: &'a Case,
    medium: &'a mut dyn Medium,
    pub(super) session: SessionId,
    registry: Arc<MemoryRegistry>,
    ids: Arc<SequentialIds>,
    pub(super) ledger: Ledger,
    acked: AckLog,
    pub(super) fenced: Vec<FencedWrite>,
    pub(super) violations: Vec<Violation>,
    pub(super) trace: Vec<String>,
    /// Faults not armed yet.
    pending: VecDeque<Fault>,
    /// The fault armed now.
    pub(super) armed: Option<Fault>,
    /// Bodies started or re-attached to since the armed fault was armed.
    pub(super) bodies_since: u32,
    faults_fired: u32,
    runs: u32,
    /// Steps the run suspended once already.
    suspended: HashSet<StepNo>,
    pub(super) store: Option<Arc<FaultStore>>,
}

impl<'a> Sim<'a> {
    pub(super) fn new(
        script: &'a Script,
        tools: &'a ToolSet,
        case: &'a Case,
        medium: &'a mut dyn Medium,
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
            if call.kind == CallKind::Companion {
                return Err(ScriptError::Companion { call: call.id.clone() });
            }
        }
        Ok(Sim {
            script,
            tools,
            case,
            medium,
            session: SessionId::new("sim-session"),
            registry: Arc::new(tools.registry()),
            ids: Arc::new(SequentialIds::new()),
            ledger: Ledger::new(),
            acked: Arc::new(Mutex::new(Vec::new())),
            fenced: Vec::new(),
            violations: Vec::new(),
            trace: Vec::new(),
            pending: case.faults.iter().copied().collect(),
            armed: None,
            bodies_since: 0,
            faults_fired: 0,
            runs: 0,
            suspended: HashSet::new(),
            store: None,
        })
    }

    /// Runs the simulation to its end and reports.
    pub(super) fn run(mut self) -> Report {
        self.arm_next();
        let outcome = if self.open_store() { self.runs_until_over() } else { None };
        // A clean restart: every handle dropped, the store opened again, the log read back.
        self.store = None;
        let log = match self.medium.open() {
            Ok(store) => match store.read_all(&self.session) {
                Ok(log) => Some(log),
                Err(e) => {
                    self.violate(Violation::Unexpected {
                        what: format!("reading the log back at the end: {e}"),
                    });
                    None
                }
            },
            Err(e) => {
                let medium = self.medium.name();
                self.violate(Violation::Reopen { medium, error: e.to_string() });
                None
            }
        };
        let log = log.unwrap_or_default();
        self.check_log(&log, outcome.is_some());
        Report {
            medium: self.medium.name(),
            session: self.session,
            violations: self.violations,
            faults_fired: self.faults_fired,
            runs: self.runs,
            outcome,
            trace: self.trace,
            log,
            ledger: self.ledger.entries(),
        }
    }

    fn runs_until_over(&mut self) -> Option<RunOutcome> {
        let bound = 4 * (self.case.faults.len() + self.script.steps.len()) as u32 + 8;
        let mut entry = Entry::NewTurn { message: self.script.message.clone() };
        let mut zombie = None;
        loop {
            if self.runs >= bound {
                let why = format!("it was still going after {bound} runs");
                self.violate(Violation::NotEnded { why });
                return None;
            }
            self.runs += 1;
            match self.drive(entry, zombie.take()) {
                Ok(End::Over(outcome)) => return Some(outcome),
                Ok(End::Suspended) => entry = Entry::Wake,
                Ok(End::Stuck) => {
                    entry = Entry::Resume(ResumeMode::WithMessage {
                        message: "Let us leave that sub-agent and go on.".to_owned(),
                    });
                }
                Err(Halt::Broken) => return None,
                Err(Halt::Fault(fired)) => {
                    self.faults_fired += 1;
                    let Some(fault) = self.armed.take() else {
                        self.violate(Violation::Unexpected {
                            what: "a fault fired with none armed".to_owned(),
                        });
                        return None;
                    };
                    self.trace.push(format!("fault {}: {}", self.faults_fired, fired.describe()));
                    let reopened = match &fired {
                        Fired::Append(AppendFault::Crash(_)) | Fired::Body(BodyFault::Crash, _) => {
                            self.crash(fault.seed)
                        }
                        Fired::Append(AppendFault::Fail { poisoned: true }) => {
                            self.store = None;
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
                    self.arm_next();
                    entry = self.entry_for(fault.then);
                }
            }
        }
    }

    /// The process died: every handle is dropped, the medium crashes, the store is opened on
    /// what it left. Returns whether it opened.
    fn crash(&mut self, seed: u64) -> bool {
        if let Some(store) = self.store.take() {
            store.kill();
        }
        self.medium.crash(seed);
        self.open_store()
    }

    fn open_store(&mut self) -> bool {
        match self.medium.open() {
            Ok(inner) => {
                let store = FaultStore::new(inner, self.acked.clone(), self.medium.tear_hook());
                if let Some(Fault { trigger: Trigger::Append { n, fault }, seed, .. }) = self.armed
                {
                    store.arm(n, fault, seed);
                }
                self.store = Some(Arc::new(store));
                true
            }
            Err(e) => {
                let medium = self.medium.name();
                self.violate(Violation::Reopen { medium, error: e.to_string() });
                false
            }
        }
    }

    /// Arms the next fault, counting appends and bodies from now.
    fn arm_next(&mut self) {
        self.armed = self.pending.pop_front();
        self.bodies_since = 0;
        if let Some(store) = &self.store {
            match self.armed {
                Some(Fault { trigger: Trigger::Append { n, fault }, seed, .. }) => {
                    store.arm(n, fault, seed)
                }
                _ => store.disarm(),
            }
        }
    }

    pub(super) fn violate(&mut self, violation: Violation) {
        if !self.violations.contains(&violation) {
            self.violations.push(violation);
        }
    }

    /// A writer call failed: the armed append fault fired, or the simulation cannot go on.
    pub(super) fn halt(&mut self, doing: impl Display, error: impl Display) -> Halt {
        if let Some(fired) = self.store.as_ref().and_then(|s| s.take_fired()) {
            return Halt::Fault(Fired::Append(fired));
        }
        self.violate(Violation::Unexpected { what: format!("{doing}: {error}") });
        Halt::Broken
    }

    fn read_log(&mut self) -> Vec<stepjournal_codec::Record> {
        let read = match &self.store {
            Some(store) => store.inner().read_all(&self.session),
            None => return Vec::new(),
        };
        read.unwrap_or_else(|e| {
            self.violate(Violation::Unexpected { what: format!("reading the log: {e}") });
            Vec::new()
        })
    }

    fn check_log(&mut self, log: &[stepjournal_codec::Record], ended: bool) {
        let history = History {
            session: self.session.clone(),
            log: log.to_vec(),
            ledger: self.ledger.entries(),
            acked: self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            fenced: self.fenced.clone(),
            config: self.case.config,
            ended,
        };
        for violation in check(&history) {
            self.violate(violation);
        }
    }

    /// The entry `recovery` names, with what it needs from the session as it is now.
    fn entry_for(&mut self, recovery: Recovery) -> Entry {
        let state = self.read_log().into_iter().fold(SessionState::default(), |mut s, r| {
            s.apply(&r.event);
            s
        });
        if state.messages().is_empty() {
            // The opening message never landed: the session begins again.
            return Entry::NewTurn { message: self.script.message.clone() };
        }
        let n = self.faults_fired;
        match recovery {
            Recovery::Wake => Entry::Wake,
            Recovery::Continue => Entry::Resume(ResumeMode::Continue),
            Recovery::FromCheckpoint => {
                let checkpoint = state
                    .saved_step()
                    .map(|r| r.checkpoint.clone())
                    .or_else(|| state.last_commit().map(|c| c.checkpoint.clone()));
                match checkpoint {
                    Some(checkpoint) => Entry::Resume(ResumeMode::FromCheckpoint { checkpoint }),
                    None => Entry::Wake,
                }
            }
            Recovery::Retry => Entry::Retry { checkpoint: None, message: None },
            Recovery::RetryWithMessage => {
                Entry::Retry { checkpoint: None, message: Some(format!("Try again ({n}).")) }
            }
            Recovery::WithMessage => Entry::Resume(ResumeMode::WithMessage {
                message: format!("Do something else ({n})."),
            }),
            Recovery::NewTurn => Entry::NewTurn { message: format!("A new request ({n}).") },
            Recovery::Stop => Entry::Stop,
        }
    }

    fn options(&self) -> JournalOptions {
        JournalOptions::new().ids(self.ids.clone()).recovery(self.case.config)
    }

    /// One run: the entry, the zombie's late writes, the recovered step, then the script's next
    /// replies until the session is over.
    fn drive(&mut self, entry: Entry, zombie: Option<Box<Zombie>>) -> Result<End, Halt> {
        let Some(store) = self.store.clone() else {
            self.violate(Violation::Unexpected { what: "no store is open".to_owned() });
            return Err(Halt::Broken);
        };
        let journal = Journal::new(store.clone(), self.registry.clone(), self.options());
        let run = self.begin(&journal, &store, entry)?;
        if let Some(zombie) = zombie {
            self.late_writes(*zombie)?;
        }
        if let RunStatus::Ended { outcome: RunOutcome::Stopped, .. } = run.status() {
            return Ok(End::Over(RunOutcome::Stopped));
        }
        if let Some(step) = run.step() {
            match self.act(&run, &step, true)? {
                Flow::Next => {}
                Flow::Suspended => return Ok(End::Suspended),
                Flow::Stuck => return self.stuck(&run),
            }
            step.commit()
                .map_err(|e| self.halt(format!("committing step {}", step.number()), e))?;
        }
        loop {
            let next = run.with_state(|s| s.replies().len());
            let Some(spec) = self.script.steps.get(next) else {
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
            match self.act(&run, &step, false)? {
                Flow::Next => {}
                Flow::Suspended => return Ok(End::Suspended),
                Flow::Stuck => return self.stuck(&run),
            }
            step.commit()
                .map_err(|e| self.halt(format!("committing step {}", step.number()), e))?;
        }
    }

    fn stuck(&mut self, run: &Run) -> Result<End, Halt> {
        let why = "a remote sub-agent whose child was never attached has no body left \
                   (max_bodies) to start it through";
        self.trace.push(format!("run {}: {why}; the run fails, a redirect follows", run.id()));
        run.fail(Some(why.to_owned())).map_err(|e| self.halt("failing the run", e))?;
        Ok(End::Stuck)
    }

    /// The call as the model makes it: its policy is the tool's.
    fn call_of(&self, call: &ScriptCall) -> Call {
        let replay = self.tools.get(call.tool.as_str()).map(|t| t.replay).unwrap_or_default();
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
    fn begin(&mut self, journal: &Journal, store: &FaultStore, entry: Entry) -> Result<Run, Halt> {
        let kind = entry.kind_str();
        let before = store.inner().tail(&self.session).ok();
        match journal.begin_run(&self.session, entry.clone()) {
            Ok(run) => {
                self.trace.push(format!("run {} begins: {kind}", run.id()));
                if let Some(Event::StepCommit(commit)) =
                    run.plan().appends.iter().find(|e| matches!(e, Event::StepCommit(_)))
                {
                    self.ledger.record(LedgerEntry::StepClosed { step: commit.step, entry: kind });
                    let by = if kind == "stop" { "a stop" } else { "a redirect" };
                    self.trace.push(format!("step {} closed by {by} ({kind})", commit.step));
                }
                Ok(run)
            }
            Err(BeginError::Refused(refusal)) => {
                let after = store.inner().tail(&self.session).ok();
                if let (Some(before), Some(after)) = (before, after)
                    && before != after
                {
                    self.violate(Violation::RefusedEntryWrote { entry: kind, before, after });
                }
                if !matches!(entry, Entry::Retry { checkpoint: None, message: None }) {
                    let what = format!("a `{kind}` entry was refused: {refusal}");
                    self.violate(Violation::Unexpected { what });
                    return Err(Halt::Broken);
                }
                self.trace.push(format!("retry refused ({refusal}); a wake instead"));
                self.begin(journal, store, Entry::Wake)
            }
            Err(e) => Err(self.halt(format!("begin_run({kind})"), e)),
        }
    }

    /// Whether a call of the state waits for an answer from outside (a client's, an
    /// approver's).
    pub(super) fn awaits(run: &Run, call: &ScriptCall) -> bool {
        run.with_state(|s| {
            s.call(&call.id).is_some_and(|r| {
                !r.is_resolved()
                    && match r.kind() {
                        CallKind::Client => true,
                        CallKind::Approval => r.approval() == ApprovalState::Undecided,
                        _ => false,
                    }
            })
        })
    }

    pub(super) fn note_suspended(&mut self, step: StepNo) -> bool {
        self.suspended.insert(step)
    }
}

/// A fault that fired.
pub(super) enum Fired {
    /// An append fault, seen through the store.
    Append(AppendFault),
    /// A body fault, with the body left running when the run was abandoned.
    Body(BodyFault, Option<Box<Zombie>>),
}

impl Fired {
    fn describe(&self) -> String {
        match self {
            Fired::Append(AppendFault::Crash(landing)) => format!(
                "crash during an append ({})",
                match landing {
                    Landing::Lands => "the batch landed",
                    Landing::Lost => "the batch was lost",
                    Landing::Torn => "the medium tore it",
                }
            ),
            Fired::Append(AppendFault::Fail { poisoned }) => {
                format!("the store failed an append (poisoned: {poisoned})")
            }
            Fired::Body(BodyFault::Crash, _) => "crash inside a body".to_owned(),
            Fired::Body(BodyFault::Abandon, _) => {
                "the run was abandoned with a body running".into()
            }
            Fired::Body(BodyFault::FailRun, _) => "the runtime failed the run inside a body".into(),
        }
    }
}
