//! What the driver and the step runner share: the simulation's inputs, the world outside the
//! journal (the ledger, the notes, the store the simulated process has open), the fault
//! schedule, and how a run, a step or a call came out.

use std::collections::{HashSet, VecDeque};
use std::fmt::Display;
use std::sync::Arc;

use stepjournal::Body;
use stepjournal_codec::StepNo;

use super::fault::{AppendFault, BodyFault, Case, Fault, Landing, Trigger};
use super::ledger::Ledger;
use super::recorder::Recorder;
use super::script::{Script, ScriptCall};
use super::store::FaultStore;
use super::tools::ToolSet;

/// The simulation as the driver and the step runner both see it.
pub(crate) struct World<'a> {
    pub(crate) script: &'a Script,
    pub(crate) tools: &'a ToolSet,
    pub(crate) case: &'a Case,
    /// What happened outside the journal; it survives every crash.
    pub(crate) ledger: Ledger,
    pub(crate) notes: Recorder,
    pub(crate) faults: Schedule,
    /// The store the simulated process has open: `None` between a crash (or a poisoning) and
    /// the next opening.
    store: Option<Arc<FaultStore>>,
    /// Steps the run suspended once already (each suspends once at most).
    suspended: HashSet<StepNo>,
}

impl<'a> World<'a> {
    pub(crate) fn new(script: &'a Script, tools: &'a ToolSet, case: &'a Case) -> Self {
        World {
            script,
            tools,
            case,
            ledger: Ledger::new(),
            notes: Recorder::default(),
            faults: Schedule::new(case),
            store: None,
            suspended: HashSet::new(),
        }
    }

    /// The store the process has open.
    pub(crate) fn store(&self) -> Option<&Arc<FaultStore>> {
        self.store.as_ref()
    }

    /// The process opened `store`: the armed append fault, if any, is armed on it.
    pub(crate) fn open(&mut self, store: FaultStore) {
        match self.faults.append_trigger() {
            Some((n, fault, seed)) => store.arm(n, fault, seed),
            None => store.disarm(),
        }
        self.store = Some(Arc::new(store));
    }

    /// Every handle of the store is dropped (the process is gone, or reopens it); returns the
    /// one it had.
    pub(crate) fn close(&mut self) -> Option<Arc<FaultStore>> {
        self.store.take()
    }

    /// The simulated process dies: nothing more it does reaches the store.
    pub(crate) fn kill(&self) {
        if let Some(store) = &self.store {
            store.kill();
        }
    }

    /// Arms the next fault of the case (on the open store too, for an append fault).
    pub(crate) fn arm_next(&mut self) {
        self.faults.arm_next();
        if let Some(store) = &self.store {
            match self.faults.append_trigger() {
                Some((n, fault, seed)) => store.arm(n, fault, seed),
                None => store.disarm(),
            }
        }
    }

    /// Whether step `step` has not suspended the run yet (and notes that it does now).
    pub(crate) fn first_suspension(&mut self, step: StepNo) -> bool {
        self.suspended.insert(step)
    }

    /// A writer call failed: the armed append fault fired, or the simulation cannot go on.
    pub(crate) fn halt(&mut self, doing: impl Display, error: impl Display) -> Halt {
        if let Some(fired) = self.store.as_ref().and_then(|s| s.take_fired()) {
            return Halt::Fault(Fired::Append(fired));
        }
        self.notes.unexpected(format!("{doing}: {error}"));
        Halt::Broken
    }
}

/// The case's faults, armed one at a time in order: the first from the start, each next one once
/// the previous fired and the session was entered again.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Faults not armed yet.
    pending: VecDeque<Fault>,
    /// The fault armed now.
    armed: Option<Fault>,
    /// How many faults fired. Invariant: `fired + armed + pending` is the case's fault count.
    fired: u32,
    total: usize,
    /// Bodies started or re-attached to since the armed fault was armed.
    bodies_since: u32,
}

impl Schedule {
    fn new(case: &Case) -> Self {
        let pending: VecDeque<Fault> = case.faults.iter().copied().collect();
        let total = pending.len();
        Schedule { pending, armed: None, fired: 0, total, bodies_since: 0 }
    }

    fn check(&self) {
        debug_assert_eq!(
            self.fired as usize + usize::from(self.armed.is_some()) + self.pending.len(),
            self.total,
            "every fault of the case is pending, armed or fired"
        );
    }

    /// A schedule with no fault: what the world holds while it lends its own out.
    pub(crate) fn idle() -> Self {
        Schedule { pending: VecDeque::new(), armed: None, fired: 0, total: 0, bodies_since: 0 }
    }

    /// Arms the next fault (dropping none: the armed one has fired), counting appends and
    /// bodies from now.
    fn arm_next(&mut self) {
        debug_assert!(self.armed.is_none(), "a fault is armed only once the one before fired");
        self.armed = self.pending.pop_front();
        self.bodies_since = 0;
        self.check();
    }

    /// The armed fault fired: it is counted and handed back (`None` if none was armed).
    pub(crate) fn fire(&mut self) -> Option<Fault> {
        let fault = self.armed.take()?;
        self.fired = self.fired.saturating_add(1);
        self.check();
        Some(fault)
    }

    /// How many faults fired.
    pub(crate) fn fired(&self) -> u32 {
        self.fired
    }

    /// Bodies started or re-attached to since the armed fault (or the last one) was armed.
    pub(crate) fn bodies_since(&self) -> u32 {
        self.bodies_since
    }

    /// The armed fault if it fires at an append: which append, what it is, and its seed.
    fn append_trigger(&self) -> Option<(u32, AppendFault, u64)> {
        match self.armed {
            Some(Fault { trigger: Trigger::Append { n, fault }, seed, .. }) => {
                Some((n, fault, seed))
            }
            _ => None,
        }
    }

    /// A body starts (or is re-attached to): the armed body fault if it fires in this body,
    /// with the action after which it fires.
    pub(crate) fn next_body(&mut self) -> Option<(u32, BodyFault)> {
        let fault = match self.armed {
            Some(Fault { trigger: Trigger::Body { n, point, fault }, .. })
                if n == self.bodies_since =>
            {
                Some((point, fault))
            }
            _ => None,
        };
        self.bodies_since = self.bodies_since.saturating_add(1);
        fault
    }
}

/// Why a run stopped going on.
pub(crate) enum Halt {
    /// A fault fired.
    Fault(Fired),
    /// The simulation cannot go on; a violation says why.
    Broken,
    /// A stop found the session's last run already ended (this way): there is nothing to
    /// stop, and the simulation ends there, the session left as it was.
    NothingToStop(stepjournal_codec::RunOutcome),
}

/// A fault that fired.
pub(crate) enum Fired {
    /// An append fault, seen through the store.
    Append(AppendFault),
    /// A body fault, with the body left running when the run was abandoned.
    Body(BodyFault, Option<Box<Zombie>>),
}

impl Fired {
    /// What fired, for the trace.
    pub(crate) fn describe(&self) -> String {
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

/// What became of a step (or a call).
pub(crate) enum Flow {
    /// Done: go on.
    Next,
    /// The run suspended.
    Suspended,
    /// A call cannot be finished: a remote sub-agent whose child was never attached and which
    /// has no body left under `max_bodies` to start it through.
    Stuck,
}

/// A body whose run was abandoned: it goes on once a newer entry has landed.
pub(crate) struct Zombie {
    pub(crate) body: Body,
    pub(crate) call: ScriptCall,
    pub(crate) step: StepNo,
    pub(crate) effect_done: bool,
}
